"""What code wrote a result: the package's commit, the libraries' versions, torch's thread count and the CPU,
recorded in every `phase.json`.

A row of a report is read long after its run, often beside rows run at other commits (a seed run later, in
another checkout); without the commit and versions it was made with, a difference between rows cannot be told
from a difference between code. The commit is `git describe --always --dirty` of the package's own checkout
(an editable install), "unknown" where the package is not a git checkout's top (an installed wheel) or git is
missing. The thread count is there because it changes the numbers: CPU reductions split over another number of
threads add in another order, and over a training run the difference grows (a digits cell at 16x16, 150 pictures,
seed 0: test 22.75% on 1 thread, the committed row, and 24.5% on 2; docs/lra.md). The CPU is there for the same
reason: torch dispatches its kernels by the instruction set it finds (`torch.backends.cpu.get_cpu_capability()`,
e.g. "AVX2" or "AVX512"), and another kernel rounds in another order, so the same seed, code and thread count on
another kind of CPU is another run of the same distribution (a digits cell moved by 14 points; docs/lra.md).
"""

from __future__ import annotations

import functools
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

import torch

from ..training.model_card import installed_versions

PROVENANCE_KEYS = ("commit", "versions", "torch_threads", "cpu")
"""The keys `run_provenance` adds to a result; a result written before they existed has neither."""
UNKNOWN_COMMIT = "unknown"
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # hf_spt/runs/provenance.py -> the checkout holding hf_spt/


def _git(*arguments: str) -> str:
    return subprocess.run(["git", "-C", str(PACKAGE_ROOT), *arguments], capture_output=True, text=True, check=True,
                          timeout=30).stdout.strip()


@functools.lru_cache(maxsize=1)
def package_commit() -> str:
    """The package checkout's commit (`git describe --always --dirty --abbrev=12`: a hash, "-dirty" with
    uncommitted changes), or "unknown"; read once per process."""
    try:
        if Path(_git("rev-parse", "--show-toplevel")).resolve() != PACKAGE_ROOT:
            return UNKNOWN_COMMIT  # the package sits inside some other repository, not its own checkout
        return _git("describe", "--always", "--dirty", "--abbrev=12") or UNKNOWN_COMMIT
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN_COMMIT


@functools.lru_cache(maxsize=1)
def cpu_description() -> dict[str, str]:
    """{"model": the CPU's model name (/proc/cpuinfo's first "model name", else `platform.processor()`, else
    the machine type), "capability": the kernel level torch dispatches to on it}; read once per process."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
    except OSError:
        pass
    return {"model": model or platform.processor() or platform.machine() or "unknown",
            "capability": torch.backends.cpu.get_cpu_capability()}


def run_provenance() -> dict[str, Any]:
    """{"commit": `package_commit()`, "versions": {library: version} of hf_spt, torch, transformers, datasets,
    accelerate and huggingface_hub}, "torch_threads": the intra-op threads torch computed with, "cpu":
    `cpu_description()`}."""
    return {"commit": package_commit(), "versions": installed_versions(), "torch_threads": torch.get_num_threads(),
            "cpu": cpu_description()}


DESCRIBED = re.compile(r"^(?:.*-g)?([0-9a-f]{7,40})(?:-dirty)?$")
"""`package_commit`'s words: a hash, `git describe`'s "<tag>-<n>-g<hash>" where a tag is near, "-dirty" after."""


def described_commit(described: str | None) -> str | None:
    """The commit hash in a recorded `commit` ("-dirty": uncommitted changes on top of it); None for "unknown",
    a missing one or anything else."""
    match = DESCRIBED.match(described or "")
    return match.group(1) if match else None


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


__all__ = ["PROVENANCE_KEYS", "UNKNOWN_COMMIT", "package_commit", "cpu_description", "run_provenance", "described_commit",
           "is_ancestor", "recorded_provenance"]
