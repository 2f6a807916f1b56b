"""One layering rule for every source of settings (issue 54, item 2): a generic budget setting (`learning_rate`,
`num_train_epochs`, `per_device_train_batch_size`, `max_steps`) in a higher layer clears the per-phase ones below
it, and one given beside the per-phase settings of every phase is refused as never read, whether the layers are a
recipe, a config file and the flags (`run_spt.py`), a recipe's common and per-task settings, or a grid's (or
study's) `experiment:` and a task's."""

from __future__ import annotations

import pytest
import yaml

from hf_spt.errors import UserInputError
from hf_spt.experiments.command_line import parse_arguments
from hf_spt.experiments.run_spec import resolve_run
from hf_spt.experiments.settings_files import recipe_settings
from hf_spt.experiments.suites.grid import parse_grid, unit_run

GRID = {"seeds": [0], "arms": [{"name": "scratch"}, {"name": "spt", "pretrain": True}]}


def grid(experiment: dict, task_experiment: dict | None = None, output_dir: str = "runs/g") -> dict:
    task = {"task": "markov", **({"experiment": task_experiment} if task_experiment is not None else {})}
    return {**GRID, "output_dir": output_dir, "tasks": {"m": task}, "experiment": experiment}


def grid_rates(experiment: dict, task_experiment: dict) -> tuple[float, float] | str:
    """The rates a grid's unit resolves, or "refused"."""
    try:
        unit = unit_run(parse_grid(grid(experiment, task_experiment)), 0, "m")
    except UserInputError as error:
        assert "learning_rate is not read" in str(error)
        return "refused"
    return unit.pretrain.learning_rate, unit.finetune.learning_rate


def run_spt_rates(tmp_path, lower: dict, higher: dict) -> tuple[float, float] | str:
    """The rates `run_spt.py` resolves with `lower` in a config file and `higher` typed as flags, or "refused"."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(lower))
    flags = [part for name, value in higher.items() for part in (f"--{name}", str(value))]
    try:
        run = resolve_run(*parse_arguments(["--config_file", str(config), "--output_dir", str(tmp_path / "o"), *flags]))
    except UserInputError as error:
        assert "--learning_rate: " in str(error)
        return "refused"
    return run.pretrain.learning_rate, run.finetune.learning_rate


def test_a_grid_refuses_the_generic_rate_beside_both_per_phase_rates():
    three = {"learning_rate": 1e-3, "pretrain_learning_rate": 2e-3, "finetune_learning_rate": 5e-4}
    with pytest.raises(UserInputError, match=r"g\.yaml: experiment: learning_rate is not read \(pretrain_learning_rate "
                                             r"and finetune_learning_rate set every phase"):
        parse_grid(grid(three), "g.yaml")  # before: the generic 1e-3 dropped silently
    with pytest.raises(ValueError, match="--learning_rate: --pretrain_learning_rate and --finetune_learning_rate"):
        parse_arguments([f"--{name}={value}" for name, value in three.items()])  # run_spt.py's rule, the same


def test_a_tasks_generic_rate_clears_the_grids_per_phase_rate():
    assert grid_rates({"pretrain_learning_rate": 2e-3}, {"learning_rate": 5e-4}) == (5e-4, 5e-4)  # before: 2e-3


def test_a_tasks_per_phase_rates_leave_the_grids_generic_rate_unread():
    with pytest.raises(UserInputError, match=r"task 'm'.*learning_rate is not read"):
        parse_grid(grid({"learning_rate": 1e-3}, {"pretrain_learning_rate": 2e-3, "finetune_learning_rate": 5e-4}))


@pytest.mark.parametrize("lower, higher", [
    ({"pretrain_learning_rate": 2e-3}, {"learning_rate": 5e-4}),  # the generic above clears the per-phase below
    ({"learning_rate": 5e-4}, {"pretrain_learning_rate": 2e-3}),  # a per-phase above wins for its phase
    ({"pretrain_learning_rate": 2e-3, "finetune_learning_rate": 3e-4}, {"learning_rate": 5e-4}),
    ({"learning_rate": 5e-4, "finetune_learning_rate": 3e-4}, {"pretrain_learning_rate": 2e-3}),  # 5e-4 unread
    ({"learning_rate": 5e-4}, {"pretrain_learning_rate": 2e-3, "finetune_learning_rate": 3e-4}),  # 5e-4 unread
    ({"learning_rate": 5e-4}, {"learning_rate": 1e-4}),
])
def test_a_grid_and_its_task_layer_as_a_config_file_and_flags_do(tmp_path, lower, higher):
    assert grid_rates(lower, higher) == run_spt_rates(tmp_path, lower, higher)


def test_a_recipes_per_task_generic_rate_clears_its_common_per_phase_rate(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("pretrain_learning_rate: 2.0e-3\ntasks:\n  markov: {learning_rate: 5.0e-4}\n")
    assert recipe_settings(str(recipe), "markov") == {"learning_rate": 5e-4}  # before: the common 2e-3 kept
    run = resolve_run(*parse_arguments(["--recipe", str(recipe), "--output_dir", str(tmp_path / "o")]))
    assert (run.pretrain.learning_rate, run.finetune.learning_rate) == (5e-4, 5e-4)
