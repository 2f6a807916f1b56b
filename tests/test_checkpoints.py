"""Finding the checkpoint a fine-tune starts from."""

import json

import pytest
from conftest import tiny_config

from hf_spt import SptForMaskedLM
from hf_spt.training.checkpoints import resolve_model_folder


def test_final_model_folder_is_taken_as_is(tmp_path):
    SptForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    assert resolve_model_folder(tmp_path) == tmp_path


def test_trainer_folder_gives_its_best_checkpoint_not_the_last(tmp_path):
    for step in (10, 20):
        SptForMaskedLM(tiny_config()).save_pretrained(tmp_path / f"checkpoint-{step}")
    state = {"best_model_checkpoint": str(tmp_path / "checkpoint-10")}
    (tmp_path / "checkpoint-20" / "trainer_state.json").write_text(json.dumps(state))
    assert resolve_model_folder(tmp_path) == tmp_path / "checkpoint-10"


def test_folder_without_checkpoint_names_what_was_expected(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here")
    with pytest.raises(FileNotFoundError, match="config.json and model.safetensors"):
        resolve_model_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match="--mode spt"):
        resolve_model_folder(tmp_path / "missing")
