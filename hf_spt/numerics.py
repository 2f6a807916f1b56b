"""Portable CPU numerics: a run's CPU kernels pinned to one level (AVX2), so that its numbers reproduce on any x86 CPU.

torch picks its vectorised kernels by the CPU's capability (AVX2, AVX-512...), MKL its GEMM code path, oneDNN its
instruction set; each rounds differently, and training amplifies the difference (`digits_data_size` seed 1 at 300
pictures tested SPT at 35.0% on one CPU kind and 52.75% on another, at the same seed, code and thread count). Each
reads a setting from the environment when it initialises, and not after: ATen `ATEN_CPU_CAPABILITY` (at its first
kernel dispatch), MKL `MKL_CBWR` (Conditional Numerical Reproducibility, at its first call), oneDNN
`ONEDNN_MAX_CPU_ISA` (at its first primitive). Pinned to AVX2, a run gives the same bits on every x86 CPU with AVX2
(Intel and AMD since about 2013) at the same thread count and library versions. `MKL_CBWR=AVX2` without
`,STRICT`: on the machine this was built on (an AMD EPYC with AVX-512) CNR's AVX2 branch gave the same GEMM bits at
one and two threads and on misaligned inputs, so STRICT (which costs speed) bought nothing there; the thread count
is recorded with every row and a re-run uses the row's.

Two ways in, both before torch runs its first operation:

- a command's `--portable_numerics` (or `portable_numerics: true` in a config, grid or study file):
  `experiments.numerics_entry.hold_numerics` re-executes the command with the environment set (below);
- a library user: `hf_spt.portable_numerics()` right after `import hf_spt` (importing torch reads none of these
  settings; the first operation does), or the variables of `PORTABLE_ENVIRONMENT` set in the shell
  (`export ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2`) with
  `torch.use_deterministic_algorithms(True)`.

A value the user had set for one of the variables is overridden, and kept in `OVERRIDDEN_ENV` (JSON) so that the
record (`runs.provenance.numerics_record`) says so. This module imports no torch at import time (layer 0), so it
can be read before the first operation; its checks import torch when called.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping

from .errors import UserInputError

PORTABLE_LEVEL = "AVX2"
"""The kernel level portable numerics pins (torch's `get_cpu_capability()` name)."""
PORTABLE_ENVIRONMENT = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
"""The variables that pin ATen, MKL and oneDNN to the portable level, read when each initialises."""
OVERRIDDEN_ENV = "HF_SPT_NUMERICS_OVERRIDDEN"
"""JSON {variable: the user's value} of the variables the pinning replaced."""
PORTABLE_LABEL = f"portable {PORTABLE_LEVEL}"
"""How a record, a phase definition and a report name portable numerics; anything else is "native"."""
NATIVE_LABEL = "native"
PORTABLE_NUMERICS_HELP = (f"Pin the run's CPU numerics to {PORTABLE_LEVEL} (torch's kernels, MKL's CNR branch, "
                          "oneDNN's ISA, deterministic algorithms), so its numbers reproduce on any x86 CPU with AVX2; refused on an "
                          "accelerator. Recorded in every phase.json and row (docs/lra.md).")
"""The help of every command's `--portable_numerics`."""


def portable_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` with the portable variables set and the user's other values of them recorded (kept from an earlier
    pinning, so a re-executed or child process still names what the user had set)."""
    overridden = json.loads(environ.get(OVERRIDDEN_ENV) or "{}")
    overridden.update({name: environ[name] for name, value in PORTABLE_ENVIRONMENT.items()
                       if name in environ and environ[name] != value})
    pinned = {**environ, **PORTABLE_ENVIRONMENT}
    if overridden:
        pinned[OVERRIDDEN_ENV] = json.dumps(overridden, sort_keys=True)
    return pinned


def is_pinned(environ: Mapping[str, str] | None = None) -> bool:
    """Whether `environ` (default: this process's) holds the portable variables (set by hf_spt or by the user)."""
    environ = os.environ if environ is None else environ
    return all(environ.get(name) == value for name, value in PORTABLE_ENVIRONMENT.items())


def overridden_values() -> dict[str, str]:
    """{variable: the value the user had set} of the variables this process's pinning replaced."""
    return json.loads(os.environ.get(OVERRIDDEN_ENV) or "{}") if is_pinned() else {}


def check_portable_numerics() -> None:
    """Refuse (`UserInputError`) unless torch runs its CPU kernels at the portable level, then turn on torch's
    deterministic algorithms. Call it once the environment is pinned: a CPU without AVX2 (or not x86) cannot hold
    the level; a process whose torch chose its kernels before the pinning has to be started again."""
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    if capability != PORTABLE_LEVEL:
        if capability == "DEFAULT" or platform.machine().lower() not in ("x86_64", "amd64"):
            raise UserInputError(f"--portable_numerics pins x86 {PORTABLE_LEVEL} kernels, and this CPU "
                                 f"({platform.machine()}, torch capability {capability}) lacks {PORTABLE_LEVEL}: "
                                 "run without it (the run is recorded as native) or on an x86 CPU with AVX2.")
        raise UserInputError(f"Portable numerics was asked for after torch chose its kernels ({capability}): call "
                             "hf_spt.portable_numerics() before any torch operation, or set "
                             + " ".join(f"{k}={v}" for k, v in PORTABLE_ENVIRONMENT.items())
                             + " before starting Python.")
    torch.use_deterministic_algorithms(True)


def portable_numerics() -> None:
    """Pin this process's CPU numerics (and those of the processes it starts) to the portable level: set
    `PORTABLE_ENVIRONMENT` (a value the user set is overridden and recorded), check torch took it, turn on
    deterministic algorithms. Call it before torch runs any operation (right after `import hf_spt` is early
    enough); run_spt's and the suites' phases then record "portable AVX2". Raises `UserInputError` where it
    cannot hold (a CPU without AVX2; torch already computing)."""
    os.environ.update(portable_environment(os.environ))
    check_portable_numerics()


def hold_portable_numerics() -> None:
    """This process pinned to portable numerics and checked (`check_portable_numerics`): pinned here
    (`portable_numerics`) unless its environment already is."""
    if is_pinned():
        check_portable_numerics()
    else:
        portable_numerics()


__all__ = ["PORTABLE_LEVEL", "PORTABLE_ENVIRONMENT", "OVERRIDDEN_ENV", "PORTABLE_LABEL",
           "NATIVE_LABEL", "PORTABLE_NUMERICS_HELP", "portable_environment", "is_pinned", "overridden_values",
           "check_portable_numerics", "portable_numerics", "hold_portable_numerics"]
