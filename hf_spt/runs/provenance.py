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
The numerics say whether that held: "portable AVX2" for a run pinned to one kernel level (`hf_spt.numerics`,
`--portable_numerics`), whose numbers reproduce on any Intel x86 CPU with AVX2, else "native" (the CPU's own
level); a portable run whose MKL did not hold AVX2 (an AMD CPU) is named with MKL's branch and its CPU
(`numerics_label`), as it reproduces on CPUs of that model only.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import torch

from ..numerics import (NATIVE_LABEL, PORTABLE_ENVIRONMENT, PORTABLE_LABEL, PORTABLE_LEVEL, cpu_model, is_pinned,
                        mkl_branch, mkl_branch_held, overridden_values)
from ..training.model_card import installed_versions

PROVENANCE_KEYS = ("commit", "uncommitted", "versions", "torch_threads", "cpu", "numerics")
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
    uncommitted changes), or "unknown"; read once per process, when this module is imported (below), as the
    package's code is loaded: a commit made while a run trains is not the code that run executes."""
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
    nothing changed or the commit is unknown. Read once per process, at import, like the commit."""
    if not package_commit().endswith("-dirty"):
        return ""
    try:
        paths = git_output(PACKAGE_ROOT, "diff", "--name-only", "HEAD").splitlines()
    except (OSError, subprocess.SubprocessError):
        return "not readable"
    more = len(paths) - MAX_NAMED_CHANGES
    return ", ".join(paths[:MAX_NAMED_CHANGES]) + (f" and {more} more" if more > 0 else "")


package_commit()  # the checkout as the code is loaded, not as it is when a result is written
package_changes()


@functools.lru_cache(maxsize=1)
def cpu_description() -> dict[str, str]:
    """{"model": the CPU's model name (`numerics.cpu_model`), "capability": the kernel level torch dispatches to
    on it}; read once per process."""
    return {"model": cpu_model(), "capability": torch.backends.cpu.get_cpu_capability()}


def numerics_record() -> dict[str, Any]:
    """This process's CPU numerics: {"label": "portable AVX2" (the variables of `numerics.PORTABLE_ENVIRONMENT` set,
    by hf_spt or the user, and torch at that level) or "native", "capability": the level torch dispatches to,
    "deterministic": torch's deterministic algorithms on, "mkl_branch": the CNR branch MKL reports
    (`numerics.mkl_branch`; None where MKL cannot be asked), "environment": the pinning variables set
    (`numerics.PORTABLE_ENVIRONMENT`, whoever set them), and "overridden": {variable: the user's value} where the
    pinning replaced one}."""
    capability = torch.backends.cpu.get_cpu_capability()
    record = {"label": PORTABLE_LABEL if is_pinned() and capability == PORTABLE_LEVEL else NATIVE_LABEL,
              "capability": capability, "deterministic": torch.are_deterministic_algorithms_enabled(),
              "mkl_branch": mkl_branch(),
              "environment": {name: os.environ[name] for name in PORTABLE_ENVIRONMENT if name in os.environ}}
    overridden = overridden_values()
    if overridden:
        record["overridden"] = overridden
    return record


def numerics_label(result: dict[str, Any]) -> str:
    """The numerics a result (a phase.json, a row) was made with: its record's label ("native" for a result
    written before numerics were recorded: every such run was native), and for a portable result whose GEMMs ran
    another MKL branch than AVX2, that branch and the CPU: "portable AVX2, MKL AUTO on AMD EPYC" (`numerics`: MKL
    holds AVX2 on Intel CPUs only, so such a result reproduces on CPUs of its model, not on Intel ones). A result
    recorded before MKL's branch was is read by the same rule (`numerics.mkl_branch_held`), as AVX2 on an Intel
    CPU."""
    record = result.get("numerics") or {}
    label = record.get("label", NATIVE_LABEL)
    if label != PORTABLE_LABEL:
        return label
    model = (result.get("cpu") or {}).get("model", "")
    branch = mkl_branch_held(record.get("mkl_branch", PORTABLE_LEVEL), model)
    if branch == PORTABLE_LEVEL:
        return label
    return f"{label}, {f'MKL {branch}' if branch else 'MKL branch unknown'} on {model or 'an unrecorded CPU'}"


def run_provenance() -> dict[str, Any]:
    """{"commit": `package_commit()`, "uncommitted": `package_changes()` (only for a "-dirty" commit), "versions":
    {library: version} of hf_spt, torch, transformers, datasets, accelerate and huggingface_hub}, "torch_threads":
    the intra-op threads torch computed with, "cpu": `cpu_description()`, "numerics": `numerics_record()`}."""
    changes = package_changes()  # "" for a clean checkout: no key then
    return {"commit": package_commit(), **({"uncommitted": changes} if changes else {}),
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
    """The commit a result or row can be checked at: the full hash it records (`commit_hash`), else the hash in its
    `git describe` words (`described_commit`; None for a bare tag, "unknown" or none)."""
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
        done = subprocess.run(["git", "-C", str(repository), "merge-base", "--is-ancestor", ancestor, commit],
                              capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return {0: True, 1: False}.get(done.returncode)


def recorded_provenance(result: dict[str, Any]) -> dict[str, Any]:
    """The provenance keys a result holds (none for one written before they were recorded), for a row built
    from it: old rows read back unchanged."""
    return {key: result[key] for key in PROVENANCE_KEYS if key in result}


__all__ = ["PROVENANCE_KEYS", "UNKNOWN_COMMIT", "MAX_NAMED_CHANGES", "git_output", "package_commit", "package_changes",
           "cpu_description", "numerics_record", "numerics_label", "run_provenance", "described_commit", "row_commit",
           "commit_in", "is_ancestor",
           "recorded_provenance"]
