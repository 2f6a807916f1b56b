"""LoRA fine-tuning through peft: only adapters and the head train, the base stays, the adapter reloads."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from conftest import random_batch, tiny_config

from hf_spt import SptForSequenceClassification
from hf_spt.errors import UserInputError
from hf_spt.training.lora import apply_lora, default_target_modules, parameter_counts, require_peft

peft = pytest.importorskip("peft")


def lora_model(seed: int = 0):
    torch.manual_seed(seed)
    return apply_lora(SptForSequenceClassification(tiny_config()), r=4, lora_alpha=8)


def test_only_adapters_and_head_require_grad():
    model = lora_model()
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in name or ".classifier." in name for name in trainable)
    # 2 layers x (q_proj, v_proj) x (A: 4x32 + B: 32x4), plus the head (32 -> 3, with bias)
    assert parameter_counts(model)["trainable_parameters"] == 2 * 2 * (4 * 32 + 32 * 4) + 32 * 3 + 3
    assert default_target_modules(SptForSequenceClassification(tiny_config())) == ["q_proj", "v_proj"]


def test_training_moves_adapters_and_head_and_leaves_the_base_bit_identical():
    model = lora_model()
    frozen = {name: p.detach().clone() for name, p in model.named_parameters() if not p.requires_grad}
    trainable = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    batch = random_batch()
    for _ in range(3):
        loss = model(**batch, labels=torch.tensor([0, 1, 2])).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    after = dict(model.named_parameters())
    assert all(torch.equal(after[name], value) for name, value in frozen.items())
    moved = [name for name, value in trainable.items() if not torch.equal(after[name], value)]
    assert any("lora_B" in name for name in moved) and any("classifier" in name for name in moved)


def test_saved_adapter_reloads_with_the_same_logits(tmp_path):
    torch.manual_seed(0)
    SptForSequenceClassification(tiny_config()).save_pretrained(tmp_path / "base")
    model = apply_lora(SptForSequenceClassification.from_pretrained(tmp_path / "base"), r=4, lora_alpha=8)
    assert model.peft_config["default"].base_model_name_or_path == str(tmp_path / "base")
    with torch.no_grad():  # as if trained: non-zero adapters and a changed head
        for name, parameter in model.named_parameters():
            if parameter.requires_grad:
                parameter.add_(0.1 * torch.randn_like(parameter))
    model.eval()
    batch = random_batch()
    expected = model(**batch).logits
    model.save_pretrained(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
    reloaded = peft.AutoPeftModelForSequenceClassification.from_pretrained(tmp_path / "adapter").eval()
    torch.testing.assert_close(reloaded(**batch).logits, expected, rtol=0, atol=1e-6)


PLAIN_PEFT = textwrap.dedent('''
    import json
    import hf_spt
    from peft import LoraConfig, get_peft_model

    config = hf_spt.SptConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=37, num_labels=3)
    model = get_peft_model(hf_spt.SptForSequenceClassification(config), LoraConfig(task_type="SEQ_CLS", r=4))
    print(json.dumps({"targets": sorted(model.peft_config["default"].target_modules),
                      "trainable": sorted(name for name, p in model.named_parameters() if p.requires_grad)}))
''')


def test_plain_peft_finds_spt_default_targets_after_import_hf_spt():
    """As for BERT: `LoraConfig(task_type="SEQ_CLS")` without `target_modules` needs only `import hf_spt`
    (a fresh interpreter, so nothing but the package's import registers SPT with peft)."""
    result = subprocess.run([sys.executable, "-c", PLAIN_PEFT], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["targets"] == ["q_proj", "v_proj"]
    assert {name.split(".layers.")[-1] for name in found["trainable"] if "lora_" in name} == {
        f"{layer}.attention.{projection}.lora_{part}.default.weight"
        for layer in (0, 1) for projection in ("q_proj", "v_proj") for part in "AB"}
    assert {name for name in found["trainable"] if "lora_" not in name} == {
        "base_model.model.classifier.modules_to_save.default.weight",
        "base_model.model.classifier.modules_to_save.default.bias"}


def test_missing_peft_names_the_extra(without_peft):
    with pytest.raises(UserInputError, match=r'\.\[peft\]'):
        require_peft()


def test_an_architecture_without_peft_defaults_asks_for_target_modules():
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    model = DistilBertForSequenceClassification(DistilBertConfig(vocab_size=99, dim=32, n_layers=1, n_heads=4,
                                                                 hidden_dim=37))
    with pytest.raises(UserInputError, match="--lora_target_modules"):
        default_target_modules(model)
