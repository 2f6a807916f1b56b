"""run_analysis.py's command line, and reading a training run: its models and the data it was trained on.

`--run OUTPUT_DIR` (a `run_spt.py` output folder) takes the models the run wrote (`scratch/`,
`spt/`, `pretrain/`, those present) and the task, task options, length and seed it recorded in
`results.json` (`task`, `seed`, `data`), so the analysed sequences are the run's without retyping
`--task_options`. A flag given as well must agree with the record: a contradiction is an error
naming both values. An ablation folder (`run_ablation.py`'s, with its `grid.json`) gives the cells
of one grid task and seed (`--task KEY`, `--seed S`: needed when the grid has several), one model
per arm, on that task's data. Without `--run`, `--model` folders and the data flags say everything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..errors import MissingInputError, UserInputError
from ..analysis.report import ReportOptions, analyse_models
from .grid import GRID_RECORD_NAME, Cell, parse_grid, pretrain_job
from .arguments import DataArguments
from .pipeline import prepare_task

RUN_RESULTS_NAME = "results.json"
RUN_MODEL_FOLDERS = ("scratch", "spt", "pretrain")
"""The phase folders of a run, in the order the report shows them."""
RUN_ANALYSIS_DIR = "analysis"
HOW_NOT_WHAT = ("preprocessing_num_workers", "list_tasks")
"""Data flags that change how the data are prepared, not which: the typed value is used, whatever the run's."""


@dataclass
class AnalysisArguments(ReportOptions):
    """run_analysis.py's flags: what to analyse (`--run` or `--model`), where to write, and the report options."""

    run: str | None = field(
        default=None, metadata={"help": "A run_spt.py output folder: analyse its models with the task settings it "
                                        "recorded (results.json). Data flags given as well must agree."}
    )
    model: list[str] = field(
        default_factory=list, metadata={"help": "Model folder(s) written by run_spt.py (pretrain, spt, scratch...); "
                                                "with --run, replaces the run's own."}
    )
    output_dir: str | None = field(
        default=None, metadata={"help": "Where the PNGs, report.md and report.json go (default: RUN/analysis with "
                                        "--run, else analysis)."}
    )


def run_record(run: str | Path) -> dict[str, Any]:
    """The `results.json` of a `run_spt.py` output folder; an error saying what `--run` expects otherwise."""
    record = Path(run) / RUN_RESULTS_NAME
    if not record.is_file():
        raise MissingInputError(f"--run {run}: no {RUN_RESULTS_NAME} or {GRID_RECORD_NAME} there; --run takes the "
                                "--output_dir of a finished run_spt.py or run_ablation.py run.")
    return json.loads(record.read_text())


def _choose(flag: str, given: bool, typed: Any, choices: list[Any]) -> Any:
    """The typed value when given (it must be one of `choices`), else the only choice."""
    if given and typed not in choices or not given and len(choices) > 1:
        raise UserInputError(f"--run of an ablation grid: pass --{flag}, one of {choices} (got {typed if given else 'none'}).")
    return typed if given else choices[0]


def grid_cells(
    run: str | Path, data_args: DataArguments, args: AnalysisArguments, given: set[str]
) -> tuple[DataArguments, int, list[str]]:
    """An ablation run's data arguments, seed and model folders for `--task KEY` and `--seed S`: one cell per arm,
    then the SPT checkpoint(s) the pretraining arms were fine-tuned from (so the report shows what SPT itself
    learned, before fine-tuning)."""
    grid = parse_grid(json.loads((Path(run) / GRID_RECORD_NAME).read_text()), str(Path(run) / GRID_RECORD_NAME))
    key = _choose("task", "task" in given, data_args.task, list(grid.tasks))
    seed = _choose("seed", "seed" in given, args.seed, grid.seeds)
    spec = grid.tasks[key]
    clashes = [f"--{flag} {getattr(data_args, flag)!r} (the grid has {value!r})" for flag, value in
               (("task_options", spec.task_options), ("data_dir", spec.data_dir), ("max_length", None))
               if flag in given and getattr(data_args, flag) != value]
    if clashes:
        raise UserInputError(f"Flags contradict the grid's task {key!r}: {'; '.join(clashes)}. Drop them.")
    located = replace(grid, output_dir=str(run))  # the folder may have moved since the grid ran
    cells = [Cell(key, arm.name, seed) for arm in grid.arms]
    jobs = sorted({job for cell in cells if (job := pretrain_job(located, cell)) is not None}, key=str)
    folders = [cell.folder(located) for cell in cells] + [job.folder(located) for job in jobs]
    data = replace(data_args, task=spec.task, data_dir=spec.data_dir, task_options=spec.task_options)
    return data, seed, [str(folder) for folder in folders if folder.is_dir()]


def run_models(run: str | Path) -> list[str]:
    """The model folders a run wrote: its `scratch/`, `spt/` and `pretrain/` phases, those present."""
    models = [str(Path(run) / name) for name in RUN_MODEL_FOLDERS if (Path(run) / name).is_dir()]
    if not models:
        raise MissingInputError(f"--run {run}: none of its phase folders ({', '.join(RUN_MODEL_FOLDERS)}) exists.")
    return models


def recorded_settings(
    record: dict[str, Any], data_args: DataArguments, args: AnalysisArguments, given: set[str]
) -> tuple[DataArguments, int]:
    """The run's data arguments and seed; a flag in `given` (names typed on the command line) must match them."""
    data = {name: value for name, value in record["data"].items()
            if name in DataArguments.__dataclass_fields__ and name not in HOW_NOT_WHAT}
    recorded = {"seed": record["seed"], **data}
    typed = {"seed": args.seed, **{f.name: getattr(data_args, f.name) for f in fields(DataArguments)}}
    clashes = [f"--{name} {typed[name]!r} (the run recorded {value!r})" for name, value in recorded.items()
               if name in given and typed[name] != value]
    if clashes:
        raise UserInputError(f"Flags contradict the run's {RUN_RESULTS_NAME}: {'; '.join(clashes)}. Drop them: --run "
                         "reads the run's own settings.")
    return replace(data_args, **data), record["seed"]


def analyse(data_args: DataArguments, args: AnalysisArguments, given: set[str] | None = None) -> dict[str, Any]:
    """Prepare the task (the run's, with `--run`) and write the report of the models; return it.

    `given` names the flags typed on the command line (without `--`), the ones `--run` checks.
    """
    models = list(args.model)
    if args.run is not None and (Path(args.run) / GRID_RECORD_NAME).is_file():
        data_args, args.seed, cells = grid_cells(args.run, data_args, args, given or set())
        models = models or cells
    elif args.run is not None:
        data_args, args.seed = recorded_settings(run_record(args.run), data_args, args, given or set())
        models = models or run_models(args.run)
    if not models:
        raise UserInputError("Nothing to analyse: pass --run RUN_DIR (a run_spt.py output folder) or --model FOLDER...")
    options = ReportOptions(**{f.name: getattr(args, f.name) for f in fields(ReportOptions)})
    return analyse_models(prepare_task(data_args, options.seed), models, report_folder(args), options)


def report_folder(args: AnalysisArguments) -> Path:
    """`--output_dir`, else RUN/analysis with `--run`, else ./analysis."""
    if args.output_dir is not None:
        return Path(args.output_dir)
    return Path(args.run) / RUN_ANALYSIS_DIR if args.run is not None else Path(RUN_ANALYSIS_DIR)


__all__ = ["AnalysisArguments", "RUN_MODEL_FOLDERS", "run_record", "run_models", "recorded_settings", "grid_cells",
           "analyse", "report_folder"]
