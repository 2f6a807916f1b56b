"""End to end: run_spt.py's arguments, phases, outputs, resume and errors, on a tiny Markov task."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "run_scripts"))

from run_spt import main, parse_arguments  # noqa: E402

TINY = [
    "--task_options", '{"num_train": 96, "num_validation": 32, "num_test": 32, "length": 24}',
    "--hidden_size", "16", "--intermediate_size", "32", "--num_attention_heads", "2",
    "--spt_epochs", "2", "--finetune_epochs", "1", "--spt_batch_size", "16", "--finetune_batch_size", "16",
    "--trainer_options", '{"disable_tqdm": true}',
]


def run(argv):
    return main(*parse_arguments(argv))


def test_compare_run_writes_models_and_results_then_skips_finished_phases(tmp_path):
    results = run(TINY + ["--output_dir", str(tmp_path)])
    assert [arm["arm"] for arm in results["arms"]] == ["scratch", "spt"]
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["task"] == "markov" and written["world_size"] == 1
    for arm in written["arms"]:
        assert 0.0 <= arm["test_accuracy"] <= 1.0 and arm["seconds"] > 0
    assert "| spt |" in (tmp_path / "results.md").read_text()
    for phase in ("pretrain", "spt", "scratch"):
        for name in ("model.safetensors", "config.json", "tokenizer.json", "phase.json"):
            assert (tmp_path / phase / name).is_file(), f"{phase}/{name}"
    assert written["arms"][1]["init_from"] == str(tmp_path / "pretrain")

    stamp = (tmp_path / "spt" / "model.safetensors").stat().st_mtime_ns
    again = run(TINY + ["--output_dir", str(tmp_path)])
    assert (tmp_path / "spt" / "model.safetensors").stat().st_mtime_ns == stamp, "finished phases are not redone"
    assert again["arms"] == results["arms"]


def test_interrupted_phase_resumes_from_its_last_checkpoint(tmp_path):
    run(TINY + ["--output_dir", str(tmp_path), "--mode", "scratch"])
    scratch = tmp_path / "scratch"
    first_epoch = scratch / "checkpoint-6" / "model.safetensors"
    stamp = first_epoch.stat().st_mtime_ns
    (scratch / "phase.json").unlink()  # as if the run had stopped before the phase ended
    (scratch / "model.safetensors").unlink()
    run(TINY + ["--output_dir", str(tmp_path), "--mode", "scratch", "--finetune_epochs", "2"])
    assert first_epoch.stat().st_mtime_ns == stamp, "the first epoch was trained again instead of resumed"
    assert (scratch / "checkpoint-12").is_dir()
    history = json.loads((scratch / "log_history.json").read_text())
    assert [entry["epoch"] for entry in history if "eval_accuracy" in entry][:2] == [1.0, 2.0]


def test_config_file_sets_defaults_and_flags_override(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(f"output_dir: {tmp_path / 'out'}\nseed: 5\nfinetune_epochs: 9\n")
    data, model, experiment = parse_arguments(["--config_file", str(config), "--seed", "7"])
    assert (experiment.seed, experiment.finetune_epochs, experiment.output_dir) == (7, 9, str(tmp_path / "out"))
    config.write_text("sead: 5\n")
    with pytest.raises(ValueError, match="unknown settings \\['sead'\\]"):
        parse_arguments(["--config_file", str(config)])


def test_bad_input_fails_before_training_with_the_fix(tmp_path):
    with pytest.raises(ValueError, match="Unknown task 'imbd'"):
        run(["--task", "imbd", "--output_dir", str(tmp_path)])
    with pytest.raises(ValueError, match="Pass --truncation"):
        run(TINY + ["--output_dir", str(tmp_path), "--max_length", "10", "--mode", "scratch"])
    with pytest.raises(FileNotFoundError, match="holds no model checkpoint"):
        (tmp_path / "empty").mkdir()
        run(TINY + ["--output_dir", str(tmp_path), "--mode", "finetune", "--init_from", str(tmp_path / "empty")])
    with pytest.raises(ValueError, match="Unknown --mode"):
        parse_arguments(["--mode", "pretrain"])
    with pytest.raises(ValueError, match="must be a JSON object"):
        parse_arguments(["--task_options", "num_train=3"])


def test_truncation_when_asked(tmp_path):
    results = run(TINY + ["--output_dir", str(tmp_path), "--max_length", "10", "--truncation", "--mode", "scratch"])
    assert results["model"]["max_position_embeddings"] == 10


def test_two_gloo_ranks_really_run(tmp_path):
    """`--multi_gpu --num_processes 2` with use_cpu starts two CPU processes (`--cpu` alone starts one)."""
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
               "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
               str(ROOT / "run_scripts" / "run_spt.py"), *TINY, "--mode", "scratch", "--output_dir", str(tmp_path)]
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["world_size"] == 2
    state = json.loads(sorted((tmp_path / "scratch").glob("checkpoint-*"))[-1].joinpath("trainer_state.json").read_text())
    assert state["global_step"] == 3, "96 examples / (16 per device x 2 ranks) = 3 steps per epoch"
