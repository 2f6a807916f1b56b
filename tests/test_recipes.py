"""Recipes give defaults; the config file and explicit flags win over them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from hf_spt.experiments.recipes import recipe_settings

RUN_SPT = Path(__file__).parents[1] / "run_scripts" / "run_spt.py"


def parse(argv):
    spec = importlib.util.spec_from_file_location("run_spt", RUN_SPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.parse_arguments(argv)


def test_balestriero_huang_under_explicit_flags(tmp_path):
    _, model, exp = parse(["--recipe", "balestriero_huang", "--finetune_batch_size", "32"])
    assert exp.optim == "adafactor" and exp.lr_scheduler_type == "cosine" and exp.warmup_steps == 0.05
    assert exp.finetune_max_steps == 10_000 and exp.spt_batch_size == 8 and model.pooling == "last_mean"
    assert exp.finetune_batch_size == 32  # the flag wins
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"recipe": "balestriero_huang", "optim": "adamw_torch"}))
    _, _, exp = parse(["--config_file", str(config)])
    assert exp.optim == "adamw_torch" and exp.lr_scheduler_type == "cosine"  # the file wins over the recipe


def test_amos_lra_per_task():
    assert recipe_settings("amos_lra", "lra_image")["mlm_probability"] == 0.5
    listops = recipe_settings("amos_lra", "listops")
    assert listops["mlm_probability"] == 0.1 and listops["intermediate_size"] == 2048 and listops["max_length"] == 2048
    assert recipe_settings("amos_lra", "retrieval")["hidden_size"] == 128
    with pytest.raises(ValueError, match="not for task 'markov'"):
        parse(["--recipe", "amos_lra"])
    with pytest.raises(ValueError, match="Unknown --recipe"):
        recipe_settings("nope", "markov")
