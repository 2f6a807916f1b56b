"""Gradient accumulation: batch 8 in one step and batch 4 x 2 accumulated steps move every
parameter equally (one SGD step, lr 0.1, no dropout), for every loss the two phases use.

The Trainer hands models that take `**kwargs` the step's label count (`num_items_in_batch`) and
then stops dividing by the accumulation steps; a model that returns a plain mean would move twice
as far. The number of items is the number of examples for classification, of masked (or shifted)
tokens for language modelling, and the total label weight for the weighted losses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from conftest import tiny_config
from datasets import Dataset
from transformers import BertConfig, DataCollatorForLanguageModeling, GPT2Config, GPT2LMHeadModel

from hf_spt import BackboneClassifierConfig, BackboneForSequenceClassification, SptForMaskedLM, SptForSequenceClassification
from hf_spt.models.tokenization_spt import build_word_tokenizer
from hf_spt.training.arguments import FinetuneArguments, PretrainArguments
from hf_spt.training.finetune_trainer import FinetuneTrainer
from hf_spt.training.pretrain_trainer import PretrainTrainer

TOKENIZER = build_word_tokenizer([f"s{i}" for i in range(95)])  # vocab 99, as tiny_config
LENGTHS = (3, 9, 5, 12, 4, 7, 11, 6)  # uneven, so micro-batches hold different numbers of tokens
LABELS = (0, 1, 1, 1, 2, 1, 1, 0)  # uneven classes, so class weights differ between micro-batches


def sequences() -> list[list[int]]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randint(4, 99, (n,), generator=generator).tolist() for n in LENGTHS]


@dataclass
class FixedMaskCollator:
    """Masks the positions where (position + token id) % 3 == 0: each example's mask depends on it
    alone, never on the batch it lands in or on a random draw."""

    mask_token_id: int = 1

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        length = max(len(feature["input_ids"]) for feature in features)
        ids = torch.zeros(len(features), length, dtype=torch.long)
        attention = torch.zeros_like(ids)
        for row, feature in enumerate(features):
            ids[row, : len(feature["input_ids"])] = torch.tensor(feature["input_ids"])
            attention[row, : len(feature["input_ids"])] = 1
        positions = torch.arange(length).expand_as(ids)
        masked = ((positions + ids) % 3 == 0) & attention.bool()
        labels = ids.masked_fill(~masked, -100)
        return {"input_ids": ids.masked_fill(masked, self.mask_token_id), "attention_mask": attention, "labels": labels}


def arguments(cls, folder: Path, batch_size: int, accumulation: int, **extra):
    return cls(output_dir=str(folder), per_device_train_batch_size=batch_size, gradient_accumulation_steps=accumulation,
               max_steps=1, optim="sgd", learning_rate=0.1, lr_scheduler_type="constant", weight_decay=0.0,
               max_grad_norm=0.0, report_to=[], use_cpu=True, eval_strategy="no", save_strategy="no",
               logging_strategy="no", load_best_model_at_end=False, seed=0, **extra)


def spt_classifier():
    return SptForSequenceClassification(tiny_config())


def backbone_classifier():
    backbone = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=37, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BackboneForSequenceClassification(BackboneClassifierConfig(backbone=backbone, num_labels=3))


def gpt2():
    return GPT2LMHeadModel(GPT2Config(vocab_size=99, n_embd=32, n_layer=2, n_head=4, n_positions=64, resid_pdrop=0.0,
                                      embd_pdrop=0.0, attn_pdrop=0.0, pad_token_id=0))


def finetune_step(folder: Path, build, batch_size: int, accumulation: int, **extra) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = build()
    data = Dataset.from_dict({"input_ids": sequences(), "labels": list(LABELS)})
    args = arguments(FinetuneArguments, folder, batch_size, accumulation, **extra)
    FinetuneTrainer(model, args, data, processing_class=TOKENIZER).train()
    return {name: parameter.detach().clone() for name, parameter in model.named_parameters()}


def pretrain_step(folder: Path, build, collator, batch_size: int, accumulation: int, **extra) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = build()
    data = Dataset.from_dict({"input_ids": sequences()})
    args = arguments(PretrainArguments, folder, batch_size, accumulation, **extra)
    PretrainTrainer(model, args, data, processing_class=TOKENIZER, data_collator=collator).train()
    return {name: parameter.detach().clone() for name, parameter in model.named_parameters()}


def assert_same_step(whole: dict[str, torch.Tensor], accumulated: dict[str, torch.Tensor], start: dict[str, torch.Tensor]):
    moved = max(float((whole[name] - start[name]).abs().max()) for name in whole)
    assert moved > 1e-4  # the step did move the parameters
    for name in whole:
        torch.testing.assert_close(accumulated[name], whole[name], atol=1e-6, rtol=0, msg=name)


@pytest.mark.parametrize("build", [spt_classifier, backbone_classifier], ids=["spt", "backbone"])
@pytest.mark.parametrize("class_weights", [None, [1.0, 0.4, 2.5]], ids=["plain", "class_weighted"])
def test_classifier_step_is_the_same_with_accumulation(tmp_path, build, class_weights):
    torch.manual_seed(0)
    start = {name: parameter.detach().clone() for name, parameter in build().named_parameters()}
    whole = finetune_step(tmp_path / "whole", build, 8, 1, class_weights=class_weights)
    accumulated = finetune_step(tmp_path / "accumulated", build, 4, 2, class_weights=class_weights)
    assert_same_step(whole, accumulated, start)


@pytest.mark.parametrize("objective", ["masked", "causal"])
@pytest.mark.parametrize("token_weighting", ["none", "inverse_frequency"])
def test_language_model_step_is_the_same_with_accumulation(tmp_path, objective, token_weighting):
    if objective == "masked":
        build, collator = (lambda: SptForMaskedLM(tiny_config())), FixedMaskCollator()
    else:
        build, collator = gpt2, DataCollatorForLanguageModeling(TOKENIZER, mlm=False)
    torch.manual_seed(0)
    start = {name: parameter.detach().clone() for name, parameter in build().named_parameters()}
    whole = pretrain_step(tmp_path / "whole", build, collator, 8, 1, token_weighting=token_weighting)
    accumulated = pretrain_step(tmp_path / "accumulated", build, collator, 4, 2, token_weighting=token_weighting)
    assert_same_step(whole, accumulated, start)
