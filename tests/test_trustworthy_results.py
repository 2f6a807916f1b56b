"""No number in results.json comes from a run other than the one asked for (issue 15, items 2-7 and 14).

Each test reproduces a defect of the pipeline before phase definitions, checkpoint-config checks,
load reports and value ranges: tiny runs of about a second each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_spt_cli
from tiny_backbone_runs import tiny_arguments, tiny_run

from hf_spt.errors import UserInputError
from hf_spt.experiments.suites.grid_runner import run_grid
from hf_spt.experiments.suites.grid import load_grid, parse_grid
from hf_spt.experiments.arguments import ExperimentArguments
from hf_spt.experiments.phase_arguments import pretrain_arguments
from hf_spt.runs.phase_definition import PhaseDefinitionMismatch
from hf_spt.experiments.pipeline import prepare_task, run_experiment
from hf_spt.tasks import load_task
from hf_spt.tasks.common import DataFormatError



def run(folder: Path, **settings) -> dict:
    return run_experiment(*tiny_arguments(folder, **settings))


def stamp(path: Path) -> int:
    return path.stat().st_mtime_ns


def test_a_changed_rerun_stops_listing_each_difference_and_overwrite_runs_it(tmp_path):
    first = run(tmp_path, mode="scratch")
    weights = stamp(tmp_path / "scratch" / "model.safetensors")
    with pytest.raises(PhaseDefinitionMismatch) as raised:  # before: the seed-0, 16-wide numbers, recorded as seed 1
        run(tmp_path, mode="scratch", seed=1, hidden_size=32)
    message = str(raised.value)
    assert "seed: 0 -> 1" in message and "model.hidden_size: 16 -> 32" in message
    assert "--output_dir" in message and "--overwrite_output_dir" in message
    assert stamp(tmp_path / "scratch" / "model.safetensors") == weights
    assert json.loads((tmp_path / "results.json").read_text())["seed"] == 0
    again = run(tmp_path, mode="scratch", seed=1, hidden_size=32, overwrite_output_dir=True)
    assert again["seed"] == 1 and again["model"]["hidden_size"] == 32
    assert again["arms"][0]["test_accuracy"] is not None and first["model"]["hidden_size"] == 16


def test_every_phase_is_checked_before_any_trains(tmp_path):
    run(tmp_path, mode="scratch")
    with pytest.raises(PhaseDefinitionMismatch, match="learning_rate: 0.001 -> 0.002"):
        run(tmp_path, mode="compare", finetune_learning_rate=2e-3)
    assert not (tmp_path / "pretrain").exists(), "the pretraining phase trained before the scratch arm was judged"


def test_repretraining_changes_the_fine_tuning_phase_definition(tmp_path):
    run(tmp_path, mode="spt")
    run(tmp_path, mode="finetune")
    run(tmp_path, mode="spt", pretrain_learning_rate=2e-3, overwrite_output_dir=True)
    with pytest.raises(PhaseDefinitionMismatch, match=r"init_from\.phase_definition"):
        run(tmp_path, mode="finetune")  # before: the spt arm fine-tuned from the first pretraining


def test_a_fixed_data_file_is_a_changed_definition(tmp_path):
    data_args, model_args, exp, training = tiny_arguments(tmp_path / "run", mode="scratch")
    run_experiment(data_args, model_args, exp, training)
    data_args.task_options = {**data_args.task_options, "num_train": 40}
    with pytest.raises(PhaseDefinitionMismatch, match=r"data\.train"):
        run_experiment(data_args, model_args, exp, training)


def test_finetune_flags_that_contradict_the_checkpoint_are_an_error(tmp_path):
    run(tmp_path, mode="spt")
    with pytest.raises(UserInputError, match=r"--hidden_size 32 \(the checkpoint has 16\)"):
        run(tmp_path, mode="finetune", hidden_size=32)  # before: trained 16 wide, recorded 32
    assert not (tmp_path / "spt").exists()


def test_finetune_records_the_trained_models_sizes(tmp_path):
    run(tmp_path, mode="spt")
    data_args, model_args, exp, training = tiny_arguments(tmp_path, mode="finetune")
    model_args.hidden_size = model_args.intermediate_size = model_args.num_attention_heads = None  # preset sizes
    results = run_experiment(data_args, model_args, exp, training)
    assert results["model"]["hidden_size"] == 16 and results["model"]["intermediate_size"] == 32
    assert json.loads((tmp_path / "results.json").read_text())["model"]["hidden_size"] == 16


def test_a_checkpoint_of_another_vocabulary_fails_before_training(tmp_path):
    run(tmp_path / "markov", mode="spt")
    files = tmp_path / "mine"
    files.mkdir()
    (files / "train.csv").write_text("text,label\n" + "".join(f"row {k},{k % 2}\n" for k in range(40)))
    data_args, model_args, exp, training = tiny_arguments(tmp_path / "custom", mode="finetune",
                                                          init_from=str(tmp_path / "markov" / "pretrain"))
    data_args.task, data_args.task_options, data_args.train_file = "custom", {}, str(files / "train.csv")
    with pytest.raises(UserInputError, match=r"vocabulary of \d+ tokens but task 'custom' uses \d+"):
        run_experiment(data_args, model_args, exp, training)  # before: IndexError mid-training
    assert not (tmp_path / "custom" / "spt").exists()


def test_init_from_with_compare_is_an_error():
    with pytest.raises(UserInputError, match="--init_from with --mode compare"):
        ExperimentArguments(mode="compare", init_from="somewhere")  # before: pretrained, then ignored it


def test_init_parts_missing_layers_fail_before_training_listing_the_keys(tmp_path):
    run(tmp_path, mode="spt")
    with pytest.raises(UserInputError, match=r"layers\.1\.attention\.q_proj\.weight"):
        run(tmp_path, mode="finetune", init_parts="qk", num_hidden_layers=2)
    assert not list((tmp_path / "spt").glob("checkpoint-*"))


def test_init_parts_loaded_keys_are_recorded_in_phase_json_and_card(tmp_path):
    run(tmp_path, mode="spt")
    run(tmp_path, mode="finetune", init_parts="qk")
    loaded = json.loads((tmp_path / "spt" / "phase.json").read_text())["loaded"]  # before: dropped
    assert list(loaded) == ["qk"] and list(loaded["qk"]) == ["0"]
    assert any(key.endswith("layers.0.attention.q_proj.weight") for key in loaded["qk"]["0"])
    assert "qk of pretrain (layers 0: " in (tmp_path / "spt" / "README.md").read_text()


@pytest.mark.parametrize("setting, message", [
    ({"mlm_probability": 0.0}, r"--mlm_probability 0.0: must be a number in \(0, 1\]"),
    ({"num_train_epochs": 0.0}, r"--num_train_epochs 0.0: must be a finite number > 0"),
    ({"finetune_batch_size": 0}, r"--finetune_batch_size 0: must be a whole number >= 1"),
    ({"max_steps": 0}, r"--max_steps 0: must be a whole number >= 1, or -1"),
    ({"early_stopping_patience": 0}, r"--early_stopping_patience 0: must be a whole number >= 1"),
    ({"finetune_method": "lora", "lora_r": 0}, r"--lora_r 0: must be a whole number >= 1"),
])
def test_out_of_range_values_are_rejected_before_data_is_built(tmp_path, monkeypatch, setting, message):
    import hf_spt.experiments.pipeline as pipeline

    monkeypatch.setattr(pipeline, "prepare_task", lambda *_: pytest.fail("data built before the check"))
    with pytest.raises(UserInputError, match=message):
        run(tmp_path, **setting)  # before: 0 became the preset (0.15) or trained nothing and reported it


@pytest.mark.parametrize("max_length", [0, -5])
def test_max_length_outside_its_range_is_rejected(tmp_path, max_length):
    data_args, model_args, exp, training = tiny_arguments(tmp_path)
    data_args.max_length = max_length
    with pytest.raises(UserInputError, match=f"--max_length {max_length}: must be a whole number >= 1"):
        run_experiment(data_args, model_args, exp, training)


def test_a_given_masking_rate_is_used_as_given(tmp_path):
    run = tiny_run(tmp_path)
    task = prepare_task(run.task, seed=0)
    assert pretrain_arguments(task, run.pretrain, tmp_path).mlm_probability == task.preset.mlm_probability
    given = tiny_run(tmp_path, mlm_probability=0.5)
    assert pretrain_arguments(task, given.pretrain, tmp_path).mlm_probability == 0.5


def test_a_single_class_train_file_is_an_error_naming_file_and_class(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("text,label\n" + "".join(f"row {k},spam\n" for k in range(20)))
    with pytest.raises(DataFormatError, match=rf"{path}: column 'label' holds a single class \['spam'\]"):
        load_task("custom", train_file=str(path), cache_dir=str(tmp_path / "cache"))  # before: trained as regression


def test_float_labels_are_not_taken_for_regression(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("text,label\n" + "".join(f"row {k},{k / 7:.3f}\n" for k in range(20)))
    with pytest.raises(DataFormatError, match="class names \\(strings\\) or class ids \\(integers\\)"):
        load_task("custom", train_file=str(path), cache_dir=str(tmp_path / "cache"))


@pytest.mark.parametrize("text, message", [
    ("tasks: [unclosed", "is not valid YAML"),
    ("seeds: [0]\n", r"a grid needs \['tasks', 'arms'\]"),
    ("- a list\n", "holds a mapping"),
])
def test_bad_grid_files_are_user_errors(tmp_path, text, message):
    path = tmp_path / "grid.yaml"
    path.write_text(text)
    with pytest.raises(UserInputError, match=message):  # before: yaml's ScannerError, KeyError, TypeError
        load_grid(path)


@pytest.mark.parametrize("argv, message", [
    (["--max_length", "-5"], "error: --max_length -5: must be a whole number >= 1"),
    (["--init_from", "x"], "error: --init_from with --mode compare"),
    (["--train_file", "x.csv"], "error: Settings this run would not read"),
    (["--config_file", "nope.yaml"], "error: --config_file nope.yaml: no such file"),
])
def test_run_spt_user_errors_exit_2_in_one_line(tmp_path, capsys, argv, message):
    status, last_line = run_spt_cli(["--output_dir", str(tmp_path / "run"), *argv], capsys)  # the script's entry point
    assert status == 2 and message in last_line


@pytest.mark.parametrize("change, message", [
    ({"experiment": {"finetune_epochs": 0}}, r"--finetune_epochs 0: must be a finite number > 0"),
    ({"arms": [{"name": "a", "num_layers": 0}]}, r"Arm 'a': num_layers must be above 0"),
])
def test_grid_values_outside_their_range_are_rejected_when_parsed(change, message):
    grid = {"seeds": [0], "tasks": {"m": {"task": "markov"}}, "arms": [{"name": "scratch"}], **change}
    with pytest.raises(UserInputError, match=message):
        parse_grid(grid)


def test_a_changed_grid_stops_before_any_unit_trains(tmp_path):
    grid = {"output_dir": str(tmp_path), "seeds": [0], "model": {"num_hidden_layers": 1, "hidden_size": 16,
            "num_attention_heads": 2, "intermediate_size": 16},
            "tasks": {"m": {"task": "markov", "task_options": {"num_train": 32, "num_validation": 16, "num_test": 16,
                                                                "length": 12}}},
            "experiment": {"pretrain_epochs": 1, "finetune_epochs": 1, "report_to": "none", "use_cpu": True},
            "arms": [{"name": "spt", "pretrain": True}]}
    run_grid(parse_grid(grid))
    grid["experiment"]["learning_rate"] = 2e-3
    grid["arms"].append({"name": "scratch"})
    with pytest.raises(PhaseDefinitionMismatch, match="learning_rate: 0.001 -> 0.002") as raised:
        run_grid(parse_grid(grid))  # before: reused the finished units' numbers as the new grid's
    assert not (tmp_path / "cells" / "m" / "scratch").exists(), "a unit trained before the grid was checked"
    message = str(raised.value)  # every changed unit is listed, not only the first, and the advice once
    assert f"{tmp_path / 'pretrain' / 'm_e1_L1_s0'} holds a run defined differently" in message
    assert f"{tmp_path / 'cells' / 'm' / 'spt' / 'seed0'} holds a run defined differently" in message
    assert message.count("--overwrite_output_dir") == 1
