"""Compute curves of finished runs: for every finished fine-tuning run of a study (a grid's cells) or of a
`run_spt.py` run (its arms), its validation accuracy after each epoch against cumulative training FLOPs,
pretraining included (`analysis.compute.ComputeCurve`). An SPT arm's curve starts at its pretraining's cost (every
epoch it ran, whichever checkpoint it kept), a hybrid-init or frozen arm's too. The FLOPs of an epoch are counted
over the real lengths of the phase's training inputs, rebuilt from the recorded task settings (the task is prepared
again, hence here, above the tasks and grids). The report drawn from the curves is `hf_spt.reports.compute_report`'s.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ...analysis.compute import ComputeCurve, epoch_accuracies, training_flops
from ...errors import MissingInputError
from ...reports.compute_report import read_compute_curves
from ...reports.report_sources import join_by_config
from ...runs.folder import PHASE_RESULT_NAME, read_json
from ...training.dataset_columns import input_lengths
from ..arguments import DataArguments
from ..phases import LOG_HISTORY_NAME
from ..pipeline import prepare_pretrain_task, prepare_task
from ..run_spec import task_requests
from ..results_files import ARM_FOLDERS
from .grid_runner import prepare_unit
from .finished_runs import read_record, recorded_settings, run_record
from .grid import GRID_RECORD_NAME, Grid, cells, parse_grid, pretrain_job

CONFIG_NAME = "config.json"
SOURCES_FLAG = "--runs"
"""The flag that names the finished runs read (`run_compute_curves.py`'s), for the messages about them."""


def _config(folder: Path) -> SimpleNamespace:
    config = read_json(folder / CONFIG_NAME)
    needed = ("hidden_size", "num_hidden_layers", "intermediate_size")
    if not isinstance(config, dict) or any(name not in config for name in needed):
        raise MissingInputError(f"{folder / CONFIG_NAME}: a model config with {', '.join(needed)} is needed to count "
                                "the phase's FLOPs.")
    return SimpleNamespace(**config)


def pretraining_flops(folder: Path, lengths: list[int]) -> float:
    """FLOPs of a finished pretraining phase: every epoch it ran (`phase.json`) over its training inputs."""
    result = read_json(folder / PHASE_RESULT_NAME)
    if result is None or result.get("phase") != "pretrain":
        raise MissingInputError(f"{folder} holds no finished pretraining phase ({PHASE_RESULT_NAME}), so the compute "
                                "of the arms that start from it is unknown.")
    return float(result["epochs"]) * training_flops(_config(folder), lengths, head="masked_lm")


def phase_curve(folder: Path, config_name: str, arm: str, seed: int, lengths: list[int],
                pretrain_flops: float, result: dict[str, Any]) -> ComputeCurve:
    """The curve (`analysis.compute.ComputeCurve`) of a finished fine-tuning phase whose `phase.json` is `result`."""
    history = read_json(folder / LOG_HISTORY_NAME)
    if not isinstance(history, list):
        raise MissingInputError(f"{folder / LOG_HISTORY_NAME} is missing: the phase's per-epoch validation is needed "
                                "for its compute curve.")
    return ComputeCurve(config_name, arm, seed, pretrain_flops, training_flops(_config(folder), lengths),
                        epoch_accuracies(history), result.get("test_accuracy"))


def grid_compute_curves(grid: Grid) -> list[ComputeCurve]:
    """One curve per finished cell of a grid (a study), in the grid's order."""
    tasks: dict = {}
    lengths: dict[tuple[str, int], list[int]] = {}

    def lengths_of(task_key: str, seed: int) -> list[int]:
        if (task_key, seed) not in lengths:
            lengths[task_key, seed] = input_lengths(prepare_unit(grid, task_key, seed, None, tasks)[0].dataset["train"])
        return lengths[task_key, seed]

    curves = []
    for cell in cells(grid):
        folder = cell.folder(grid)
        result = read_json(folder / PHASE_RESULT_NAME)
        if result is None:
            continue
        job = pretrain_job(grid, cell)
        spent = pretraining_flops(job.folder(grid), lengths_of(job.task, cell.seed)) if job else 0.0
        curves.append(phase_curve(folder, cell.task, cell.arm, cell.seed, lengths_of(cell.task, cell.seed), spent,
                                  result))
    return curves


def run_compute_curves(run: str | Path) -> list[ComputeCurve]:
    """One curve per finished arm of a `run_spt.py` output folder, on the task settings its `results.json` records.
    An arm that started from weights other than the run's own pretraining is left out (its compute is unknown)."""
    run = Path(run)
    record = run_record(run, SOURCES_FLAG, instead=None)
    data, seed = recorded_settings(record, {}, set())
    request, source = task_requests(DataArguments(**data))
    task = prepare_task(request, seed)
    lengths = input_lengths(task.dataset["train"])
    pretrain_lengths = (input_lengths(prepare_pretrain_task(source, task, seed).dataset["train"]) if source
                        else lengths)
    curves = []
    for arm in record["arms"]:
        if arm["arm"] not in ARM_FOLDERS or not (run / arm["arm"]).is_dir():
            continue
        spent = 0.0
        if arm.get("init_from"):
            if Path(arm["init_from"]).name != "pretrain":
                print(f"{arm['arm']}: starts from {arm['init_from']}, whose compute is unknown; left out.")
                continue
            spent = pretraining_flops(run / "pretrain", pretrain_lengths)
        curves.append(phase_curve(run / arm["arm"], record["task"], arm["arm"], seed, lengths, spent, arm))
    return curves


def folder_compute_curves(folder: str | Path) -> list[ComputeCurve]:
    """The curves of a finished study or ablation folder (its `grid.json`) or of a `run_spt.py` output folder."""
    folder = Path(folder)
    if (folder / GRID_RECORD_NAME).is_file():
        record = folder / GRID_RECORD_NAME
        grid = parse_grid(read_record(record, SOURCES_FLAG, instead=None), str(record))
        grid.output_dir = str(folder)  # the folder may have moved since the grid ran
        return grid_compute_curves(grid)
    return run_compute_curves(folder)


def combined_curves(sources: list[str | Path], replaced: Collection[str] = (), added: Collection[str] = ()
                    ) -> list[ComputeCurve]:
    """The curves of several finished folders or `*_compute.json` files, for one report; a configuration's curves
    come from one source (`reports.report_sources.join_by_config`; a configuration in `replaced` from the last source that
    holds it, one in `added` from every source, as other seeds of one study: same arms, same FLOPs per epoch and
    pretraining FLOPs)."""
    found = [(source, read_compute_curves(source) if source.suffix == ".json" else folder_compute_curves(source))
             for source in map(Path, sources)]
    return join_by_config(found, lambda curve: curve.config, lambda curve: curve.seed,
                          lambda curve: (curve.arm, curve.pretrain_flops, curve.flops_per_epoch), replaced, added)


__all__ = ["SOURCES_FLAG", "pretraining_flops", "phase_curve", "grid_compute_curves", "run_compute_curves",
           "folder_compute_curves", "combined_curves"]
