"""run_spt.py's modes are data (`modes.MODES`): the table alone decides the phases a run plans, trains,
announces and lists, and the settings it reads; an unknown mode fails naming every mode of the table."""

from dataclasses import fields

import pytest
from tiny_backbone_runs import tiny_arguments, tiny_run

from hf_spt.errors import UserInputError
from hf_spt.experiments import modes
from hf_spt.experiments.arguments import ExperimentArguments
from hf_spt.experiments.command_line import parse_arguments
from hf_spt.experiments.model_config import build_config
from hf_spt.experiments.arms import Arm
from hf_spt.experiments.modes import MODES, PRETRAIN_FOLDER, Mode
from hf_spt.runs.phase_definition import definition_digest
from hf_spt.experiments.pipeline import plan_run, prepare_task, run_experiment
from hf_spt.training.model_factory import pretraining_model


@pytest.mark.parametrize("mode", sorted(MODES))
def test_each_mode_plans_the_phases_of_its_table_entry(tmp_path, mode):
    plain = tiny_run(tmp_path / "run")
    task = prepare_task(plain.task, seed=0)
    checkpoint = tmp_path / "checkpoint"
    pretraining_model(build_config(task, plain.model), "masked").save_pretrained(checkpoint)
    start = {"finetune": {"init_from": str(checkpoint)}}.get(mode, {})
    run = tiny_run(
        tmp_path / "run", mode=mode, **start, **({"model_name_or_path": str(checkpoint)} if mode == "lora_comparison" else {}))
    phases = plan_run(task, task, build_config(task, run.model), run)

    folders = [PRETRAIN_FOLDER] * MODES[mode].pretrains + [arm.name for arm in MODES[mode].arms]
    assert [phase.folder for phase in phases] == [tmp_path / "run" / folder for folder in folders]
    assert [phase.args.output_dir for phase in phases] == [str(tmp_path / "run" / folder) for folder in folders]
    assert [phase.arm for phase in phases] == [None] * MODES[mode].pretrains + [arm.name for arm in MODES[mode].arms]
    for phase, folder in zip(phases, folders):
        assert phase.definition["phase"] == folder
    for phase, arm in zip(phases[MODES[mode].pretrains:], MODES[mode].arms):
        assert phase.definition["finetune_method"] == phase.method == (arm.method or run.finetune.finetune_method)
    if mode == "compare":  # the spt arm starts from the pretraining phase this run plans
        assert phases[1].definition["init_from"] == {"phase_definition": definition_digest(phases[0].definition)}


def test_an_unknown_mode_fails_listing_the_modes_of_the_table():
    with pytest.raises(UserInputError) as error:
        ExperimentArguments(mode="lora")
    assert str(error.value) == f"--mode 'lora': must be one of {', '.join(MODES)}."
    with pytest.raises(UserInputError, match="must be one of compare, spt, finetune, scratch, lora_comparison"):
        parse_arguments(["--mode", "lora"])


def test_a_new_mode_is_one_entry_in_the_table(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(modes.MODES, "two_arms", Mode(pretrains=False, arms=(Arm("scratch", method="full"),
                                                                             Arm("pretrained_full", method="full"))))
    with pytest.raises(UserInputError, match="--init_from: --mode two_arms starts from random weights"):
        parse_arguments(["--mode", "two_arms", "--init_from", "x"])
    with pytest.raises(UserInputError, match="--finetune_method: --mode two_arms sets each arm's method"):
        parse_arguments(["--mode", "two_arms", "--finetune_method", "lora"])

    results = run_experiment(*tiny_arguments(tmp_path, mode="two_arms"))
    assert [arm["arm"] for arm in results["arms"]] == ["scratch", "pretrained_full"]
    assert all((tmp_path / name / "phase.json").is_file() for name in ("scratch", "pretrained_full"))
    assert not (tmp_path / "pretrain").exists() and not (tmp_path / "spt").exists()
    planned = [line.split(":")[0].strip() for line in capsys.readouterr().out.splitlines() if "training rows" in line]
    assert planned == ["scratch", "pretrained_full"]


def test_every_mode_says_what_it_does_in_help():
    """--mode's help is written from MODES, so a new mode is one entry there."""
    help_text = next(f.metadata["help"] for f in fields(ExperimentArguments) if f.name == "mode")
    assert all(mode.help and f"{name} ({mode.help})" in help_text for name, mode in MODES.items())
