"""The ablation grid of Coser et al. (arXiv 2605.21070): arms x seeds x tasks, resumable, on several processes.

A grid file (YAML or JSON, see `run_scripts/ablation_default.yaml`) names tasks, seeds, shared
settings and arms. `experiment:` takes `run_spt.py`'s experiment and TrainingArguments settings
by their flag names (`pretrain_epochs`, `finetune_epochs`, `learning_rate`, `report_to`...), `model:`
its model settings. An arm is a configuration of one fine-tuning run:

    name             label in the tables
    pretrain         start from an SPT checkpoint (implied by the four options below)
    init_parts       hybrid init: fresh model plus only these parts of the checkpoint ("qk", "attention"...)
    pretrain_task    key of `tasks` or `pretrain_tasks` to pretrain on (cross-task SPT; default: the cell's task)
    pretrain_epochs  pretraining epochs (default: the experiment's, as run_spt.py resolves them)
    freeze_parts     parts kept at their initial values ("attention")
    num_layers       depth (default: model.num_hidden_layers or the task preset)
    compute_matched  fine-tune for as many optimizer steps as the SPT arm's pretraining and fine-tuning
                     budgets together (scratch with SPT's budget)

A task may carry its own `experiment:` and `model:` settings (over the grid's) and `max_length`,
so that one grid holds tasks with different published recipes (`run_scripts/run_lra.py`).

Layout under `output_dir`: `pretrain/<task>_e<epochs>_L<depth>_s<seed>/` (one SPT checkpoint,
shared by every arm that needs it), `cells/<task>/<arm>/seed<seed>/` (one fine-tuning run, done
when its `phase.json` exists; each unit's folder records its definition, and a grid changed
since some units ran stops before any unit trains, listing the differences), then `results.csv`, `results.md` and `results.png`; `grid.json` records
the parsed grid (what `run_analysis.py --run` reads).

Several processes (`accelerate launch --num_processes N run_ablation.py`): first the SPT
checkpoints, then the cells, are split between ranks with `PartialState.split_between_processes`.
A `Trainer` created inside a launched process would join the process group and split every
batch across ranks, so each rank runs its units in a child Python process with the launcher's
distributed variables removed: a plain single-process `Trainer`, the same result as a
one-process run. A single process runs units in-process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
from accelerate import PartialState
from accelerate.utils import parse_flag_from_env

from ..errors import UserInputError
from ..tasks import task_preset
from ..training.parts import parse_parts
from .ablation_report import write_report
from .arguments import DataArguments, ExperimentArguments, ModelArguments, SharedTrainingArguments
from .command_line import read_settings_file
from .model_config import build_config
from .phase_arguments import finetune_arguments, pretrain_arguments
from .phase_definition import check_phase_folders, finetune_definition, pretrain_definition
from .pipeline import PHASE_RESULT_NAME, finetune, finetune_settings, prepare_task, pretrain
from .run_folder import locks_output_dir, read_json, write_json
from .run_plan import phase_steps, spt_step_budget  # moved there; importable from here as before
from .value_ranges import check_value_ranges

CELLS_DIR = "cells"
PRETRAIN_DIR = "pretrain"
GRID_RECORD_NAME = "grid.json"
DISTRIBUTED_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
                   "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass
class TaskSpec:
    """A task of the grid: a registered task name, its builder options, and settings over the grid's for it."""

    task: str
    task_options: dict[str, Any] = field(default_factory=dict)
    data_dir: str | None = None
    max_length: int | None = None
    experiment: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)


@dataclass
class Arm:
    """One configuration of the fine-tuning run (module docstring lists the fields)."""

    name: str
    pretrain: bool = False
    init_parts: str | None = None
    pretrain_task: str | None = None
    pretrain_epochs: float | None = None
    freeze_parts: str | None = None
    num_layers: int | None = None
    compute_matched: bool = False

    def __post_init__(self):
        self.pretrain = self.pretrain or any(
            v is not None for v in (self.init_parts, self.pretrain_task, self.pretrain_epochs))
        for parts in (self.init_parts, self.freeze_parts):
            if parts is not None:
                parse_parts(parts)
        for name in ("pretrain_epochs", "num_layers"):
            if (value := getattr(self, name)) is not None and value <= 0:
                raise UserInputError(f"Arm {self.name!r}: {name} must be above 0, got {value}.")
        if self.compute_matched and self.pretrain:
            raise UserInputError(f"Arm {self.name!r}: compute_matched is a scratch control; it cannot also pretrain.")


@dataclass
class Grid:
    """A parsed grid file."""

    tasks: dict[str, TaskSpec]
    arms: list[Arm]
    seeds: list[int]
    output_dir: str = "runs/ablation"
    pretrain_tasks: dict[str, TaskSpec] = field(default_factory=dict)
    experiment: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)

    def task_spec(self, key: str) -> TaskSpec:
        return {**self.pretrain_tasks, **self.tasks}[key]


def _checked(cls, values: dict[str, Any], where: str, *more_classes: type) -> dict[str, Any]:
    known = {f.name for c in (cls, *more_classes) for f in fields(c)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise UserInputError(f"{where}: unknown setting(s) {unknown}; valid: {sorted(known)}.")
    return values


def parse_grid(raw: dict[str, Any], source: str = "grid") -> Grid:
    """Grid from a dict (a loaded YAML/JSON file); every unknown name or dangling reference is an error."""
    raw = dict(_checked(Grid, raw, source))
    missing = [name for name in ("tasks", "arms", "seeds") if name not in raw]
    if missing:
        raise UserInputError(f"{source}: a grid needs {missing}; see run_scripts/ablation_default.yaml.")
    raw["tasks"] = {k: TaskSpec(**_checked(TaskSpec, v, f"{source}: tasks.{k}")) for k, v in raw["tasks"].items()}
    raw["pretrain_tasks"] = {k: TaskSpec(**_checked(TaskSpec, v, f"{source}: pretrain_tasks.{k}"))
                             for k, v in (raw.get("pretrain_tasks") or {}).items()}
    for key, spec in {**raw["pretrain_tasks"], **raw["tasks"]}.items():
        _checked(ExperimentArguments, spec.experiment, f"{source}: tasks.{key}.experiment", SharedTrainingArguments)
        _checked(ModelArguments, spec.model, f"{source}: tasks.{key}.model")
    raw["arms"] = [Arm(**_checked(Arm, arm, f"{source}: arm {arm.get('name')!r}")) for arm in raw["arms"]]
    _checked(ExperimentArguments, raw.get("experiment") or {}, f"{source}: experiment", SharedTrainingArguments)
    _checked(ModelArguments, raw.get("model") or {}, f"{source}: model")
    grid = Grid(**raw)
    for key, spec in {**grid.pretrain_tasks, **grid.tasks}.items():  # every task's settings' ranges, before any unit runs
        for seed in grid.seeds:
            check_value_ranges(DataArguments(max_length=spec.max_length), _model_arguments(grid, key, None),
                               *_experiment(grid, seed, key))
    names = [arm.name for arm in grid.arms]
    if len(set(names)) != len(names):
        raise UserInputError(f"{source}: arm names must be unique, got {names}.")
    known_tasks = set(grid.tasks) | set(grid.pretrain_tasks)
    for arm in grid.arms:
        if arm.pretrain_task is not None and arm.pretrain_task not in known_tasks:
            raise UserInputError(f"{source}: arm {arm.name!r} pretrains on {arm.pretrain_task!r}, which is not in "
                             f"tasks or pretrain_tasks ({sorted(known_tasks)}).")
    return grid


def load_grid(path: str | Path) -> Grid:
    """Read a grid file (.yaml/.yml or .json)."""
    raw = read_settings_file(path, "Grid file")
    if not isinstance(raw, dict):
        raise UserInputError(f"Grid file {path} holds a mapping (tasks, seeds, arms...), not {type(raw).__name__}.")
    return parse_grid(raw, str(path))


@dataclass(frozen=True)
class PretrainJob:
    """One SPT checkpoint: pretraining task, epochs, depth, seed."""

    task: str
    epochs: float
    num_layers: int
    seed: int

    def folder(self, grid: Grid) -> Path:
        return Path(grid.output_dir) / PRETRAIN_DIR / f"{self.task}_e{self.epochs:g}_L{self.num_layers}_s{self.seed}"


@dataclass(frozen=True)
class Cell:
    """One fine-tuning run: task, arm name, seed."""

    task: str
    arm: str
    seed: int

    def folder(self, grid: Grid) -> Path:
        return Path(grid.output_dir) / CELLS_DIR / self.task / self.arm / f"seed{self.seed}"


def _experiment(grid: Grid, seed: int, task_key: str) -> tuple[ExperimentArguments, SharedTrainingArguments]:
    """The grid's experiment settings (the task's over the grid's) for `seed`, split into experiment and
    TrainingArguments settings."""
    own = {f.name for f in fields(ExperimentArguments)}
    settings = {**grid.experiment, **grid.task_spec(task_key).experiment, "output_dir": grid.output_dir, "seed": seed}
    return (ExperimentArguments(**{k: v for k, v in settings.items() if k in own}),
            SharedTrainingArguments(**{k: v for k, v in settings.items() if k not in own}))


def _model_arguments(grid: Grid, task_key: str, num_layers: int | None) -> ModelArguments:
    values = {**grid.model, **grid.task_spec(task_key).model}
    if num_layers is not None:
        values["num_hidden_layers"] = num_layers
    return ModelArguments(**values)


def _prepare(grid: Grid, task_key: str, seed: int, num_layers: int | None, tasks: dict | None = None):
    """The task and model config of a unit; `tasks` caches the prepared tasks by (task key, seed)."""
    spec = grid.task_spec(task_key)
    tasks = {} if tasks is None else tasks
    if (task_key, seed) not in tasks:
        data = DataArguments(task=spec.task, data_dir=spec.data_dir, task_options=spec.task_options,
                             max_length=spec.max_length)
        tasks[task_key, seed] = prepare_task(data, seed)
    task = tasks[task_key, seed]
    return task, build_config(task, _model_arguments(grid, task_key, num_layers))


def _arm(grid: Grid, name: str) -> Arm:
    return next(arm for arm in grid.arms if arm.name == name)


def _depth(grid: Grid, arm: Arm, task_key: str) -> int:
    """The arm's number of layers, the task preset's when neither the arm nor the grid's model sets it."""
    spec = grid.task_spec(task_key)
    for depth in (arm.num_layers, spec.model.get("num_hidden_layers"), grid.model.get("num_hidden_layers")):
        if depth is not None:
            return depth
    return task_preset(spec.task).model["num_hidden_layers"]


def cells(grid: Grid) -> list[Cell]:
    return [Cell(task, arm.name, seed) for task in grid.tasks for arm in grid.arms for seed in grid.seeds]


def pretrain_job(grid: Grid, cell: Cell) -> PretrainJob | None:
    """The SPT checkpoint `cell` starts from, or None for scratch arms."""
    arm = _arm(grid, cell.arm)
    if not arm.pretrain:
        return None
    epochs = arm.pretrain_epochs
    if epochs is None:
        exp, training = _experiment(grid, cell.seed, arm.pretrain_task or cell.task)
        epochs = exp.phase_setting(training, "pretrain", "epochs")
    return PretrainJob(arm.pretrain_task or cell.task, float(epochs), _depth(grid, arm, cell.task), cell.seed)


def _job_inputs(grid: Grid, job: PretrainJob, tasks: dict | None = None) -> tuple:
    """`pipeline.pretrain`'s task, config, experiment and training arguments for `job`."""
    task, config = _prepare(grid, job.task, job.seed, job.num_layers, tasks)
    exp, training = _experiment(grid, job.seed, job.task)
    return task, config, replace(exp, pretrain_epochs=job.epochs), training


def _cell_inputs(grid: Grid, cell: Cell, tasks: dict | None = None) -> tuple:
    """`pipeline.finetune`'s task, config, experiment and training arguments for `cell`, and its keyword options."""
    arm = _arm(grid, cell.arm)
    task, config = _prepare(grid, cell.task, cell.seed, arm.num_layers, tasks)
    exp, training = _experiment(grid, cell.seed, cell.task)
    job = pretrain_job(grid, cell)
    epochs = None
    if arm.compute_matched:
        budget = spt_step_budget(len(task.dataset["train"]), task.is_pair, task.preset.batch_size, exp, training)
        epochs = (budget["pretrain"] + budget["finetune"]) / budget["finetune_steps_per_epoch"]
    options = {"init_from": job.folder(grid) if job else None, "init_parts": arm.init_parts,
               "freeze_parts": arm.freeze_parts, "epochs": epochs}
    return task, config, exp, training, options


def run_pretrain_job(grid: Grid, job: PretrainJob) -> dict[str, Any]:
    task, config, exp, training = _job_inputs(grid, job)
    return pretrain(task, config, exp, training, job.folder(grid))


def run_cell(grid: Grid, cell: Cell) -> dict[str, Any]:
    """Fine-tune one cell (skipped, returning its result, when its phase.json exists)."""
    task, config, exp, training, options = _cell_inputs(grid, cell)
    return finetune(task, config, exp, training, cell.folder(grid), cell.arm, **options)


def check_grid(grid: Grid) -> None:
    """Check that every SPT job's and cell's folder holds that unit or nothing, before any unit trains: a grid
    changed since some units ran stops here, listing the differences (`PhaseDefinitionMismatch`)."""
    tasks: dict = {}
    sources = {}
    for job in sorted({job for cell in cells(grid) if (job := pretrain_job(grid, cell)) is not None}, key=str):
        task, config, exp, training = _job_inputs(grid, job, tasks)
        args = pretrain_arguments(task, exp, training, job.folder(grid))
        sources[job] = pretrain_definition(task, config, exp.pretrain_objective, args, None)
    units = [(job.folder(grid), definition) for job, definition in sources.items()]
    for cell in cells(grid):
        task, config, exp, training, options = _cell_inputs(grid, cell, tasks)
        args = finetune_arguments(task, exp, training, cell.folder(grid), config.num_labels, options["epochs"])
        units.append((cell.folder(grid), finetune_definition(
            task, config, cell.arm, args, options["init_from"], options["init_parts"], options["freeze_parts"],
            source_definition=sources.get(pretrain_job(grid, cell)), settings=finetune_settings(exp, exp.finetune_method))))
    check_phase_folders(units)  # every changed unit listed, not only the first


def _run_unit(grid: Grid, kind: str, unit: PretrainJob | Cell, isolate: bool, device_index: int | None) -> None:
    """Run a pretraining job or a cell, in this process or (several ranks) in a clean child process."""
    if not isolate:
        (run_pretrain_job if kind == "pretrain" else run_cell)(grid, unit)
        return
    env = {k: v for k, v in os.environ.items()
           if k not in DISTRIBUTED_ENV and not k.startswith(("TORCHELASTIC_", "ACCELERATE_"))}
    if device_index is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(device_index)
    payload = json.dumps({"grid": asdict(grid), "kind": kind, "unit": asdict(unit)})
    subprocess.run([sys.executable, "-m", "hf_spt.experiments.ablation", payload], env=env, check=True)


@locks_output_dir(lambda grid: grid.output_dir)  # rank 0 holds it; the cells' child processes take none
def run_grid(grid: Grid) -> list[dict[str, Any]]:
    """Run every unfinished SPT job and cell of `grid`, then (main process) write the report; return the rows."""
    # Without a GPU the launcher's ranks only form a (gloo) group when PartialState is told cpu=True.
    cpu = parse_flag_from_env("ACCELERATE_USE_CPU") or not torch.cuda.is_available()
    state = PartialState(cpu=cpu, timeout=timedelta(days=7))  # ranks wait at barriers for the longest pretraining
    isolate = state.num_processes > 1
    device_index = state.local_process_index if state.device.type == "cuda" else None
    check_grid(grid)  # on every rank, so that all stop together
    if state.is_main_process:
        write_json(Path(grid.output_dir) / GRID_RECORD_NAME, asdict(grid))
    todo_cells = [c for c in cells(grid) if read_json(c.folder(grid) / PHASE_RESULT_NAME) is None]
    jobs = sorted({job for c in todo_cells if (job := pretrain_job(grid, c)) is not None}, key=str)
    jobs = [job for job in jobs if read_json(job.folder(grid) / PHASE_RESULT_NAME) is None]
    with state.split_between_processes(jobs) as mine:
        for job in mine:
            _run_unit(grid, "pretrain", job, isolate, device_index)
    state.wait_for_everyone()
    with state.split_between_processes(todo_cells) as mine:
        for cell in mine:
            _run_unit(grid, "cell", cell, isolate, device_index)
    state.wait_for_everyone()
    rows = collect_rows(grid)
    if state.is_main_process:
        write_report(rows, Path(grid.output_dir))
    return rows


def collect_rows(grid: Grid) -> list[dict[str, Any]]:
    """One row per finished cell: its settings and scores."""
    rows = []
    for cell in cells(grid):
        result = read_json(cell.folder(grid) / PHASE_RESULT_NAME)
        if result is None:
            continue
        arm = _arm(grid, cell.arm)
        job = pretrain_job(grid, cell)
        rows.append({"task": cell.task, "arm": cell.arm, "seed": cell.seed,
                     "test_accuracy": result.get("test_accuracy"), "eval_accuracy": result.get("eval_accuracy"),
                     "seconds": result.get("seconds"), "init_parts": arm.init_parts, "freeze_parts": arm.freeze_parts,
                     "pretrain_task": job.task if job else None, "pretrain_epochs": job.epochs if job else None,
                     "num_layers": _depth(grid, arm, cell.task), "compute_matched": arm.compute_matched})
    return rows


def _main_child(payload: str) -> None:
    """Entry of the child process of a rank: run one unit in a single-process setting."""
    data = json.loads(payload)
    grid = parse_grid(data["grid"])
    unit = PretrainJob(**data["unit"]) if data["kind"] == "pretrain" else Cell(**data["unit"])
    _run_unit(grid, data["kind"], unit, isolate=False, device_index=None)


__all__ = ["TaskSpec", "Arm", "Grid", "PretrainJob", "Cell", "parse_grid", "load_grid", "cells", "pretrain_job",
           "phase_steps", "spt_step_budget", "run_pretrain_job", "run_cell", "check_grid", "run_grid",
           "collect_rows"]


if __name__ == "__main__":
    _main_child(sys.argv[1])
