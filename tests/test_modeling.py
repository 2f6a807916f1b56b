"""The SPT model family: shapes, padding, attention back-ends, positions, heads, save/load, errors."""

import math

import pytest
import torch
from conftest import enable_activation_checkpointing, random_batch, tiny_config
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification

from hf_spt import SptConfig, SptForMaskedLM, SptForSequenceClassification, SptModel
from hf_spt.models.configuration_spt import POOLING_TYPES, POSITION_EMBEDDING_TYPES
from hf_spt.models.positions import sinusoidal_table


def test_output_shapes(config):
    batch = random_batch()
    hidden = SptModel(config)(**batch).last_hidden_state
    assert hidden.shape == (3, 12, 32)
    assert SptForMaskedLM(config)(**batch).logits.shape == (3, 12, 99)
    assert SptForSequenceClassification(config)(**batch).logits.shape == (3, 3)


@pytest.mark.parametrize("position", POSITION_EMBEDDING_TYPES)
@pytest.mark.parametrize("pooling", POOLING_TYPES)
def test_extra_padding_changes_no_real_token_nor_pooled_vector(position, pooling):
    config = tiny_config(position_embedding_type=position, pooling=pooling)
    model = SptForSequenceClassification(config).eval()
    batch = random_batch()
    padded = {k: torch.nn.functional.pad(v, (0, 7)) for k, v in batch.items()}
    with torch.no_grad():
        short = model(**batch, output_hidden_states=True)
        long = model(**padded, output_hidden_states=True)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(long.hidden_states[-1][:, :12][real], short.hidden_states[-1][real], atol=1e-5, rtol=0)
    torch.testing.assert_close(long.logits, short.logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("position", POSITION_EMBEDDING_TYPES)
def test_eager_and_sdpa_agree(position):
    config = tiny_config(position_embedding_type=position)
    model = SptForMaskedLM(config).eval()
    batch = random_batch()
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        model.config._attn_implementation = "sdpa"
        sdpa = model(**batch).logits
        model.config._attn_implementation = "eager"
        eager = model(**batch).logits
    assert (sdpa[real] - eager[real]).abs().max() < 1e-5


def test_output_attentions_returns_probabilities_even_under_sdpa(config):
    model = SptModel(config).eval()
    assert model.config._attn_implementation == "sdpa"
    batch = random_batch()
    attentions = model(**batch, output_attentions=True).attentions
    assert len(attentions) == 2 and attentions[0].shape == (3, 4, 12, 12)
    torch.testing.assert_close(attentions[0].sum(-1), torch.ones(3, 4, 12))
    padded_keys = batch["attention_mask"] == 0
    assert attentions[1].permute(0, 2, 1, 3)[padded_keys[:, None, None, :].expand(3, 12, 4, 12)].abs().max() == 0


def test_sinusoid_table_matches_the_formula():
    table = sinusoidal_table(50, 16)
    for position in (0, 1, 7, 49):
        for i in range(8):
            angle = position / 10000 ** (2 * i / 16)
            assert table[position, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[position, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoids_are_fixed_buffers_not_parameters(config):
    model = SptModel(config)
    assert not any("position" in name for name, _ in model.named_parameters())
    torch.testing.assert_close(model.embeddings.position_table(), sinusoidal_table(64, 32))
    assert "embeddings.sinusoidal_positions" not in model.state_dict()


def test_mlm_logits_are_standard_and_sparse_prediction_keeps_masked_positions_only(config):
    model = SptForMaskedLM(config).eval()
    batch = random_batch()
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, 2], labels[1, 5], labels[2, 0] = 7, 8, 9
    with torch.no_grad():
        dense = model(**batch, labels=labels)
        full = model(**batch).logits
        model.config.sparse_prediction = True
        sparse = model(**batch, labels=labels)
    masked = labels != -100
    expected = torch.nn.functional.cross_entropy(full[masked], labels[masked])
    assert dense.logits.shape == (3, 12, 99)
    torch.testing.assert_close(dense.logits, full)
    assert sparse.logits.shape == (3, 99)
    torch.testing.assert_close(sparse.logits, full[masked])
    torch.testing.assert_close(dense.loss, expected)
    torch.testing.assert_close(sparse.loss, expected)


def test_mlm_decoder_is_tied_to_token_embeddings(config):
    model = SptForMaskedLM(config)
    assert model.lm_head.decoder.weight is model.spt.embeddings.word_embeddings.weight


def test_save_load_round_trip_through_auto_classes_is_bit_identical(tmp_path, config):
    batch = random_batch()
    for auto, cls in ((AutoModelForMaskedLM, SptForMaskedLM), (AutoModelForSequenceClassification,
                      SptForSequenceClassification), (AutoModel, SptModel)):
        model = cls(config).eval()
        model.save_pretrained(tmp_path / cls.__name__)
        assert (tmp_path / cls.__name__ / "model.safetensors").is_file()
        loaded = auto.from_pretrained(tmp_path / cls.__name__).eval()
        assert type(loaded) is cls
        with torch.no_grad():
            first = model(**batch)[0]
            second = loaded(**batch)[0]
        assert torch.equal(first, second)
    assert AutoConfig.from_pretrained(tmp_path / "SptModel").model_type == "spt"


def test_gradient_checkpointing_gives_the_same_gradients(config):
    batch = random_batch()
    labels = torch.tensor([0, 1, 2])
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        model = SptForSequenceClassification(config).train()
        if checkpointing:
            enable_activation_checkpointing(model)
            assert model.spt.layers[0].gradient_checkpointing
        model(**batch, labels=labels).loss.backward()
        grads.append(model.spt.layers[0].attention.q_proj.weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1])


def test_problem_types():
    batch = random_batch()
    multi = SptForSequenceClassification(tiny_config(problem_type="multi_label_classification"))
    labels = torch.tensor([[1.0, 0, 1], [0, 0, 1], [1, 1, 0]])
    output = multi(**batch, labels=labels)
    torch.testing.assert_close(output.loss, torch.nn.functional.binary_cross_entropy_with_logits(output.logits, labels))
    regression = SptForSequenceClassification(tiny_config(num_labels=1))
    targets = torch.tensor([0.5, 1.0, -2.0])
    output = regression(**batch, labels=targets)
    assert regression.config.problem_type == "regression" and output.logits.shape == (3, 1)
    torch.testing.assert_close(output.loss, ((output.logits.squeeze(-1) - targets) ** 2).mean())


def test_two_tower_reads_both_documents():
    model = SptForSequenceClassification(tiny_config(two_tower=True, num_labels=2)).eval()
    first, second = random_batch(seed=0), random_batch(seed=1)
    pair = {"pair_input_ids": second["input_ids"], "pair_attention_mask": second["attention_mask"]}
    logits = model(**first, **pair).logits
    assert model.classifier.in_features == 4 * 32 and logits.shape == (3, 2)
    third = random_batch(seed=2)
    with torch.no_grad():
        same = model(**first, **pair).logits
        other_pair = model(**first, pair_input_ids=third["input_ids"], pair_attention_mask=third["attention_mask"]).logits
    torch.testing.assert_close(logits, same)
    changed = (logits - other_pair).abs().amax(dim=-1)
    assert (changed > 1e-4).all(), "changing only the pair document must change every row's logits"
    with pytest.raises(ValueError, match="pair_input_ids"):
        model(**first)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(pooling="median"), "Unknown pooling"),
        (dict(position_embedding_type="relative"), "Unknown position_embedding_type"),
        (dict(hidden_size=30, num_attention_heads=4), "divisible"),
    ],
)
def test_bad_configs_name_the_fix(overrides, message):
    with pytest.raises(Exception, match=message):
        tiny_config(**overrides)


def test_sequence_longer_than_positions_is_an_error(config):
    model = SptModel(config)
    with pytest.raises(ValueError, match="max_position_embeddings=64.*--truncation"):
        model(torch.ones(1, 65, dtype=torch.long))


def test_config_round_trip(tmp_path):
    config = tiny_config(position_embedding_type="alibi", pooling="last_mean")
    config.save_pretrained(tmp_path)
    loaded = SptConfig.from_pretrained(tmp_path)
    assert loaded.position_embedding_type == "alibi" and loaded.pooling == "last_mean"
