"""What an ablation grid is: tasks, arms and seeds read from a grid file, and the units they make.

A grid file (YAML or JSON, see `hf_spt/scripts/ablation_default.yaml`) names tasks, seeds, shared
settings and arms. `experiment:` takes `run_spt.py`'s experiment and TrainingArguments settings
by their flag names (`pretrain_epochs`, `finetune_epochs`, `learning_rate`, `report_to`...), `model:`
its model settings. An arm is a configuration of one fine-tuning run (`experiments.arms.Arm`, whose docstring
lists the fields: name, pretrain, init_parts, pretrain_task, pretrain_epochs, freeze_parts, num_layers,
compute_matched, model, start, method), the same arms `run_spt.py`'s modes are made of.

A task may carry its own `experiment:` and `model:` settings (over the grid's) and `max_length`,
so that one grid holds tasks with different published recipes (`run_scripts/run_lra.py`). A task's
`experiment:` lies over the grid's as `run_spt.py`'s flags over its config file (`arguments.layered`: a
generic budget such as `learning_rate` clears the per-phase ones below it), and a generic budget that no
phase reads (beside `pretrain_learning_rate` and `finetune_learning_rate`) is refused as the flag is.

The units: one `PretrainJob` (an SPT checkpoint, shared by every arm that needs it) per task, epochs,
depth and seed, and one `Cell` (a fine-tuning run) per task, arm and seed. `grid_runner.py` runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ...errors import UserInputError
from ...runs.folder import check_plain_name
from ...tasks import task_preset
from ...value_checks import fits
from ..arguments import (PHASES, DataArguments, ExperimentArguments, ModelArguments, SharedTrainingArguments, layered,
                         unread_budgets)
from ..arms import Arm
from ..model_config import check_model_settings
from ..phase_arguments import check_trainer_settings
from ..pipeline import check_run
from ..run_spec import ModelSpec, RunSpec, resolve_run
from ..settings_files import check_setting_types, read_settings_file

CELLS_DIR = "cells"
PRETRAIN_DIR = "pretrain"
GRID_RECORD_NAME = "grid.json"


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


GRID_UNREAD = {
    "mode": "a grid's arms say what trains",
    "recipe": "a grid applies no recipe: write its settings under experiment: (run_lra.py builds its grid so)",
    "init_from": "a grid's SPT arms start from the grid's own pretraining",
    "init_parts": "set it on an arm", "freeze_parts": "set it on an arm",
    "output_dir": "set output_dir at the top of the file", "seed": "list the seeds at the top of the file (seeds:)",
    "overwrite_output_dir": "a grid keeps its finished units; delete a unit's folder to train it again",
}
"""Experiment settings of `run_spt.py` that a grid never reads, and why: naming one is an error, not a no-op."""


def _checked(cls, values: Any, where: str, *more_classes: type) -> dict[str, Any]:
    """`values` (a file's mapping for dataclass `cls`, and `more_classes`): a mapping of known names whose values
    have their fields' types as a file spells them (a file has no parser: "4" is text, not a number)."""
    if not isinstance(values, dict):
        raise UserInputError(f"{where}: expected a mapping of setting names to values, not {values!r}.")
    known = {f.name for c in (cls, *more_classes) for f in fields(c)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise UserInputError(f"{where}: unknown setting(s) {unknown}; valid: {sorted(known)}.")
    check_setting_types(values, where, (cls, *more_classes), text_parsed=False)
    return values


def _task_spec(values: Any, where: str) -> TaskSpec:
    """A grid's task entry: known, typed settings, its registered task name given (not a dataclass TypeError)."""
    _checked(TaskSpec, values, where)
    if "task" not in values:
        raise UserInputError(f"{where}: missing required setting 'task' (a registered task name, e.g. task: markov).")
    return TaskSpec(**values)


def _experiment(values: Any, where: str) -> dict[str, Any]:
    """A grid's (or a task's) `experiment:` settings: known, typed, and read by a grid (`GRID_UNREAD`)."""
    _checked(ExperimentArguments, values, where, SharedTrainingArguments)
    unread = sorted(set(values) & set(GRID_UNREAD))
    if unread:
        raise UserInputError(f"{where}: " + "; ".join(f"{name} is not read by a grid ({GRID_UNREAD[name]})"
                                                       for name in unread) + ".")
    return values


def _check_budgets_read(layers: list[dict[str, Any]], where: str) -> None:
    """Refuse a generic budget setting of `layers` (lowest first) that no phase reads, as `run_spt.py` refuses the
    flag (`arguments.unread_budgets` over the layers merged by `arguments.layered`): `learning_rate` beside
    `pretrain_learning_rate` and `finetune_learning_rate`, in its layer or above it."""
    unread = unread_budgets(set().union(*layers), layered(layers), PHASES, flag="")
    if unread:
        raise UserInputError(f"{where}: " + "; ".join(f"{name} is not read ({why})" for name, why in unread.items())
                             + "; drop it or a per-phase setting.")


def _seeds(seeds: Any, where: str) -> list[int]:
    if not fits(seeds, list[int]) or not seeds or any(seed < 0 for seed in seeds) or len(set(seeds)) < len(seeds):
        raise UserInputError(f"{where}: seeds is a list of different whole numbers >= 0, e.g. [0, 1, 2]; got "
                             f"{seeds!r}.")
    return seeds


def _mapping_of_mappings(values: Any, where: str, group: str) -> dict[str, Any]:
    if not isinstance(values, dict) or not all(isinstance(spec, dict) for spec in values.values()):
        raise UserInputError(f"{where}: {group} is a mapping of task keys to their settings ({{key: {{task: markov, "
                             f"...}}}}), not {values!r}.")
    return values


def parse_grid(raw: dict[str, Any], source: str = "grid") -> Grid:
    """Grid from a dict (a loaded YAML/JSON file), read through the flags' own declarations: an unknown name, a
    value of the wrong type or outside its range, a setting a grid does not read, a model or Trainer setting that
    transformers refuses, and a dangling reference are each a one-line error, before any data is built."""
    raw = dict(_checked(Grid, raw, source))
    missing = [name for name in ("tasks", "arms", "seeds") if name not in raw]
    if missing:
        raise UserInputError(f"{source}: a grid needs {missing}; see the default grid (`hf-spt ablation "
                             "--write_default_grid my_grid.yaml` writes a copy).")
    raw["seeds"] = _seeds(raw["seeds"], source)
    for group in ("tasks", "pretrain_tasks"):  # keys and arm names become folders under output_dir
        for key in _mapping_of_mappings(raw.get(group) or {}, source, group):
            check_plain_name(key, f"{source}: {group} key")
    if not isinstance(raw["arms"], list) or not all(isinstance(arm, dict) for arm in raw["arms"]):
        raise UserInputError(f"{source}: arms is a list of mappings ([{{name: scratch}}, {{name: spt, pretrain: "
                             f"true}}]), not {raw['arms']!r}.")
    for arm in raw["arms"]:
        check_plain_name(arm.get("name"), f"{source}: arm name")
    raw["tasks"] = {k: _task_spec(v, f"{source}: tasks.{k}") for k, v in raw["tasks"].items()}
    raw["pretrain_tasks"] = {k: _task_spec(v, f"{source}: pretrain_tasks.{k}")
                             for k, v in (raw.get("pretrain_tasks") or {}).items()}
    for key, spec in {**raw["pretrain_tasks"], **raw["tasks"]}.items():
        _experiment(spec.experiment, f"{source}: tasks.{key}.experiment")
        if "portable_numerics" in spec.experiment:  # a grid's processes run every task: one numerics for all
            raise UserInputError(f"{source}: tasks.{key}.experiment: portable_numerics holds for the whole grid; set "
                                 "it under the grid's experiment: (or pass --portable_numerics).")
        _checked(ModelArguments, spec.model, f"{source}: tasks.{key}.model")
    raw["arms"] = [Arm(**_checked(Arm, arm, f"{source}: arm {arm.get('name')!r}")) for arm in raw["arms"]]
    for arm in raw["arms"]:
        _checked(ModelArguments, arm.model, f"{source}: arm {arm.name!r} model")
    _experiment(raw.get("experiment") or {}, f"{source}: experiment")
    _check_budgets_read([raw.get("experiment") or {}], f"{source}: experiment")
    for key, spec in {**raw["pretrain_tasks"], **raw["tasks"]}.items():
        _check_budgets_read([raw.get("experiment") or {}, spec.experiment], f"{source}: task {key!r}: experiment")
    _checked(ModelArguments, raw.get("model") or {}, f"{source}: model")
    grid = Grid(**raw)
    for key, spec in {**grid.pretrain_tasks, **grid.tasks}.items():  # every unit's settings, before any unit runs
        try:
            check_run(unit_run(grid, grid.seeds[0], key), phases=("pretrain", "finetune"), trainer_arguments=False)
            for arm in (arm for arm in grid.arms if arm.model):
                check_model_settings(unit_model(grid, key, None, arm), spec.task, spec.max_length)
        except UserInputError as error:
            raise UserInputError(f"{source}: task {key!r}: {error}") from None
    names = [arm.name for arm in grid.arms]
    if len(set(names)) != len(names):
        raise UserInputError(f"{source}: arm names must be unique, got {names}.")
    known_tasks = set(grid.tasks) | set(grid.pretrain_tasks)
    for arm in grid.arms:
        unknown = sorted(set(arm.tasks or ()) - set(grid.tasks))
        if unknown:
            raise UserInputError(f"{source}: arm {arm.name!r} runs on tasks {unknown}, which are not in tasks "
                                 f"({sorted(grid.tasks)}).")
        if arm.pretrain_task is not None and arm.pretrain_task not in known_tasks:
            raise UserInputError(f"{source}: arm {arm.name!r} pretrains on {arm.pretrain_task!r}, which is not in "
                             f"tasks or pretrain_tasks ({sorted(known_tasks)}).")
    return grid


def with_portable_numerics(grid: Grid, asked: str | None) -> Grid:
    """`grid` with a suite's `--portable_numerics` value ("true", "cross_vendor", or "false", which turns a file's
    setting off) over its file's `experiment: {portable_numerics: ...}`; unchanged where the flag was not given."""
    return grid if asked is None else replace(grid, experiment={**grid.experiment, "portable_numerics": asked})


def check_trainer_settings_of(grid: Grid) -> None:
    """Each task's Trainer arguments and reporters as transformers builds them (`phase_arguments.
    check_trainer_settings`), before any data: the part of `pipeline.check_run` that `parse_grid` leaves
    to the grid runner (`grid_runner.run_grid`, once it has set up the ranks' distributed state) and to the dry runs."""
    for key, spec in {**grid.pretrain_tasks, **grid.tasks}.items():
        run = unit_run(grid, grid.seeds[0], key)
        try:
            check_trainer_settings((run.pretrain, run.finetune), task_preset(spec.task).batch_size,
                                   Path(grid.output_dir))
        except UserInputError as error:
            raise UserInputError(f"grid task {key!r}: {error}") from None


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


def _model_values(grid: Grid, task_key: str, num_layers: int | None, arm: Arm | None = None) -> dict[str, Any]:
    """Model settings of a unit: the grid's, the task's over them, then the arm's (`Arm.model`, `num_layers`)."""
    values = {**grid.model, **grid.task_spec(task_key).model, **(arm.model if arm else {})}
    if num_layers is not None:
        values["num_hidden_layers"] = num_layers
    return values


def unit_run(grid: Grid, seed: int, task_key: str, num_layers: int | None = None, arm: Arm | None = None) -> RunSpec:
    """A unit's settings, resolved as `run_spt.py`'s are (`run_spec.resolve_run`) from the argument groups the
    grid's settings make: the task's, the experiment and Trainer settings (the task's over the grid's) for `seed`,
    and the model settings (`_model_values`: of `arm`'s cells, with its model settings and `num_layers`)."""
    spec = grid.task_spec(task_key)
    own = {f.name for f in fields(ExperimentArguments)}
    settings = {**layered([grid.experiment, spec.experiment]), "output_dir": grid.output_dir, "seed": seed}
    data = DataArguments(task=spec.task, data_dir=spec.data_dir, task_options=spec.task_options,
                         max_length=spec.max_length)
    return resolve_run(data, ModelArguments(**_model_values(grid, task_key, num_layers, arm)),
                       ExperimentArguments(**{k: v for k, v in settings.items() if k in own}),
                       SharedTrainingArguments(**{k: v for k, v in settings.items() if k not in own}))


def unit_model(grid: Grid, task_key: str, num_layers: int | None, arm: Arm | None = None) -> ModelSpec:
    """The model of a unit (`unit_run`'s)."""
    return unit_run(grid, grid.seeds[0], task_key, num_layers, arm).model


def arm_named(grid: Grid, name: str) -> Arm:
    return next(arm for arm in grid.arms if arm.name == name)


def arm_depth(grid: Grid, arm: Arm, task_key: str) -> int:
    """The arm's number of layers, the task preset's when neither the arm nor the grid's model sets it."""
    spec = grid.task_spec(task_key)
    for depth in (arm.num_layers, spec.model.get("num_hidden_layers"), grid.model.get("num_hidden_layers")):
        if depth is not None:
            return depth
    return task_preset(spec.task).model["num_hidden_layers"]


def cells(grid: Grid) -> list[Cell]:
    """Every fine-tuning run of the grid: each task with each arm that runs on it (`Arm.tasks`), for every seed."""
    return [Cell(task, arm.name, seed) for task in grid.tasks for arm in grid.arms if arm.runs_on(task)
            for seed in grid.seeds]


def arm_pretrain_epochs(grid: Grid, arm: Arm, seed: int, task_key: str) -> float:
    """The SPT budget an arm starts from (a pretraining arm) or is given the steps of (a compute-matched arm): its
    own `pretrain_epochs`, else the experiment's for `task_key`, as run_spt.py resolves them."""
    if arm.pretrain_epochs is not None:
        return arm.pretrain_epochs
    return unit_run(grid, seed, task_key).pretrain.epochs


def pretrain_job(grid: Grid, cell: Cell) -> PretrainJob | None:
    """The SPT checkpoint `cell` starts from, or None for scratch arms."""
    arm = arm_named(grid, cell.arm)
    if not arm.pretrain:
        return None
    source = arm.pretrain_task or cell.task
    return PretrainJob(source, float(arm_pretrain_epochs(grid, arm, cell.seed, source)),
                       arm_depth(grid, arm, cell.task), cell.seed)


def pretrain_jobs(grid: Grid, of_cells: list[Cell] | None = None) -> list[PretrainJob]:
    """The SPT checkpoints the cells (`of_cells`, default: every cell of the grid) start from, each once, in a fixed
    order (by name)."""
    return sorted({job for cell in (cells(grid) if of_cells is None else of_cells)
                   if (job := pretrain_job(grid, cell)) is not None}, key=str)


__all__ = ["CELLS_DIR", "PRETRAIN_DIR", "GRID_RECORD_NAME", "TaskSpec", "Arm", "Grid", "PretrainJob", "Cell",
           "parse_grid", "with_portable_numerics", "check_trainer_settings_of", "load_grid", "unit_run", "unit_model", "arm_named", "arm_depth", "cells",
           "arm_pretrain_epochs", "pretrain_job", "pretrain_jobs"]
