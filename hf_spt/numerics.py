"""Portable CPU numerics: a run's CPU kernels pinned to one level (AVX2), so that its numbers reproduce on other CPUs.

torch picks its vectorised kernels by the CPU's capability (AVX2, AVX-512...), MKL its GEMM code path, oneDNN its
instruction set; each rounds differently, and training amplifies the difference (`digits_data_size` seed 1 at 300
pictures tested SPT at 35.0% on one CPU kind and 52.75% on another, at the same seed, code and thread count). Each
reads a setting from the environment when it initialises, and not after: ATen `ATEN_CPU_CAPABILITY` (at its first
kernel dispatch), MKL `MKL_CBWR` (Conditional Numerical Reproducibility, at its first call), oneDNN
`ONEDNN_MAX_CPU_ISA` (at its first primitive). Pinned to AVX2, a run gives the same bits on every Intel x86 CPU
with AVX2 at the same thread count and library versions. MKL takes a CNR branch other than AUTO or COMPATIBLE on
Intel CPUs only (Intel's CNR documentation): on an AMD CPU `MKL_CBWR=AVX2` silently runs MKL's automatic branch,
so a portable run there reproduces on CPUs of its model, not on Intel ones (measured: the tiny golden run of
tests/test_portable_numerics.py made on an AMD EPYC gives the same metrics to every printed digit on an Intel Xeon,
and other weight bits). `mkl_branch` asks MKL which branch it runs; every record says it, and a report names such
rows apart (`runs.provenance.numerics_label`). COMPATIBLE, the one branch MKL holds on every vendor, costs about
2.4x in training throughput (benchmarks/bench_training_throughput.py, image preset, one thread; one run each,
beside a training run), so it is not the default. `MKL_CBWR=AVX2` without `,STRICT`: on the machine this was
built on CNR's AVX2 branch gave the same GEMM bits at one and two threads and on misaligned inputs, so STRICT
(which costs speed) bought nothing there; the thread count is recorded with every row and a re-run uses the row's.

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

import ctypes
import functools
import json
import os
import platform
import warnings
from collections.abc import Mapping
from pathlib import Path

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
                          "oneDNN's ISA, deterministic algorithms), so its numbers reproduce on any Intel x86 CPU with AVX2 (on an "
                          "AMD CPU, on CPUs of its model: MKL holds its AVX2 branch on Intel CPUs only); refused on an "
                          "accelerator. Recorded in every phase.json and row (docs/lra.md).")
"""The help of every command's `--portable_numerics`."""

MKL_BRANCHES = {1: "OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1", 8: "SSE4_2", 9: "AVX",
                10: "AVX2", 11: "AVX512_MIC", 12: "AVX512", 13: "AVX512_MIC_E1", 14: "AVX512_E1"}
"""MKL's CNR branches by the number `mkl_cbwr_get(MKL_CBWR_BRANCH)` returns (mkl_cbwr.h); "OFF": CNR is off."""


def cpu_model() -> str:
    """The CPU's model name: /proc/cpuinfo's first "model name", else `platform.processor()`, else the machine
    type."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
    except OSError:
        pass
    return model or platform.processor() or platform.machine() or "unknown"


@functools.lru_cache(maxsize=1)
def mkl_branch() -> str | None:
    """The CNR branch MKL runs this process's GEMMs on, as MKL reports it ("AVX2", "AUTO", "OFF"...; read from the
    MKL that torch links, where its CPU library exports MKL's service call), or None where MKL cannot be asked (a
    torch without MKL, or one whose library hides MKL's symbols). MKL fixes the branch when it first reads
    `MKL_CBWR`, so the answer holds for the process."""
    import torch

    if not torch.backends.mkl.is_available():
        return None
    for library in sorted((Path(torch.__file__).parent / "lib").glob("*torch_cpu*")):
        try:
            branch_of = ctypes.CDLL(str(library)).mkl_serv_cbwr_get
        except (OSError, AttributeError):
            continue
        branch_of.restype, branch_of.argtypes = ctypes.c_int, [ctypes.c_int]
        number = branch_of(1) & 0xFFFF  # MKL_CBWR_BRANCH; the STRICT flag (0x10000) left out
        return MKL_BRANCHES.get(number, f"branch {number}")
    return None


def mkl_branch_held(branch: str | None, model: str) -> str | None:
    """The branch MKL computes with on a CPU of `model` (`cpu_model`; "" where none was recorded), given the branch
    it reports (`mkl_branch`): on a CPU that is not Intel's, every branch but COMPATIBLE is AUTO (Intel's CNR
    documentation: other branches hold on Intel CPUs only, and MKL falls back to AUTO without a word)."""
    if branch is not None and model and "intel" not in model.lower() and branch not in ("COMPATIBLE", "OFF"):
        return "AUTO"
    return branch


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
    warn_unless_mkl_holds(cpu_model(), mkl_branch())


def warn_unless_mkl_holds(model: str, branch: str | None) -> None:
    """Warn where MKL does not compute a pinned run's GEMMs on the portable branch (`mkl_branch_held`: an AMD CPU):
    the run still goes on, its numbers reproduce on CPUs of its model, and its records name it so."""
    held = mkl_branch_held(branch, model)
    if held not in (PORTABLE_LEVEL, None):
        warnings.warn(f"MKL runs its {held} branch on this CPU ({model}), not {PORTABLE_LEVEL}: it holds "
                      f"{PORTABLE_LEVEL} on Intel CPUs only, so this run's numbers reproduce on CPUs of this model, "
                      "not on Intel ones; its records say so (docs/lra.md, portable numerics).", stacklevel=3)


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


__all__ = ["PORTABLE_LEVEL", "PORTABLE_ENVIRONMENT", "OVERRIDDEN_ENV", "PORTABLE_LABEL", "NATIVE_LABEL",
           "PORTABLE_NUMERICS_HELP", "MKL_BRANCHES", "cpu_model", "mkl_branch", "mkl_branch_held",
           "warn_unless_mkl_holds", "portable_environment", "is_pinned", "overridden_values", "check_portable_numerics",
           "portable_numerics", "hold_portable_numerics"]
