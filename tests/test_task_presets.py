"""Task presets are static: registered with the task, read without building any data, adjusted by options."""

from __future__ import annotations

import dataclasses

import pytest

import hf_spt.experiments.suites.grid_runner as grid_runner
from hf_spt.experiments.suites.grid import cells, parse_grid, pretrain_job
from hf_spt.tasks import TASKS, load_task, task_preset
from hf_spt.tasks.registry import TaskPreset


def test_every_task_registers_its_preset():
    for name, entry in TASKS.items():
        assert isinstance(entry.preset, TaskPreset) and entry.preset.model["num_hidden_layers"] > 0, name
    assert task_preset("listops").mlm_probability == 0.1 and task_preset("image").batch_size == 50
    with pytest.raises(ValueError, match="Unknown task 'nope'"):
        task_preset("nope")


def test_pathfinder_and_pathx_differ_only_in_size():
    pathfinder, pathx = task_preset("pathfinder"), task_preset("pathx")
    assert (pathfinder.max_length, pathx.max_length) == (32 * 32, 128 * 128)
    assert dataclasses.replace(pathx, max_length=pathfinder.max_length) == pathfinder


def test_builders_adjust_the_preset_from_their_options_without_touching_the_registered_one():
    task = load_task("markov", num_train=8, num_validation=4, num_test=4, length=12, steps=(1, 3, 5))
    assert (task.preset.max_length, task.preset.num_labels) == (12, 3)
    assert (task_preset("markov").max_length, task_preset("markov").num_labels) == (100, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.preset.max_length = 5


def test_the_ablation_grid_reads_the_depth_without_building_data(tmp_path, monkeypatch):
    grid = parse_grid({"output_dir": str(tmp_path), "seeds": [0], "tasks": {"lo": {"task": "listops"}},
                       "arms": [{"name": "spt", "pretrain": True}]})
    monkeypatch.setattr(grid_runner, "prepare_task", lambda *a, **k: pytest.fail("built a data set to read a preset"))
    assert pretrain_job(grid, cells(grid)[0]).num_layers == 6
