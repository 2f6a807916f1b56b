"""Files written whole or not at all, for every layer that writes one (a run folder's results, the analysis report
and its figures, a generator's files).

`replaced_file` hands out a stream on a temporary file next to the target and `os.replace`s it over the target when
the block ends, so a reader (or a kill) sees the old content or the new, never half of it; a block that raises
leaves the target untouched and no temporary behind. The file gets the permissions any new file gets (0666 less
the umask), not `mkstemp`'s 0600. `write_text` and `write_json` write a whole text through it, `write_png` a picture
(a generator's, the digits exporter's). A temporary a kill
left behind matches `TEMPORARY_FILE` (`runs.folder.remove_stale_temporaries` removes those of a run folder).
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

TEMPORARY_FILE = re.compile(r"\..+\.[0-9a-f]{16}\.tmp")
"""The name of a temporary file `replaced_file` writes (`.<name>.<16 hex digits>.tmp`)."""


def _create_temporary(path: Path) -> tuple[int, Path]:
    """A new, uniquely named file next to `path`, open for writing. Unlike `tempfile.mkstemp` (always 0600) it
    is created as `open` creates a file, 0666 less the umask, so the file it becomes is as readable as the
    run's other files."""
    while True:
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            return os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), temporary
        except FileExistsError:
            continue


@contextmanager
def replaced_file(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """A stream (`mode` "w" for text, "wb" for bytes) whose content replaces `path`'s when the block ends (the
    module docstring); its folder is made when missing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = _create_temporary(path)
    try:
        with os.fdopen(handle, mode) as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    """Write `text` to `path` atomically."""
    with replaced_file(path) as stream:
        stream.write(text)


def write_json(path: str | Path, data: Any) -> None:
    """`data` as indented JSON at `path`, atomically."""
    write_text(path, json.dumps(data, indent=1))


def write_png(path: str | Path, pixels: Any) -> None:
    """`pixels` (a uint8 array, (height, width) gray or (height, width, 3) colour) as a PNG at `path`, atomically
    (Pillow, imported here only: the layers that write pictures need it)."""
    from PIL import Image

    with replaced_file(path, "wb") as stream:
        Image.fromarray(pixels).save(stream, format="PNG")


__all__ = ["TEMPORARY_FILE", "replaced_file", "write_text", "write_json", "write_png"]
