"""Every value a user can get wrong, by flag or by settings file, is a one-line error naming it, with exit status 2,
before any data is built (issue: one schema). One table drives all of them: `run_spt.py` flags, grid and study
files (through `run_budget_study.py --dry_run` and `run_ablation.py`), recipes and config files, and the suite
scripts' own flags."""

from __future__ import annotations

import importlib

import pytest
import yaml

import hf_spt.experiments.pipeline as pipeline
import hf_spt.experiments.suites.grid_runner as grid_runner
from hf_spt.experiments.exit_status import USER_ERROR_STATUS
from hf_spt.scripts import run_spt
TINY = {"num_train": 16, "num_validation": 8, "num_test": 8, "length": 12}

STUDY = {"output_dir": "OUT", "seeds": [0], "tasks": {"m": {"task": "markov", "task_options": TINY}},
         "model": {"num_hidden_layers": 1, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 32},
         "experiment": {"finetune_epochs": 1, "report_to": "none"},
         "arms": [{"name": "scratch"}, {"name": "spt_e1", "pretrain_epochs": 1},
                  {"name": "scratch_compute_matched_e1", "compute_matched": True, "pretrain_epochs": 1}]}


def exit_line(main, argv: list[str], capsys) -> tuple[int, str]:
    """(exit status, stderr) of a command's `main` on `argv`."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    return exit_info.value.code, capsys.readouterr().err


@pytest.fixture
def no_data(monkeypatch):
    """Building any data set fails the test: every probe must stop before."""
    def refuse(*args, **kwargs):
        pytest.fail("a data set was built before the bad value was refused")
    monkeypatch.setattr(pipeline, "load_task", refuse)
    monkeypatch.setattr(grid_runner, "prepare_task", refuse)


def script_main(name: str):
    """The `main` of the command `hf_spt.scripts.<name>`."""
    return importlib.import_module(f"hf_spt.scripts.{name}").main


FLAG_PROBES = [  # run_spt.py flags: (argv, words the message must hold)
    (["--hidden_size", "30", "--num_attention_heads", "4"], "--hidden_size 30"),
    (["--position_embedding_type", "foo"], "--position_embedding_type 'foo'"),
    (["--pooling", "foo"], "--pooling 'foo'"),
    (["--attn_implementation", "foo"], "--attn_implementation 'foo'"),
    (["--model_type", "nosuch"], "--model_type 'nosuch'"),
    (["--eval_strategy", "no"], "Evaluation strategy: IntervalStrategy.NO"),
    (["--report_to", "nosuch"], "--report_to"),
    (["--optim", "nosuch"], "nosuch is not a valid OptimizerNames"),
    (["--warmup_steps", "-1"], "--warmup_steps -1"),
    (["--seed", "-1"], "--seed -1"),
    (["--hidden_size", "1000000000"], "--hidden_size 1000000000"),
    (["--task_options", '{"num_train": "abc"}'], "num_train"),
    (["--task_options", '{"length": -5}'], "length"),
    (["--task_options", '{"locality": 1.5}'], "locality"),
    (["--init_parts", "qk", "--mode", "scratch"], "--init_parts 'qk' needs SPT weights"),
]


@pytest.mark.parametrize("argv, words", FLAG_PROBES, ids=[" ".join(argv) for argv, _ in FLAG_PROBES])
def test_a_bad_flag_is_one_line_and_exit_2_before_any_data(argv, words, tmp_path, capsys, no_data):
    status, err = exit_line(run_spt.main, argv + ["--output_dir", str(tmp_path / "run")], capsys)
    assert status == USER_ERROR_STATUS and err.startswith("error: ") and err.count("\n") == 1, err
    assert words in err, err
    assert not (tmp_path / "run").exists()


def with_change(change: dict) -> dict:
    study = yaml.safe_load(yaml.safe_dump(STUDY))
    for path, value in change.items():
        *parents, last = path.split(".")
        node = study
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return study


FILE_PROBES = [  # grid/study file values: (change to STUDY, words the message must hold)
    ({"seeds": "0,1"}, "seeds"), ({"seeds": 3}, "seeds"), ({"seeds": [0.5]}, "seeds"), ({"seeds": [True]}, "seeds"),
    ({"seeds": [0, 0]}, "seeds"), ({"tasks": [{"task": "markov"}]}, "tasks"),
    ({"arms": {"name": "scratch"}}, "arms"), ({"output_dir": 5}, "output_dir"),
    ({"experiment.learning_rate": "abc"}, "learning_rate"), ({"model.hidden_size": 32.5}, "hidden_size"),
    ({"model.hidden_size": "32"}, "hidden_size"), ({"experiment.pretrain_epochs": "4"}, "pretrain_epochs"),
    ({"arms.1.pretrain_epochs": "4"}, "pretrain_epochs"), ({"arms.0.freeze_parts": 5}, "freeze_parts"),
    ({"arms.0.num_layers": 1.5}, "num_layers"), ({"arms.0.pretrain": "no"}, "pretrain"),
    ({"arms.2.compute_matched": "false"}, "compute_matched"), ({"experiment.mode": "scratch"}, "mode"),
    ({"arms.1.name": "spt_eX"}, "spt_eX"), ({"tasks.m.task_options": {**TINY, "length": -5}}, "length"),
    ({"model.position_embedding_type": "foo"}, "position_embedding_type"),
    ({"experiment.optim": "nosuch"}, "nosuch is not a valid OptimizerNames"),
]


@pytest.mark.parametrize("change, words", FILE_PROBES, ids=[str(change) for change, _ in FILE_PROBES])
def test_a_bad_study_value_is_one_line_and_exit_2_before_any_data(change, words, tmp_path, capsys, no_data):
    study = with_change(change)
    study["output_dir"] = str(tmp_path / "out") if study["output_dir"] == "OUT" else study["output_dir"]
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    status, err = exit_line(script_main("run_budget_study"), ["--study", str(path), "--dry_run"], capsys)
    assert status == USER_ERROR_STATUS and err.startswith("error: ") and err.count("\n") == 1, err
    assert words in err, err


def test_a_duplicate_key_in_a_settings_file_is_an_error(tmp_path, capsys, no_data):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(STUDY).replace("seeds:", "seeds: [1]\nseeds:"))
    status, err = exit_line(script_main("run_budget_study"), ["--study", str(path), "--dry_run"], capsys)
    assert status == USER_ERROR_STATUS and "seeds" in err and "twice" in err, err
    config = tmp_path / "config.json"
    config.write_text('{"seed": 1, "seed": 2}')
    status, err = exit_line(run_spt.main, ["--config_file", str(config), "--output_dir", str(tmp_path / "r")], capsys)
    assert status == USER_ERROR_STATUS and "seed" in err and "twice" in err, err


@pytest.mark.parametrize("content, words", [("recipe: amos_lra\n", "recipe"), ("task: listops\n", "task")])
def test_a_recipe_cannot_name_a_recipe_or_a_task(content, words, tmp_path, capsys, no_data):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("learning_rate: 0.001\n" + content)
    status, err = exit_line(run_spt.main, ["--recipe", str(recipe), "--output_dir", str(tmp_path / "r")], capsys)
    assert status == USER_ERROR_STATUS and words in err and err.count("\n") == 1, err


SUITE_FLAG_PROBES = [  # (script, argv, words)
    ("run_ablation", ["--seeds", "a"], "--seeds 'a'"),
    ("run_lra", ["--seeds", "a", "--dry_run"], "--seeds 'a'"),
    ("run_budget_study", ["--seeds", "a", "--dry_run"], "--seeds 'a'"),
    ("run_budget_study", ["--torch_threads", "0", "--dry_run"], "--torch_threads 0"),
    ("run_lra", ["--steps_per_second", "{bad", "--dry_run"], "--steps_per_second"),
    ("run_budget_study", ["--probe_examples", "-5", "--dry_run"], "--probe_examples -5"),
    ("run_lra", ["--scale", "mini", "--dry_run", "--attn_implementation", "foo"], "attn_implementation"),
    ("run_lra", ["--scale", "mini", "--dry_run", "--train_sampling_strategy", "foo"], "train_sampling_strategy"),
    ("run_lra", ["--scale", "mini", "--dry_run", "--pretrain_epochs", "-1"], "pretrain_epochs"),
]


@pytest.mark.parametrize("name, argv, words", SUITE_FLAG_PROBES,
                         ids=[f"{name} {' '.join(argv)}" for name, argv, _ in SUITE_FLAG_PROBES])
def test_a_bad_suite_flag_is_one_line_and_exit_2(name, argv, words, tmp_path, capsys, no_data):
    status, err = exit_line(script_main(name), argv + ["--output_dir", str(tmp_path / "out")], capsys)
    assert status == USER_ERROR_STATUS and err.startswith("error: ") and err.count("\n") == 1, err
    assert words in err, err


@pytest.mark.skipif(any(importlib.util.find_spec(name) for name in ("tensorboard", "tensorboardX")),
                    reason="tensorboard is installed here")
def test_a_reporter_that_is_not_installed_is_refused_before_any_data(tmp_path, capsys, no_data):
    status, err = exit_line(run_spt.main, ["--report_to", "tensorboard", "--output_dir", str(tmp_path / "r")], capsys)
    assert status == USER_ERROR_STATUS and err.startswith("error: --report_to tensorboard: ") and err.count("\n") == 1
