"""Published training recipes as named presets (`--recipe NAME`), under any explicit setting.

A recipe only supplies defaults: `run_spt.py` applies it below the `--config_file` settings and
the command-line flags (`command_line.py`), so `--recipe balestriero_huang --finetune_batch_size 32`
changes the fine-tuning batch and keeps the rest of the recipe. Settings are named as the flags
are; a budget the same in both phases uses the generic TrainingArguments name, which per-phase
flags override for their phase.

- `balestriero_huang` (Balestriero & Huang): AdaFactor, cosine decay after a 5% linear warm-up,
  batch 8, 10,000 steps (each phase), no gradient accumulation, and their classifier head, a
  linear layer on the last token's state concatenated with the mean (`last_mean`). Their
  comparison, from scratch vs the pretrained checkpoint with LoRA (and with full fine-tuning), is
  `--mode lora_comparison --model_name_or_path ...` under this recipe.
- `amos_lra` (Amos et al., arXiv 2310.02980, SPT on Long Range Arena): the LRA task's registered
  preset (masking rate: 50% visual, 15% text and retrieval, 10% ListOps; batch, model size,
  length) with mean pooling, AdamW at 1e-3 (the top of their grid) and up to 200 pretraining
  epochs, of which the best-validation checkpoint is fine-tuned.
"""

from __future__ import annotations

from typing import Any

from ..errors import UserInputError
from ..tasks import task_preset

BALESTRIERO_HUANG: dict[str, Any] = {
    "optim": "adafactor",
    "lr_scheduler_type": "cosine",
    "warmup_steps": 0.05,
    "per_device_train_batch_size": 8,
    "max_steps": 10_000,
    "pooling": "last_mean",
}

AMOS_LRA_COMMON: dict[str, Any] = {
    "optim": "adamw_torch",
    "learning_rate": 1e-3,
    "pretrain_epochs": 200,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "pooling": "mean",
}
AMOS_LRA_TASKS = ("listops", "text", "retrieval", "image", "pathfinder")
# where Amos et al.'s setting differs from the task's preset: ListOps positions for 2048 tokens (the preset: 2000)
AMOS_LRA_CHANGES: dict[str, dict[str, Any]] = {"listops": {"max_length": 2048}}

RECIPES = ("balestriero_huang", "amos_lra")


def lra_task_key(task: str) -> str:
    """`lra_listops`, `LRA-Text`, `listops` -> the registered task name."""
    key = task.lower().replace("-", "_")
    return key[len("lra_"):] if key.startswith("lra_") else key


def amos_lra_settings(task: str) -> dict[str, Any]:
    """The `amos_lra` settings of one LRA task, read off its registered preset."""
    preset = task_preset(task)
    return {**AMOS_LRA_COMMON, "mlm_probability": preset.mlm_probability,
            "per_device_train_batch_size": preset.batch_size, "max_length": preset.max_length,
            **{name: preset.model[name] for name in ("num_hidden_layers", "hidden_size", "num_attention_heads",
                                                     "intermediate_size")},
            **AMOS_LRA_CHANGES.get(task, {})}


def recipe_settings(name: str, task: str) -> dict[str, Any]:
    """The settings (argument-dataclass field names) that recipe `name` gives task `task`."""
    if name == "balestriero_huang":
        return dict(BALESTRIERO_HUANG)
    if name == "amos_lra":
        key = lra_task_key(task)
        if key not in AMOS_LRA_TASKS:
            raise UserInputError(
                f"--recipe amos_lra has settings for the LRA tasks {', '.join(AMOS_LRA_TASKS)}, not for task {task!r}: "
                "use the task's own preset (no --recipe) or --recipe balestriero_huang."
            )
        return amos_lra_settings(key)
    raise UserInputError(f"Unknown --recipe {name!r}; choose one of {', '.join(RECIPES)}.")


__all__ = ["RECIPES", "BALESTRIERO_HUANG", "AMOS_LRA_TASKS", "recipe_settings", "amos_lra_settings", "lra_task_key"]
