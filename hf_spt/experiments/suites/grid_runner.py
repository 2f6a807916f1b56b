"""The grid runner behind every suite (the ablation grid, the LRA suite, the budget studies): a grid (`grid.py`:
tasks x arms x seeds) planned once, run unit by unit, resumable, on several processes, and its rows.

Layout under `output_dir`: `pretrain/<task>_e<epochs>_L<depth>_s<seed>/` (one SPT checkpoint,
shared by every arm that needs it), `cells/<task>/<arm>/seed<seed>/` (one fine-tuning run, done
when its `phase.json` exists; each unit's folder records its definition, and a grid changed
since some units ran stops before any unit trains, listing the differences), then `results.csv`,
`results.md` and `results.png`; `grid.json` records the parsed grid (what `run_analysis.py --run` reads).

Several processes (`accelerate launch --num_processes N run_ablation.py`): the units, in the order
SPT checkpoints (longest first), cells that start from random init (compute-matched ones, the longest,
first), cells that start from a checkpoint, form one queue: each rank takes the next unit no rank has
claimed yet (`unit_claims.py`, a file per unit in the output folder every rank shares), so a rank that
finishes a short unit takes the next one while another still trains a long one. A cell that needs a
checkpoint another rank trains waits for that job alone (its result file), not for every rank.
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
import time
from dataclasses import asdict, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
from accelerate import PartialState
from accelerate.utils import parse_flag_from_env
from transformers import PreTrainedConfig

from ...atomic_files import write_json
from ...reports.grid_report import write_report
from ...runs.folder import PHASE_RESULT_NAME, locks_output_dir, read_json
from ...runs.provenance import recorded_provenance
from ...runs.phase_definition import check_phase_folders
from ...tasks import Task
from ..arguments import redacted
from ..model_config import build_config
from ..phases import PlannedPhase, arm_phase, pretrain_phase, run_phase
from ..pipeline import prepare_task
from ..step_plan import spt_step_budget
from ..run_spec import RunSpec
from .grid import (GRID_RECORD_NAME, Arm, Cell, Grid, PretrainJob, arm_depth, arm_named, arm_pretrain_epochs, cells,
                   check_trainer_settings_of, parse_grid, pretrain_job, pretrain_jobs, unit_run)
from .unit_claims import UnitClaims

DISTRIBUTED_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
                   "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def prepare_unit(grid: Grid, task_key: str, seed: int, num_layers: int | None, tasks: dict | None = None,
                 arm: Arm | None = None) -> tuple[Task, PreTrainedConfig, RunSpec]:
    """The task, model config and resolved settings of a unit (of `arm`'s cells: with its model settings); `tasks`
    caches the prepared tasks by (task key, seed)."""
    run = unit_run(grid, seed, task_key, num_layers, arm)
    tasks = {} if tasks is None else tasks
    if (task_key, seed) not in tasks:
        tasks[task_key, seed] = prepare_task(run.task, seed)
    task = tasks[task_key, seed]
    return task, build_config(task, run.model), run


def unit_phase(grid: Grid, kind: str, unit: PretrainJob | Cell, tasks: dict | None = None,
               sources: dict[PretrainJob, dict[str, Any]] | None = None) -> PlannedPhase:
    """The phase of an SPT job (`kind` "pretrain") or a cell, built once. `tasks` caches the prepared tasks;
    `sources`: the definitions of SPT jobs not trained yet, by job (a cell records its checkpoint's definition)."""
    if kind == "pretrain":
        task, config, run = prepare_unit(grid, unit.task, unit.seed, unit.num_layers, tasks)
        return pretrain_phase(task, config, replace(run.pretrain, epochs=unit.epochs), unit.folder(grid))
    arm = arm_named(grid, unit.arm)
    task, config, run = prepare_unit(grid, unit.task, unit.seed, arm.num_layers, tasks, arm)
    finetune = run.finetune
    if not arm.early_stopping:  # the whole budget: no patience (recorded as such in the cell's definition)
        finetune = replace(finetune, early_stopping_patience=None)
    job = pretrain_job(grid, unit)
    epochs = None
    if arm.compute_matched:
        matched = replace(run.pretrain, epochs=arm_pretrain_epochs(grid, arm, unit.seed, unit.task))
        budget = spt_step_budget(len(task.dataset["train"]), task.is_pair, task.preset.batch_size, matched, finetune)
        epochs = (budget["pretrain"] + budget["finetune"]) / budget["finetune_steps_per_epoch"]
    return arm_phase(arm, task, config, run.model, finetune, unit.folder(grid), job.folder(grid) if job else None,
                     (sources or {}).get(job), epochs)


def plan_grid(grid: Grid) -> dict[tuple[str, PretrainJob | Cell], PlannedPhase]:
    """Every unit's phase, built once, by (kind, unit): the SPT jobs the cells need, then the cells."""
    tasks: dict = {}
    jobs = pretrain_jobs(grid)
    planned = {("pretrain", job): unit_phase(grid, "pretrain", job, tasks) for job in jobs}
    sources = {job: planned["pretrain", job].definition for job in jobs}
    planned.update({("cell", cell): unit_phase(grid, "cell", cell, tasks, sources) for cell in cells(grid)})
    return planned


def _run_in_child(grid: Grid, kind: str, unit: PretrainJob | Cell, device_index: int | None) -> None:
    """Run a pretraining job or a cell in a clean child process (one of several ranks), which plans it there."""
    env = {k: v for k, v in os.environ.items()
           if k not in DISTRIBUTED_ENV and not k.startswith(("TORCHELASTIC_", "ACCELERATE_"))}
    if device_index is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(device_index)
    payload = json.dumps({"grid": asdict(grid), "kind": kind, "unit": asdict(unit)})  # on stdin: no token in `ps`
    subprocess.run([sys.executable, "-m", "hf_spt.experiments.suites.grid_runner"], input=payload, text=True, env=env,
                   check=True)


CHECKPOINT_POLL_SECONDS = 10.0


def wait_for_checkpoint(grid: Grid, job: PretrainJob) -> None:
    """Return once the SPT job `job` has finished (its result file is written last, atomically). Another rank
    trains it; if that rank fails, the launcher stops every rank, this one included."""
    result = job.folder(grid) / PHASE_RESULT_NAME
    while not result.is_file():
        time.sleep(CHECKPOINT_POLL_SECONDS)


def grid_record(grid: Grid) -> dict[str, Any]:
    """What `grid.json` records: the parsed grid, every `*_token` setting redacted (`arguments.redacted`)."""
    record = asdict(grid)
    record["experiment"] = redacted(record["experiment"])
    for group in ("tasks", "pretrain_tasks"):
        for spec in record[group].values():
            spec["experiment"] = redacted(spec["experiment"])
    return record


@locks_output_dir(lambda grid, **selection: grid.output_dir)  # rank 0 holds it; the cells' child processes take none
def run_grid(grid: Grid, arms: list[str] | None = None, seeds: list[int] | None = None,
             tasks: list[str] | None = None) -> list[dict[str, Any]]:
    """Run every unfinished SPT job and cell of `grid` (only those of `arms`, `seeds` and `tasks`, the grid's task
    keys, when given), then (main process) write the report of every finished cell of the grid; return its rows. A
    narrower run trains less and reports everything the folder holds: its `grid.json` and results keep the rows of
    the arms, seeds and tasks it left out, and every unit's definition is checked either way."""
    # Without a GPU the launcher's ranks only form a (gloo) group when PartialState is told cpu=True.
    cpu = parse_flag_from_env("ACCELERATE_USE_CPU") or not torch.cuda.is_available()
    state = PartialState(cpu=cpu, timeout=timedelta(days=7))  # ranks wait at the last barrier for the slowest
    isolate = state.num_processes > 1
    device_index = state.local_process_index if state.device.type == "cuda" else None
    check_trainer_settings_of(grid)  # before any data, now that the ranks' state is set up
    planned = plan_grid(grid)  # on every rank, so that all stop together at a changed unit
    check_phase_folders((phase.folder, phase.definition) for phase in planned.values())  # every change listed
    if state.is_main_process:
        write_json(Path(grid.output_dir) / GRID_RECORD_NAME, grid_record(grid))
    todo_cells = [c for c in cells(grid) if (arms is None or c.arm in arms) and (seeds is None or c.seed in seeds)
                  and (tasks is None or c.task in tasks) and read_json(c.folder(grid) / PHASE_RESULT_NAME) is None]
    jobs = sorted(pretrain_jobs(grid, todo_cells), key=lambda job: (-job.epochs, str(job)))  # longest first
    jobs = [job for job in jobs if read_json(job.folder(grid) / PHASE_RESULT_NAME) is None]
    # One queue for every rank: each takes the next unit no rank has claimed. Every SPT job comes before every
    # cell, so a job is claimed, and trained at once, before any cell that needs it is: a cell waiting for a job
    # never waits for a rank that waits itself.
    source = {cell: pretrain_job(grid, cell) for cell in todo_cells}  # the SPT job a cell starts from, or None
    from_random = sorted((c for c in todo_cells if source[c] is None),
                         key=lambda cell: not arm_named(grid, cell.arm).compute_matched)  # the longest first
    units = ([("pretrain", job) for job in jobs] + [("cell", c) for c in from_random]
             + [("cell", c) for c in todo_cells if source[c] is not None])
    claims = UnitClaims(Path(grid.output_dir), state)
    for kind, unit in units:
        if isolate and not claims.claim(unit.folder(grid)):
            continue
        if kind == "cell" and source[unit] is not None:
            wait_for_checkpoint(grid, source[unit])
        if isolate:
            _run_in_child(grid, kind, unit, device_index)
        else:
            run_phase(planned[kind, unit], checked=True)
    state.wait_for_everyone()
    rows = collect_rows(grid)
    if state.is_main_process:
        claims.clear()
        write_report(rows, Path(grid.output_dir))
    return rows


def collect_rows(grid: Grid) -> list[dict[str, Any]]:
    """One row per finished cell: its settings and scores, and the commit and versions that made it (a row of a
    cell run before they were recorded has neither)."""
    rows = []
    for cell in cells(grid):
        result = read_json(cell.folder(grid) / PHASE_RESULT_NAME)
        if result is None:
            continue
        arm = arm_named(grid, cell.arm)
        job = pretrain_job(grid, cell)
        rows.append({"task": cell.task, "arm": cell.arm, "seed": cell.seed,
                     "test_accuracy": result.get("test_accuracy"), "eval_accuracy": result.get("eval_accuracy"),
                     "seconds": result.get("seconds"), "init_parts": arm.init_parts, "freeze_parts": arm.freeze_parts,
                     "pretrain_task": job.task if job else None, "pretrain_epochs": job.epochs if job else None,
                     "num_layers": arm_depth(grid, arm, cell.task), "compute_matched": arm.compute_matched,
                     **recorded_provenance(result)})
    return rows


def rows_with_pretraining(grid: Grid) -> list[dict[str, Any]]:
    """`collect_rows`, an SPT row's `seconds` counting its pretraining job too (`pretrain_seconds`): what the LRA
    suite and the budget studies report."""
    rows = collect_rows(grid)
    for row in rows:
        job = pretrain_job(grid, Cell(row["task"], row["arm"], row["seed"]))
        if job is not None:
            row["pretrain_seconds"] = (read_json(job.folder(grid) / PHASE_RESULT_NAME) or {}).get("seconds")
            if row["seconds"] is not None and row["pretrain_seconds"] is not None:
                row["seconds"] += row["pretrain_seconds"]
    return rows


def _main_child(payload: str) -> None:
    """Entry of the child process of a rank: run one unit in a single-process setting."""
    data = json.loads(payload)
    grid = parse_grid(data["grid"])
    unit = PretrainJob(**data["unit"]) if data["kind"] == "pretrain" else Cell(**data["unit"])
    run_phase(unit_phase(grid, data["kind"], unit))  # its checkpoint, if any, is trained: its definition is on disk


__all__ = ["prepare_unit", "unit_phase", "plan_grid", "wait_for_checkpoint", "grid_record", "run_grid", "collect_rows",
           "rows_with_pretraining"]


if __name__ == "__main__":
    _main_child(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read())
