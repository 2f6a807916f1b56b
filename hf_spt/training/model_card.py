"""Model cards of saved hf_spt models: Hub metadata plus the SPT provenance of the weights.

`SptModelCardData` holds what a reader of a checkpoint needs to trust and reuse it: where the
weights came from (random init, an SPT checkpoint, a pretrained model), what the SPT phase read
and for how long, which parts were taken from another checkpoint (`init_parts`) or frozen
(`freeze_parts`; `None` = not recorded, `[]` = nothing), and the run's results. `model_card` renders it into
`hf_spt/model_cards/spt_model_card_template.md` with `huggingface_hub.ModelCard`; the YAML
header (library, tags, data set, metrics as a `model-index`) is what the Hub indexes, and
`ModelCard.load` reads it back.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData
from transformers import PreTrainedConfig, TrainingArguments


TEMPLATE_PATH = Path(__file__).parents[1] / "model_cards" / "spt_model_card_template.md"
MODEL_CARD_NAME = "README.md"
PHASES = ("pretrain", "spt", "scratch")
METRIC_NAMES = ("accuracy", "macro_f1", "loss", "mse")
PRETRAINING_TASKS = {"masked": "masked-token reconstruction (loss on the masked positions only)",
                     "causal": "next-token prediction"}
CARD_TRAINING_FIELDS = ("learning_rate", "per_device_train_batch_size", "num_train_epochs", "max_steps", "optim",
                     "lr_scheduler_type", "warmup_steps", "weight_decay", "train_sampling_strategy")
PIPELINE_TAGS = {"masked": "fill-mask", "causal": "text-generation", None: "text-classification"}
AUTO_CLASSES = {"masked": "AutoModelForMaskedLM", "causal": "AutoModelForCausalLM", None: "AutoModelForSequenceClassification"}


def package_version() -> tuple[str, str]:
    """hf_spt's version and where it was read: the imported package's own `hf_spt.__version__` (the number
    setup.cfg builds from), not an installed distribution's metadata, which a checkout on PYTHONPATH over an
    installed release would misname. Records and `hf-spt --version` both read it here."""
    package = sys.modules[__name__.split(".")[0]]  # imported before any of its modules: no import here
    return package.__version__, f"hf_spt.__version__ (the package imported from {Path(package.__file__).parent})"


def installed_versions() -> dict[str, str]:
    """Versions of the libraries that wrote the model (the card renders hf_spt, transformers, torch and
    huggingface_hub under "Framework versions"; every phase's result records them all, `runs.provenance`)."""
    return {"hf_spt": package_version()[0],
            **{name: metadata.version(name) for name in ("transformers", "torch", "huggingface_hub", "datasets",
                                                         "accelerate")}}


def _listed(parts: list[str] | None) -> str:
    if parts is None:
        return "not recorded"
    return ", ".join(parts) if parts else "nothing"


@dataclass
class SptModelCardData:
    """What the card of one saved phase says. `metrics` are the phase's final metrics (eval_*/test_*)."""

    model_name: str
    phase: str
    task_name: str
    architecture: str
    objective: str | None = None  # SPT objective behind these weights ("masked"/"causal"); None: no SPT
    init_from: str | None = None
    base_model: str | None = None  # a Hub id the weights derive from (metadata `base_model`); local folders stay out
    pretraining_data: str | None = None
    pretraining_task: str | None = None
    pretrain_epochs: float | None = None
    mlm_probability: float | None = None
    init_parts: list[str] | None = None  # "<part> of <checkpoint>" for each part taken from another checkpoint
    freeze_parts: list[str] | None = None
    adapter: dict[str, Any] | None = None  # a LoRA adapter's peft settings and `base_weights`; None: full weights
    seed: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    hub_model_id: str | None = None
    versions: dict[str, str] = field(default_factory=installed_versions)

    def __post_init__(self):
        if not self.phase:
            raise ValueError(f"A card needs its phase: one of {', '.join(PHASES)} or an ablation arm's name.")

    @property
    def pipeline_tag(self) -> str:
        return PIPELINE_TAGS[self.objective if self.phase == "pretrain" else None]

    def eval_results(self) -> list[EvalResult]:
        """One model-index entry per reported metric (`eval_*` = validation split, `test_*` = test split)."""
        results = []
        for key, value in sorted(self.metrics.items()):
            split, _, name = key.partition("_")
            if split not in ("eval", "test") or name not in METRIC_NAMES:
                continue
            results.append(EvalResult(
                task_type=self.pipeline_tag, dataset_type=self.task_name, dataset_name=self.task_name,
                dataset_split="validation" if split == "eval" else "test", metric_type=name, metric_value=float(value),
            ))
        return results

    def to_card_data(self) -> ModelCardData:
        """The YAML header: library, tags, data set, metrics (model-index) and the SPT provenance."""
        adapter_tags = ["peft", "lora"] if self.adapter else []
        return ModelCardData(
            library_name="peft" if self.adapter else "transformers",
            model_name=self.model_name,
            pipeline_tag=self.pipeline_tag,
            tags=["hf_spt", "self-pretraining", self.phase, self.architecture, *adapter_tags],
            datasets=[self.task_name],
            metrics=sorted({r.metric_type for r in self.eval_results()}) or None,
            base_model=self.base_model,
            eval_results=self.eval_results() or None,
            spt={"phase": self.phase, "init_from": self.init_from, "objective": self.objective,
                 "pretraining_data": self.pretraining_data, "pretraining_task": self.pretraining_task,
                 "pretrain_epochs": self.pretrain_epochs, "mlm_probability": self.mlm_probability,
                 "init_parts": self.init_parts, "freeze_parts": self.freeze_parts, "adapter": self.adapter,
                 "seed": self.seed},
        )

    def results_table(self) -> str:
        rows = [(key.partition("_")[0], key.partition("_")[2], value) for key, value in sorted(self.metrics.items())
                if key.partition("_")[0] in ("eval", "test") and key.partition("_")[2] in METRIC_NAMES]
        if not rows:
            return "No metrics recorded."
        lines = ["| split | metric | value |", "|---|---|---|"]
        lines += [f"| {'validation' if split == 'eval' else 'test'} | {name} | {value:.4f} |" for split, name, value in rows]
        return "\n".join(lines)

    def training_table(self) -> str:
        if not self.training:
            return "Not recorded."
        return "\n".join(["| setting | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in sorted(self.training.items())])

    def finetune_text(self) -> str:
        """How the weights were fine-tuned: in full, or a LoRA adapter with its peft settings."""
        if self.phase == "pretrain":
            return "n/a"
        if not self.adapter:
            return "all weights"
        a = self.adapter
        return (f"LoRA (r={a['r']}, alpha={a['lora_alpha']}, dropout={a['lora_dropout']}, on "
                f"{', '.join(a['target_modules'])}) on base weights `{a['base_weights']}`; "
                f"{', '.join(a['modules_to_save'])} trained in full")

    def template_context(self) -> dict[str, Any]:
        """Everything the template reads besides `card_data`."""
        kind = "self-pretrained (SPT phase)" if self.phase == "pretrain" else "sequence classifier"
        auto_class = ("AutoPeftModelForSequenceClassification" if self.adapter
                      else AUTO_CLASSES[self.objective if self.phase == "pretrain" else None])
        load_path = self.hub_model_id or "path/to/this/folder"
        if self.adapter:
            kind = (f"LoRA adapter (peft) and classifier head, on the base weights `{self.adapter['base_weights']}`, "
                    f"of a {kind}")
            load_path = self.hub_model_id or Path(self.adapter["base_weights"]).parent.as_posix()
        start = f"from `{self.init_from}`" if self.init_from else "from random initialisation"
        return {
            "model_name": self.model_name, "phase": self.phase, "task_name": self.task_name,
            "architecture": self.architecture, "init_from": self.init_from, "seed": self.seed,
            "summary": f"`{self.architecture}` {kind} for the task `{self.task_name}`, trained {start} with hf_spt "
            "(self-pretraining on the task's own inputs, then fine-tuning on its labels).",
            "pretraining_data": self.pretraining_data, "pretraining_task": self.pretraining_task,
            "pretrain_epochs_text": "n/a" if self.pretrain_epochs is None else f"{self.pretrain_epochs:g}",
            "mlm_probability_text": "n/a" if self.mlm_probability is None else f"{self.mlm_probability:g}",
            "init_parts_text": _listed(self.init_parts), "freeze_parts_text": _listed(self.freeze_parts),
            "adapter": self.adapter, "finetune_text": self.finetune_text(),
            "imports": (f"from peft import {auto_class}\nfrom transformers import AutoTokenizer" if self.adapter
                        else f"from transformers import {auto_class}, AutoTokenizer"),
            "results_table": self.results_table(), "training_table": self.training_table(),
            "auto_class": auto_class,
            "load_path": load_path, "versions": self.versions,
        }


def model_card(data: SptModelCardData, template_path: str | Path = TEMPLATE_PATH) -> ModelCard:
    """Render the card (metadata header + Markdown body) from the template."""
    return ModelCard.from_template(data.to_card_data(), template_path=str(template_path), **data.template_context())


def write_model_card(data: SptModelCardData, folder: str | Path) -> Path:
    """Write the card as `folder/README.md` (the file the Hub shows and `ModelCard.load` reads)."""
    path = Path(folder) / MODEL_CARD_NAME
    model_card(data).save(path)
    return path


class ModelCardMixin:
    """Trainer mixin: `create_model_card` (called by `Trainer.push_to_hub`) writes the SPT card.

    Set `trainer.model_card_data` before saving; without it the Trainer's own card is written.
    """

    model_card_data: SptModelCardData | None = None

    def create_model_card(self, **kwargs: Any) -> None:
        if self.model_card_data is None:
            return super().create_model_card(**kwargs)
        if self.is_world_process_zero():
            write_model_card(self.model_card_data, self.args.output_dir)


__all__ = ["package_version", "SptModelCardData", "ModelCardMixin", "model_card", "write_model_card",
           "installed_versions", "TEMPLATE_PATH", "MODEL_CARD_NAME"]
