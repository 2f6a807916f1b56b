"""A folder an exporter writes files into (the digits pictures), as careful with the user's files as a run folder.

An exporter writes file names of its own choosing (`train/0/0000.png`), so writing into a folder that already holds
files could replace the user's without a word. `claim_export_folder` lets it write only into a folder that is new,
empty, or a previous export of the same settings, which it recognises by the marker it records there first
(`EXPORT_MARKER_NAME`, as a phase folder records its `phase_definition.json`): a re-run of the same command
completes or rewrites its own files, and anything else is refused in one line before a file is written. A marker
counts as an export only once files are written beside it: a folder holding the marker alone (an export that stopped
before its first file) is claimed as an empty one, whatever settings it recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..atomic_files import write_json
from ..errors import UserInputError
from .folder import check_writable_folder, read_json
from .phase_definition import differences

EXPORT_MARKER_NAME = ".hf_spt_export.json"
"""What an exporter wrote into its folder (a hidden file: the image-folder reader skips it)."""


def claim_export_folder(folder: str | Path | None, settings: dict[str, Any], flag: str = "--output_dir") -> Path:
    """`folder` (as named by `flag`) once it may receive an export of `settings` (a JSON-able mapping naming the
    exporter and every setting its files depend on), with the marker recorded; otherwise a one-line error, and
    nothing written: a folder that cannot be written (`check_writable_folder`), one holding files of no export, or
    an export of other settings (each difference as `name: recorded -> asked for`; a marker with no file beside it
    is no export)."""
    path = check_writable_folder(folder, flag)
    if path.is_dir() and any(entry.name != EXPORT_MARKER_NAME for entry in path.iterdir()):
        recorded = read_json(path / EXPORT_MARKER_NAME, quiet=True)
        if recorded is None:
            raise UserInputError(f"{flag} {folder} holds files this command did not write (no {EXPORT_MARKER_NAME}), "
                                 "which the export could overwrite: pass a new or empty folder.")
        changed = differences(recorded, settings)
        if changed:
            raise UserInputError(f"{flag} {folder} holds an export of other settings ({'; '.join(changed)}, recorded "
                                 "-> asked for): pass another folder, or the recorded settings to complete it.")
    write_json(path / EXPORT_MARKER_NAME, settings)
    return path


__all__ = ["EXPORT_MARKER_NAME", "claim_export_folder"]
