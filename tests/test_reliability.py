"""A run folder after a kill, a crash, or a second run into it: resume from complete checkpoints only,
unreadable results re-run, one run per folder, fixed validation masks, time over every session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tiny_backbone_runs import tiny_arguments, tiny_run

from hf_spt.experiments.suites import grid_runner
from hf_spt.experiments.suites.grid import Cell, parse_grid
from hf_spt.experiments.model_config import build_config
from hf_spt.experiments.pipeline import prepare_task, run_experiment
from hf_spt.runs.folder import (HOLDER_NAME, OutputDirBusyError, hold_output_dir, is_complete_checkpoint,
                                           write_json)
from hf_spt.training.arguments import PretrainArguments
from hf_spt.training.model_factory import pretraining_model
from hf_spt.training.pretrain_trainer import PretrainTrainer

ROOT = Path(__file__).resolve().parents[1]
SCRATCH = {"mode": "scratch", "finetune_batch_size": 16}  # 48 rows: 3 steps an epoch, checkpoint-3 after epoch 1


def scratch_run(folder: Path, epochs: int = 1) -> dict:
    data_args, model_args, exp, training = tiny_arguments(folder, **SCRATCH)
    exp.finetune_epochs = epochs
    return run_experiment(data_args, model_args, exp, training)


def interrupt(folder: Path) -> None:
    """As if the 2-epoch run had been killed after its first epoch's checkpoint, before the phase ended."""
    shutil.rmtree(folder / "scratch" / "checkpoint-6")
    (folder / "scratch" / "phase.json").unlink()
    (folder / "scratch" / "model.safetensors").unlink()


@pytest.mark.parametrize("damage", ["empty", "truncated_weights", "no_trainer_state"])
def test_a_checkpoint_killed_while_written_is_skipped_and_the_run_resumes(tmp_path, damage):
    scratch_run(tmp_path, epochs=2)
    interrupt(tmp_path)
    complete, partial = tmp_path / "scratch" / "checkpoint-3", tmp_path / "scratch" / "checkpoint-6"
    assert is_complete_checkpoint(complete)
    partial.mkdir()
    if damage != "empty":
        for name in ("model.safetensors", "config.json", "trainer_state.json", "optimizer.pt", "scheduler.pt"):
            (partial / name).write_bytes((complete / name).read_bytes())
        if damage == "truncated_weights":
            weights = (complete / "model.safetensors").read_bytes()
            (partial / "model.safetensors").write_bytes(weights[: len(weights) // 2])
        else:
            (partial / "trainer_state.json").unlink()
    assert not is_complete_checkpoint(partial)
    stamp = (complete / "model.safetensors").stat().st_mtime_ns
    result = scratch_run(tmp_path, epochs=2)  # before: "Can't find a valid checkpoint at .../checkpoint-6"
    assert (complete / "model.safetensors").stat().st_mtime_ns == stamp, "epoch 1 was trained again, not resumed"
    history = json.loads((tmp_path / "scratch" / "log_history.json").read_text())
    assert [entry["epoch"] for entry in history if "eval_accuracy" in entry][:2] == [1.0, 2.0]
    assert is_complete_checkpoint(partial) and result["arms"][0]["arm"] == "scratch"


def test_an_unreadable_phase_result_reruns_the_phase_instead_of_crashing(tmp_path, caplog):
    first = scratch_run(tmp_path)
    (tmp_path / "scratch" / "phase.json").write_text('{"arm": "scratch", "test_accu')  # killed mid-write
    again = scratch_run(tmp_path)  # before: json.decoder.JSONDecodeError
    assert "phase.json is unreadable" in caplog.text and str(tmp_path / "scratch" / "phase.json") in caplog.text
    assert again["arms"][0]["test_accuracy"] == first["arms"][0]["test_accuracy"]
    assert json.loads((tmp_path / "scratch" / "phase.json").read_text())["arm"] == "scratch"


def test_results_are_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    target = tmp_path / "results.json"
    write_json(target, {"old": 1})

    def killed(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", killed)  # interrupted after writing, before the rename
    with pytest.raises(KeyboardInterrupt):
        write_json(target, {"new": 2})
    assert json.loads(target.read_text()) == {"old": 1} and [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_a_phase_killed_and_resumed_ends_with_the_bits_of_one_never_interrupted(tmp_path):
    """A launch killed mid-phase and run again resumes from the last complete checkpoint: dropout, masking, batch
    order and early stopping go on from the checkpoint's states, so the row is the one an uninterrupted run gives
    (weights to the bit, every metric), for SPT's pretraining, its fine-tuning and a patient scratch arm."""
    import hashlib

    def compare_run(folder: Path) -> None:
        data_args, model_args, exp, training = tiny_arguments(
            folder, mode="compare", pretrain_batch_size=16, finetune_batch_size=16, hidden_dropout_prob=0.2,
            early_stopping_patience=1)
        exp.pretrain_epochs, exp.finetune_epochs = 2, 4
        run_experiment(data_args, model_args, exp, training)

    def kill(phase: Path) -> None:  # as if killed after its next-to-last checkpoint
        shutil.rmtree(max(phase.glob("checkpoint-*"), key=lambda checkpoint: int(checkpoint.name.split("-")[1])))
        (phase / "phase.json").unlink()
        (phase / "model.safetensors").unlink()

    compare_run(tmp_path / "straight")
    resumed = tmp_path / "resumed"
    compare_run(resumed)
    kill(resumed / "pretrain")
    shutil.rmtree(resumed / "spt")  # fine-tuned from the killed pretraining: starts again from its checkpoint
    compare_run(resumed)
    kill(resumed / "spt")
    kill(resumed / "scratch")
    compare_run(resumed)
    for phase in ("pretrain", "spt", "scratch"):
        straight, again = (json.loads((folder / phase / "phase.json").read_text())
                           for folder in (tmp_path / "straight", resumed))
        assert "eval_loss" in straight
        assert ({k: v for k, v in again.items() if "loss" in k or "accuracy" in k}
                == {k: v for k, v in straight.items() if "loss" in k or "accuracy" in k}), phase
        assert (hashlib.sha256((resumed / phase / "model.safetensors").read_bytes()).digest()
                == hashlib.sha256((tmp_path / "straight" / phase / "model.safetensors").read_bytes()).digest()), phase


def test_resumed_phase_counts_the_seconds_of_every_session(tmp_path):
    scratch_run(tmp_path, epochs=2)
    state_file = tmp_path / "scratch" / "checkpoint-3" / "trainer_state.json"
    state = json.loads(state_file.read_text())
    saved = state["stateful_callbacks"]["ElapsedTime"]["attributes"]["earlier_seconds"]
    assert saved > 0
    interrupt(tmp_path)
    state["stateful_callbacks"]["ElapsedTime"]["attributes"]["earlier_seconds"] = 1000.0  # a long first session
    state_file.write_text(json.dumps(state))
    result = scratch_run(tmp_path, epochs=2)
    assert 1000 < result["arms"][0]["seconds"] < 1000 + 120  # before: the last session's few seconds only


def test_validation_masks_are_fixed_across_evaluations_and_resumes(tmp_path):
    run = tiny_run(tmp_path)
    task = prepare_task(run.task, seed=0)
    model = pretraining_model(build_config(task, run.model), "masked")

    def trainer() -> PretrainTrainer:
        args = PretrainArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True, mlm_probability=0.5,
                                 per_device_eval_batch_size=8, disable_tqdm=True)
        return PretrainTrainer(model, args, task.dataset["train"], task.dataset["validation"],
                               processing_class=task.tokenizer)

    first = trainer()
    losses = [first.evaluate()["eval_loss"], first.evaluate()["eval_loss"]]
    torch.manual_seed(123)  # a resumed run's random state differs
    losses.append(trainer().evaluate()["eval_loss"])
    assert losses[0] == losses[1] == losses[2]  # before: 7.12, 6.96, ...


HOLD = """
import sys, time
from hf_spt.runs.folder import hold_output_dir
with hold_output_dir(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_second_run_into_a_busy_folder_fails_at_once_naming_the_holder(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OutputDirBusyError) as error:
            scratch_run(tmp_path)  # before: trained into the same folder as the first run
        assert str(tmp_path) in str(error.value) and f"pid {holder.pid}" in str(error.value)
        assert not (tmp_path / "scratch").exists()
    finally:
        holder.kill()
        holder.wait()
    scratch_run(tmp_path)  # the lock dies with its holder
    assert not (tmp_path / HOLDER_NAME).exists()


def test_grid_cells_in_child_processes_run_under_the_grid_lock(tmp_path):
    torch.set_num_threads(1)
    grid = parse_grid({"output_dir": str(tmp_path), "seeds": [0], "arms": [{"name": "scratch"}],
                       "tasks": {"m": {"task": "markov", "task_options": {"num_train": 16, "num_validation": 8,
                                                                           "num_test": 8, "length": 8}}},
                       "experiment": {"finetune_epochs": 1, "report_to": "none", "use_cpu": True},
                       "model": {"num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 2,
                                 "intermediate_size": 8}})
    cell = Cell("m", "scratch", 0)
    with hold_output_dir(tmp_path):  # what rank 0 of run_grid holds while its ranks' children run cells
        grid_runner._run_in_child(grid, "cell", cell, device_index=None)
    assert (cell.folder(grid) / "phase.json").is_file()


@pytest.mark.parametrize("settings", [{"finetune_max_steps": 20, "lr_scheduler_type": "constant"},  # 3 steps an epoch
                                      {"finetune_epochs": 40, "early_stopping_patience": 1}])
def test_a_kill_between_the_last_checkpoint_and_the_record_ends_as_the_uninterrupted_run(tmp_path, settings):
    def run(folder: Path) -> None:
        data_args, model_args, exp, training = tiny_arguments(folder, **SCRATCH,
                                                              **{k: v for k, v in settings.items() if k != "finetune_epochs"})
        exp.finetune_epochs = settings.get("finetune_epochs", exp.finetune_epochs)
        run_experiment(data_args, model_args, exp, training)

    run(tmp_path / "whole")
    whole = json.loads((tmp_path / "whole/scratch/phase.json").read_text())
    assert whole["steps"] == 20 if "finetune_max_steps" in settings else whole["epochs"] < 40  # it stopped early
    shutil.copytree(tmp_path / "whole", tmp_path / "killed")
    phase = tmp_path / "killed/scratch"
    for name in ("phase.json", "log_history.json", "model.safetensors"):  # killed after the last checkpoint
        (phase / name).unlink()
    (tmp_path / "killed/results.json").unlink()
    (phase / ".phase.json.0123456789abcdef.tmp").write_text('{"arm": "scr')  # and while writing its record
    run(tmp_path / "killed")
    resumed = json.loads((phase / "phase.json").read_text())
    assert {k: v for k, v in resumed.items() if k != "seconds"} == {k: v for k, v in whole.items() if k != "seconds"}
    assert (phase / "model.safetensors").read_bytes() == (tmp_path / "whole/scratch/model.safetensors").read_bytes()
    steps = [max(e["step"] for e in json.loads((folder / "log_history.json").read_text()))
             for folder in (phase, tmp_path / "whole/scratch")]
    assert steps[0] == steps[1] and not list((tmp_path / "killed").rglob("*.tmp"))
