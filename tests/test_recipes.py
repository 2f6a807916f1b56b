"""Recipes give defaults; the config file and explicit flags win over them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from hf_spt.experiments.recipes import recipe_settings
from hf_spt.tasks import task_preset

RUN_SPT = Path(__file__).parents[1] / "run_scripts" / "run_spt.py"


def parse(argv):
    spec = importlib.util.spec_from_file_location("run_spt", RUN_SPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.parse_arguments(argv)


def test_balestriero_huang_under_explicit_flags(tmp_path):
    _, model, exp, training = parse(["--recipe", "balestriero_huang", "--finetune_batch_size", "32"])
    assert training.optim == "adafactor" and training.lr_scheduler_type == "cosine" and training.warmup_steps == 0.05
    assert exp.phase_setting(training, "finetune", "max_steps") == 10_000 and model.pooling == "last_mean"
    assert exp.phase_setting(training, "pretrain", "batch_size") == 8
    assert exp.phase_setting(training, "finetune", "batch_size") == 32  # the flag wins
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"recipe": "balestriero_huang", "optim": "adamw_torch"}))
    _, _, exp, training = parse(["--config_file", str(config)])
    assert training.optim == "adamw_torch" and training.lr_scheduler_type == "cosine"  # the file wins over the recipe


def test_a_generic_flag_beats_the_recipes_per_phase_value():
    _, _, exp, training = parse(["--recipe", "amos_lra", "--task", "image", "--num_train_epochs", "3"])
    assert exp.phase_setting(training, "pretrain", "epochs") == 3  # not the recipe's 200 pretraining epochs
    _, _, exp, training = parse(["--recipe", "amos_lra", "--task", "image"])
    assert exp.phase_setting(training, "pretrain", "epochs") == 200 and exp.phase_setting(training, "finetune", "epochs") == 4


def test_amos_lra_reads_the_registered_presets():
    image = task_preset("image")
    settings = recipe_settings("amos_lra", "image")
    assert (settings["mlm_probability"], settings["per_device_train_batch_size"], settings["hidden_size"]) == (
        image.mlm_probability, image.batch_size, image.model["hidden_size"])


def test_amos_lra_per_task():
    assert recipe_settings("amos_lra", "lra_image")["mlm_probability"] == 0.5
    listops = recipe_settings("amos_lra", "listops")
    assert listops["mlm_probability"] == 0.1 and listops["intermediate_size"] == 2048 and listops["max_length"] == 2048
    assert recipe_settings("amos_lra", "retrieval")["hidden_size"] == 128
    with pytest.raises(ValueError, match="not for task 'markov'"):
        parse(["--recipe", "amos_lra"])
    with pytest.raises(ValueError, match="Unknown --recipe"):
        recipe_settings("nope", "markov")
