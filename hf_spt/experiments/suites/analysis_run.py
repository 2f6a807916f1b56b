"""run_analysis.py's command line, and reading a training run: its models and the data it was trained on.

`--run OUTPUT_DIR` (a `run_spt.py` output folder) takes the models the run wrote (`scratch/`,
`spt/`, `pretrain/`, those present) and the task, task options, length and seed it recorded in
`results.json` (`task`, `seed`, `data`), so the analysed sequences are the run's without retyping
`--task_options`. A flag given as well must agree with the record: a contradiction is an error
naming both values. The run's phase folders must come from one run (`check_one_run`: the seeds,
data fingerprints and starting weights their `phase_definition.json` record), or the report would
set models of different runs side by side; naming the models with `--model` analyses them
together anyway. An unreadable `results.json`/`grid.json` or weight file is a user error naming
the file. An ablation folder (`run_ablation.py`'s, with its `grid.json`) gives the cells
of one grid task and seed (`--task KEY`, `--seed S`: needed when the grid has several), one model
per arm, on that task's data. Without `--run`, `--model` folders and the data flags say everything.
The report records which code and CPU numerics computed it (`provenance`: commit, versions, threads, CPU,
numerics, as a run's `phase.json` does); `--portable_numerics` pins the analysis to portable CPU numerics, as it
pins a training run, so its figures reproduce on any Intel CPU with AVX2.
The report's folder (`--output_dir`, by default RUN/analysis) is checked as a run's output folder is before any
data or model is read, so a run folder that cannot be written is refused in one line: `--output_dir` elsewhere
analyses it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ...analysis.report import ReportOptions, analyse_models
from ...errors import MissingInputError, UserInputError
from ...runs.folder import check_writable_folder
from ...runs.one_run import check_one_run
from ...runs.provenance import run_provenance
from ..arguments import DataArguments
from ..pipeline import prepare_task
from ..run_spec import task_requests
from ..suite_flags import portable_numerics_field
from .grid import GRID_RECORD_NAME, Cell, parse_grid, pretrain_jobs
from .finished_runs import read_record, recorded_settings, run_record

RUN_MODEL_FOLDERS = ("scratch", "spt", "pretrain")
"""The phase folders of a run, in the order the report shows them."""
RUN_ANALYSIS_DIR = "analysis"


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
    portable_numerics: str | None = portable_numerics_field()


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
    grid = parse_grid(read_record(Path(run) / GRID_RECORD_NAME), str(Path(run) / GRID_RECORD_NAME))
    key = _choose("task", "task" in given, data_args.task, list(grid.tasks))
    seed = _choose("seed", "seed" in given, args.seed, grid.seeds)
    spec = grid.tasks[key]
    clashes = [f"--{flag} {getattr(data_args, flag)!r} (the grid has {value!r})" for flag, value in
               (("task_options", spec.task_options), ("data_dir", spec.data_dir), ("max_length", None))
               if flag in given and getattr(data_args, flag) != value]
    if clashes:
        raise UserInputError(f"Flags contradict the grid's task {key!r}: {'; '.join(clashes)}. Drop them.")
    located = replace(grid, output_dir=str(run))  # the folder may have moved since the grid ran
    cells = [Cell(key, arm.name, seed) for arm in grid.arms if arm.runs_on(key)]
    jobs = pretrain_jobs(located, cells)
    folders = [cell.folder(located) for cell in cells] + [job.folder(located) for job in jobs]
    data = replace(data_args, task=spec.task, data_dir=spec.data_dir, task_options=spec.task_options)
    return data, seed, [str(folder) for folder in folders if folder.is_dir()]


def run_models(run: str | Path) -> list[str]:
    """The model folders a run wrote: its `scratch/`, `spt/` and `pretrain/` phases, those present."""
    models = [str(Path(run) / name) for name in RUN_MODEL_FOLDERS if (Path(run) / name).is_dir()]
    if not models:
        raise MissingInputError(f"--run {run}: none of its phase folders ({', '.join(RUN_MODEL_FOLDERS)}) exists.")
    return models


def analyse(data_args: DataArguments, args: AnalysisArguments, given: set[str] | None = None) -> dict[str, Any]:
    """Prepare the task (the run's, with `--run`) and write the report of the models; return it.

    `given` names the flags typed on the command line (without `--`), the ones `--run` checks. With `--run` and
    no `--model`, the run's phase folders must be one run's (`check_one_run`).
    """
    models, own = list(args.model), []
    if args.run is not None and (Path(args.run) / GRID_RECORD_NAME).is_file():
        data_args, args.seed, own = grid_cells(args.run, data_args, args, given or set())
    elif args.run is not None:
        data, args.seed = recorded_settings(run_record(args.run), {**asdict(data_args), "seed": args.seed},
                                            given or set())
        data_args = replace(data_args, **data)
        own = [] if models else run_models(args.run)
    if not models and own:
        check_one_run(args.run, own, args.seed)
        models = own
    if not models:
        raise UserInputError("Nothing to analyse: pass --run RUN_DIR (a run_spt.py output folder) or --model FOLDER...")
    folder = writable_report_folder(args)
    options = ReportOptions(**{f.name: getattr(args, f.name) for f in fields(ReportOptions)})
    return analyse_models(prepare_task(task_requests(data_args)[0], options.seed), models, folder, options,
                          run_provenance())


def report_folder(args: AnalysisArguments) -> Path:
    """`--output_dir`, else RUN/analysis with `--run`, else ./analysis."""
    if args.output_dir is not None:
        return Path(args.output_dir)
    return Path(args.run) / RUN_ANALYSIS_DIR if args.run is not None else Path(RUN_ANALYSIS_DIR)


def writable_report_folder(args: AnalysisArguments) -> Path:
    """`report_folder`, checked as a run's output folder is (`check_writable_folder`: not empty, not a file, can be
    written) before any data or model is read; the default inside a read-only run is refused with the flag that
    moves the report elsewhere."""
    if args.output_dir is not None:
        return check_writable_folder(args.output_dir)
    default = f"{'RUN' if args.run is not None else '.'}/{RUN_ANALYSIS_DIR}"
    return check_writable_folder(report_folder(args), f"--output_dir (by default {default})")


__all__ = ["AnalysisArguments", "RUN_MODEL_FOLDERS", "run_models", "grid_cells", "analyse", "report_folder",
           "writable_report_folder"]
