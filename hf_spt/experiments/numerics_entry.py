"""Where a command that trains takes `--portable_numerics`: re-executed with its CPU numerics pinned.

ATen, MKL and oneDNN read their settings when they initialise (`hf_spt.numerics`), so the variables must be in the
environment before the first torch operation of every process that computes: the command, each rank `accelerate
launch` starts (each runs the command from its start, so each pins itself), and the processes a rank starts for
its units (they inherit the environment). The flag can also come from a config, grid or study file, which is read
only after the package, and torch with it, are imported. Two ways would meet that: read argv and the files before
importing anything, or set the environment and start the same command again. The first would duplicate the
layered parsing of flags over files over recipes, and could still be undone by an import that runs an operation;
the second is exact whatever the imports do, so a command re-executes itself (`os.execve` of `sys.orig_argv`, the
same interpreter, flags and working directory; the process id, and with it the launcher's bookkeeping, stays), and
the new process finds the environment pinned and goes on. A command called from Python (`main(argv)` with other
flags than the process's) cannot be re-executed: it pins the environment in-process, which holds where torch has
run no operation yet and is refused otherwise (`numerics.check_portable_numerics`).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from accelerate.utils import parse_flag_from_env

from ..errors import UserInputError
from ..numerics import hold_portable_numerics, is_pinned, portable_environment
from .exit_status import runs_command_line


def accelerator_present() -> str | None:
    """The accelerator torch would train on ("cuda", "xpu", "mps"...: `torch.accelerator`, as the phases' device
    defaults read it), or None on a CPU-only machine."""
    import torch

    return torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else None


def refuse_accelerator(use_cpu: bool) -> None:
    """Refuse portable numerics for a run that would train on an accelerator: one present, and neither `use_cpu` nor
    `ACCELERATE_USE_CPU=1` asks for the CPU."""
    use_cpu = use_cpu or parse_flag_from_env("ACCELERATE_USE_CPU")
    accelerator = None if use_cpu else accelerator_present()
    if accelerator is not None:
        raise UserInputError(f"--portable_numerics pins CPU kernels, and this run would train on {accelerator}: drop "
                             "it, or train on the CPU (--use_cpu, or ACCELERATE_USE_CPU=1 for a suite).")


def hold_numerics(portable: bool, use_cpu: bool) -> None:
    """Before a command plans anything: with `portable`, its process pinned to portable numerics (re-executed with
    the environment set when it runs its own command line, else pinned in-process), or a one-line refusal where
    they cannot hold: an accelerator run (`use_cpu`, or `ACCELERATE_USE_CPU=1`: the run asks for the CPU although
    one is present), a CPU without AVX2. Without `portable`, nothing."""
    if not portable:
        return
    refuse_accelerator(use_cpu)
    if not is_pinned() and runs_command_line():
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], portable_environment(os.environ))
    hold_portable_numerics()


def hold_grid_numerics(experiment: dict[str, Any]) -> None:
    """`hold_numerics` for a suite whose grid's shared settings are `experiment` (its `portable_numerics` and
    `use_cpu`)."""
    hold_numerics(bool(experiment.get("portable_numerics")), bool(experiment.get("use_cpu")))


__all__ = ["accelerator_present", "refuse_accelerator", "hold_numerics", "hold_grid_numerics"]
