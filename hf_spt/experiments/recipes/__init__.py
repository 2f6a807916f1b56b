"""Training recipes (`--recipe NAME|FILE`): settings files shipped under `recipes/`, or the user's own.

A recipe only supplies defaults: `run_spt.py` applies it below the `--config_file` settings and
the command-line flags (`command_line.py`), so `--recipe balestriero_huang --finetune_batch_size 32`
changes the fine-tuning batch and keeps the rest of the recipe. A recipe file (YAML or JSON) holds
settings named as the flags are, checked as a config file's are, and optionally `tasks:`, a mapping
of task name -> the settings of that task over the common ones; a recipe with `tasks:` has settings
for those tasks only. Task names match ignoring case, `-` vs `_` and a leading `lra_` (`LRA-Text`,
`lra_text` and `text` are one task). Each shipped file says where its settings come from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import MissingInputError, UserInputError

RECIPES_DIR = Path(__file__).parent
RECIPES = tuple(sorted(path.stem for path in RECIPES_DIR.glob("*.yaml")))
SUFFIXES = (".yaml", ".yml", ".json")


def task_key(task: str) -> str:
    """`lra_listops`, `LRA-Text`, `listops` -> the registered task name."""
    return task.lower().replace("-", "_").removeprefix("lra_")


def recipe_path(recipe: str) -> Path:
    """The file of `recipe`: a shipped recipe's name, or the path of a recipe file."""
    if recipe in RECIPES:
        return RECIPES_DIR / f"{recipe}.yaml"
    choices = f"name a shipped recipe ({', '.join(RECIPES)}) or a recipe file ({'/'.join(SUFFIXES)})"
    path = Path(recipe)
    if path.suffix not in SUFFIXES:
        raise UserInputError(f"Unknown --recipe {recipe!r}; {choices}.")
    if not path.is_file():
        raise MissingInputError(f"--recipe {recipe}: no such file; {choices}.")
    return path


def read_recipe(recipe: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A recipe's common settings and its per-task settings (by `task_key`; empty: for every task)."""
    from ..command_line import check_settings, read_settings_file  # command_line reads recipes: import when used

    path = recipe_path(recipe)
    content = read_settings_file(path, "--recipe") or {}
    tasks = (content.pop("tasks", None) if isinstance(content, dict) else None) or {}
    common = check_settings(content, f"--recipe {path}")
    if not isinstance(tasks, dict):
        raise UserInputError(f"--recipe {path}: tasks: is a mapping of task name -> settings, not "
                             f"{type(tasks).__name__}.")
    return common, {task_key(name): check_settings(settings, f"--recipe {path}, tasks: {name}")
                    for name, settings in tasks.items()}


def recipe_settings(recipe: str, task: str) -> dict[str, Any]:
    """The settings (argument-dataclass field names) that recipe `recipe` (a name or a file) gives task `task`."""
    common, tasks = read_recipe(recipe)
    if not tasks:
        return common
    if task_key(task) not in tasks:
        for_every_task = " or ".join(f"--recipe {name}" for name in RECIPES if not read_recipe(name)[1])
        raise UserInputError(
            f"--recipe {recipe} has settings for the tasks {', '.join(tasks)}, not for task {task!r}: use the "
            f"task's own preset (no --recipe) or a recipe for every task ({for_every_task}).")
    return {**common, **tasks[task_key(task)]}


__all__ = ["RECIPES", "RECIPES_DIR", "task_key", "recipe_path", "read_recipe", "recipe_settings"]
