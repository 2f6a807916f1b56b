"""What code wrote a result: the package's commit, the libraries' versions, torch's thread count and the CPU,
recorded in every `phase.json`.

A row of a report is read long after its run, often beside rows run at other commits (a seed run later, in
another checkout); without the commit and versions it was made with, a difference between rows cannot be told
from a difference between code. The commit is `git describe --always --dirty` of the package's own checkout
(an editable install), "unknown" where the package is not a git checkout's top (an installed wheel) or git is
missing; where it says "-dirty", "uncommitted" names the tracked files changed on top of it (a documentation
edit, or code), so a reader can tell which. The thread count is there because it changes the numbers: CPU
reductions split over another number of threads add in another order, and over a training run the difference
grows (a digits cell at 16x16, 150 pictures, seed 0: test 22.75% on 1 thread, the committed row, and 24.5% on 2;
docs/lra.md). The CPU is there for the same
reason: torch dispatches its kernels by the instruction set it finds (`torch.backends.cpu.get_cpu_capability()`,
e.g. "AVX2" or "AVX512"), and another kernel rounds in another order, so the same seed, code and thread count on
another kind of CPU is another run of the same distribution (a digits cell moved by 14 points; docs/lra.md).
The numerics say whether that held (`numerics.numerics_record`, `numerics.numerics_label`: the functions live in
layer-0 `hf_spt.numerics`, so a report reads a row's numerics without importing this module).

The commit is read once per process, where a command starts (`read_package_state`, from `exit_status.run_cli`;
else at the first record): a commit made while a run trains is not the code that run executes, and importing a
module runs no git. Beside `git describe` (which at an annotated tag says "v1.0", no hash) the full hash is
recorded as `commit_hash`, which `row_commit` reads to check a row against git.
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path
from typing import Any

import torch

from ..numerics import cpu_description, numerics_record
from ..training.model_card import installed_versions

PROVENANCE_KEYS = ("commit", "commit_hash", "uncommitted", "versions", "torch_threads", "cpu", "numerics")
"""The keys `run_provenance` adds to a result; a result written before they existed has neither (a result without
"numerics" was made with native numerics: `numerics_label`)."""
UNKNOWN_COMMIT = "unknown"
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # hf_spt/runs/provenance.py -> the checkout holding hf_spt/


def git_output(folder: Path, *arguments: str) -> str:
    """What `git -C folder ARGUMENTS` prints, stripped; raises `OSError` (no git) or `subprocess.SubprocessError`
    (a failing command, or one past 30 s)."""
    return subprocess.run(["git", "-C", str(folder), *arguments], capture_output=True, text=True, check=True,
                          timeout=30).stdout.strip()


@functools.lru_cache(maxsize=1)
def package_commit() -> str:
    """The package checkout's commit (`git describe --always --dirty --abbrev=12`: a hash, "-dirty" with
    uncommitted changes), or "unknown"; read once per process (`read_package_state`)."""
    try:
        if Path(git_output(PACKAGE_ROOT, "rev-parse", "--show-toplevel")).resolve() != PACKAGE_ROOT:
            return UNKNOWN_COMMIT  # the package sits inside some other repository, not its own checkout
        return git_output(PACKAGE_ROOT, "describe", "--always", "--dirty", "--abbrev=12") or UNKNOWN_COMMIT
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN_COMMIT


MAX_NAMED_CHANGES = 20


@functools.lru_cache(maxsize=1)
def package_changes() -> str:
    """The tracked files of the package's checkout changed since its commit (what makes `package_commit` "-dirty"),
    as "path, path, ..." relative to the checkout (the first `MAX_NAMED_CHANGES`, then how many more); "" where
    nothing changed or the commit is unknown. Read once per process, like the commit."""
    if not package_commit().endswith("-dirty"):
        return ""
    try:
        paths = git_output(PACKAGE_ROOT, "diff", "--name-only", "HEAD").splitlines()
    except (OSError, subprocess.SubprocessError):
        return "not readable"
    more = len(paths) - MAX_NAMED_CHANGES
    return ", ".join(paths[:MAX_NAMED_CHANGES]) + (f" and {more} more" if more > 0 else "")


@functools.lru_cache(maxsize=1)
def package_commit_hash() -> str | None:
    """The full hash of the package checkout's commit (`git rev-parse HEAD`; "-dirty" state is in
    `package_commit`), or None where the commit is unknown. Read once per process, like the commit."""
    if package_commit() == UNKNOWN_COMMIT:
        return None
    try:
        return git_output(PACKAGE_ROOT, "rev-parse", "HEAD") or None
    except (OSError, subprocess.SubprocessError):
        return None


def read_package_state() -> None:
    """Read the checkout's commit, hash and changed files now, once for the process: called where a command
    starts, as its code is loaded (the records it writes later say this state)."""
    package_commit()
    package_commit_hash()
    package_changes()


def run_provenance() -> dict[str, Any]:
    """{"commit": `package_commit()`, "commit_hash": `package_commit_hash()` (where known), "uncommitted":
    `package_changes()` (only for a "-dirty" commit), "versions":
    {library: version} of hf_spt, torch, transformers, datasets, accelerate and huggingface_hub}, "torch_threads":
    the intra-op threads torch computed with, "cpu": `cpu_description()`, "numerics": `numerics_record()`}."""
    changes, full = package_changes(), package_commit_hash()  # "" / None: no key then
    return {"commit": package_commit(), **({"commit_hash": full} if full else {}),
            **({"uncommitted": changes} if changes else {}),
            "versions": installed_versions(), "torch_threads": torch.get_num_threads(), "cpu": cpu_description(),
            "numerics": numerics_record()}


DESCRIBED = re.compile(r"^(?:.*-g)?([0-9a-f]{7,40})(?:-dirty)?$")
"""`package_commit`'s words: a hash, `git describe`'s "<tag>-<n>-g<hash>" where a tag is near, "-dirty" after."""


def described_commit(described: str | None) -> str | None:
    """The commit hash in a recorded `commit` ("-dirty": uncommitted changes on top of it); None for "unknown",
    a missing one or anything else."""
    match = DESCRIBED.match(described or "")
    return match.group(1) if match else None


def row_commit(row: dict[str, Any]) -> str | None:
    """The commit a result or row can be checked at in git: its recorded full hash (`commit_hash`), else the hash in
    its `git describe` words (`described_commit`; None for a bare tag, "unknown" or none)."""
    return row.get("commit_hash") or described_commit(row.get("commit"))


def commit_in(repository: Path | None, commit: str) -> bool:
    """Whether the git repository at `repository` holds `commit` (False without git or a repository)."""
    if repository is None:
        return False
    try:
        git_output(repository, "cat-file", "-e", f"{commit}^{{commit}}")
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def is_ancestor(repository: Path | None, ancestor: str, commit: str) -> bool | None:
    """Whether `ancestor` is `commit` or one of its ancestors in the git repository at `repository`; None when git
    cannot tell (no git, no repository, or a commit the repository does not hold)."""
    if repository is None:
        return None
    try:
        git_output(repository, "merge-base", "--is-ancestor", ancestor, commit)
    except subprocess.CalledProcessError as error:  # status 1: not an ancestor; another: git cannot tell
        return False if error.returncode == 1 else None
    except (OSError, subprocess.SubprocessError):
        return None
    return True


def recorded_provenance(result: dict[str, Any]) -> dict[str, Any]:
    """The provenance keys a result holds (none for one written before they were recorded), for a row built
    from it: old rows read back unchanged."""
    return {key: result[key] for key in PROVENANCE_KEYS if key in result}


__all__ = ["PROVENANCE_KEYS", "UNKNOWN_COMMIT", "MAX_NAMED_CHANGES", "git_output", "package_commit", "package_changes",
           "package_commit_hash", "read_package_state", "run_provenance", "described_commit", "row_commit",
           "commit_in", "is_ancestor", "recorded_provenance"]
