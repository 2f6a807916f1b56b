"""`run_spt.py`'s `--mode`s as data: whether a mode trains the pretraining phase, and its arms (`arms.Arm`, the arms
grid files are made of). `pipeline.plan_run` builds a run from here, and the command line reads here which
settings a mode leaves unread and `--help` what each does. A new mode is one entry in `MODES`; a new arm of a
mode, one `Arm` in its tuple.
"""

from __future__ import annotations

from dataclasses import dataclass

from .arms import Arm

PRETRAIN_FOLDER = "pretrain"  # the pretraining phase's folder; each arm's is its name


@dataclass(frozen=True)
class Mode:
    """A `--mode`: whether it pretrains (on the task's inputs, into `pretrain/`), then its arms in order. Its
    pretraining arms start from `--init_from`, else this run's `pretrain/`, and take `--init_parts`; every arm
    takes `--freeze_parts`."""

    pretrains: bool
    arms: tuple[Arm, ...] = ()
    help: str = ""  # what `--help` says of it

    @property
    def phases(self) -> tuple[str, ...]:
        """The phases it trains, in order: "pretrain" when it pretrains, "finetune" when it has arms."""
        return ("pretrain",) * self.pretrains + ("finetune",) * bool(self.arms)


SPT = Arm("spt", pretrain=True)
SCRATCH = Arm("scratch")
MODES: dict[str, Mode] = {
    "compare": Mode(pretrains=True, arms=(SPT, SCRATCH), help="pretrain then fine-tune, and scratch"),
    "spt": Mode(pretrains=True, help="pretrain only"),
    "finetune": Mode(pretrains=False, arms=(SPT,), help="from --init_from, default OUTPUT_DIR/pretrain"),
    "scratch": Mode(pretrains=False, arms=(SCRATCH,), help="fine-tune from random init only"),
    "lora_comparison": Mode(pretrains=False, arms=(Arm("scratch", start="random", method="full"),
                                                   Arm("pretrained_lora", method="lora"),
                                                   Arm("pretrained_full", method="full")),
                            help="Balestriero & Huang: --model_name_or_path's architecture from scratch vs its "
                                 "weights with LoRA vs with full fine-tuning, arms scratch, pretrained_lora, "
                                 "pretrained_full"),
}


def uses_lora(mode: str, finetune_method: str) -> bool:
    """Whether an arm of `mode` trains LoRA adapters, given `--finetune_method`."""
    return any((arm.method or finetune_method) == "lora" for arm in MODES[mode].arms)


__all__ = ["PRETRAIN_FOLDER", "Mode", "SPT", "SCRATCH", "MODES", "uses_lora"]
