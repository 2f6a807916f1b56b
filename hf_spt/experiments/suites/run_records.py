"""Reading a finished `run_spt.py` run's record (`results.json`) or a grid's (`grid.json`): what the analysis of a
run and its accuracy-against-compute report both start from.

An unreadable record is a user error naming the file and the fix; flags typed beside `--run` must agree with what
the run recorded.
"""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from ...errors import MissingInputError, UserInputError
from ..arguments import DataArguments
from ..settings_files import read_settings_file
from .grid import GRID_RECORD_NAME

RUN_RESULTS_NAME = "results.json"
HOW_NOT_WHAT = ("preprocessing_num_workers", "list_tasks")
"""Data flags that change how the data are prepared, not which: the typed value is used, whatever the run's."""


def read_record(path: Path) -> Any:
    """A run's `results.json` or `grid.json`; one that cannot be read is a user error naming it and the fix."""
    try:
        return read_settings_file(path, "--run:")
    except UserInputError as error:
        raise UserInputError(f"{error}. Re-run the command that wrote it (its finished phases are reused and the "
                             "file written again), or pass the models with --model and the task flags.") from None


def run_record(run: str | Path) -> dict[str, Any]:
    """The `results.json` of a `run_spt.py` output folder; an error saying what `--run` expects otherwise."""
    record = Path(run) / RUN_RESULTS_NAME
    if not record.is_file():
        raise MissingInputError(f"--run {run}: no {RUN_RESULTS_NAME} or {GRID_RECORD_NAME} there; --run takes the "
                                "--output_dir of a finished run_spt.py or run_ablation.py run.")
    content = read_record(record)
    if not isinstance(content, dict) or not {"seed", "data"} <= set(content):
        raise UserInputError(f"--run: {record} is not the results.json of a run_spt.py run (no seed and data "
                             "recorded). Pass the models with --model and the task flags instead.")
    return content


def recorded_settings(
    record: dict[str, Any], data_args: DataArguments, seed: int, given: set[str]
) -> tuple[DataArguments, int]:
    """The run's data arguments and seed; a flag in `given` (names typed on the command line; `seed` is the typed
    seed) must match them."""
    data = {name: value for name, value in record["data"].items()
            if name in DataArguments.__dataclass_fields__ and name not in HOW_NOT_WHAT}
    recorded = {"seed": record["seed"], **data}
    typed = {"seed": seed, **{f.name: getattr(data_args, f.name) for f in fields(DataArguments)}}
    clashes = [f"--{name} {typed[name]!r} (the run recorded {value!r})" for name, value in recorded.items()
               if name in given and typed[name] != value]
    if clashes:
        raise UserInputError(f"Flags contradict the run's {RUN_RESULTS_NAME}: {'; '.join(clashes)}. Drop them: --run "
                         "reads the run's own settings.")
    return replace(data_args, **data), record["seed"]


__all__ = ["RUN_RESULTS_NAME", "read_record", "run_record", "recorded_settings"]
