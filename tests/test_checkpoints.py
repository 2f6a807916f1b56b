"""Finding the checkpoint a phase starts from: folder, Trainer run, single file, sharded index, missing folder, Hub id."""

import json

import pytest
from conftest import tiny_config
from huggingface_hub import constants

from hf_spt import SptForMaskedLM
from hf_spt.training.checkpoints import (
    HubNotReadyError,
    checkpoint_weight_map,
    resolve_model,
    resolve_model_folder,
)


def test_final_model_folder_is_taken_as_is(tmp_path):
    SptForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    assert resolve_model_folder(tmp_path) == tmp_path
    assert resolve_model(tmp_path) == str(tmp_path)


def test_trainer_folder_gives_its_best_checkpoint_not_the_last(tmp_path):
    for step in (10, 20):
        SptForMaskedLM(tiny_config()).save_pretrained(tmp_path / f"checkpoint-{step}")
    state = {"best_model_checkpoint": str(tmp_path / "checkpoint-10")}
    (tmp_path / "checkpoint-20" / "trainer_state.json").write_text(json.dumps(state))
    assert resolve_model_folder(tmp_path) == tmp_path / "checkpoint-10"
    assert resolve_model(tmp_path) == str(tmp_path / "checkpoint-10")
    keys, shard_path = checkpoint_weight_map(tmp_path)
    assert shard_path(keys["spt.layers.0.attention.q_proj.weight"]) == tmp_path / "checkpoint-10" / "model.safetensors"


def test_single_file_and_sharded_index_give_their_weight_maps(tmp_path):
    model = SptForMaskedLM(tiny_config())
    model.save_pretrained(tmp_path / "single")
    model.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    single = tmp_path / "single" / "model.safetensors"
    keys, shard_path = checkpoint_weight_map(single)
    assert "spt.final_norm.weight" in keys and set(keys) <= set(model.state_dict())
    assert shard_path(keys["spt.final_norm.weight"]) == single
    index = tmp_path / "sharded" / "model.safetensors.index.json"
    for source in (index, tmp_path / "sharded"):
        keys, shard_path = checkpoint_weight_map(source)
        assert keys == json.loads(index.read_text())["weight_map"]
        assert len(set(keys.values())) > 1
        assert shard_path(keys["spt.final_norm.weight"]) == tmp_path / "sharded" / keys["spt.final_norm.weight"]


def test_folder_without_checkpoint_names_what_was_expected(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here")
    with pytest.raises(FileNotFoundError, match="config.json and model.safetensors"):
        resolve_model_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match="No such folder.*--mode spt"):
        resolve_model_folder(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="No such folder"):
        resolve_model(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="No such folder"):
        checkpoint_weight_map("runs/markov/spt")


def test_offline_hub_id_fails_naming_the_fix():
    assert constants.HF_HUB_OFFLINE  # tests run offline (conftest)
    with pytest.raises(HubNotReadyError, match="not a local folder, and HF_HUB_OFFLINE is set.*save_pretrained"):
        resolve_model("someone/not-cached-model")
    with pytest.raises(HubNotReadyError, match="HF_HUB_OFFLINE is set"):
        checkpoint_weight_map("someone/not-cached-model")
