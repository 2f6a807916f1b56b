"""Finding the model a phase should start from (a local folder, a Trainer run, a Hub id), with errors
that say what was expected; a Hub id that cannot be reached fails before any training."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from huggingface_hub import constants, try_to_load_from_cache
from safetensors import safe_open
from transformers.trainer_utils import get_last_checkpoint

from ..errors import MissingInputError, UserInputError

WEIGHTS_NAME = "model.safetensors"
SHARDED_INDEX_NAME = "model.safetensors.index.json"
CONFIG_NAME = "config.json"
TRAINER_STATE_NAME = "trainer_state.json"
REACHABILITY_TIMEOUT_S = 5.0


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
        raise MissingInputError(f"No checkpoint folder at {path}: run `run_spt.py --mode spt` first or fix the path.")
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
    raise MissingInputError(
        f"{path} holds no model checkpoint: expected {CONFIG_NAME} and {WEIGHTS_NAME} (a folder written by "
        "save_pretrained or run_spt.py) or checkpoint-N subfolders of a Trainer run."
    )


def check_weights_readable(folder: str | Path) -> None:
    """Open the safetensors header of every weight file of a model folder; a corrupt or truncated one is
    a user error naming the file and the fix (not a deserialisation traceback mid-run)."""
    folder = Path(folder)
    if (folder / SHARDED_INDEX_NAME).is_file():
        names = sorted(set(json.loads((folder / SHARDED_INDEX_NAME).read_text())["weight_map"].values()))
    else:
        names = [WEIGHTS_NAME] if (folder / WEIGHTS_NAME).is_file() else []
    for name in names:
        try:
            with safe_open(str(folder / name), framework="pt"):
                pass
        except Exception as error:  # safetensors raises its own error types for every kind of damage
            raise UserInputError(
                f"{folder / name} is corrupt or truncated ({error}); the run that wrote it was probably interrupted. "
                f"Re-run the phase that wrote {folder} (delete its phase.json and model files first), or copy the "
                "model again."
            ) from None


def _looks_like_folder(name: str) -> bool:
    """A name that can only be a path (not a Hub id `name` or `owner/name`), or one whose parent folder exists."""
    parent = Path(name).parent
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or os.sep != "/" and os.sep in name or (
        parent != Path(".") and parent.is_dir())


class HubNotReadyError(UserInputError, RuntimeError):
    """The Hub cannot be used for what the run asked (offline, no token, unreachable, no repo id): a user error."""


def hub_offline() -> bool:
    """True when HF_HUB_OFFLINE is set, read now (the environment may change after import)."""
    return constants.HF_HUB_OFFLINE or constants._is_true(os.environ.get("HF_HUB_OFFLINE"))


def endpoint_reachable(endpoint: str, timeout: float) -> bool:
    """A TCP connection to the Hub endpoint opens within `timeout` seconds (no retries, no HTTP)."""
    url = urlparse(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def _cached(repo_id: str) -> bool:
    """True when the Hub model `repo_id` is already in the local cache (usable offline)."""
    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except ValueError:  # not a valid repo id at all
        return False


def check_model_source(name_or_path: str) -> None:
    """A model source is a local folder, a cached Hub model, or a Hub id that needs the Hub: fail early offline."""
    if Path(name_or_path).exists() or _cached(name_or_path):
        return
    if _looks_like_folder(name_or_path):
        raise MissingInputError(f"No such folder: {name_or_path}. Pass a folder written by save_pretrained or "
                                "run_spt.py (e.g. OUTPUT_DIR/pretrain), or fix the path.")
    if hub_offline():
        raise HubNotReadyError(
            f"{name_or_path!r} is not a local folder, and HF_HUB_OFFLINE is set so it cannot be fetched from the "
            "Hub: pass a folder written by save_pretrained, or unset HF_HUB_OFFLINE."
        )
    if not endpoint_reachable(constants.ENDPOINT, REACHABILITY_TIMEOUT_S):
        raise HubNotReadyError(
            f"{name_or_path!r} is not a local folder, and the Hub at {constants.ENDPOINT} is unreachable: "
            "pass a folder written by save_pretrained, or connect to the network."
        )


__all__ = ["WEIGHTS_NAME", "SHARDED_INDEX_NAME", "CONFIG_NAME", "is_model_folder", "resolve_model_folder",
           "check_weights_readable", "HubNotReadyError", "hub_offline", "endpoint_reachable", "check_model_source"]
