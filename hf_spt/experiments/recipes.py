"""Published training recipes as named presets (`--recipe NAME`), under any explicit setting.

A recipe only supplies defaults: `run_spt.py` applies it below the `--config_file` settings and
the command-line flags, so `--recipe balestriero_huang --finetune_batch_size 32` changes the
batch and keeps the rest of the recipe.

- `balestriero_huang` (Balestriero & Huang): AdaFactor, cosine decay after a 5% linear warm-up,
  batch 8, 10,000 steps (each phase), no gradient accumulation, and their classifier head, a
  linear layer on the last token's state concatenated with the mean (`last_mean`).
- `amos_lra` (Amos et al., arXiv 2310.02980, SPT on Long Range Arena): per task, the
  masking rate (50% visual, 15% text and retrieval, 10% ListOps), batch, model size, length and
  mean pooling; AdamW at 1e-3 (the top of their grid) and up to 200 SPT epochs, of which the
  best-validation checkpoint is fine-tuned.
"""

from __future__ import annotations

import argparse
from typing import Any

BALESTRIERO_HUANG: dict[str, Any] = {
    "optim": "adafactor",
    "lr_scheduler_type": "cosine",
    "warmup_steps": 0.05,
    "spt_batch_size": 8,
    "finetune_batch_size": 8,
    "spt_max_steps": 10_000,
    "finetune_max_steps": 10_000,
    "pooling": "last_mean",
}

AMOS_LRA_COMMON: dict[str, Any] = {
    "optim": "adamw_torch",
    "spt_learning_rate": 1e-3,
    "finetune_learning_rate": 1e-3,
    "spt_epochs": 200,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "pooling": "mean",
}


def _lra(mlm: float, batch: int, layers: int, width: int, heads: int, ffn: int, length: int) -> dict[str, Any]:
    return {"mlm_probability": mlm, "spt_batch_size": batch, "finetune_batch_size": batch, "num_hidden_layers": layers,
            "hidden_size": width, "num_attention_heads": heads, "intermediate_size": ffn * width, "max_length": length}


AMOS_LRA_TASKS: dict[str, dict[str, Any]] = {  # Amos et al.: model sizes per task and masking rates
    "listops": _lra(0.10, 32, 6, 512, 8, 4, 2048),
    "text": _lra(0.15, 32, 6, 512, 8, 4, 4096),
    "retrieval": _lra(0.15, 32, 4, 128, 4, 4, 4000),
    "image": _lra(0.50, 50, 3, 64, 4, 2, 1024),
    "pathfinder": _lra(0.50, 32, 4, 128, 8, 1, 1024),
}

RECIPES = ("balestriero_huang", "amos_lra")


def lra_task_key(task: str) -> str:
    """`lra_listops`, `LRA-Text`, `listops` -> the key of `AMOS_LRA_TASKS`."""
    key = task.lower().replace("-", "_")
    return key[len("lra_"):] if key.startswith("lra_") else key


def recipe_settings(name: str, task: str) -> dict[str, Any]:
    """The settings (argument-dataclass field names) that recipe `name` gives task `task`."""
    if name == "balestriero_huang":
        return dict(BALESTRIERO_HUANG)
    if name == "amos_lra":
        key = lra_task_key(task)
        if key not in AMOS_LRA_TASKS:
            raise ValueError(
                f"--recipe amos_lra has settings for the LRA tasks {', '.join(AMOS_LRA_TASKS)}, not for task {task!r}: "
                "use the task's own preset (no --recipe) or --recipe balestriero_huang."
            )
        return {**AMOS_LRA_COMMON, **AMOS_LRA_TASKS[key]}
    raise ValueError(f"Unknown --recipe {name!r}; choose one of {', '.join(RECIPES)}.")


def recipe_defaults(argv: list[str], file_defaults: dict[str, Any], default_task: str) -> dict[str, Any]:
    """Parser defaults for a command line: the recipe's settings, overridden by the config file's.

    The recipe and task are read from `argv` first, then from the config file.
    """
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--recipe")
    peek.add_argument("--task")
    known, _ = peek.parse_known_args(argv)
    recipe = known.recipe or file_defaults.get("recipe")
    if not recipe:
        return dict(file_defaults)
    task = known.task or file_defaults.get("task") or default_task
    return {**recipe_settings(recipe, task), **file_defaults}


__all__ = ["RECIPES", "BALESTRIERO_HUANG", "AMOS_LRA_TASKS", "recipe_settings", "recipe_defaults", "lra_task_key"]
