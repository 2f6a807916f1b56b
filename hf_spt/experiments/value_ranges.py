"""The valid range of every numeric flag, checked before any data is built.

`None` means "the task preset's" (or our default); a given value is used as given or rejected
here with its valid range, never replaced: `--mlm_probability 0` or `--max_length 0` must not
quietly become the preset while results.json records 0, and `--finetune_epochs 0` must not report
an untrained model's accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..errors import UserInputError
from .arguments import BEST_MODEL_METRICS, DataArguments, ExperimentArguments, ModelArguments, SharedTrainingArguments

# flag -> (test, the valid range in words)
POSITIVE_INT = (lambda v: v >= 1, "a whole number >= 1")
POSITIVE = (lambda v: v > 0 and math.isfinite(v), "a finite number > 0")
PROBABILITY = (lambda v: 0 <= v <= 1, "a number in [0, 1]")
DROPOUT = (lambda v: 0 <= v < 1, "a number in [0, 1)")
MAX_STEPS = (lambda v: v == -1 or v >= 1, "a whole number >= 1, or -1 (train by epochs)")
RANGES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "max_length": POSITIVE_INT, "preprocessing_num_workers": POSITIVE_INT,
    "hidden_size": POSITIVE_INT, "num_hidden_layers": POSITIVE_INT, "num_attention_heads": POSITIVE_INT,
    "intermediate_size": POSITIVE_INT, "hidden_dropout_prob": DROPOUT, "attention_probs_dropout_prob": DROPOUT,
    "mlm_probability": (lambda v: 0 < v <= 1, "a number in (0, 1]"), "mask_replace_prob": PROBABILITY,
    "random_replace_prob": PROBABILITY, "proximity_every_n_steps": POSITIVE_INT,
    "pretrain_epochs": POSITIVE, "finetune_epochs": POSITIVE, "num_train_epochs": POSITIVE,
    "pretrain_learning_rate": POSITIVE, "finetune_learning_rate": POSITIVE, "learning_rate": POSITIVE,
    "pretrain_batch_size": POSITIVE_INT, "finetune_batch_size": POSITIVE_INT, "per_device_train_batch_size": POSITIVE_INT,
    "per_device_eval_batch_size": POSITIVE_INT, "pretrain_max_steps": MAX_STEPS, "finetune_max_steps": MAX_STEPS,
    "max_steps": MAX_STEPS, "gradient_accumulation_steps": POSITIVE_INT,
    "lora_r": POSITIVE_INT, "lora_alpha": POSITIVE, "lora_dropout": DROPOUT, "early_stopping_patience": POSITIVE_INT,
}


def check_value_ranges(
    data: DataArguments, model: ModelArguments, exp: ExperimentArguments, training: SharedTrainingArguments
) -> None:
    """Raise `UserInputError` listing every given value outside its valid range."""
    wrong = []
    for group in (data, model, exp, training):
        for name, (valid, words) in RANGES.items():
            value = getattr(group, name, None)
            if value is not None and not valid(value):
                wrong.append(f"--{name} {value!r}: must be {words}")
    if exp.mask_replace_prob + exp.random_replace_prob > 1:
        wrong.append(f"--mask_replace_prob {exp.mask_replace_prob} plus --random_replace_prob "
                     f"{exp.random_replace_prob}: must add up to at most 1")
    metric = training.metric_for_best_model
    if metric is not None and metric.removeprefix("eval_") not in BEST_MODEL_METRICS:
        wrong.append(f"--metric_for_best_model {metric!r}: must be one of {', '.join(BEST_MODEL_METRICS)} (the "
                     "fine-tuning phase's validation metrics)")
    if wrong:
        raise UserInputError("Values outside their valid range (None/unset means the preset):\n  " + "\n  ".join(
            sorted(set(wrong))))


__all__ = ["RANGES", "check_value_ranges"]
