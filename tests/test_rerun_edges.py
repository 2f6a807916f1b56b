"""Run folders at the edges (issue 20, items 4, 5, 13, 15, 17): a checkpoint's settings against the flags,
a plain checkpoint replaced in place, a failed run's leftovers, a narrower mode re-run into a compare
run's folder, and the permissions of what a run writes. Tiny runs of about a second each."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from tiny_backbone_runs import tiny_arguments

from hf_spt.errors import UserInputError
from hf_spt.experiments import phases, pipeline
from hf_spt.runs.phase_definition import DEFINITION_NAME, PhaseDefinitionMismatch
from hf_spt.atomic_files import write_json, write_text


def run(folder: Path, **settings) -> dict:
    return pipeline.run_experiment(*tiny_arguments(folder, **settings))


def results(folder: Path) -> dict:
    return json.loads((folder / "results.json").read_text())


# item 4: --mode finetune loads a checkpoint whole


def test_finetune_from_a_checkpoint_trains_with_the_given_dropout(tmp_path, monkeypatch):
    run(tmp_path, mode="spt")  # a checkpoint trained without dropout
    built = []
    real = phases.classification_model
    monkeypatch.setattr(phases, "classification_model", lambda *a, **k: built.append(real(*a, **k)) or built[-1])
    run(tmp_path, mode="finetune", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.2)
    model = built[0]
    assert {module.p for module in model.modules() if isinstance(module, torch.nn.Dropout)} == {0.1}  # before: {0.0}
    assert model.config.attention_probs_dropout_prob == 0.2  # read by the attention at every forward
    trained = json.loads((tmp_path / "spt" / "config.json").read_text())
    recorded = json.loads((tmp_path / "spt" / DEFINITION_NAME).read_text())["model"]
    assert trained["hidden_dropout_prob"] == recorded["hidden_dropout_prob"] == results(tmp_path)["model"][
        "hidden_dropout_prob"] == 0.1
    assert trained["attention_probs_dropout_prob"] == recorded["attention_probs_dropout_prob"] == 0.2


def test_a_position_type_contradicting_the_checkpoint_is_an_error(tmp_path):
    run(tmp_path, mode="spt")  # sinusoidal positions
    with pytest.raises(UserInputError, match=r"--position_embedding_type learned \(the checkpoint has sinusoidal\)"):
        run(tmp_path, mode="finetune", position_embedding_type="learned")  # before: trained sinusoidal, silently
    assert not (tmp_path / "spt").exists()


def test_without_the_flag_the_checkpoints_position_type_is_used(tmp_path):
    run(tmp_path, mode="spt", position_embedding_type="learned")
    finished = run(tmp_path, mode="finetune")  # before: the flag's default (sinusoidal) was recorded as the model's
    assert finished["model"]["position_embedding_type"] == "learned"
    assert json.loads((tmp_path / "spt" / DEFINITION_NAME).read_text())["model"]["position_embedding_type"] == "learned"


# item 5: a plain checkpoint (no phase_definition.json) is identified by its content


def test_a_plain_checkpoint_replaced_in_place_changes_the_definition(tmp_path):
    run(tmp_path / "source", mode="spt")
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("model.safetensors", "config.json"):
        shutil.copy(tmp_path / "source" / "pretrain" / name, plain / name)
    run(tmp_path / "run", mode="finetune", init_from=str(plain))
    run(tmp_path / "run", mode="finetune", init_from=str(plain))  # unchanged: the finished phase is reused
    weights = load_file(plain / "model.safetensors")
    save_file({key: value + 1.0 for key, value in weights.items()}, plain / "model.safetensors")  # new weights, same path
    with pytest.raises(PhaseDefinitionMismatch, match=r"init_from\.weights"):
        run(tmp_path / "run", mode="finetune", init_from=str(plain))  # before: reported the old weights' numbers


# item 13: a failed run leaves nothing that blocks the corrected re-run


def test_a_failed_load_leaves_no_definition_and_names_a_flag(tmp_path):
    run(tmp_path, mode="spt")  # one layer
    with pytest.raises(UserInputError, match="--num_hidden_layers 1") as raised:
        run(tmp_path, mode="finetune", init_parts="qk", num_hidden_layers=2)
    assert "layer_map={1: 0}" not in str(raised.value)  # before: advice with no flag
    assert not (tmp_path / "spt" / DEFINITION_NAME).exists()
    corrected = run(tmp_path, mode="finetune", init_parts="qk")  # before: refused, the failed run's definition differs
    assert corrected["arms"][0]["loaded"]["qk"]


def test_a_lora_run_failing_after_it_wrote_leaves_its_folder_empty(tmp_path):
    with pytest.raises(UserInputError, match="LoRA target modules"):
        run(tmp_path, mode="scratch", finetune_method="lora", lora_target_modules="no_such_module")
    assert not (tmp_path / "scratch").exists() or not any((tmp_path / "scratch").iterdir())
    corrected = run(tmp_path, mode="scratch", finetune_method="lora", lora_target_modules="q_proj,v_proj")
    assert corrected["arms"][0]["finetune_method"] == "lora"


# item 15: results.json lists the finished arms on disk


def test_a_spt_rerun_into_a_compare_folder_keeps_its_arms(tmp_path):
    compare = run(tmp_path, mode="compare")
    again = run(tmp_path, mode="spt")  # before: results.json with "arms": []
    assert [arm["arm"] for arm in results(tmp_path)["arms"]] == ["scratch", "spt"] == [a["arm"] for a in again["arms"]]
    assert results(tmp_path)["arms"] == compare["arms"]
    assert "| spt |" in (tmp_path / "results.md").read_text()


def test_an_arm_from_a_replaced_pretraining_is_listed_with_a_note(tmp_path):
    run(tmp_path, mode="compare")
    run(tmp_path, mode="spt", pretrain_learning_rate=2e-3, overwrite_output_dir=True)
    arms = {arm["arm"]: arm for arm in results(tmp_path)["arms"]}
    assert "note" not in arms["scratch"]
    assert "pretrain" in arms["spt"]["note"] and "trained again" in arms["spt"]["note"]
    assert "spt: fine-tuned from" in (tmp_path / "results.md").read_text()


def test_an_arm_of_another_seed_is_listed_with_a_note(tmp_path):
    run(tmp_path, mode="compare")
    run(tmp_path, mode="spt", seed=1, overwrite_output_dir=True)
    arms = {arm["arm"]: arm for arm in results(tmp_path)["arms"]}
    assert "seed 0" in arms["scratch"]["note"] and "seed 0" in arms["spt"]["note"]


def test_a_copied_run_folder_reruns_to_the_same_results(tmp_path, monkeypatch):
    """The same command in a copy of a finished run's folder trains nothing and lists the same arms, the SPT arm's
    seconds counting its pretraining, its start the copy's pretrain/ (before: the recorded start, run/pretrain,
    named the original folder, and the SPT arm lost its pretraining time, 0.648 -> 0.286 s)."""
    monkeypatch.chdir(tmp_path)
    run(Path("run"), mode="compare")
    shutil.copytree("run", "copy")
    monkeypatch.setattr(phases, "_run_finetune", lambda phase: pytest.fail(f"trained {phase.folder} again"))
    monkeypatch.setattr(phases, "_run_pretrain", lambda phase: pytest.fail("trained the pretraining again"))
    run(tmp_path / "copy", mode="compare")
    original, copied = results(tmp_path / "run"), results(tmp_path / "copy")
    spt = {arm["arm"]: arm for arm in copied["arms"]}["spt"]
    assert spt["init_from"] == str(tmp_path / "copy" / "pretrain") and spt["pretrain_seconds"] > 0
    assert [{**arm, "init_from": None} for arm in copied["arms"]] == [{**arm, "init_from": None}
                                                                       for arm in original["arms"]]


# issue 54, item 1: an arm read back is matched to pretrain/ by its recorded definition digest, never by path


def test_a_copied_folder_pretrained_again_lists_its_old_arm_with_a_note(tmp_path):
    run(tmp_path / "run", mode="compare")
    shutil.copytree(tmp_path / "run", tmp_path / "copy")
    run(tmp_path / "copy", mode="spt", pretrain_learning_rate=2e-3, overwrite_output_dir=True)
    arms = {arm["arm"]: arm for arm in results(tmp_path / "copy")["arms"]}
    assert "another pretraining" in arms["spt"]["note"]  # before: no note (the recorded path named run/pretrain)
    assert "pretrain_seconds" not in arms["spt"] and "note" not in arms["scratch"]


def test_a_copied_folder_rerun_with_mode_spt_counts_the_pretraining(tmp_path):
    original = {arm["arm"]: arm for arm in run(tmp_path / "run", mode="compare")["arms"]}
    shutil.copytree(tmp_path / "run", tmp_path / "copy")
    spt = {arm["arm"]: arm for arm in run(tmp_path / "copy", mode="spt")["arms"]}["spt"]
    assert spt["pretrain_seconds"] == original["spt"]["pretrain_seconds"] > 0  # before: dropped
    assert spt["seconds"] == original["spt"]["seconds"] and "note" not in spt
    assert spt["init_from"] == str(tmp_path / "copy" / "pretrain")  # the copy's, not run/pretrain


def test_a_relative_output_dir_rerun_from_another_folder_counts_the_pretraining(tmp_path, monkeypatch):
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    original = {arm["arm"]: arm for arm in run(Path("run"), mode="compare")["arms"]}
    monkeypatch.chdir(tmp_path / "elsewhere")
    spt = {arm["arm"]: arm for arm in run(Path("../run"), mode="spt")["arms"]}["spt"]
    assert spt["pretrain_seconds"] == original["spt"]["pretrain_seconds"] > 0  # before: dropped
    assert "note" not in spt


# item 17: atomic writes respect the umask


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_atomic_writes_get_the_permissions_of_a_plain_file(tmp_path, umask):
    previous = os.umask(umask)
    try:
        write_json(tmp_path / "results.json", {"a": 1})
        write_text(tmp_path / "results.md", "x")
        (tmp_path / "plain.txt").write_text("x")
    finally:
        os.umask(previous)
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in tmp_path.iterdir()}
    assert modes == dict.fromkeys(["results.json", "results.md", "plain.txt"], 0o666 & ~umask)  # before: 0o600


def test_a_runs_results_and_logs_are_readable_like_its_other_files(tmp_path):
    previous = os.umask(0o022)
    try:
        run(tmp_path, mode="scratch")
    finally:
        os.umask(previous)
    for path in (tmp_path / "results.json", tmp_path / "scratch" / "phase.json", tmp_path / "scratch" / "log_history.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
