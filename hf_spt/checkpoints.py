"""Finding the model a phase should start from, with errors that say what was expected."""

from __future__ import annotations

import json
from pathlib import Path

from transformers.trainer_utils import get_last_checkpoint

WEIGHTS_NAME = "model.safetensors"
SHARDED_INDEX_NAME = "model.safetensors.index.json"
CONFIG_NAME = "config.json"
TRAINER_STATE_NAME = "trainer_state.json"


def is_model_folder(folder: str | Path) -> bool:
    """True when `folder` holds a saved model: config.json plus safetensors weights (single or sharded)."""
    folder = Path(folder)
    has_weights = (folder / WEIGHTS_NAME).is_file() or (folder / SHARDED_INDEX_NAME).is_file()
    return (folder / CONFIG_NAME).is_file() and has_weights


def resolve_model_folder(path: str | Path) -> Path:
    """The saved model inside `path`: `path` itself, or its best Trainer checkpoint.

    `path` may be a final model folder (what `run_spt.py` writes at the end of a phase) or a
    Trainer output folder with `checkpoint-N` subfolders only (an interrupted run): then the
    best checkpoint recorded in the last `trainer_state.json` is taken, else the last one.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No checkpoint folder at {path}: run `run_spt.py --mode spt` first or fix the path.")
    if is_model_folder(path):
        return path
    last = get_last_checkpoint(str(path)) if path.is_dir() else None
    if last is not None:
        state_file = Path(last) / TRAINER_STATE_NAME
        if state_file.is_file():
            best = json.loads(state_file.read_text()).get("best_model_checkpoint")
            if best and is_model_folder(path / Path(best).name):
                return path / Path(best).name
        if is_model_folder(last):
            return Path(last)
    raise FileNotFoundError(
        f"{path} holds no model checkpoint: expected {CONFIG_NAME} and {WEIGHTS_NAME} (a folder written by "
        "save_pretrained or run_spt.py) or checkpoint-N subfolders of a Trainer run."
    )


__all__ = ["WEIGHTS_NAME", "SHARDED_INDEX_NAME", "CONFIG_NAME", "is_model_folder", "resolve_model_folder"]
