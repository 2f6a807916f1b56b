"""The Long Range Arena suite: scratch, compute-matched scratch and SPT on every LRA task with data, as one grid.

`lra_grid` turns the suite's options into an ablation `Grid` (`grid_runner.py`), so the suite
shares the grid's machinery: one SPT checkpoint per (task, seed), one cell per (task, arm,
seed), resumable cell by cell, cells split between ranks. Every task runs with its published
recipe, `amos_lra` (`recipes/amos_lra.yaml`: AdamW at 1e-3, the task's masking rate, batch, model
size and length, up to 200 pretraining epochs of which the best-validation checkpoint is kept),
and every arm is fine-tuned to convergence: the best-validation checkpoint, with early stopping
on validation accuracy (`early_stopping_patience` evaluations) within `finetune_epochs` epochs.
The compute-matched scratch arm gets the SPT arm's pretraining plus fine-tuning steps.

Scales:
- `full`: the recipe as published, on the data under `data_root` (ListOps and Pathfinder
  generated at the release's sizes when absent).
- `mini`: sized to run within an hour on a 2-core CPU with two seeds (`MINI`; 36 min measured): generated
  ListOps with shorter trees, generated Pathfinder with fewer images, the Markov task, and
  Text/Retrieval/Image (shortened) only when their folders are given. Small models, shorter
  pretraining; the same arms, recipe optimizer and masking rates.

`step_counts` gives each arm's optimizer steps per seed without building any data (the train
sizes of `TRAIN_ROWS`), for the cost estimate of `run_lra.py --dry_run`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from accelerate import PartialState

from ...errors import UserInputError
from ...reports.lra_report import write_lra_report
from ...runs.folder import read_json
from ...tasks import task_preset
from ...tasks.lra_data import LRA_TASKS, find_lra_data
from ..arguments import ModelArguments
from ..phases import LOG_HISTORY_NAME
from ..step_plan import spt_step_budget
from ..settings_files import recipe_settings
from .grid_runner import rows_with_pretraining, run_grid
from .grid import Grid, TaskSpec, parse_grid, pretrain_jobs, unit_run

SCALES = ("full", "mini")
ARMS = ({"name": "scratch"}, {"name": "scratch_compute_matched", "compute_matched": True},
        {"name": "spt", "pretrain": True})
# Fine-tuning budget of every arm at full scale: a maximum, cut by early stopping on validation accuracy.
FULL_FINETUNE_EPOCHS = 50
FULL_PATIENCE = 10
# Generated data at full scale: ListOps's builder defaults are the release's 96k/2k/2k trees of 500-2000 tokens;
# Pathfinder as the release (about 200k images of the difficulty, split 80/10/10).
FULL_GENERATED_OPTIONS = {"listops": {}, "pathfinder": {"num_images": 200_000}}
# Training rows per task at full scale (the releases; Text and Image after hf_spt carves 10% for validation).
TRAIN_ROWS = {"listops": 96_000, "text": 22_500, "retrieval": 147_086, "image": 45_000, "pathfinder": 160_000}

MINI_MODEL = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128}
# The mini suite, per task: builder options (data size and length), model and budgets, sized from measured CPU step
# times (docs/lra.md) so that two seeds fit in about an hour on 2 cores while each task keeps its structure: ListOps
# trees of 100-300 tokens (hierarchical, several levels deep), Pathfinder at 24x24 (576 pixels; the smallest size
# at which the generator draws the end-point discs wider than the dashes), Markov as in the ablation grid.
MINI: dict[str, dict[str, Any]] = {
    # patience 10: scratch on Markov sits near chance for many epochs before it finds the local rule (ablations.md)
    "markov": {"task_options": {}, "model": {"num_hidden_layers": 1},
               "experiment": {"pretrain_epochs": 25, "finetune_epochs": 20, "early_stopping_patience": 10}},
    "listops": {"task_options": {"num_train": 4000, "num_validation": 500, "num_test": 500, "min_length": 100,
                                 "max_length": 300}, "model": {},
                "experiment": {"pretrain_epochs": 8, "finetune_epochs": 12}},
    "pathfinder": {"task_options": {"num_images": 3000, "image_size": 24}, "model": {},
                   "experiment": {"pretrain_epochs": 6, "finetune_epochs": 8}},
    # only with --data_root: shortened to 512 bytes / 16x16 pixels (all rows: their time grows with the data given)
    "text": {"task_options": {"max_length": 512}, "model": {}, "experiment": {"pretrain_epochs": 3, "finetune_epochs": 6}},
    "retrieval": {"task_options": {"max_length": 512}, "model": {},
                  "experiment": {"pretrain_epochs": 3, "finetune_epochs": 6}},
    "image": {"task_options": {"image_size": 16}, "model": {}, "experiment": {"pretrain_epochs": 3, "finetune_epochs": 6}},
}
MINI_PATIENCE = 3
MINI_GENERATED = ("markov", "listops", "pathfinder")


@dataclass
class LraSuite:
    """What `run_lra.py` runs: scale, data, seeds, budgets, and settings given to every task (GPU flags)."""

    output_dir: str
    scale: str = "full"
    data_root: str | None = None
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    tasks: list[str] | None = None
    finetune_epochs: float | None = None
    pretrain_epochs: float | None = None
    early_stopping_patience: int | None = None
    training: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.scale not in SCALES:
            raise UserInputError(f"Unknown --scale {self.scale!r}; choose one of {', '.join(SCALES)}.")
        known = suite_tasks(self.scale)
        unknown = sorted(set(self.tasks or ()) - set(known))
        if unknown:
            raise UserInputError(f"--tasks {unknown} are not in the {self.scale} suite ({', '.join(known)}).")


# Mini order: the order of the units in the ranks' shared queue (the table lists tasks in LRA's order).
MINI_ORDER = ("pathfinder", "markov", "listops", "text", "retrieval", "image")


def suite_tasks(scale: str) -> tuple[str, ...]:
    return LRA_TASKS if scale == "full" else MINI_ORDER


def _split_recipe(task: str) -> tuple[dict[str, Any], dict[str, Any], int | None]:
    """`amos_lra`'s settings of `task`, split into experiment (phase and Trainer) settings, model settings and
    the length (positions)."""
    settings = recipe_settings("amos_lra", task)
    model_names = {f.name for f in fields(ModelArguments)}
    max_length = settings.pop("max_length", None)
    return ({k: v for k, v in settings.items() if k not in model_names},
            {k: v for k, v in settings.items() if k in model_names}, max_length)


def _task_spec(suite: LraSuite, task: str, folder: Path | None) -> TaskSpec:
    """One task of the suite at its scale, its data folder (None: generated), its recipe and budgets."""
    mini = suite.scale == "mini"
    if task == "markov":  # not an LRA task: its own preset with the recipe's optimizer
        experiment, model, max_length = {"optim": "adamw_torch", "learning_rate": 1e-3}, {}, None
    else:
        experiment, model, max_length = _split_recipe(task)
    patience = MINI_PATIENCE if mini else FULL_PATIENCE
    experiment.update(finetune_epochs=FULL_FINETUNE_EPOCHS, early_stopping_patience=patience)
    options: dict[str, Any] = {}
    if mini:
        settings = MINI[task]
        experiment.update(settings["experiment"])
        model.update({**MINI_MODEL, **settings["model"]} if task != "markov" else settings["model"])
        options, max_length = dict(settings["task_options"]), None  # lengths come from the builder options
        if task in MINI_GENERATED:
            folder = None
    elif folder is None:
        options = dict(FULL_GENERATED_OPTIONS[task])
    for name, value in (("finetune_epochs", suite.finetune_epochs), ("pretrain_epochs", suite.pretrain_epochs),
                        ("early_stopping_patience", suite.early_stopping_patience)):
        if value is not None:
            experiment[name] = value
    return TaskSpec(task=task, task_options=options, data_dir=str(folder) if folder else None, max_length=max_length,
                    experiment={**experiment, **suite.training}, model={**model, **suite.model})


def runnable_tasks(suite: LraSuite) -> tuple[dict[str, Path | None], list[str]]:
    """({task: data folder or None}, the tasks that will run): a task runs when its data is there or generated."""
    wanted = tuple(suite.tasks or suite_tasks(suite.scale))
    lra = tuple(t for t in wanted if t in LRA_TASKS)
    found = find_lra_data(suite.data_root, lra)
    generated = MINI_GENERATED if suite.scale == "mini" else tuple(t for t in lra if FULL_GENERATED_OPTIONS.get(t) is not None)
    return found, [t for t in wanted if t in generated or found.get(t) is not None]


def lra_grid(suite: LraSuite) -> Grid:
    """The suite as an ablation grid over the tasks that can run (see `runnable_tasks`)."""
    found, tasks = runnable_tasks(suite)
    raw = {"tasks": {task: asdict(_task_spec(suite, task, found.get(task))) for task in tasks},
           "arms": [dict(arm) for arm in ARMS], "seeds": list(suite.seeds), "output_dir": suite.output_dir,
           "experiment": {"report_to": "none"}}
    return parse_grid(raw, "the LRA suite")  # read as a grid file is: every setting checked


def _rows(spec: TaskSpec) -> tuple[int, bool]:
    """Training rows of a task spec (known sizes, no data built) and whether it is a pair task."""
    options = spec.task_options
    if spec.task == "pathfinder" and "num_images" in options:
        return int(0.8 * options["num_images"]), False
    if "num_train" in options:
        return options["num_train"], False
    if spec.task == "markov":
        return 4000, False
    return TRAIN_ROWS[spec.task], spec.task == "retrieval"


def step_counts(grid: Grid) -> dict[str, dict[str, int]]:
    """{task: {"pretrain", "finetune", arm...}} optimizer steps per seed at most (early stopping cuts fine-tuning):
    a scratch arm the fine-tuning budget, an SPT arm pretraining + fine-tuning, a compute-matched arm the same."""
    counts = {}
    for key, spec in grid.tasks.items():
        rows, pair = _rows(spec)
        run = unit_run(grid, 0, key)
        budget = spt_step_budget(rows, pair, task_preset(spec.task).batch_size, run.pretrain, run.finetune)
        pretrain, finetune = budget["pretrain"], budget["finetune"]
        counts[key] = {"train_rows": rows, "pretrain": pretrain, "finetune": finetune}
        counts[key].update({arm.name: pretrain + finetune if arm.pretrain or arm.compute_matched else finetune
                            for arm in grid.arms})
    return counts


def gpu_hours(counts: dict[str, dict[str, int]], seeds: int, steps_per_second: dict[str, float]) -> dict[str, float]:
    """GPU-hours per task, at most: seeds x (the steps of every arm of `ARMS`) / steps per second / 3600."""
    return {task: seeds * sum(c[arm["name"]] for arm in ARMS) / steps_per_second[task] / 3600
            for task, c in counts.items() if task in steps_per_second}


def pretraining_curves(grid: Grid) -> dict[str, dict[int, list[tuple[float, float]]]]:
    """Validation MLM loss at every evaluation of each finished SPT job, {task: {seed: [(epoch, loss)...]}}: the
    learning curves that tell whether SPT left its plateau. The final re-evaluation of the best checkpoint (logged
    at the last epoch again) is dropped, so each epoch shows its own loss; a job with no evaluation is left out."""
    curves: dict[str, dict[int, list[tuple[float, float]]]] = {}
    for job in pretrain_jobs(grid):
        history = read_json(job.folder(grid) / LOG_HISTORY_NAME) or []
        points = {entry["epoch"]: entry["eval_loss"] for entry in reversed(history) if "eval_loss" in entry}
        if points:  # reversed: each epoch keeps its first value
            curves.setdefault(job.task, {})[job.seed] = sorted(points.items())
    return curves


def run_lra_suite(grid: Grid) -> list[dict[str, Any]]:
    """Run every unfinished unit of the suite's grid (resumable, split between ranks), then write
    `lra_results.{json,md,png}` and the SPT curves `lra_pretraining.png` from the main process; return the rows."""
    run_grid(grid)
    rows = rows_with_pretraining(grid)
    if PartialState().is_main_process:  # the state run_grid set up
        write_lra_report(rows, Path(grid.output_dir), pretraining_curves(grid), [arm.name for arm in grid.arms])
    return rows


__all__ = ["SCALES", "ARMS", "MINI", "MINI_ORDER", "TRAIN_ROWS", "LraSuite", "suite_tasks", "runnable_tasks", "lra_grid",
           "step_counts", "gpu_hours", "pretraining_curves", "run_lra_suite"]
