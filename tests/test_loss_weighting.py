"""Class weights for fine-tuning and inverse-frequency token weights for SPT, checked by hand."""

from __future__ import annotations

import math

import pytest
import torch
from datasets import Dataset

from hf_spt.models.configuration_spt import SptConfig
from hf_spt.training.arguments import FinetuneArguments
from hf_spt.training.finetune_trainer import FinetuneTrainer
from hf_spt.training.losses import class_weights_from_spec, inverse_frequency_token_weights, weighted_token_loss
from hf_spt.models.modeling_spt import SptForSequenceClassification


def test_balanced_and_listed_class_weights():
    assert class_weights_from_spec("balanced", [0, 0, 0, 1], 2) == [4 / 6, 4 / 2]
    assert class_weights_from_spec("1,3", [0, 1], 2) == [1.0, 3.0]
    assert class_weights_from_spec("none", [0, 1], 2) is None
    with pytest.raises(ValueError, match="give 3 non-negative numbers"):
        class_weights_from_spec("1,2", [0, 1, 2], 3)


class FixedLogits(torch.nn.Module):
    """Returns the same logits whatever the input, so the loss can be computed by hand."""

    def __init__(self, logits):
        super().__init__()
        self.logits = logits
        self.config = type("Config", (), {"num_labels": logits.shape[1]})()

    def forward(self, input_ids, labels=None, **kwargs):
        loss = torch.nn.functional.cross_entropy(self.logits, labels)
        return {"loss": loss, "logits": self.logits}


def test_class_weights_change_the_finetuning_loss_as_computed_by_hand(tmp_path):
    # two examples, logits [ln 3, 0] each: p(class 0) = 3/4, p(class 1) = 1/4; labels 0 and 1
    logits = torch.tensor([[math.log(3.0), 0.0], [math.log(3.0), 0.0]])
    labels = torch.tensor([0, 1])
    args = FinetuneArguments(output_dir=str(tmp_path), class_weights=[1.0, 3.0], report_to="none", use_cpu=True)
    data = Dataset.from_dict({"input_ids": [[4], [5]], "labels": [0, 1]})
    model = SptForSequenceClassification(SptConfig(vocab_size=8, num_labels=2))
    trainer = FinetuneTrainer(model, args, data, data, data_collator=lambda rows: rows)
    inputs = {"input_ids": torch.tensor([[4], [5]]), "labels": labels}
    weighted = trainer.compute_loss(FixedLogits(logits), dict(inputs))
    # (1 * -ln(3/4) + 3 * -ln(1/4)) / (1 + 3)
    expected = (-math.log(0.75) + 3 * -math.log(0.25)) / 4
    assert weighted.item() == pytest.approx(expected, rel=1e-6)
    trainer.class_weights = None
    unweighted = trainer.compute_loss(FixedLogits(logits), dict(inputs))
    assert unweighted.item() == pytest.approx((-math.log(0.75) - math.log(0.25)) / 2, rel=1e-6)


def test_inverse_frequency_token_weights_average_one_per_token():
    weights = inverse_frequency_token_weights([[4, 4, 4, 5], [4, 5, 6]], vocab_size=8)
    counts = torch.tensor([0, 0, 0, 0, 4, 2, 1, 0], dtype=torch.float)
    assert weights[4] * 4 == pytest.approx(weights[6] * 1)  # every id carries the same total weight
    assert (counts * weights).sum().item() == pytest.approx(counts.sum().item())
    # flat logits at the labelled positions (SptForMaskedLM) give the same loss as the full (B, T, V) tensor
    logits = torch.randn(1, 3, 8)
    labels = torch.tensor([[4, -100, 6]])
    full = weighted_token_loss(logits, labels, weights, shift=False)
    flat = weighted_token_loss(logits[labels != -100], labels, weights, shift=False)
    torch.testing.assert_close(full, flat)
    manual = -(weights[4] * logits[0, 0].log_softmax(-1)[4] + weights[6] * logits[0, 2].log_softmax(-1)[6]) / (
        weights[4] + weights[6])
    torch.testing.assert_close(full, manual)
