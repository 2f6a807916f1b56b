"""Flags the suite scripts share (`run_ablation.py`, `run_lra.py`, `run_budget_study.py`): read and checked once,
here, with the same words in every script.

Each script's argument dataclass declares its counts' ranges as `run_spt.py`'s flags do (`"range": POSITIVE_INT`,
checked by `value_checks.check_declared`) and reads its lists with these helpers in its `__post_init__`, so a
wrong value is a one-line error (exit status 2, `exit_status.run_cli`) before any grid is read or any process
starts.
"""

from __future__ import annotations

import math
import os
from dataclasses import field
from typing import Any

from ..errors import UserInputError
from ..numerics import PORTABLE_NUMERICS_HELP, SETTING_VALUES
from ..value_checks import POSITIVE_INT
from .declarations import json_mapping

TORCH_THREADS_HELP = "torch CPU threads per process (a whole number >= 1; also set for a multi-rank run's units)."


def comma_seeds(text: str, flag: str = "--seeds") -> list[int]:
    """`"0,1,2"` -> `[0, 1, 2]`: whole numbers >= 0, each once."""
    items = [item.strip() for item in text.split(",")]
    if not all(item.isdigit() for item in items):
        raise UserInputError(f"{flag} {text!r}: give comma-separated whole numbers >= 0, e.g. 0,1,2.")
    seeds = [int(item) for item in items]
    if len(set(seeds)) != len(seeds):
        raise UserInputError(f"{flag} {text!r}: a seed is listed twice; each seed's cells run once.")
    return seeds


def comma_names(text: str, flag: str) -> list[str]:
    """`"a,b"` -> `["a", "b"]`: non-empty names, each once."""
    names = [item.strip() for item in text.split(",")]
    if not all(names) or len(set(names)) != len(names):
        raise UserInputError(f"{flag} {text!r}: give comma-separated names, each once and none empty.")
    return names


def torch_threads_field() -> Any:
    """The `--torch_threads` flag of a suite script's dataclass (parsed with `declarations.SettingsParser`; the
    dataclass checks its declared range with `value_checks.check_declared`)."""
    return field(default=None, metadata={"range": POSITIVE_INT, "help": TORCH_THREADS_HELP})


def portable_numerics_field() -> Any:
    """The `--portable_numerics` flag of a suite script's dataclass, three-valued: unset (the grid's `experiment:
    {portable_numerics: ...}` holds), or a value that replaces it (bare: "true"; "false" turns it off)."""
    return field(default=None, metadata={"values": SETTING_VALUES, "nargs": "?", "const": "true",
                                         "help": PORTABLE_NUMERICS_HELP})


def set_torch_threads(threads: int | None) -> None:
    """Use `threads` torch CPU threads in this process and in the child processes a multi-rank grid starts (None:
    torch's default)."""
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)


def positive_numbers(text: str | None, flag: str) -> dict[str, float]:
    """A JSON object of names to finite numbers > 0 (`--steps_per_second '{"listops": 3.5}'`)."""
    mapping: dict[str, Any] = json_mapping(text, flag)
    wrong = {key: value for key, value in mapping.items() if isinstance(value, bool)
             or not isinstance(value, (int, float)) or not (value > 0 and math.isfinite(value))}
    if wrong:
        raise UserInputError(f"{flag}: {wrong} must be finite numbers > 0.")
    return {key: float(value) for key, value in mapping.items()}


__all__ = ["TORCH_THREADS_HELP", "comma_seeds", "comma_names", "torch_threads_field", "portable_numerics_field", "set_torch_threads",
           "positive_numbers"]
