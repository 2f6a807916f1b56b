"""Training recipes (`--recipe NAME|FILE`): settings files shipped under `recipes/`, or the user's own.

Where the recipes are and how a name finds its file; `settings_files.recipe_settings` reads one. A
recipe only supplies defaults: `run_spt.py` applies it below the `--config_file` settings and
the command-line flags (`command_line.py`), so `--recipe balestriero_huang --finetune_batch_size 32`
changes the fine-tuning batch and keeps the rest of the recipe. A recipe file (YAML or JSON) holds
settings named as the flags are, checked as a config file's are, and optionally `tasks:`, a mapping
of task name -> the settings of that task over the common ones; a recipe with `tasks:` has settings
for those tasks only. Task names match ignoring case, `-` vs `_` and a leading `lra_` (`LRA-Text`,
`lra_text` and `text` are one task). Each shipped file says where its settings come from.
"""

from __future__ import annotations

from pathlib import Path

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


__all__ = ["RECIPES", "RECIPES_DIR", "SUFFIXES", "task_key", "recipe_path"]
