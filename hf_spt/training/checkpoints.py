"""Finding the checkpoint a phase starts from, in one place: a saved-model folder, a Trainer run, a
`.safetensors` file, a sharded index or a Hub id.

A local checkpoint is identified by its content (`content_digest`: its config and weight bytes), so a
phase definition changes when new weights are copied over the same path.

Files are located with transformers' own resolution (`cached_file`: a local folder, else the Hub
cache, else a download), and Trainer runs are read with `TrainerState`. Errors name what was
expected and the fix; a Hub id that cannot be fetched fails before any training.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from huggingface_hub import is_offline_mode
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id
from safetensors import safe_open
from transformers import TrainerState
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import get_last_checkpoint
from transformers.utils import CONFIG_NAME, SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, cached_file

from ..errors import MissingInputError, UserInputError


class HubNotReadyError(UserInputError, RuntimeError):
    """The Hub cannot be used for what the run asked (offline, no token, unreachable, no repo id): a user error."""


def has_weights(folder: str | Path) -> bool:
    """True when `folder` holds safetensors weights, single or sharded."""
    return (Path(folder) / SAFE_WEIGHTS_NAME).is_file() or (Path(folder) / SAFE_WEIGHTS_INDEX_NAME).is_file()


def is_model_folder(folder: str | Path) -> bool:
    """True when `folder` holds a saved model: config.json plus safetensors weights (single or sharded)."""
    return (Path(folder) / CONFIG_NAME).is_file() and has_weights(folder)


def resolve_model_folder(path: str | Path) -> Path:
    """The saved model inside local folder `path`: `path` itself, or its best Trainer checkpoint.

    `path` may be a final model folder (what `run_spt.py` writes at the end of a phase) or a
    Trainer output folder with `checkpoint-N` subfolders only (an interrupted run): then the
    best checkpoint recorded in the last `trainer_state.json` is taken, else the last one.
    """
    path = Path(path)
    if not path.exists():
        raise MissingInputError(f"No such folder: {path}. Run `run_spt.py --mode spt` first or fix the path.")
    if is_model_folder(path):
        return path
    last = get_last_checkpoint(str(path)) if path.is_dir() else None
    if last is not None:
        state_file = Path(last) / TRAINER_STATE_NAME
        if state_file.is_file():
            best = TrainerState.load_from_json(str(state_file)).best_model_checkpoint
            if best and is_model_folder(path / Path(best).name):
                return path / Path(best).name
        if is_model_folder(last):
            return Path(last)
    raise MissingInputError(
        f"{path} holds no model checkpoint: expected {CONFIG_NAME} and {SAFE_WEIGHTS_NAME} (a folder written by "
        "save_pretrained or run_spt.py) or checkpoint-N subfolders of a Trainer run."
    )


def check_weights_readable(folder: str | Path) -> None:
    """Open the safetensors header of every weight file of a model folder; a corrupt or truncated one is
    a user error naming the file and the fix (not a deserialisation traceback mid-run)."""
    folder = Path(folder)
    if (folder / SAFE_WEIGHTS_INDEX_NAME).is_file():
        names = sorted(set(json.loads((folder / SAFE_WEIGHTS_INDEX_NAME).read_text())["weight_map"].values()))
    else:
        names = [SAFE_WEIGHTS_NAME] if (folder / SAFE_WEIGHTS_NAME).is_file() else []
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


def checkpoint_file(source: str | Path, filename: str, required: bool = True) -> Path | None:
    """`filename` of a local model folder or of Hub model `source` (from the cache, else downloaded).

    None when the file is absent and not `required`. Raises `HubNotReadyError` when the Hub is
    needed but HF_HUB_OFFLINE is set, and OSError naming the fix when it cannot be fetched.
    """
    try:
        found = cached_file(str(source), filename, _raise_exceptions_for_missing_entries=required)
    except OSError as error:
        if Path(source).is_dir():
            raise
        if is_offline_mode():
            raise HubNotReadyError(
                f"{str(source)!r} is not a local folder, and HF_HUB_OFFLINE is set so it cannot be fetched from the "
                "Hub: pass a folder written by save_pretrained, or unset HF_HUB_OFFLINE."
            ) from error
        raise OSError(
            f"Could not get {filename} of Hub model {str(source)!r} ({error}). Is the Hub reachable (network up) and "
            "the id right? Or pass a local folder written by save_pretrained."
        ) from error
    return None if found is None else Path(found)


def _looks_like_folder(name: str) -> bool:
    """A name that can only be a path (not a Hub id `name` or `owner/name`), or one whose parent folder exists."""
    parent = Path(name).parent
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or (os.sep != "/" and os.sep in name) or (
        parent != Path(".") and parent.is_dir())


def _require_hub_id(source: str | Path) -> str:
    """`source` as a Hub id; a path that exists nowhere (or cannot be an id) is a missing local folder, and says so."""
    try:
        validate_repo_id(str(source))
    except HFValidationError:
        valid = False
    else:
        valid = not _looks_like_folder(str(source))
    if not valid:
        raise MissingInputError(
            f"No such folder: {source}. It is neither a local checkpoint (folder, .safetensors file or sharded index) "
            "nor a Hub id (owner/name): fix the path, or run the phase that writes it first."
        )
    return str(source)


def check_model_source(name_or_path: str | Path) -> None:
    """A model source is a local path, or a Hub id whose config is cached or can be fetched: else fail now."""
    if not Path(name_or_path).exists():
        checkpoint_file(_require_hub_id(name_or_path), CONFIG_NAME)


def resolve_model(source: str | Path) -> str:
    """What `from_pretrained` should load for `source`: a local model folder (a Trainer run: its best
    checkpoint), or a Hub id whose config is cached or can be fetched."""
    if Path(source).exists():
        folder = resolve_model_folder(source)
        check_weights_readable(folder)
        return str(folder)
    check_model_source(source)
    return str(source)


def _shards(index: Path) -> list[Path]:
    return [index.parent / name for name in sorted(set(json.loads(index.read_text())["weight_map"].values()))]


def checkpoint_files(checkpoint: str | Path) -> list[Path]:
    """The files a local checkpoint is loaded from, in a fixed order: its config (when there) and its weights,
    single or sharded (index and shards). `checkpoint` is a folder (a saved model, or a Trainer run: its best
    checkpoint), a `.safetensors` file or a `model.safetensors.index.json`."""
    path = Path(checkpoint)
    if path.is_file():
        return [path, *_shards(path)] if path.name.endswith(".json") else [path]
    folder = path if has_weights(path) else resolve_model_folder(path)
    index = folder / SAFE_WEIGHTS_INDEX_NAME
    weights = [index, *_shards(index)] if index.is_file() else [folder / SAFE_WEIGHTS_NAME]
    config = folder / CONFIG_NAME
    return [config, *weights] if config.is_file() else weights


@functools.lru_cache(maxsize=256)
def _file_digest(path: Path, size: int, modified_ns: int, inode: int) -> str:
    """The digest of a file's bytes; cached by its stat, so a run reads each file once however many phase
    definitions name it, and a file written since is read again."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def content_digest(checkpoint: str | Path) -> str:
    """A digest of the bytes of a local checkpoint's config and weight files (`checkpoint_files`): new weights
    copied over the same path give another digest, the same files anywhere give the same one."""
    digest = hashlib.blake2b(digest_size=16)
    for file in checkpoint_files(checkpoint):
        if not file.is_file():
            raise MissingInputError(f"{file} is missing from checkpoint {checkpoint}: copy the model again, or re-run "
                                    "the phase that wrote it.")
        status = file.stat()
        digest.update(f"{file.name}:{_file_digest(file.resolve(), status.st_size, status.st_mtime_ns, status.st_ino)}\n"
                      .encode())
    return digest.hexdigest()


def checkpoint_weight_map(checkpoint: str | Path) -> tuple[dict[str, str], Callable[[str], Path]]:
    """Key -> shard name of a checkpoint, and a function turning a shard name into a local file path.

    `checkpoint` is a folder (a saved model or a Trainer run: see `resolve_model_folder`), a
    `.safetensors` file, a `model.safetensors.index.json`, or a Hub id. Shards are only fetched
    (Hub) or opened when one of their keys is read.
    """
    path = Path(checkpoint)
    if path.is_file() and path.name.endswith(".json"):
        return dict(json.loads(path.read_text())["weight_map"]), lambda shard: path.parent / shard
    if path.is_file():
        with safe_open(str(path), framework="pt") as handle:
            return {key: path.name for key in handle.keys()}, lambda shard: path
    source = str(path) if has_weights(path) else resolve_model(checkpoint)
    index = checkpoint_file(source, SAFE_WEIGHTS_INDEX_NAME, required=False)
    if index is None:
        return checkpoint_weight_map(checkpoint_file(source, SAFE_WEIGHTS_NAME))
    return dict(json.loads(index.read_text())["weight_map"]), lambda shard: checkpoint_file(source, shard)


__all__ = ["HubNotReadyError", "has_weights", "is_model_folder", "resolve_model_folder", "check_weights_readable",
           "checkpoint_file", "check_model_source", "resolve_model", "checkpoint_files", "content_digest",
           "checkpoint_weight_map"]
