"""Reading a finished `run_spt.py` run's record (`results.json`) or a grid's (`grid.json`): what the analysis of a
run and its accuracy-against-compute report both start from.

An unreadable record is a user error naming the file, the flag that named it (`--run` of the analysis, `--runs` of the
compute report) and the fix; flags typed beside `--run` must agree with what the run recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import MissingInputError, UserInputError
from ..arguments import DataArguments
from ..settings_files import read_settings_file
from .grid import GRID_RECORD_NAME

RUN_RESULTS_NAME = "results.json"
HOW_NOT_WHAT = ("preprocessing_num_workers", "list_tasks")
"""Data flags that change how the data are prepared, not which: the typed value is used, whatever the run's."""


MODELS_INSTEAD = "pass the models with --model and the task flags"
"""The analysis's way round a run it cannot read (`--run`'s default `instead`)."""


def read_record(path: Path, flag: str = "--run", instead: str | None = MODELS_INSTEAD) -> Any:
    """A run's `results.json` or `grid.json`, named by `flag`; one that cannot be read is a user error naming it and
    the fix (re-running, or `instead`)."""
    try:
        return read_settings_file(path, f"{flag}:")
    except UserInputError as error:
        raise UserInputError(f"{error}. Re-run the command that wrote it (its finished phases are reused and the "
                             f"file written again){f', or {instead}' if instead else ''}.") from None


def run_record(run: str | Path, flag: str = "--run", instead: str | None = MODELS_INSTEAD) -> dict[str, Any]:
    """The `results.json` of a `run_spt.py` output folder named by `flag`; an error saying what `flag` expects
    otherwise (and `instead`, another way round)."""
    record = Path(run) / RUN_RESULTS_NAME
    if not record.is_file():
        raise MissingInputError(f"{flag} {run}: no {RUN_RESULTS_NAME} or {GRID_RECORD_NAME} there; {flag} takes the "
                                "--output_dir of a finished run_spt.py, run_ablation.py or run_budget_study.py run.")
    content = read_record(record, flag, instead)
    if not isinstance(content, dict) or not {"seed", "data"} <= set(content):
        raise UserInputError(f"{flag}: {record} is not the results.json of a run_spt.py run (no seed and data "
                             f"recorded){f'; {instead} instead' if instead else ''}.")
    return content


def recorded_settings(record: dict[str, Any], typed: dict[str, Any], given: set[str]) -> tuple[dict[str, Any], int]:
    """The run's data settings (by flag name) and seed, from its record; a flag in `given` (names typed on the
    command line) must match them (`typed`: the values of the data flags and `seed` as parsed)."""
    data = {name: value for name, value in record["data"].items()
            if name in DataArguments.__dataclass_fields__ and name not in HOW_NOT_WHAT}
    recorded = {"seed": record["seed"], **data}
    clashes = [f"--{name} {typed[name]!r} (the run recorded {value!r})" for name, value in recorded.items()
               if name in given and typed.get(name) != value]
    if clashes:
        raise UserInputError(f"Flags contradict the run's {RUN_RESULTS_NAME}: {'; '.join(clashes)}. Drop them: --run "
                             "reads the run's own settings.")
    return data, record["seed"]


__all__ = ["RUN_RESULTS_NAME", "MODELS_INSTEAD", "read_record", "run_record", "recorded_settings"]
