"""The grid runner's shared queue: which rank runs which unit, decided as the ranks reach it.

Dealing units to ranks in a fixed turn left one rank idle once its short cells were done while another trained
the long ones (half the MNIST pilot's wall time ran on one core). Instead every rank walks the same list of units
and runs each one it manages to claim first: a claim is a file created exclusively (`O_CREAT | O_EXCL`, atomic on
a local or shared file system) under `OUTPUT_DIR/.unit_claims/`, named by the unit's folder (`claim_name`: one
name per folder, so no two units share a claim). The output folder is
locked for the launch (`runs.folder.locks_output_dir`), so the only claims there are this launch's once the main
process has cleared those a killed launch left, before any rank claims.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

CLAIMS_DIR = ".unit_claims"


class RankState(Protocol):
    """What the claims need of accelerate's `PartialState`."""

    is_main_process: bool
    process_index: int

    def wait_for_everyone(self) -> None: ...


def claim_name(unit: Path) -> str:
    """The claim file's name for the unit folder `unit` (relative to the output folder): its path percent-encoded,
    '/' as %2F and '%' as %25, so two folders never share a name (`cells/a__b/c` and `cells/a/b__c` did when the
    parts were joined with '__', and one of the two units was never trained)."""
    return quote(unit.as_posix(), safe="")


class UnitClaims:
    """Claims on the units of one launch of a grid, shared by its ranks through `output_dir`."""

    def __init__(self, output_dir: Path, state: RankState):
        self.folder = output_dir / CLAIMS_DIR
        self.output_dir = output_dir
        self.rank = state.process_index
        if state.is_main_process:
            self.clear()  # a killed launch's claims: its units are unfinished and must be claimable again
        state.wait_for_everyone()  # no rank claims before the old claims are gone

    def claim(self, unit_folder: Path) -> bool:
        """True if this rank is the first to claim the unit whose folder is `unit_folder` (it must run it)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        name = claim_name(unit_folder.relative_to(self.output_dir))
        try:
            handle = os.open(self.folder / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        with os.fdopen(handle, "w") as file:
            file.write(f"rank {self.rank}\n")
        return True

    def clear(self) -> None:
        """Remove every claim (the main process, before the ranks claim and once they all are done)."""
        shutil.rmtree(self.folder, ignore_errors=True)


__all__ = ["CLAIMS_DIR", "claim_name", "UnitClaims"]
