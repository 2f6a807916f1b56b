"""End to end: run_spt.py's arguments, phases, outputs, resume and errors, on a tiny Markov task."""

import json
import logging
import os
import shutil
import subprocess
import sys
import warnings
from dataclasses import fields
from pathlib import Path

import pytest
import torch
from gloo_launch import gloo_launcher

from hf_spt.experiments.arguments import FINETUNE_FLAGS, PRETRAIN_FLAGS, ExperimentArguments
from hf_spt.errors import UserInputError
from hf_spt.experiments.command_line import build_parser, given_flags
from hf_spt.scripts import run_spt
from hf_spt.scripts.run_spt import parse_arguments

ROOT = Path(__file__).resolve().parents[1]

TINY = [
    "--task_options", '{"num_train": 96, "num_validation": 32, "num_test": 32, "length": 24}',
    "--hidden_size", "16", "--intermediate_size", "32", "--num_attention_heads", "2",
    "--finetune_epochs", "1", "--per_device_train_batch_size", "16", "--disable_tqdm", "true",
]
PRETRAIN = ["--pretrain_epochs", "2"]  # only runs that pretrain may set it


def run(argv):
    return run_spt.run(*parse_arguments(argv))


def test_compare_run_writes_models_and_results_then_skips_finished_phases(tmp_path):
    results = run(TINY + PRETRAIN + ["--output_dir", str(tmp_path)])
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
    again = run(TINY + PRETRAIN + ["--output_dir", str(tmp_path)])
    assert (tmp_path / "spt" / "model.safetensors").stat().st_mtime_ns == stamp, "finished phases are not redone"
    assert again["arms"] == results["arms"]


def test_interrupted_phase_resumes_from_its_last_checkpoint(tmp_path):
    argv = TINY + ["--output_dir", str(tmp_path), "--mode", "scratch", "--finetune_epochs", "2"]
    run(argv)
    scratch = tmp_path / "scratch"
    first_epoch = scratch / "checkpoint-6" / "model.safetensors"
    stamp = first_epoch.stat().st_mtime_ns
    (scratch / "phase.json").unlink()  # as if the run had stopped after its first epoch
    (scratch / "model.safetensors").unlink()
    shutil.rmtree(scratch / "checkpoint-12")
    run(argv)
    assert first_epoch.stat().st_mtime_ns == stamp, "the first epoch was trained again instead of resumed"
    assert (scratch / "checkpoint-12").is_dir()
    history = json.loads((scratch / "log_history.json").read_text())
    assert [entry["epoch"] for entry in history if "eval_accuracy" in entry][:2] == [1.0, 2.0]


def test_config_file_sets_defaults_and_flags_override(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(f"output_dir: {tmp_path / 'out'}\nseed: 5\nfinetune_epochs: 9\n")
    data, model, experiment, training = parse_arguments(["--config_file", str(config), "--seed", "7"])
    assert (training.seed, experiment.finetune_epochs, training.output_dir) == (7, 9, str(tmp_path / "out"))
    config.write_text("sead: 5\nbf16: true\n")
    with pytest.raises(ValueError, match="unknown settings \\['sead'\\]"):
        parse_arguments(["--config_file", str(config)])
    json_config = tmp_path / "run.json"  # TrainingArguments' names too, in JSON
    json_config.write_text(json.dumps({"gradient_accumulation_steps": 4, "pretrain_max_steps": 3}))
    _, _, experiment, training = parse_arguments(["--config_file", str(json_config), "--max_steps", "5"])
    assert training.gradient_accumulation_steps == 4 and training.max_steps == 5
    assert experiment.pretrain_max_steps is None, "the flag's generic --max_steps beats the file's per-phase value"


def test_bad_input_fails_before_training_with_the_fix(tmp_path):
    with pytest.raises(ValueError, match="Unknown task 'imbd'"):
        run(["--task", "imbd", "--output_dir", str(tmp_path)])
    with pytest.raises(ValueError, match="Pass --truncation"):
        run(TINY + ["--output_dir", str(tmp_path), "--max_length", "10", "--mode", "scratch"])
    with pytest.raises(FileNotFoundError, match="holds no model checkpoint"):
        (tmp_path / "empty").mkdir()
        run(TINY + ["--output_dir", str(tmp_path), "--mode", "finetune", "--init_from", str(tmp_path / "empty")])
    with pytest.raises(ValueError, match="--mode 'pretrain': must be one of compare, spt"):
        parse_arguments(["--mode", "pretrain"])
    with pytest.raises(ValueError, match="must be a JSON object"):
        parse_arguments(["--task_options", "num_train=3"])


def test_truncation_when_asked(tmp_path):
    results = run(TINY + ["--output_dir", str(tmp_path), "--max_length", "10", "--truncation", "--mode", "scratch"])
    assert results["model"]["max_position_embeddings"] == 10


def test_two_gloo_ranks_really_run(tmp_path):
    """`--multi_gpu --num_processes 2` with use_cpu starts two CPU processes (`--cpu` alone starts one)."""
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, *gloo_launcher(2), str(ROOT / "run_scripts" / "run_spt.py"), *TINY, "--mode", "scratch",
               "--output_dir", str(tmp_path)]
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["world_size"] == 2
    state = json.loads(sorted((tmp_path / "scratch").glob("checkpoint-*"))[-1].joinpath("trainer_state.json").read_text())
    assert state["global_step"] == 3, "96 examples / (16 per device x 2 ranks) = 3 steps per epoch"


def phase_arguments_of(argv, tmp_path):
    """The Trainer arguments both phases would get from `argv` (built as the pipeline builds them)."""
    from hf_spt.experiments.phase_arguments import finetune_arguments, pretrain_arguments
    from hf_spt.experiments.pipeline import prepare_task
    from hf_spt.experiments.run_spec import resolve_run

    spec = resolve_run(*parse_arguments(argv))
    task = prepare_task(spec.task, spec.seed)
    return (pretrain_arguments(task, spec.pretrain, tmp_path / "pretrain"),
            finetune_arguments(task, spec.finetune, tmp_path / "spt", task.preset.num_labels))


def test_training_arguments_flags_reach_both_phases_and_per_phase_flags_win(tmp_path):
    shared = ["--gradient_accumulation_steps", "2", "--logging_steps", "3", "--save_total_limit", "1",
              "--lr_scheduler_type", "cosine", "--report_to", "none"]
    pretrain, finetune = phase_arguments_of(TINY + PRETRAIN + shared + ["--learning_rate", "5e-4", "--finetune_learning_rate",
                                                               "1e-4", "--max_steps", "7"], tmp_path)
    for args in (pretrain, finetune):
        assert (args.gradient_accumulation_steps, args.logging_steps, args.save_total_limit) == (2, 3, 1)
        assert args.lr_scheduler_type == "cosine" and args.max_steps == 7 and args.seed == 0
        assert args.load_best_model_at_end and args.eval_strategy == "epoch", "each phase keeps its own defaults"
    assert (pretrain.learning_rate, finetune.learning_rate) == (5e-4, 1e-4)
    assert (pretrain.num_train_epochs, finetune.num_train_epochs) == (2, 1)
    assert pretrain.output_dir == str(tmp_path / "pretrain") and finetune.output_dir == str(tmp_path / "spt")
    pretrain, finetune = phase_arguments_of(["--task_options", TINY[1]], tmp_path)  # our defaults, not transformers'
    assert (pretrain.learning_rate, pretrain.num_train_epochs, finetune.num_train_epochs) == (1e-3, 25, 4)
    assert (pretrain.per_device_train_batch_size, pretrain.optim, pretrain.warmup_steps) == (32, "adamw_torch", 0.1)
    assert pretrain.save_total_limit == 2 and finetune.metric_for_best_model == "accuracy"


def test_the_best_model_metric_is_fine_tunings_and_pretraining_keeps_its_loss(tmp_path):
    """`--metric_for_best_model macro_f1` picks fine-tuning's checkpoint; pretraining, which reports no classification
    metric, keeps its lowest eval_loss (before: it failed after its first evaluation, an epoch lost)."""
    pretrain, finetune = phase_arguments_of(TINY + PRETRAIN + ["--metric_for_best_model", "macro_f1"], tmp_path)
    assert (pretrain.metric_for_best_model, pretrain.greater_is_better) == ("eval_loss", False)
    assert (finetune.metric_for_best_model, finetune.greater_is_better) == ("macro_f1", True)
    results = run(TINY + ["--pretrain_epochs", "1", "--output_dir", str(tmp_path / "run"), "--metric_for_best_model",
                          "macro_f1", "--early_stopping_patience", "1"])
    assert {arm["arm"] for arm in results["arms"]} == {"spt", "scratch"}
    with pytest.raises(UserInputError, match="--metric_for_best_model: only fine-tuning reads it"):
        parse_arguments(["--mode", "spt", "--metric_for_best_model", "macro_f1"])
    with pytest.raises(UserInputError, match="must be one of accuracy, macro_f1, loss"):
        run(TINY + ["--mode", "scratch", "--metric_for_best_model", "f1", "--output_dir", str(tmp_path / "bad")])


def test_test_evaluation_does_not_trip_early_stopping(tmp_path):
    """Early stopping ends with training: the test evaluation (test_* metrics) made transformers' callback warn that
    it found no eval_accuracy and was disabled, as if early stopping had been off."""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    callback_logger = logging.getLogger("transformers.trainer_callback")
    callback_logger.addHandler(handler)
    try:
        results = run(TINY + ["--mode", "scratch", "--output_dir", str(tmp_path), "--early_stopping_patience", "1"])
    finally:
        callback_logger.removeHandler(handler)
    assert results["arms"][0]["test_accuracy"] is not None
    assert not [record for record in records if "early stopping" in record.getMessage()]


def test_max_steps_bounds_both_phases(tmp_path):
    results = run(TINY + PRETRAIN + ["--output_dir", str(tmp_path), "--max_steps", "2", "--save_total_limit", "1"])
    for phase in ("pretrain", "spt", "scratch"):
        history = json.loads((tmp_path / phase / "log_history.json").read_text())
        assert max(entry["step"] for entry in history) == 2, phase
    assert results["training"]["max_steps"] == 2


def test_overwrite_output_dir_retrains_finished_phases(tmp_path):
    argv = TINY + ["--output_dir", str(tmp_path), "--mode", "scratch"]
    run(argv)
    stamp = (tmp_path / "scratch" / "model.safetensors").stat().st_mtime_ns
    run(argv + ["--overwrite_output_dir"])
    assert (tmp_path / "scratch" / "model.safetensors").stat().st_mtime_ns != stamp


def test_help_groups_the_flags(capsys):
    with pytest.raises(SystemExit):
        parse_arguments(["--help"])
    output = capsys.readouterr().out
    text = output[output.index("\nData:"):]  # the groups, after the usage line
    groups = ["Data:", "Model:", "Experiment: the mode, each phase's settings, LoRA:",
              "Both phases (transformers TrainingArguments):"]
    positions = [text.index(group) for group in groups]
    assert positions == sorted(positions)
    assert positions[2] < text.index("--pretrain_epochs") < text.index("--finetune_epochs") < positions[3]
    assert text.index("--gradient_accumulation_steps") > positions[3] and "--config_file" in output


def test_phase_settings_partition_the_experiment_arguments():
    """Each experiment setting is read by one phase, or by the run as a whole (the unread-flag check relies on it)."""
    names = [spec.name for spec in fields(ExperimentArguments)]
    assert not set(PRETRAIN_FLAGS) & set(FINETUNE_FLAGS)
    assert set(PRETRAIN_FLAGS) | set(FINETUNE_FLAGS) == set(names) - {"mode", "recipe", "log_proximity",
                                                                            "proximity_every_n_steps",
                                                                            "portable_numerics"}


def test_given_flags_are_what_was_typed():
    """Typed values count, even when they equal a default; defaults of what was not typed do not."""
    flags = given_flags(build_parser(), ["--seed", "0", "--mode=scratch", "--no_remove_unused_columns", "--bf16", "false"])
    assert flags == {"seed": 0, "mode": "scratch", "remove_unused_columns": False, "bf16": False}


@pytest.mark.parametrize("argv, message", [
    (["--mode", "scratch", "--pretrain_epochs", "3"], "--pretrain_epochs: only the pretraining phase reads it"),
    (["--mode", "finetune", "--mlm_probability", "0.3"], "--mlm_probability: only the pretraining phase"),
    (["--mode", "spt", "--class_weighting", "balanced"], "--class_weighting: only fine-tuning reads it"),
    (["--mode", "spt", "--finetune_epochs", "3"], "--finetune_epochs: only fine-tuning reads it"),
    (["--mode", "scratch", "--init_from", "x"], "--init_from: --mode scratch starts from random weights"),
    (["--learning_rate", "1e-3", "--pretrain_learning_rate", "1e-3", "--finetune_learning_rate", "1e-4"],
     "--learning_rate: --pretrain_learning_rate and --finetune_learning_rate set every phase"),
    (["--mode", "scratch", "--max_steps", "5", "--finetune_max_steps", "3"], "--max_steps: --finetune_max_steps"),
    (["--train_file", "x.csv"], "--train_file: only --task custom reads it"),
    (["--hub_model_id", "me/x"], "--hub_model_id: it is read only with --push_to_hub"),
    (["--proximity_every_n_steps", "5"], "it is read only with --log_proximity"),
])
def test_a_given_flag_the_run_does_not_read_is_an_error(argv, message):
    with pytest.raises(ValueError, match=message.replace("(", "\\(")):
        parse_arguments(argv)


def test_unread_setting_in_a_config_file_is_an_error_too(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("mode: spt\nfinetune_learning_rate: 0.01\n")
    with pytest.raises(ValueError, match="--finetune_learning_rate: only fine-tuning reads it"):
        parse_arguments(["--config_file", str(config)])


def test_device_defaults_on_a_cpu_and_on_an_accelerator(tmp_path, monkeypatch):
    """Pinned memory, non-blocking copies and widths a multiple of 8 on an accelerator only; a flag given wins."""
    import hf_spt.training.arguments as training_arguments

    for on_cpu in phase_arguments_of(TINY, tmp_path):
        assert (on_cpu.dataloader_pin_memory, on_cpu.pad_to_multiple_of, on_cpu.accelerator_config.non_blocking) == (
            False, None, False)
    monkeypatch.setattr(training_arguments, "accelerator_available", lambda args: True)
    for on_accelerator in phase_arguments_of(TINY, tmp_path):
        assert (on_accelerator.dataloader_pin_memory, on_accelerator.pad_to_multiple_of,
                on_accelerator.accelerator_config.non_blocking) == (True, 8, True)
    for given in phase_arguments_of(TINY + ["--pad_to_multiple_of", "64", "--dataloader_pin_memory", "false"],
                                    tmp_path):
        assert (given.dataloader_pin_memory, given.pad_to_multiple_of) == (False, 64)


def test_no_pin_memory_warning_without_an_accelerator(tmp_path):
    if torch.accelerator.is_available():
        pytest.skip("an accelerator pins memory")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(TINY + ["--output_dir", str(tmp_path), "--mode", "scratch"])
    assert not [w for w in caught if "pin_memory" in str(w.message)]
    assert not [w for w in caught if "hf_spt" in w.filename or "run_spt" in w.filename], "the package's own warnings"


def test_any_width_multiple_trains_on_short_custom_data_and_one_past_the_positions_is_refused(tmp_path):
    """The GPU's default multiple (8) made explicit on a CPU: custom rows of up to 23 tokens size the model at 23
    positions, and batches padded to 24 failed at the first step; widths now stop at the positions."""
    import pandas as pd

    texts = [("ab" * 12)[: 12 + k % 12] for k in range(24)]  # 12 to 23 bytes
    pd.DataFrame({"text": texts, "label": [k % 2 for k in range(24)]}).to_csv(tmp_path / "train.csv", index=False)
    argv = ["--task", "custom", "--train_file", str(tmp_path / "train.csv"), "--output_dir", str(tmp_path / "run"),
            "--task_options", f'{{"cache_dir": "{tmp_path / "cache"}"}}', "--report_to", "none", "--use_cpu",
            "--hidden_size", "16", "--intermediate_size", "32", "--num_attention_heads", "2", "--num_hidden_layers",
            "1", "--pretrain_epochs", "1", "--finetune_epochs", "1", "--disable_tqdm", "true"]
    results = run(argv + ["--pad_to_multiple_of", "8"])
    assert results["model"]["max_position_embeddings"] == 23 and {arm["arm"] for arm in results["arms"]} == {
        "scratch", "spt"}
    with pytest.raises(UserInputError, match="--pad_to_multiple_of 4096 is larger than the model's 23 positions"):
        run(argv + ["--pad_to_multiple_of", "4096", "--overwrite_output_dir"])
