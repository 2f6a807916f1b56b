"""Where a command that trains takes `--portable_numerics`: its process pinned before torch's first operation.

ATen, MKL and oneDNN read their settings when they initialise, at their first operation, not at import
(`hf_spt.numerics`). A command parses its flags and files (which runs no torch operation) and then pins its own
process (`numerics.portable_numerics`): the entry points (`hf-spt`, `python -m hf_spt`, `run_scripts/`, each rank
`accelerate launch` starts, which runs the command from its start) and the processes a rank starts for its units
(they inherit the environment) all hold the pin. Nothing is started again, so nothing that started Python is
replayed (a script read from stdin, a config file from a pipe, a driver's code before `main()`, a notebook).
Where torch or MKL computed before the pin (a driver or notebook that ran an operation first, a startup hook), the
pin cannot hold and the command is refused in one line that names the variable read too early, the three variables
to export before Python starts, and `hf_spt.portable_numerics()` for library use.
"""

from __future__ import annotations

from typing import Any

from accelerate.utils import parse_flag_from_env

from ..errors import UserInputError
from ..numerics import portable_mode, portable_numerics

FLAG = "--portable_numerics"


def accelerator_present() -> str | None:
    """The accelerator torch would train on ("cuda", "xpu", "mps"...: `torch.accelerator`, as the phases' device
    defaults read it), or None on a CPU-only machine."""
    import torch

    return torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else None


def refuse_accelerator(use_cpu: bool, source: str | None = None) -> None:
    """Refuse portable numerics for a run that would train on an accelerator: one present, and neither `use_cpu` nor
    `ACCELERATE_USE_CPU=1` asks for the CPU. `source` names the file that asked (None: the flag did)."""
    use_cpu = use_cpu or parse_flag_from_env("ACCELERATE_USE_CPU")
    accelerator = None if use_cpu else accelerator_present()
    if accelerator is not None:
        asked, fix = ((f"{FLAG} pins CPU kernels", "drop it") if source is None else
                      (f"{source} sets portable_numerics, which pins CPU kernels", f"pass {FLAG} false"))
        raise UserInputError(f"{asked}, and this run would train on {accelerator}: {fix}, or train on the CPU "
                             "(--use_cpu, or ACCELERATE_USE_CPU=1 for a suite).")


def hold_numerics(setting: bool | str | None, use_cpu: bool, source: str | None = None) -> None:
    """Before a command plans anything: with a `setting` that pins ("true", "cross_vendor": `numerics.portable_mode`),
    this process pinned to that mode, or a one-line refusal where it cannot hold: an accelerator run (`use_cpu`, or
    `ACCELERATE_USE_CPU=1`: the run asks for the CPU although one is present), a CPU without AVX2, torch or MKL
    initialised already. `source` names the file the setting came from (None: the flag). Otherwise nothing."""
    mode = portable_mode(setting, FLAG if source is None else f"{source}: portable_numerics")
    if mode is not None:
        refuse_accelerator(use_cpu, source)
        portable_numerics(mode)


def hold_grid_numerics(experiment: dict[str, Any], source: str | None) -> None:
    """`hold_numerics` for a suite whose grid's shared settings are `experiment` (its `portable_numerics` and
    `use_cpu`); `source`: the grid's file, None where the suite's flag set it."""
    hold_numerics(experiment.get("portable_numerics"), bool(experiment.get("use_cpu")), source)


__all__ = ["FLAG", "accelerator_present", "refuse_accelerator", "hold_numerics", "hold_grid_numerics"]
