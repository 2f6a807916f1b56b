"""`run_spt.py`'s `--mode`s as data, each the ordered phases it trains: `pipeline.plan_run` builds a run from here, and
the command line reads here which settings a mode leaves unread. A new mode, or arm, is one entry in `MODE_PHASES`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class PhaseSpec:
    """The pretraining phase or a fine-tuning arm, trained in `OUTPUT_DIR/<folder>` (an arm's name is its folder's).

    `start`: the weights it starts from: "random", "model" (`--model_name_or_path`'s, random without it or with
    `--from_scratch`) or "pretraining" (`--init_from`, else this run's pretraining folder). `takes_parts`:
    `--init_parts` applies (`--freeze_parts` applies to every arm). `method`: the fine-tuning method, None for
    `--finetune_method`. `config`: "flags" (the model flags'), "checkpoint" (the start checkpoint's, when the arm
    loads it whole and this run does not train it) or "from_scratch" (`--model_name_or_path`'s architecture, which
    it then needs, with fresh weights).
    """

    folder: str
    kind: Literal["pretrain", "finetune"] = "finetune"
    start: Literal["random", "model", "pretraining"] = "model"
    takes_parts: bool = False
    method: str | None = None
    config: Literal["flags", "checkpoint", "from_scratch"] = "flags"


PRETRAIN = PhaseSpec("pretrain", kind="pretrain")
SPT = PhaseSpec("spt", start="pretraining", takes_parts=True, config="checkpoint")
SCRATCH = PhaseSpec("scratch")
MODE_PHASES: dict[str, tuple[PhaseSpec, ...]] = {
    "compare": (PRETRAIN, SPT, SCRATCH),
    "spt": (PRETRAIN,),
    "finetune": (SPT,),
    "scratch": (SCRATCH,),
    # Balestriero & Huang: the architecture from scratch vs its pretrained weights with LoRA, and in full
    "lora_comparison": (PhaseSpec("scratch", start="random", method="full", config="from_scratch"),
                        PhaseSpec("pretrained_lora", method="lora"), PhaseSpec("pretrained_full", method="full")),
}


def mode_arms(mode: str) -> tuple[PhaseSpec, ...]:
    return tuple(spec for spec in MODE_PHASES[mode] if spec.kind == "finetune")


def mode_pretrains(mode: str) -> bool:
    """Whether `mode` trains a pretraining phase."""
    return any(spec.kind == "pretrain" for spec in MODE_PHASES[mode])


def uses_lora(mode: str, finetune_method: str) -> bool:
    """Whether an arm of `mode` trains LoRA adapters, given `--finetune_method`."""
    return any((arm.method or finetune_method) == "lora" for arm in mode_arms(mode))


__all__ = ["PhaseSpec", "PRETRAIN", "SPT", "SCRATCH", "MODE_PHASES", "mode_arms", "mode_pretrains", "uses_lora"]
