"""Freezing: frozen parameters stay bit-identical through fine-tuning and get no optimizer state."""

from __future__ import annotations

import pytest
import torch

from hf_spt import SptConfig, SptForSequenceClassification
from hf_spt.training.arguments import FinetuneArguments
from hf_spt.training.finetune_trainer import FinetuneTrainer
from hf_spt.training.parts import freeze_parts
from hf_spt.tasks import load_task


@pytest.mark.parametrize("parts", ["attention", "qk,mlp"])
def test_frozen_parameters_unchanged_after_training(tmp_path, parts):
    task = load_task("markov", num_train=48, num_validation=16, num_test=16, length=12)
    config = SptConfig(vocab_size=len(task.tokenizer), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                       intermediate_size=24, max_position_embeddings=12, num_labels=2,
                       pad_token_id=task.tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = SptForSequenceClassification(config)
    frozen = freeze_parts(model, parts)
    assert sorted(frozen) == sorted(name for name, p in model.named_parameters() if not p.requires_grad)
    assert "spt.layers.1.attention.q_proj.bias" in frozen and "spt.layers.1.attention.k_proj.bias" in frozen
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    args = FinetuneArguments(output_dir=str(tmp_path), num_train_epochs=2, per_device_train_batch_size=16,
                                     weight_decay=0.1, save_strategy="no", eval_strategy="no",
                                     load_best_model_at_end=False, report_to="none", use_cpu=True)
    trainer = FinetuneTrainer(model, args, task.dataset["train"], processing_class=task.tokenizer)
    trainer.train()
    after = dict(model.named_parameters())
    for name in frozen:
        assert torch.equal(after[name], before[name]), name
    trained = [n for n in before if n not in frozen]
    assert all(not torch.equal(after[n], before[n]) for n in trained if n.endswith("weight") and "norm" not in n)
    optimized = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    assert not optimized & {id(after[n]) for n in frozen}  # no AdamW state, no weight decay
    assert not set(trainer.optimizer.state) & {after[n] for n in frozen}


def test_freezing_nothing_or_unknown_parts_is_an_error():
    model = SptForSequenceClassification(SptConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
                                                   num_attention_heads=2, intermediate_size=8,
                                                   max_position_embeddings=8))
    with pytest.raises(ValueError, match="valid parts"):
        freeze_parts(model, "attn")
    with pytest.raises(ValueError, match="match no parameter"):
        freeze_parts(model, "attention", layers=[3])
