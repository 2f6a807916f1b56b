"""Portable CPU numerics: a run's CPU kernels pinned to one level (AVX2), so that its numbers reproduce on other CPUs.

torch picks its vectorised kernels by the CPU's capability (AVX2, AVX-512...), MKL its GEMM code path, oneDNN its
instruction set; each rounds differently, and training amplifies the difference (`digits_data_size` seed 1 at 300
pictures tested SPT at 35.0% on one CPU kind and 52.75% on another, at the same seed, code and thread count). Each
reads a setting from the environment when it initialises, and not after: ATen `ATEN_CPU_CAPABILITY` (at its first
kernel dispatch), MKL `MKL_CBWR` (Conditional Numerical Reproducibility, at its first call), oneDNN
`ONEDNN_MAX_CPU_ISA` (at its first primitive). Importing torch reads none of them; the first operation does.

Two modes, the values of one setting (`--portable_numerics true|cross_vendor`, `PORTABLE_MODES`):

- "true" (AVX2): the same bits on every Intel x86 CPU with AVX2 at the same thread count and library versions. MKL
  takes a CNR branch other than AUTO or COMPATIBLE on Intel CPUs only (Intel's CNR documentation): on an AMD CPU it
  reports and runs its AUTO branch, which follows the CPU's own ISA, so such a run reproduces on CPUs of its model
  (recorded: `cpu_description`'s "native_isa"), not on Intel ones (a committed MNIST row, 67.48% on an Intel Xeon,
  gave 54.17% re-run on an AMD EPYC).
- "cross_vendor": MKL's COMPATIBLE branch, the one it holds on every vendor; its cost beside the AVX2 mode is
  measured by benchmarks/bench_portable_numerics.py (docs/lra.md, "Portable numerics").

`MKL_CBWR=AVX2` without `,STRICT`: on the machine this was built on CNR's AVX2 branch gave the same GEMM bits at one
and two threads and on misaligned inputs; the thread count is recorded with every row and a re-run uses the row's.
A setting the user made that is at least as strict as the mode's pin is kept (`MKL_CBWR=COMPATIBLE` or `AVX2,STRICT`,
a lower `ONEDNN_MAX_CPU_ISA` or `ATEN_CPU_CAPABILITY=default`: `STRICTNESS`) and recorded; any other is replaced, in
one printed line with both values, and kept in `OVERRIDDEN_ENV` (JSON) so that the record says what the user had.

Where the pin goes in (`portable_numerics`, before torch's first operation: a command pins itself after parsing
its flags and files, a library user right after `import hf_spt`), then `check_portable_numerics` asks ATen and MKL
which level each took and refuses where one chose before the pin (oneDNN cannot be asked). This module imports no
torch at import time (layer 0); its checks and records import torch when called.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import platform
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import UserInputError

PORTABLE_LEVEL = "AVX2"
"""The kernel level portable numerics pins (torch's `get_cpu_capability()` name)."""
PORTABLE_ENVIRONMENT = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
"""The variables that pin ATen, MKL and oneDNN to the portable level, read when each initialises."""
CROSS_VENDOR = "cross_vendor"
PORTABLE_MODES = {"true": PORTABLE_ENVIRONMENT, CROSS_VENDOR: {**PORTABLE_ENVIRONMENT, "MKL_CBWR": "COMPATIBLE"}}
"""Each value of the `portable_numerics` setting that pins, and the environment it pins."""
SETTING_VALUES = ("true", "false", CROSS_VENDOR)
"""What the `portable_numerics` setting takes (a file may also give true/false as booleans)."""
OVERRIDDEN_ENV = "HF_SPT_NUMERICS_OVERRIDDEN"
"""JSON {variable: the user's value} of the variables the pinning replaced."""
PORTABLE_LABEL = f"portable {PORTABLE_LEVEL}"
"""How a record and a report name portable numerics; anything else is "native"."""
NATIVE_LABEL = "native"
MODE_LABELS = {"true": PORTABLE_LABEL, CROSS_VENDOR: f"{PORTABLE_LABEL}, MKL COMPATIBLE"}
"""The numerics a phase definition names for each mode (`numerics_label` names a row of that mode alike)."""
STRICTNESS = {"ATEN_CPU_CAPABILITY": ("DEFAULT", "AVX2"), "ONEDNN_MAX_CPU_ISA": ("SSE41", "AVX", "AVX2"),
              "MKL_CBWR": ("COMPATIBLE", "SSE2", "SSSE3", "SSE4_1", "SSE4_2", "AVX", "AVX2")}
"""Each variable's values from the strictest (runs on the most CPUs) up to the pin: a user's value at or before the
pin's in its list is kept. MKL's `,STRICT` suffix is stricter still, and kept."""
PORTABLE_NUMERICS_HELP = (f"true: pin the run's CPU numerics to {PORTABLE_LEVEL} (torch's kernels, MKL's CNR branch, "
                          "oneDNN's ISA, deterministic algorithms), so its numbers reproduce on any Intel x86 CPU with "
                          "AVX2 (on an AMD CPU, on CPUs of its model: MKL holds its AVX2 branch on Intel CPUs only); "
                          "cross_vendor: MKL's COMPATIBLE branch too, the same numbers on Intel and AMD CPUs, slower; "
                          "false: native (turns a file's setting off). Refused on an accelerator. Recorded in every "
                          "phase.json and row (docs/lra.md).")
"""The help of every command's `--portable_numerics`."""

MKL_BRANCHES = {1: "OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1", 8: "SSE4_2", 9: "AVX",
                10: "AVX2", 11: "AVX512_MIC", 12: "AVX512", 13: "AVX512_MIC_E1", 14: "AVX512_E1"}
"""MKL's CNR branches by the number `mkl_cbwr_get(MKL_CBWR_BRANCH)` returns (mkl_cbwr.h); "OFF": CNR is off."""
INTEL_VENDOR = "GenuineIntel"
NATIVE_ISA_FLAGS = (("AVX512", ("avx512f", "avx512bw", "avx512vl", "avx512dq")), ("AVX2", ("avx2", "fma")))
"""torch's capability names and the /proc/cpuinfo flags each needs, highest first."""


def portable_mode(value: bool | str | None, source: str = "--portable_numerics") -> str | None:
    """The mode a `portable_numerics` value asks for ("true", "cross_vendor"), or None (native: false or unset);
    anything else is refused, naming `source`."""
    text = str(value).lower() if isinstance(value, bool) else value
    if text is None or text == "false":
        return None
    if text not in PORTABLE_MODES:
        raise UserInputError(f"{source} {value!r}: must be one of {', '.join(SETTING_VALUES)}.")
    return text


def _cpuinfo(key: str) -> str:
    """/proc/cpuinfo's first value of `key`, "" where there is none."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            return next((line.split(":", 1)[1].strip() for line in cpuinfo if line.split(":")[0].strip() == key), "")
    except OSError:
        return ""


def cpu_model() -> str:
    """The CPU's model name: /proc/cpuinfo's "model name", else `platform.processor()`, else the machine type."""
    return _cpuinfo("model name") or platform.processor() or platform.machine() or "unknown"


def cpu_vendor() -> str:
    """The CPU's vendor as /proc/cpuinfo's vendor_id says it ("GenuineIntel", "AuthenticAMD"), "" where unknown."""
    return _cpuinfo("vendor_id")


def native_isa() -> str:
    """The kernel level this CPU offers in torch's names ("AVX512", "AVX2", "DEFAULT"; from /proc/cpuinfo's flags):
    what an unpinned torch dispatches to, and what MKL's AUTO branch follows."""
    flags = set(_cpuinfo("flags").split())
    return next((level for level, needed in NATIVE_ISA_FLAGS if flags >= set(needed)), "DEFAULT")


@functools.lru_cache(maxsize=1)
def cpu_description() -> dict[str, str]:
    """{"model", "vendor": /proc/cpuinfo's, "capability": the level torch dispatches to here, "native_isa":
    `native_isa()`}; read once per process."""
    import torch

    return {"model": cpu_model(), "vendor": cpu_vendor(), "capability": torch.backends.cpu.get_cpu_capability(),
            "native_isa": native_isa()}


@functools.lru_cache(maxsize=1)
def mkl_branch() -> str | None:
    """The CNR branch MKL runs this process's GEMMs on, as MKL reports it ("AVX2", "AUTO", "OFF"...; read from the
    MKL that torch links, where its CPU library exports MKL's service call), or None where MKL cannot be asked. MKL
    fixes the branch when it first reads `MKL_CBWR` (at its first call, this one included), so the answer holds for
    the process: ask only once the environment is pinned."""
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


def _level(name: str, value: str) -> str:
    """The level part of a variable's value, upper case (MKL's branch without ",STRICT")."""
    return value.split(",")[0].strip().upper() if name == "MKL_CBWR" else value.strip().upper()


def at_least_as_strict(name: str, value: str, pin: str) -> bool:
    """Whether `value` of variable `name` runs on at least every CPU that `pin` does (`STRICTNESS`)."""
    order = STRICTNESS[name]
    return _level(name, value) in order[:order.index(_level(name, pin)) + 1]


def _pinned_value(name: str, value: str | None, pin: str) -> str:
    """The value a variable gets: the user's where it is at least as strict as `pin`, else the pin (keeping MKL's
    ",STRICT" where the user asked for it)."""
    if value is not None and at_least_as_strict(name, value, pin):
        return value
    strict = name == "MKL_CBWR" and value is not None and value.upper().replace(" ", "").endswith(",STRICT")
    return f"{pin},STRICT" if strict else pin


def portable_environment(environ: Mapping[str, str], mode: str = "true") -> dict[str, str]:
    """`environ` with the variables of `PORTABLE_MODES[mode]` set where the user's values are less strict, and the
    user's replaced values recorded in `OVERRIDDEN_ENV` (kept from an earlier pinning, so a child process still
    names what the user had set)."""
    pinned = {name: _pinned_value(name, environ.get(name), pin) for name, pin in PORTABLE_MODES[mode].items()}
    overridden = json.loads(environ.get(OVERRIDDEN_ENV) or "{}")
    overridden.update({name: environ[name] for name in pinned if name in environ and environ[name] != pinned[name]})
    return {**environ, **pinned, **({OVERRIDDEN_ENV: json.dumps(overridden, sort_keys=True)} if overridden else {})}


def is_pinned(environ: Mapping[str, str] | None = None, mode: str = "true") -> bool:
    """Whether `environ` (default: this process's) holds each variable of the `mode`'s pin at least as strictly
    (set by hf_spt or by the user)."""
    environ = os.environ if environ is None else environ
    return all(name in environ and at_least_as_strict(name, environ[name], pin)
               for name, pin in PORTABLE_MODES[mode].items())


def overridden_values() -> dict[str, str]:
    """{variable: the value the user had set} of the variables this process's pinning replaced."""
    return json.loads(os.environ.get(OVERRIDDEN_ENV) or "{}") if is_pinned() else {}


def _refused_late(library: str, took: str, variable: str) -> UserInputError:
    return UserInputError(f"Portable numerics was asked for after {library} chose its {took} ({variable} read "
                          "before the pin): export " + " ".join(f"{k}={v}" for k, v in PORTABLE_ENVIRONMENT.items())
                          + " before starting Python, or call hf_spt.portable_numerics() before any torch operation.")


def check_portable_numerics() -> None:
    """Refuse (`UserInputError`) unless torch's kernels and MKL's branch took this process's pinned environment,
    then turn on torch's deterministic algorithms: a CPU without AVX2 (or not x86) cannot hold the level; ATen or
    MKL initialised before the pin (a torch operation, a GEMM) is refused, naming the variable read too early."""
    import torch

    capability, asked_kernels = (torch.backends.cpu.get_cpu_capability(),
                                 _level("ATEN_CPU_CAPABILITY", os.environ["ATEN_CPU_CAPABILITY"]))
    if platform.machine().lower() not in ("x86_64", "amd64") or capability == "DEFAULT" != asked_kernels:
        raise UserInputError(f"--portable_numerics pins x86 {PORTABLE_LEVEL} kernels, and this CPU "
                             f"({platform.machine()}, torch capability {capability}) lacks {PORTABLE_LEVEL}: "
                             "run without it (the run is recorded as native) or on an x86 CPU with AVX2.")
    if capability != asked_kernels:
        raise _refused_late("torch", f"kernels ({capability})", "ATEN_CPU_CAPABILITY")
    branch, asked = mkl_branch(), _level("MKL_CBWR", os.environ["MKL_CBWR"])
    held = {asked} if asked == "COMPATIBLE" or cpu_vendor() == INTEL_VENDOR else {asked, "AUTO"}
    if branch is not None and branch not in held:  # other vendors' MKL runs AUTO for a named branch
        raise _refused_late("MKL", f"branch ({branch})", "MKL_CBWR")
    torch.use_deterministic_algorithms(True)
    warn_unless_mkl_holds(branch, asked)


def warn_unless_mkl_holds(branch: str | None, asked: str) -> None:
    """Warn where MKL runs its AUTO branch for the `asked` one (an AMD CPU): the run still goes on, its numbers
    reproduce on CPUs of its model, and its records name it so."""
    if branch == "AUTO" and asked != "AUTO":
        warnings.warn(f"MKL runs its AUTO branch on this CPU ({cpu_model()}, {cpu_vendor() or 'vendor unknown'}), "
                      f"not {asked}: it holds named branches on Intel CPUs only, so this run's numbers reproduce on "
                      "CPUs of this model; --portable_numerics cross_vendor holds on every vendor (docs/lra.md).",
                      stacklevel=3)


def portable_numerics(mode: str = "true") -> None:
    """Pin this process's CPU numerics (and those of the processes it starts) to `mode` (`PORTABLE_MODES`): set its
    variables (a stricter value the user set is kept; a value replaced is printed, both values on one line, and
    recorded), check torch and MKL took them, turn on deterministic algorithms. Call it before torch runs any
    operation (right after `import hf_spt` is early enough). Raises `UserInputError` where it cannot hold (a CPU
    without AVX2; torch or MKL already computing)."""
    pinned = portable_environment(os.environ, mode)
    changed = [f"{name} {os.environ[name]} -> {pinned[name]}" for name in PORTABLE_MODES[mode]
               if name in os.environ and os.environ[name] != pinned[name]]
    if changed:
        print(f"portable numerics: {', '.join(changed)} (a value less strict than the pin is replaced)",
              file=sys.stderr)
    os.environ.update(pinned)
    check_portable_numerics()


def numerics_record() -> dict[str, Any]:
    """This process's CPU numerics: {"label": "portable AVX2" (the variables pinned at least as strictly, by hf_spt
    or the user, and torch at that level) or "native", "capability": the level torch dispatches to,
    "deterministic": torch's deterministic algorithms on, "mkl_branch": the CNR branch MKL reports (`mkl_branch`;
    None where MKL cannot be asked), "environment": the pinning variables set (whoever set them), and "overridden":
    {variable: the user's value} where the pinning replaced one}."""
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    pinned = is_pinned() and capability == _level("ATEN_CPU_CAPABILITY", os.environ["ATEN_CPU_CAPABILITY"])
    record = {"label": PORTABLE_LABEL if pinned else NATIVE_LABEL, "capability": capability,
              "deterministic": torch.are_deterministic_algorithms_enabled(), "mkl_branch": mkl_branch(),
              "environment": {name: os.environ[name] for name in PORTABLE_ENVIRONMENT if name in os.environ}}
    overridden = overridden_values()
    return {**record, "overridden": overridden} if overridden else record


def mkl_held(record: Mapping[str, Any], cpu: Mapping[str, Any]) -> str | None:
    """The branch a portable record's GEMMs ran on: MKL's own answer where it was recorded; for a record made before
    it was, AVX2 on an Intel CPU (by the recorded vendor, else by the model's name, all such records have) and
    AUTO on another."""
    if "mkl_branch" in record:
        return record["mkl_branch"]
    vendor = cpu.get("vendor") or ("GenuineIntel" if "intel" in cpu.get("model", "").lower() else "")
    return PORTABLE_LEVEL if vendor == INTEL_VENDOR or not cpu.get("model") else "AUTO"


def numerics_label(result: Mapping[str, Any]) -> str:
    """The numerics a result (a phase.json, a row) was made with: its record's label ("native" for a result
    written before numerics were recorded: every such run was native), and for a portable one each library that
    ran another level than AVX2: ATen's capability ("ATen DEFAULT"), MKL's branch ("MKL COMPATIBLE", the
    cross-vendor mode's; "MKL AUTO on AMD EPYC" with the CPU, whose ISA AUTO follows; ",STRICT" where asked), and
    oneDNN's ISA ("oneDNN AVX"). Rows of one label were made with the same numerics."""
    record = result.get("numerics") or {}
    label = record.get("label", NATIVE_LABEL)
    if label != PORTABLE_LABEL:
        return label
    cpu, environment = result.get("cpu") or {}, record.get("environment") or {}
    parts = [label] + ([f"ATen {record['capability']}"] if record.get("capability", PORTABLE_LEVEL) != PORTABLE_LEVEL
                       else [])
    branch = mkl_held(record, cpu)
    strict = ",STRICT" if environment.get("MKL_CBWR", "").upper().replace(" ", "").endswith(",STRICT") else ""
    if branch != PORTABLE_LEVEL or strict:
        on = "" if branch not in ("AUTO", None) else f" on {cpu.get('model') or 'an unrecorded CPU'}"
        parts.append(f"{f'MKL {branch}' if branch else 'MKL branch unknown'}{strict}{on}")
    onednn = _level("ONEDNN_MAX_CPU_ISA", environment.get("ONEDNN_MAX_CPU_ISA", PORTABLE_LEVEL))
    return ", ".join(parts + ([f"oneDNN {onednn}"] if onednn != PORTABLE_LEVEL else []))


__all__ = ["PORTABLE_LEVEL", "PORTABLE_ENVIRONMENT", "CROSS_VENDOR", "PORTABLE_MODES", "SETTING_VALUES",
           "OVERRIDDEN_ENV", "PORTABLE_LABEL", "NATIVE_LABEL", "MODE_LABELS", "STRICTNESS", "PORTABLE_NUMERICS_HELP",
           "MKL_BRANCHES", "INTEL_VENDOR", "portable_mode", "cpu_model", "cpu_vendor", "native_isa",
           "cpu_description", "mkl_branch", "at_least_as_strict", "portable_environment", "is_pinned",
           "overridden_values", "check_portable_numerics", "warn_unless_mkl_holds", "portable_numerics",
           "numerics_record", "mkl_held", "numerics_label"]
