"""Settings that would train on nothing or crash mid-run stop before training, with one line naming the setting,
the value and the fix (issue 20, items 7 and 10)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import MISSING, fields
from pathlib import Path

import pytest
from tiny_backbone_runs import tiny_arguments, tiny_run

from hf_spt.errors import UserInputError
from hf_spt.experiments.arguments import ARGUMENT_GROUPS
from hf_spt.experiments.command_line import parse_arguments
from hf_spt.experiments.settings_files import check_setting_types, read_recipe, recipe_settings
from hf_spt.experiments.model_config import build_config
from hf_spt.experiments.pipeline import prepare_task, run_experiment
from hf_spt.training.arguments import PretrainArguments
from hf_spt.training.model_factory import pretraining_model
from hf_spt.training.pretrain_trainer import PretrainTrainer

ROOT = Path(__file__).resolve().parents[1]


def test_a_masking_rate_that_masks_nothing_stops_before_training(tmp_path):
    """--mlm_probability 1e-5 on 48 rows of 16 tokens: no masked token in a batch nor in the validation masking
    (before: loss 0.0, grad norm 0, eval_loss NaN recorded)."""
    with pytest.raises(UserInputError, match=r"--mlm_probability 1e-05 masks next to nothing: about 0.0051 masked "
                                             r"tokens per training batch of 32 rows, and the fixed validation masking "
                                             r"holds 0 masked tokens.*eval_loss NaN.*0.1 to 0.5"):
        run_experiment(*tiny_arguments(tmp_path, mode="spt", mlm_probability=1e-5))
    assert not list((tmp_path / "pretrain").glob("checkpoint-*"))
    assert not (tmp_path / "pretrain" / "phase.json").exists()


def test_a_masking_rate_with_empty_training_batches_is_refused_even_when_validation_has_masks(tmp_path):
    """0.01 of 16-token rows in batches of 2: 0.32 masked tokens a batch (most batches empty), though the 16
    validation rows' fixed masking holds some; 0.05 in batches of 2 (1.6 a batch) trains."""
    run = tiny_run(tmp_path)
    task = prepare_task(run.task, seed=0)
    model = pretraining_model(build_config(task, run.model), "masked")

    def trainer(rate: float) -> PretrainTrainer:
        args = PretrainArguments(output_dir=str(tmp_path), per_device_train_batch_size=2, mlm_probability=rate,
                                 report_to="none", use_cpu=True)
        return PretrainTrainer(model, args, task.dataset["train"], task.dataset["validation"],
                               processing_class=task.tokenizer)

    with pytest.raises(UserInputError, match=r"--mlm_probability 0.01 .* about 0.32 masked tokens per training batch "
                                             r"of 2 rows, and the fixed validation masking holds [1-9]\d* masked"):
        trainer(0.01)
    assert (trainer(0.05).eval_dataset["labels"] is not None)


@pytest.mark.parametrize("text, message", [
    ("seed: [1, 2]\n", "seed: [1, 2] does not fit --seed, which takes a whole number."),
    ("hidden_size: 32.5\n", "hidden_size: 32.5 does not fit --hidden_size, which takes a whole number or null."),
    ("truncation: 1\nreport_to: [none, 3]\n", "truncation: 1 does not fit --truncation, which takes true or false; "
                                              "report_to: ['none', 3] does not fit --report_to"),
    ('{"task_options": [10], "pretrain_epochs": true}', "task_options: [10] does not fit --task_options, which "
                                                        "takes a mapping or text or null; pretrain_epochs: True"),
])
def test_config_file_values_of_the_wrong_type_are_errors_naming_key_value_and_type(tmp_path, text, message):
    config = tmp_path / ("run.json" if text.startswith("{") else "run.yaml")
    config.write_text(text)
    with pytest.raises(UserInputError) as error:
        parse_arguments(["--config_file", str(config)])
    assert str(error.value).startswith(f"{config}: {message}")


@pytest.mark.parametrize("written, spellings", [("1e-3", ("1.0e-3", "0.001")), ("2E5", ("2.0e+5", "200000")),
                                                ("1.5e4", ("1.5e+4", "15000"))])
def test_a_grid_number_yaml_reads_as_text_says_so_and_how_to_write_it(tmp_path, written, spellings):
    """Issue 54: a grid's `learning_rate: 1e-3` was refused as text without saying why: YAML 1.1 (PyYAML) reads a
    number in exponent form as text unless it has a dot and a signed exponent. The message says so, and both
    spellings it suggests read as that number."""
    import yaml

    from hf_spt.experiments.suites.grid import load_grid

    grid = tmp_path / "grid.yaml"
    grid.write_text(f"tasks: {{markov: {{task: markov}}}}\nseeds: [0]\narms: [{{name: scratch}}]\n"
                    f"experiment: {{learning_rate: {written}}}\n")
    with pytest.raises(UserInputError) as error:
        load_grid(grid)
    assert (f"learning_rate: '{written}' does not fit learning_rate, which takes a number or null (YAML 1.1 reads "
            f"{written} as text" in str(error.value)), error.value
    assert f"write {spellings[0]} or {spellings[1]})" in str(error.value), error.value
    assert all(yaml.safe_load(spelling) == float(written) for spelling in spellings)


def test_run_spt_config_file_of_the_wrong_type_exits_2_in_one_line_before_any_work(tmp_path):
    """Before: `seed: [1, 2]` a TypeError inside fine-tuning, after its phase definition was written (which then
    blocked the corrected re-run); `hidden_size: 32.5` a validation traceback."""
    (tmp_path / "run.yaml").write_text("seed: [1, 2]\nhidden_size: 32.5\n")
    command = [sys.executable, str(ROOT / "run_scripts" / "run_spt.py"), "--output_dir", str(tmp_path / "run"),
               "--config_file", str(tmp_path / "run.yaml")]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120,
                               env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"})
    assert completed.returncode == 2 and "Traceback" not in completed.stderr
    assert completed.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'run.yaml'}: seed: [1, 2] does not fit --seed, which takes a whole number; hidden_size: "
        "32.5 does not fit --hidden_size, which takes a whole number or null."]
    assert not (tmp_path / "run").exists()


def test_every_valid_setting_passes_the_type_check(tmp_path):
    """The defaults of every flag, the recipes' settings, text (read as the flag typed) and mappings for the JSON
    options pass; the file's values reach the run."""
    defaults = {f.name: f.default for group in ARGUMENT_GROUPS for f in fields(group)
                if f.default is not MISSING and not isinstance(f.default, str)}
    check_setting_types(defaults, "defaults")
    for task in read_recipe("amos_lra")[1]:
        check_setting_types(recipe_settings("amos_lra", task), "amos_lra")
    check_setting_types(recipe_settings("balestriero_huang", "markov"), "balestriero_huang")
    settings = {"seed": 3, "learning_rate": 1, "warmup_steps": 10, "hidden_size": "32", "num_train_epochs": "1e-3",
                "task_options": {"num_train": 10}, "report_to": ["none"], "lr_scheduler_type": "cosine",
                "model_name_or_path": None, "truncation": True}
    (tmp_path / "run.json").write_text(json.dumps(settings))
    data, model, _, training = parse_arguments(["--config_file", str(tmp_path / "run.json")])
    assert (training.seed, training.learning_rate, model.hidden_size, training.num_train_epochs) == (3, 1, 32, 1e-3)
    assert data.task_options == {"num_train": 10} and data.truncation
