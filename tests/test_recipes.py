"""Recipes are settings files (shipped or the user's) giving defaults; the config file and explicit flags win."""

from __future__ import annotations

import json

import pytest

from hf_spt.errors import MissingInputError, UserInputError
from hf_spt.experiments.recipes import RECIPES
from hf_spt.experiments.run_spec import resolve_run
from hf_spt.experiments.settings_files import read_recipe, recipe_settings
from hf_spt.scripts.run_spt import parse_arguments as parse
from hf_spt.tasks import task_preset


def test_balestriero_huang_under_explicit_flags(tmp_path):
    groups = parse(["--recipe", "balestriero_huang", "--finetune_batch_size", "32"])
    _, model, exp, training = groups
    run = resolve_run(*groups)
    assert training.optim == "adafactor" and training.lr_scheduler_type == "cosine" and training.warmup_steps == 0.05
    assert run.finetune.max_steps == 10_000 and model.pooling == "last_mean" == run.model.pooling
    assert run.pretrain.batch_size == 8
    assert run.finetune.batch_size == 32  # the flag wins
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"recipe": "balestriero_huang", "optim": "adamw_torch"}))
    _, _, exp, training = parse(["--config_file", str(config)])
    assert training.optim == "adamw_torch" and training.lr_scheduler_type == "cosine"  # the file wins over the recipe


def test_a_generic_flag_beats_the_recipes_per_phase_value():
    run = resolve_run(*parse(["--recipe", "amos_lra", "--task", "image", "--num_train_epochs", "3"]))
    assert run.pretrain.epochs == 3  # not the recipe's 200 pretraining epochs
    run = resolve_run(*parse(["--recipe", "amos_lra", "--task", "image"]))
    assert run.pretrain.epochs == 200 and run.finetune.epochs == 4


def test_shipped_recipes_are_files_with_the_published_values():
    assert RECIPES == ("amos_lra", "balestriero_huang")
    assert recipe_settings("balestriero_huang", "anything") == {
        "optim": "adafactor", "lr_scheduler_type": "cosine", "warmup_steps": 0.05, "per_device_train_batch_size": 8,
        "max_steps": 10_000, "pooling": "last_mean"}
    assert recipe_settings("amos_lra", "LRA-Text") == {
        "optim": "adamw_torch", "learning_rate": 1e-3, "pretrain_epochs": 200, "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0, "pooling": "mean", "mlm_probability": 0.15,
        "per_device_train_batch_size": 32, "max_length": 4096, "num_hidden_layers": 6, "hidden_size": 512,
        "num_attention_heads": 8, "intermediate_size": 2048}
    pathfinder = recipe_settings("amos_lra", "pathfinder")
    assert (pathfinder["num_attention_heads"], pathfinder["intermediate_size"], pathfinder["max_length"]) == (8, 128, 1024)
    assert isinstance(pathfinder["learning_rate"], float)  # 0.001 in the file: YAML reads `1e-3` as text


def test_amos_lra_per_task():
    assert recipe_settings("amos_lra", "lra_image")["mlm_probability"] == 0.5
    listops = recipe_settings("amos_lra", "listops")
    assert listops["mlm_probability"] == 0.1 and listops["intermediate_size"] == 2048 and listops["max_length"] == 2048
    assert recipe_settings("amos_lra", "retrieval")["hidden_size"] == 128
    with pytest.raises(ValueError, match="not for task 'markov'"):
        parse(["--recipe", "amos_lra"])
    with pytest.raises(ValueError, match="Unknown --recipe"):
        recipe_settings("nope", "markov")


def test_a_user_recipe_file_with_per_task_settings(tmp_path):
    recipe = tmp_path / "mine.yaml"
    recipe.write_text("optim: adafactor\npretrain_epochs: 3\ntasks:\n  markov: {mlm_probability: 0.3}\n"
                      "  LRA-ListOps: {hidden_size: 32}\n")
    assert recipe_settings(str(recipe), "markov") == {"optim": "adafactor", "pretrain_epochs": 3, "mlm_probability": 0.3}
    assert recipe_settings(str(recipe), "lra_listops")["hidden_size"] == 32
    _, _, exp, training = parse(["--recipe", str(recipe), "--pretrain_epochs", "2"])
    assert training.optim == "adafactor" and exp.mlm_probability == 0.3 and exp.pretrain_epochs == 2
    with pytest.raises(UserInputError, match=r"has settings for the tasks markov, listops, not for task 'image': use "
                                             r"the task's own preset \(no --recipe\) or a recipe for every task "
                                             r"\(--recipe balestriero_huang\)"):
        recipe_settings(str(recipe), "image")
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"max_steps": 7}))
    assert parse(["--recipe", str(plain)])[3].max_steps == 7


@pytest.mark.parametrize("name, text, error, message", [
    ("nope", None, UserInputError, r"Unknown --recipe 'nope'; name a shipped recipe \(amos_lra, balestriero_huang\) "
                                   r"or a recipe file \(.yaml/.yml/.json\)"),
    ("absent.yaml", None, MissingInputError, r"--recipe absent.yaml: no such file; name a shipped recipe \(amos_lra"),
    ("bad.yaml", "optim: [adafactor\n", UserInputError, r"--recipe .*bad.yaml is not valid YAML"),
    ("list.yaml", "- optim\n", UserInputError, r"list.yaml: expected a mapping of setting names to values, not list"),
    ("key.yaml", "optimiser: adafactor\n", UserInputError, r"key.yaml: unknown settings \['optimiser'\]; run with --help"),
    ("task_key.json", '{"tasks": {"markov": {"hiden_size": 8}}}', UserInputError,
     r"task_key.json, tasks: markov: unknown settings \['hiden_size'\]"),
    ("tasks.yaml", "tasks: [markov]\n", UserInputError, r"tasks.yaml: tasks: is a mapping of task name -> settings, not list"),
    ("type.yaml", "seed: [1, 2]\n", UserInputError, r"type.yaml: seed: \[1, 2\] does not fit --seed, which takes a whole"),
])
def test_recipe_errors_name_the_problem_and_the_fix(tmp_path, name, text, error, message):
    if text is not None:
        (tmp_path / name).write_text(text)
    with pytest.raises(error, match=message):
        recipe_settings(name if text is None else str(tmp_path / name), "markov")


def test_amos_lra_file_agrees_with_the_task_presets_where_its_header_says_so():
    """The file writes out each task's preset values; only ListOps's length differs (2048 positions, the preset 2000)."""
    _, tasks = read_recipe("amos_lra")
    assert set(tasks) == {"listops", "text", "retrieval", "image", "pathfinder"}
    for task, settings in tasks.items():
        preset = task_preset(task)
        expected = {"mlm_probability": preset.mlm_probability, "per_device_train_batch_size": preset.batch_size,
                    "max_length": 2048 if task == "listops" else preset.max_length,
                    **{name: preset.model[name] for name in ("num_hidden_layers", "hidden_size", "num_attention_heads",
                                                             "intermediate_size")}}
        assert settings == expected, task
