"""`SharedTrainingArguments`: every flag of transformers' `TrainingArguments`, given to both phases of a run.

Only the fields below differ from transformers': the generic budgets (`--learning_rate`, `--num_train_epochs`,
`--per_device_train_batch_size`, `--max_steps`) and the evaluation and checkpoint settings default to `None`, so a
given value can be told from each phase's own default; ranges and "read only with" are declared as in
`arguments.py` (`declarations`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from transformers import TrainingArguments

from ..errors import UserInputError
from ..runs.folder import check_output_folder
from ..training.arguments import FinetuneArguments, PretrainArguments
from ..training.metrics import SHIPPED_METRICS
from ..value_checks import MAX_STEPS, NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, check_declared
from .declarations import declared, field_default, redacted

BEST_MODEL_METRICS = (*SHIPPED_METRICS, "loss")
"""What `--metric_for_best_model` may name: the fine-tuning metrics of every classification task, bare or eval_."""


def _setting(default: Any, help_text: str, **declarations: Any) -> Any:
    """A field with its `--help` text and what else it declares (`range`, `phase`, `needs`: `DECLARED_KEYS`)."""
    return field(default=default, metadata={"help": help_text, **declarations})


TRANSFORMERS_RANGES = {"gradient_accumulation_steps": POSITIVE_INT}
"""Ranges of transformers' own `TrainingArguments` flags that `SharedTrainingArguments` does not declare anew."""


@dataclass
class SharedTrainingArguments(TrainingArguments):
    """transformers' `TrainingArguments`, given to both phases; only the fields below differ from transformers'.

    A carrier, not a Trainer's arguments: each phase builds its own `PretrainArguments` or
    `FinetuneArguments` from these values (`phase_arguments`), and those run transformers'
    validation. Fields left `None` take each phase's own default, so a phase's changed defaults
    (evaluate and save every epoch, keep the best checkpoint...) hold unless a flag is given.
    """

    _argument_group_name = "Both phases (transformers TrainingArguments)"

    output_dir: str | None = _setting("runs/markov", "Where the phase folders, results.json and results.md go.")
    overwrite_output_dir: bool = _setting(
        False, "Delete the folders of the phases this run trains before training (default: a re-run skips finished "
        "phases and resumes interrupted ones).")
    seed: int = _setting(0, "Seed of data generation, init, masking and shuffling.", range=NON_NEGATIVE_INT)
    optim: str = _setting("adamw_torch", "Optimizer of both phases.")
    warmup_steps: float = _setting(0.1, "Linear warm-up: steps, or a fraction of all steps (<1).", range=NON_NEGATIVE)
    learning_rate: float | None = _setting(
        None, f"Peak learning rate of both phases (default: {PretrainArguments.learning_rate:g} pretraining, "
        f"{FinetuneArguments.learning_rate:g} fine-tuning; --pretrain_/--finetune_learning_rate win).",
        range=POSITIVE)
    num_train_epochs: float | None = _setting(
        None, f"Epochs of both phases (default: {PretrainArguments.num_train_epochs:g} pretraining, "
        f"{FinetuneArguments.num_train_epochs:g} fine-tuning; --pretrain_/--finetune_epochs win).",
        range=POSITIVE)
    per_device_train_batch_size: int | None = _setting(
        None, "Batch size of both phases (default: the task preset; --pretrain_/--finetune_batch_size win).",
        range=POSITIVE_INT)
    max_steps: int | None = _setting(
        None, "Steps of both phases; above 0 they replace the epochs (--pretrain_/--finetune_max_steps win).",
        range=MAX_STEPS)
    per_device_eval_batch_size: int | None = _setting(
        None, "Evaluation batch size (default: the phase's training batch).", range=POSITIVE_INT)
    hub_strategy: str | None = _setting(
        None, "With --push_to_hub (default: end, the final model of each phase only).", needs="push_to_hub")
    hub_model_id: str | None = _setting(
        None, "Hub repo prefix: phases go to HUB_MODEL_ID-pretrain, -spt, -scratch.", needs="push_to_hub")
    dataloader_pin_memory: bool | None = _setting(None, "Pin data-loader memory (default: only with an accelerator).")
    eval_strategy: str | None = _setting(None, "Default: each phase's own (epoch).")
    save_strategy: str | None = _setting(None, "Default: each phase's own (epoch).")
    logging_strategy: str | None = _setting(None, "Default: each phase's own (epoch).")
    load_best_model_at_end: bool | None = _setting(None, "Default: each phase's own (true: the best-validation checkpoint).")
    metric_for_best_model: str | None = _setting(
        None, "Fine-tuning only: the validation metric that picks the kept checkpoint and drives early stopping, one of "
        f"{', '.join(BEST_MODEL_METRICS)} (default: accuracy). Pretraining always keeps its lowest eval_loss.",
        phase="finetune")
    greater_is_better: bool | None = _setting(
        None, "Fine-tuning only; default: from --metric_for_best_model.", phase="finetune")
    save_total_limit: int | None = _setting(None, "Checkpoints kept per phase (default: each phase's own, 2).")
    prediction_loss_only: bool | None = _setting(None, "Default: each phase's own (true when pretraining).")
    train_sampling_strategy: str | None = field(default=None, metadata={
        "help": "random, sequential, group_by_length or batch_rebalance. Default: per phase, group_by_length when "
        "its training lengths vary (std/mean > 0.1: ListOps, Text, Retrieval, custom data), else random.",
        "values": ("random", "sequential", "group_by_length", "batch_rebalance")})
    padding_free: bool = _setting(
        False, "Both phases: pack each batch's rows without padding, for a varlen attention kernel: an SPT model on "
        "torch_varlen (core torch's kernel, chosen for sdpa; CUDA with --bf16/--fp16, else a block-diagonal SDPA "
        "fallback the run names) or --attn_implementation flash_attention_2 on a GPU, else a clear error.")
    use_hub_kernels: bool = _setting(
        False, "Both phases, every arm: let transformers swap layers (GELU, ...) for kernels downloaded from the Hub "
        "(the `kernels` package); recorded in each phase's definition. Default: every model keeps its own layers and "
        "nothing is fetched (transformers >= 5.25 would otherwise turn them on for loaded models only).")
    pad_to_multiple_of: int | None = _setting(
        None, "Both phases: pad a padded batch's width up to a multiple of this, never past the model's positions "
        "(default: 8 on an accelerator, where aligned shapes keep the fast kernels; none on a CPU, where it would only "
        "add padding; 64 gives fewer distinct widths). Larger than the model's positions, or given with --padding_free "
        "(which never pads): an error.", range=POSITIVE_INT)
    logging_nan_inf_filter: bool = _setting(
        False, "Skip NaN/inf losses in the logged training loss (changed default: off, as checking costs a host "
        "sync every step on a GPU; the loss trained on is the same either way).")

    def __post_init__(self):
        """No transformers validation here (the phases' arguments run it: `phase_arguments.check_trainer_settings`
        builds them before any data), but the declared ranges, and one repair: `HfArgumentParser` turns two
        defaults into their falsy twins (`debug` "" -> None, `include_num_input_tokens_seen` "no" -> False); the
        defaults are restored so the phases receive transformers' own."""
        for spec in fields(self):
            if spec.init and getattr(self, spec.name) in (None, False) and field_default(spec) in ("", "no"):
                setattr(self, spec.name, field_default(spec))
        check_declared(self, TRANSFORMERS_RANGES)
        metric = self.metric_for_best_model
        if metric is not None and metric.removeprefix("eval_") not in BEST_MODEL_METRICS:
            raise UserInputError(f"--metric_for_best_model {metric!r}: must be one of {', '.join(BEST_MODEL_METRICS)} "
                                 "(the fine-tuning phase's validation metrics).")
        if self.output_dir is not None:
            check_output_folder(self.output_dir)

    def given(self) -> dict[str, Any]:
        """The fields set away from this class's defaults (what results.json records), secrets redacted."""
        return redacted({f.name: getattr(self, f.name) for f in fields(self)
                         if f.init and getattr(self, f.name) != field_default(f)})

    def phase_kwargs(self, phase: str) -> dict[str, Any]:
        """`TrainingArguments` keyword arguments of `phase`: all fields but our own, but the `None` ones this class
        declares, which stand for each phase's own default, and for pretraining but `FINETUNE_TRAINER_FLAGS`."""
        phase_own = {name for name in SharedTrainingArguments.__annotations__
                     if SharedTrainingArguments.__dataclass_fields__[name].default is None}
        skipped = OUR_TRAINING_FIELDS + (FINETUNE_TRAINER_FLAGS if phase == "pretrain" else ())
        return {f.name: getattr(self, f.name) for f in fields(self) if f.init and f.name not in skipped
                and not (f.name in phase_own and getattr(self, f.name) is None)}


OUR_TRAINING_FIELDS = ("overwrite_output_dir",)  # flags of SharedTrainingArguments that transformers lacks
FINETUNE_TRAINER_FLAGS = declared(SharedTrainingArguments, "phase", "finetune")
"""`TrainingArguments` flags only fine-tuning reads: pretraining reports no classification metric."""


__all__ = ["BEST_MODEL_METRICS", "TRANSFORMERS_RANGES", "SharedTrainingArguments", "OUR_TRAINING_FIELDS",
           "FINETUNE_TRAINER_FLAGS"]
