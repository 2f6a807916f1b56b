"""Partial loading: part selection, reading only selected tensors, prefixes, shards, layer maps, errors."""

from __future__ import annotations

import pytest
import safetensors
import torch

import hf_spt.training.parts as partial_loading
from hf_spt.training.checkpoints import HubNotReadyError
from hf_spt import SptConfig, SptForMaskedLM, SptForSequenceClassification, SptModel
from hf_spt.training.parts import (
    PARTIAL_WEIGHTS_NAME,
    get_partial_state_dict,
    load_partial_weights,
    save_partial_state_dict,
    select_keys,
)


def tiny_config(layers: int = 1, hidden: int = 32, positions: str = "learned") -> SptConfig:
    return SptConfig(vocab_size=99, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                     intermediate_size=37, max_position_embeddings=16, position_embedding_type=positions, num_labels=2)


def expected_keys(part: str, layers: int) -> set[str]:
    """The encoder keys (no prefix) a part must select, written out by hand."""
    wb = ("weight", "bias")
    per_layer = {
        "qk": [f"attention.{p}_proj.{w}" for p in "qk" for w in wb],
        "qkv": [f"attention.{p}_proj.{w}" for p in "qkv" for w in wb],
        "attention": [f"attention.{p}_proj.{w}" for p in "qkvo" for w in wb],
        "mlp": [f"mlp.{fc}.{w}" for fc in ("fc1", "fc2") for w in wb],
        "norms": [f"{n}.{w}" for n in ("attention_norm", "mlp_norm") for w in wb],
        "embeddings": [],
    }
    per_layer["all"] = per_layer["attention"] + per_layer["mlp"] + per_layer["norms"]
    keys = {f"layers.{i}.{k}" for i in range(layers) for k in per_layer[part]}
    if part in ("embeddings", "all"):
        keys |= {"embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight"}
    if part in ("norms", "all"):
        keys |= {"final_norm.weight", "final_norm.bias"}
    return keys


@pytest.mark.parametrize("layers", [1, 3])
@pytest.mark.parametrize("part", ["qk", "qkv", "attention", "mlp", "embeddings", "norms", "all"])
def test_each_part_selects_exactly_its_keys(part, layers):
    model = SptForMaskedLM(tiny_config(layers))
    selected = select_keys(model.state_dict(), part)
    assert {key.removeprefix("spt.") for key in selected} == expected_keys(part, layers)
    assert all(key.startswith("spt.") for key in selected)  # heads (lm_head.*) are never a part


def test_parts_combine_and_layers_limit_per_layer_keys_only():
    names = list(SptModel(tiny_config(3)).state_dict())  # bare model: no prefix
    combined = set(select_keys(names, "qk,mlp"))
    assert combined == expected_keys("qk", 3) | expected_keys("mlp", 3)
    limited = set(select_keys(names, "qk,embeddings", layers=[2]))
    assert limited == {k for k in expected_keys("qk", 3) if k.startswith("layers.2.")} | expected_keys("embeddings", 3)


def test_unknown_part_lists_valid_parts():
    with pytest.raises(ValueError, match="valid parts: qk, qkv, attention, mlp, embeddings, norms, all"):
        select_keys(["spt.layers.0.mlp.fc1.weight"], "qk,attn")


@pytest.fixture
def mlm_checkpoint(tmp_path):
    torch.manual_seed(0)
    model = SptForMaskedLM(tiny_config(2))
    model.save_pretrained(tmp_path / "mlm")
    return model, tmp_path / "mlm"


def test_loading_qk_reads_only_qk_tensors(mlm_checkpoint, monkeypatch):
    source, folder = mlm_checkpoint
    requested: list[str] = []
    real_safe_open = safetensors.safe_open

    class RecordingHandle:
        def __init__(self, *args, **kwargs):
            self.handle = real_safe_open(*args, **kwargs)

        def __enter__(self):
            self.handle.__enter__()
            return self

        def __exit__(self, *exc):
            return self.handle.__exit__(*exc)

        def keys(self):
            return self.handle.keys()

        def get_slice(self, name):
            requested.append(name)
            return self.handle.get_slice(name)

        def get_tensor(self, name):
            requested.append(name)
            return self.handle.get_tensor(name)

    monkeypatch.setattr(partial_loading, "safe_open", RecordingHandle)
    target = SptForSequenceClassification(tiny_config(2))
    report = load_partial_weights(target, folder, "qk")
    qk_keys = set(select_keys(source.state_dict(), "qk"))
    assert set(requested) == qk_keys and len(qk_keys) == 8
    assert set(report.loaded) == qk_keys and not report.missing and not report.mismatched
    assert "spt.layers.0.attention.v_proj.weight" in report.skipped
    for key in qk_keys:
        assert torch.equal(target.state_dict()[key], source.state_dict()[key])
    assert not torch.equal(target.spt.layers[0].attention.v_proj.weight, source.spt.layers[0].attention.v_proj.weight)


def test_prefixes_differ_between_classes(mlm_checkpoint, tmp_path):
    source, folder = mlm_checkpoint
    bare = SptModel(tiny_config(2))
    load_partial_weights(bare, folder, "attention")  # "spt." in the checkpoint, none in the model
    assert torch.equal(bare.layers[1].attention.o_proj.weight, source.spt.layers[1].attention.o_proj.weight)
    bare.save_pretrained(tmp_path / "bare")
    classifier = SptForSequenceClassification(tiny_config(2))
    load_partial_weights(classifier, tmp_path / "bare", "attention")  # none in the checkpoint, "spt." in the model
    assert torch.equal(classifier.spt.layers[1].attention.o_proj.weight, source.spt.layers[1].attention.o_proj.weight)


def test_sharded_checkpoint_opens_only_needed_shards(mlm_checkpoint, tmp_path, monkeypatch):
    source, _ = mlm_checkpoint
    source.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    index = (tmp_path / "sharded" / "model.safetensors.index.json")
    assert index.is_file()
    opened: list[str] = []
    real_safe_open = safetensors.safe_open
    monkeypatch.setattr(partial_loading, "safe_open", lambda path, *a, **k: opened.append(path) or real_safe_open(path, *a, **k))
    target = SptForSequenceClassification(tiny_config(2))
    load_partial_weights(target, tmp_path / "sharded", "qk", layers=[1])
    import json

    weight_map = json.loads(index.read_text())["weight_map"]
    needed = {weight_map[k] for k in select_keys(weight_map, "qk", layers=[1])}
    assert {p.rsplit("/", 1)[-1] for p in opened} == needed
    assert len(set(weight_map.values())) > len(needed)
    assert torch.equal(target.spt.layers[1].attention.k_proj.bias, source.spt.layers[1].attention.k_proj.bias)
    assert not torch.equal(target.spt.layers[0].attention.k_proj.weight, source.spt.layers[0].attention.k_proj.weight)


def test_save_and_load_partial_state_dict_round_trip(mlm_checkpoint, tmp_path):
    source, _ = mlm_checkpoint
    path = save_partial_state_dict(source, tmp_path / "part", "mlp")
    assert path.name == PARTIAL_WEIGHTS_NAME
    assert set(get_partial_state_dict(source, "mlp")) == set(select_keys(source.state_dict(), "mlp"))
    target = SptForSequenceClassification(tiny_config(2))
    report = load_partial_weights(target, path, "mlp")
    assert len(report.loaded) == 8 and not report.skipped
    assert torch.equal(target.spt.layers[0].mlp.fc2.weight, source.spt.layers[0].mlp.fc2.weight)


def test_layer_map_feeds_a_deeper_model(tmp_path):
    shallow = SptForMaskedLM(tiny_config(1))
    shallow.save_pretrained(tmp_path / "one")
    deep = SptForSequenceClassification(tiny_config(3))
    report = load_partial_weights(deep, tmp_path / "one", "qk", layer_map={0: 0, 2: 0})
    assert len(report.loaded) == 8
    for layer in (0, 2):
        assert torch.equal(deep.spt.layers[layer].attention.q_proj.weight, shallow.spt.layers[0].attention.q_proj.weight)
    assert not torch.equal(deep.spt.layers[1].attention.q_proj.weight, shallow.spt.layers[0].attention.q_proj.weight)
    assert report.loaded_by_part("qk") == {"qk": {
        str(layer): [f"spt.layers.{layer}.attention.{m}_proj.{w}" for m in "qk" for w in ("weight", "bias")]
        for layer in (0, 2)}}


def test_missing_layers_are_an_error_not_a_random_init(tmp_path):
    SptForMaskedLM(tiny_config(1)).save_pretrained(tmp_path / "one")
    two = SptForSequenceClassification(tiny_config(2))
    before = {name: value.clone() for name, value in two.state_dict().items()}
    with pytest.raises(ValueError, match=r"(?s)lacks 4 tensor.*spt\.layers\.1\.attention\.q_proj\.weight.*"
                       r"--num_hidden_layers 1.*layer_map=\{0: 0, 1: 0\}"):
        load_partial_weights(two, tmp_path / "one", "qk")
    assert all(torch.equal(value, before[name]) for name, value in two.state_dict().items())  # nothing half-loaded
    report = load_partial_weights(two, tmp_path / "one", "qk", layer_map={0: 0, 1: 0})
    assert sorted(report.loaded_by_part("qk")["qk"]) == ["0", "1"] and not report.missing


def test_shape_mismatch_lists_the_keys(mlm_checkpoint):
    _, folder = mlm_checkpoint
    with pytest.raises(ValueError, match=r"(?s)Shape mismatch.*spt.layers.0.attention.q_proj.weight: model \(16, 16\)"):
        load_partial_weights(SptForSequenceClassification(tiny_config(2, hidden=16)), folder, "qk")


def test_selection_matching_nothing_is_an_error(mlm_checkpoint, tmp_path):
    _, folder = mlm_checkpoint
    with pytest.raises(ValueError, match="select no key of the model"):
        load_partial_weights(SptForSequenceClassification(tiny_config(2)), folder, "qk", layers=[7])
    sinusoidal = SptForMaskedLM(tiny_config(1, positions="sinusoidal"))
    sinusoidal.save_pretrained(tmp_path / "sin")
    with pytest.raises(ValueError, match="embeddings.position_embeddings.weight"):  # learned table absent
        load_partial_weights(SptModel(tiny_config(1)), tmp_path / "sin", "embeddings")


def test_unreachable_hub_repo_gives_a_clear_error():
    with pytest.raises(HubNotReadyError, match="not a local folder, and HF_HUB_OFFLINE is set"):
        load_partial_weights(SptModel(tiny_config(1)), "no-such-user/no-such-spt-model", "qk")
    with pytest.raises(FileNotFoundError, match="No such folder"):
        load_partial_weights(SptModel(tiny_config(1)), "runs/markov/no-such-phase", "qk")
