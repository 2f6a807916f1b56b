"""What makes a run folder trustworthy after a kill, a crash or a second run started into it.

- A folder that can be written: `check_writable_folder` refuses, in one line naming the flag, an empty name (the
  current folder), a file, a path under a file, a symbolic link to nothing, a path too long for the file system
  and a folder a write fails in, before anything is written; every writer of the package checks its output folder
  with it (a run, the exporters, the analysis, the compute report, a combined budget report, the GPU self-check),
  and `check_writable_file` an output file's (the Pathfinder examples figure).
- One run per folder: `hold_output_dir` takes an exclusive `filelock` on `<folder>/.hf_spt.lock`
  and writes who holds it (pid, host, command, start time) next to it; a second run fails at
  once with `OutputDirBusyError`, naming the folder and the holder. Only the launching process
  (rank 0, or a plain `python` run) takes it: the other ranks of one `accelerate launch`, and the
  child processes the ablation grid starts for its cells, work under their parent's lock.
- Atomic files: every file of the folder is written with `hf_spt.atomic_files` (`write_json` /
  `write_text`: a temporary file, then `os.replace`), so a reader sees the old content or the new,
  never half of it; `remove_stale_temporaries` removes the temporaries a kill left.
- Unreadable results: `read_json` returns None (with a warning naming the file) for a file that
  is missing or not valid JSON; callers treat the phase as unfinished and run it again.
- Complete checkpoints: a kill while the Trainer writes `checkpoint-N/` leaves it partial;
  `resume_checkpoint` returns the newest checkpoint that has everything a resume needs and
  removes the partial ones after it, which the Trainer would otherwise trip over.
- Time across sessions: `ElapsedTime` is a stateful Trainer callback, so the seconds spent so far
  are saved in each checkpoint's `trainer_state.json` and a resumed phase counts every session.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import os
import re
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock, Timeout
from safetensors import safe_open
from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..atomic_files import TEMPORARY_FILE, write_json
from ..errors import UserInputError

logger = logging.getLogger(__name__)

PHASE_RESULT_NAME = "phase.json"  # a finished phase's result; a phase folder without it is not finished
LOCK_NAME = ".hf_spt.lock"
HOLDER_NAME = ".hf_spt.lock.holder"
TRAINER_STATE_NAME = "trainer_state.json"
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "adapter_model.safetensors")
RESUME_FILES = ("optimizer.pt", "scheduler.pt")
F = TypeVar("F", bound=Callable[..., Any])


class OutputDirBusyError(UserInputError):
    """Another run is writing into the same output folder."""


PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
"""A name that becomes one folder (an arm, a grid's task key): no separator, no `..`, nothing hidden."""


def check_plain_name(name: Any, what: str) -> str:
    """`name` when it is a plain folder name (`PLAIN_NAME`); otherwise an error naming it and `what` it is, so a
    settings file cannot write outside the run's folder."""
    if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name):
        raise UserInputError(f"{what} {name!r} becomes a folder name: use letters, digits, '.', '_' and '-' only, "
                             "starting with a letter or digit (no '/', no '..').")
    return name


def _nearest_existing(path: Path) -> Path:
    """`path` if it exists, else the nearest of its parents that does (the current folder for a relative path)."""
    return next((parent for parent in (path, *path.parents) if parent.exists()), Path("."))


def check_output_folder(folder: str | Path | None, flag: str = "--output_dir") -> Path:
    """`folder` as a Path unless it is empty (which would write into the current folder), a file, under a file, a
    path the file system cannot hold (a name or path too long), or reached through a symbolic link to nothing
    (making the folder would fail on the link); `flag` is the option that named it, for the message. Writes nothing
    (`check_writable_folder` tries a write)."""
    if folder is None or not str(folder).strip():
        raise UserInputError(f"{flag} is empty: name the folder to write into (an empty name would write into the "
                             "current folder).")
    path = Path(folder)
    try:
        existing = _nearest_existing(path)
    except OSError as error:  # ENAMETOOLONG from stat: a name over the file system's limit, or the whole path
        raise UserInputError(f"{flag} {folder} cannot be a folder here ({error.strerror or error}): pass a shorter "
                             "path.") from None
    missing = itertools.takewhile(lambda part: part != existing, (path, *path.parents))
    if dangling := next((part for part in missing if part.is_symlink()), None):
        raise UserInputError(f"{flag} {folder}: {dangling} is a symbolic link to {os.readlink(dangling)}, which does "
                             "not exist; make its target or pass another folder.")
    if path.exists() and not path.is_dir():
        raise UserInputError(f"{flag} {folder} is a file, not a folder: pass a folder (new or one this command "
                             "wrote).")
    if not existing.is_dir():
        raise UserInputError(f"{flag} {folder}: {existing} is a file, so the folder cannot be made there.")
    return path


def check_writable_folder(folder: str | Path | None, flag: str = "--output_dir") -> Path:
    """`check_output_folder`, then a file created and removed in `folder` (or, when it does not exist yet, in the
    nearest folder above it, where it would be made): root passes every permission check, so only a write tells
    whether a read-only file system or a folder like /proc refuses it. Leaves nothing behind."""
    path = check_output_folder(folder, flag)
    probe = _nearest_existing(path) / f".hf_spt.write_probe.{os.getpid()}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as error:
        raise UserInputError(f"{flag} {folder} cannot be written ({error.strerror or error}); pass a folder you "
                             "can write into.") from None
    return path


def check_writable_file(file: str | Path | None, flag: str = "--output") -> Path:
    """`file` as a Path unless its name is empty (a writer would make up a place), it is a folder, or its folder is
    one `check_writable_folder` refuses (named "`flag`'s folder"). Writes nothing but the probe."""
    if file is None or not str(file).strip():
        raise UserInputError(f"{flag} is empty: name the file to write.")
    path = Path(file)
    if path.is_dir():
        raise UserInputError(f"{flag} {file} is a folder, not a file: name the file to write.")
    check_writable_folder(path.parent, f"{flag}'s folder")
    return path


def _holder_text(folder: Path) -> str:
    holder = read_json(folder / HOLDER_NAME, quiet=True) or {}
    if not holder:
        return "another process (no holder recorded)"
    return (f"pid {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}: "
            f"{holder.get('command')}")


@contextmanager
def hold_output_dir(folder: str | Path) -> Iterator[Path]:
    """Hold the exclusive lock of `folder` for the block; fail at once if it is taken.

    A folder this call created is removed again if the block wrote nothing into it."""
    folder = check_writable_folder(folder)
    created = not folder.exists()
    lock = FileLock(folder / LOCK_NAME)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise OutputDirBusyError(
            f"{folder} is in use by another run ({_holder_text(folder)}). Wait for it to end, or pass another "
            "--output_dir; two runs in one folder would resume from each other's checkpoints."
        ) from None
    remove_stale_temporaries(folder)  # left by a kill while writing; nobody else writes here while we hold it
    try:
        write_json(folder / HOLDER_NAME, {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv),
                                          "started": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        yield folder
    finally:
        (folder / HOLDER_NAME).unlink(missing_ok=True)
        lock.release()
        if created and [path.name for path in folder.iterdir()] in ([], [LOCK_NAME]):  # a run that failed at once
            (folder / LOCK_NAME).unlink(missing_ok=True)
            folder.rmdir()


def is_launching_process() -> bool:
    """True for rank 0 of a launched run and for a plain process (read from RANK, without starting torch.distributed)."""
    return int(os.environ.get("RANK", "0")) == 0


def locks_output_dir(folder_of: Callable[..., str | Path]) -> Callable[[F], F]:
    """Decorator: the launching process runs the function while holding `folder_of(*args)`'s lock."""

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            if not is_launching_process():
                return function(*args, **kwargs)
            with hold_output_dir(folder_of(*args, **kwargs)):
                return function(*args, **kwargs)

        return run  # type: ignore[return-value]

    return decorate


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files `write_text` left under `folder` when a kill stopped it before its rename (only
    call it with the folder's lock held); returns them."""
    stale = [path for path in Path(folder).rglob(".*.tmp") if TEMPORARY_FILE.fullmatch(path.name) and path.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def read_json(path: str | Path, quiet: bool = False) -> Any | None:
    """The JSON content of `path`; None when it is missing or unreadable (an unreadable one is reported by path)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        if not quiet:
            logger.warning("%s is unreadable (%s): treating it as unfinished and running that part again.", path, error)
        return None


def _weights_readable(checkpoint: Path) -> bool:
    if (checkpoint / "pytorch_model.bin").is_file():
        return True
    index = read_json(checkpoint / "model.safetensors.index.json", quiet=True)
    adapter = (checkpoint / "adapter_model.safetensors").is_file()  # a LoRA arm saves its adapter and head only
    files = sorted(set(index["weight_map"].values())) if index else ["adapter_model.safetensors" if adapter
                                                                     else "model.safetensors"]
    try:
        for name in files:
            with safe_open(str(checkpoint / name), framework="pt"):
                pass
    except Exception:  # missing, truncated or corrupt: any failure means this checkpoint cannot be resumed
        return False
    return True


def is_complete_checkpoint(checkpoint: str | Path) -> bool:
    """Whether a Trainer checkpoint has what a resume reads: readable weights and trainer state, optimizer, scheduler."""
    checkpoint = Path(checkpoint)
    return (read_json(checkpoint / TRAINER_STATE_NAME, quiet=True) is not None
            and all((checkpoint / name).is_file() for name in RESUME_FILES)
            and any((checkpoint / name).is_file() for name in WEIGHT_FILES) and _weights_readable(checkpoint))


def _checkpoints(folder: Path) -> list[Path]:
    """`checkpoint-N` subfolders of `folder`, newest (largest N) first."""
    found = [path for path in folder.glob(f"{PREFIX_CHECKPOINT_DIR}-*")
             if path.is_dir() and path.name.split("-")[-1].isdigit()]
    return sorted(found, key=lambda path: int(path.name.split("-")[-1]), reverse=True)


def resume_checkpoint(folder: str | Path) -> Path | None:
    """The newest complete checkpoint of `folder` (None: start afresh); partial ones after it are removed."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    for checkpoint in _checkpoints(folder):
        if is_complete_checkpoint(checkpoint):
            return checkpoint
        logger.warning("%s is incomplete (interrupted while being written): removing it.", checkpoint)
        shutil.rmtree(checkpoint)
    return None


class ElapsedTime(TrainerCallback, ExportableState):
    """Seconds a phase has run over all its sessions; saved with every checkpoint (trainer_state.json)."""

    def __init__(self, earlier_seconds: float = 0.0):
        self.earlier_seconds = earlier_seconds
        self.start = time.perf_counter()

    def seconds(self) -> float:
        """Earlier sessions' seconds (up to the checkpoint resumed from) plus this session's."""
        return self.earlier_seconds + time.perf_counter() - self.start

    def state(self) -> dict[str, Any]:
        """Saved with a checkpoint; restoring it (the Trainer's `restore_callback_states_from_checkpoint`)
        gives a clock that starts then from the seconds spent up to that checkpoint."""
        return {"args": {}, "attributes": {"earlier_seconds": self.seconds()}}

    @classmethod
    def from_checkpoint(cls, checkpoint: Path | None) -> ElapsedTime:
        """A clock starting now, from the seconds saved in `checkpoint` (0 without one)."""
        saved = read_json(checkpoint / TRAINER_STATE_NAME) if checkpoint is not None else None
        state = ((saved or {}).get("stateful_callbacks") or {}).get(cls.__name__) or {}
        if isinstance(state, list):
            state = state[-1] if state else {}
        return cls(float(state.get("attributes", {}).get("earlier_seconds", 0.0)))


__all__ = ["PLAIN_NAME", "check_plain_name", "check_output_folder", "check_writable_folder", "remove_stale_temporaries", "PHASE_RESULT_NAME", "LOCK_NAME", "HOLDER_NAME", "OutputDirBusyError", "hold_output_dir", "is_launching_process",
           "locks_output_dir", "read_json", "is_complete_checkpoint", "resume_checkpoint",
           "ElapsedTime"]
