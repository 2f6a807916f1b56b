"""What a transformers user relies on, for every SPT head and every position encoding.

Save/load with no missing or unexpected keys, resizing (tied weights stay tied), attention and
hidden-state outputs, the standard MLM logits shape under `Trainer.evaluate`, padding invariance, gradient checkpointing, `torch.export` and
`torch.compile(fullgraph=True)` with an attention mask, the pipelines, bf16 loading, and loading
with `trust_remote_code=True` in an interpreter where hf_spt cannot be imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from conftest import activation_checkpointing_on, enable_activation_checkpointing, random_batch, tiny_config
from datasets import Dataset
from transformers import (AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer, BertConfig,
                          DataCollatorForLanguageModeling, Trainer, TrainingArguments, pipeline)

from hf_spt import BackboneClassifierConfig, BackboneForSequenceClassification, SptForMaskedLM, SptForSequenceClassification, SptModel
from hf_spt.models.attention_spt import attention_bias
from hf_spt.models.configuration_spt import POSITION_EMBEDDING_TYPES
from hf_spt.models.tokenization_spt import build_word_tokenizer

HEADS = {SptModel: AutoModel, SptForMaskedLM: AutoModelForMaskedLM, SptForSequenceClassification: AutoModelForSequenceClassification}
ALL = [(cls, position) for cls in HEADS for position in POSITION_EMBEDDING_TYPES]
IDS = [f"{cls.__name__}-{position}" for cls, position in ALL]


def tokenizer():
    return build_word_tokenizer([f"s{i}" for i in range(95)])  # vocab 99, as tiny_config


def build(cls, position: str):
    torch.manual_seed(0)
    return cls(tiny_config(position_embedding_type=position)).eval()


def first_output(model, batch) -> torch.Tensor:
    with torch.no_grad():
        return model(**batch)[0]


@pytest.mark.parametrize(("cls", "position"), ALL, ids=IDS)
def test_save_load_round_trip_has_no_missing_or_unexpected_keys(tmp_path, cls, position):
    model = build(cls, position)
    model.save_pretrained(tmp_path)
    loaded, info = HEADS[cls].from_pretrained(tmp_path, output_loading_info=True)
    assert type(loaded) is cls
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    batch = random_batch()
    assert torch.equal(first_output(model, batch), first_output(loaded.eval(), batch))


@pytest.mark.parametrize("cls", [SptForMaskedLM, SptForSequenceClassification])
@pytest.mark.parametrize("position", POSITION_EMBEDDING_TYPES)
def test_resize_token_embeddings_keeps_tied_weights_and_runs(cls, position):
    model = build(cls, position)
    model.resize_token_embeddings(120)
    embeddings = model.get_input_embeddings()
    assert embeddings.weight.shape == (120, 32) and model.config.vocab_size == 120
    if cls is SptForMaskedLM:
        assert model.lm_head.decoder.weight is embeddings.weight
        assert model.lm_head.decoder.bias is model.lm_head.bias and model.lm_head.bias.shape == (120,)
        assert torch.equal(model.lm_head.bias, torch.zeros(120))  # zero init, grown with the mean of zeros as BERT's
    output = first_output(model, random_batch(vocab=120))
    assert output.shape == ((3, 12, 120) if cls is SptForMaskedLM else (3, 3))


def test_added_tokens_resize_save_and_reload(tmp_path):
    model, tok = build(SptForMaskedLM, "sinusoidal"), tokenizer()
    tok.add_tokens(["new_a", "new_b"])
    model.resize_token_embeddings(len(tok))
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    batch = AutoTokenizer.from_pretrained(tmp_path)(["s1 new_a s2", "new_b"], return_tensors="pt", padding=True)
    assert loaded.lm_head.decoder.weight is loaded.spt.embeddings.word_embeddings.weight
    assert loaded.lm_head.bias.shape == (101,)
    torch.testing.assert_close(first_output(loaded, batch), first_output(model, batch))


@pytest.mark.parametrize(("cls", "position"), ALL, ids=IDS)
def test_attentions_and_hidden_states_shapes(cls, position):
    with torch.no_grad():
        output = build(cls, position)(**random_batch(), output_attentions=True, output_hidden_states=True)
    assert len(output.attentions) == 2 and all(a.shape == (3, 4, 12, 12) for a in output.attentions)
    assert len(output.hidden_states) == 3 and all(h.shape == (3, 12, 32) for h in output.hidden_states)
    padded = output.attentions[0][2, :, :, 8:]  # row 2 has 8 real tokens
    assert torch.equal(padded, torch.zeros_like(padded))


@pytest.mark.parametrize(("cls", "position"), ALL, ids=IDS)
def test_extra_padding_changes_no_output(cls, position):
    model, batch = build(cls, position), random_batch()
    padded = {key: torch.cat((value, torch.zeros(3, 5, dtype=value.dtype)), dim=1) for key, value in batch.items()}
    short, long = first_output(model, batch), first_output(model, padded)
    if cls is not SptForSequenceClassification:  # per-token outputs: compare the real tokens
        real = batch["attention_mask"].bool()
        short, long = short[real], long[:, :12][real]
    torch.testing.assert_close(short, long, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("cls", "position"), ALL, ids=IDS)
def test_gradient_checkpointing_gives_equal_gradients(cls, position):
    batch = random_batch()
    gradients = []
    for checkpointing in (False, True):
        model = build(cls, position).train()
        if checkpointing:
            with warnings.catch_warnings():
                warnings.simplefilter("error", FutureWarning)  # no deprecated name
                enable_activation_checkpointing(model)
            assert activation_checkpointing_on(model)
        model(**batch)[0].float().square().mean().backward()
        gradients.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    for plain, checkpointed in zip(*gradients, strict=True):
        torch.testing.assert_close(plain, checkpointed)


# Every head and every position encoding once (export is the slow part of this module).
EXPORTED = [(SptForSequenceClassification, "sinusoidal"), (SptModel, "learned"), (SptForMaskedLM, "rotary"),
            (SptForSequenceClassification, "alibi"), (SptForMaskedLM, "none")]


@pytest.mark.parametrize(("cls", "position"), EXPORTED, ids=[f"{cls.__name__}-{position}" for cls, position in EXPORTED])
def test_export_with_dynamic_shapes_on_unpadded_input_runs_padded_input(cls, position):
    model, batch = build(cls, position), random_batch()
    unpadded = {"input_ids": batch["input_ids"], "attention_mask": torch.ones_like(batch["attention_mask"])}
    length = torch.export.Dim("length", min=2, max=64)
    program = torch.export.export(model, args=(), kwargs=unpadded,
                                  dynamic_shapes={"input_ids": {1: length}, "attention_mask": {1: length}})
    static = torch.export.export(model, args=(), kwargs=batch)
    shorter = {key: value[:, :7] for key, value in batch.items()}
    with torch.no_grad():
        for exported, inputs in ((program, batch), (program, shorter), (program, unpadded), (static, batch)):
            torch.testing.assert_close(exported.module()(**inputs)[0], first_output(model, inputs))


def test_unpadded_batches_pass_no_mask_so_sdpa_keeps_its_fused_kernel():
    model, batch = build(SptModel, "sinusoidal"), random_batch()
    embeds = model.get_input_embeddings()(batch["input_ids"])
    assert model.config._attn_implementation == "sdpa"
    assert attention_bias(model.config, torch.ones_like(batch["attention_mask"]), embeds, None) is None
    assert attention_bias(model.config, None, embeds, None) is None
    assert attention_bias(model.config, batch["attention_mask"], embeds, None).shape == (3, 1, 12, 12)


@pytest.mark.parametrize("cls", list(HEADS))
def test_compile_fullgraph_with_a_mask_equals_eager(cls):
    """Dynamo traces the whole forward with no graph break (the "eager" backend keeps it fast on CPU)."""
    torch._dynamo.reset()
    model, batch = build(cls, "alibi"), random_batch()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    assert cls._can_compile_fullgraph
    with torch.no_grad():
        torch.testing.assert_close(compiled(**batch)[0], first_output(model, batch))


def test_pipelines_on_saved_folders(tmp_path):
    tok = tokenizer()
    for cls in (SptForSequenceClassification, SptForMaskedLM):
        build(cls, "sinusoidal").save_pretrained(tmp_path / cls.__name__)
        tok.save_pretrained(tmp_path / cls.__name__)
    classify = pipeline("text-classification", model=str(tmp_path / "SptForSequenceClassification"), device="cpu")
    assert classify(["s1 s2 s3", "s4"])[0]["label"].startswith("LABEL_")
    fill = pipeline("fill-mask", model=str(tmp_path / "SptForMaskedLM"), device="cpu", top_k=3)
    assert len(fill("s1 [MASK] s3")) == 3
    features = pipeline("feature-extraction", model=str(tmp_path / "SptForSequenceClassification"), device="cpu")
    assert torch.tensor(features("s1 s2 s3")).shape == (1, 3, 32)


def test_bf16_loading(tmp_path):
    model = build(SptForSequenceClassification, "rotary")
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path, dtype=torch.bfloat16).eval()
    assert all(parameter.dtype == torch.bfloat16 for parameter in loaded.parameters())
    batch = random_batch()
    torch.testing.assert_close(first_output(loaded, batch).float(), first_output(model, batch), atol=0.1, rtol=0.1)


HIDDEN_PACKAGE_LOADER = textwrap.dedent('''
    import importlib.abc, json, sys

    class HideHfSpt(importlib.abc.MetaPathFinder):
        """Refuses hf_spt even where an editable install or a path entry would serve it."""

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "hf_spt":
                raise ModuleNotFoundError(f"No module named {name!r}")

    sys.meta_path.insert(0, HideHfSpt())
    try:
        import hf_spt
        sys.exit("hf_spt is importable")
    except ModuleNotFoundError:
        pass
    import torch
    import transformers
    from transformers import AutoTokenizer, pipeline

    for folder, autos in json.loads(sys.argv[1]).items():
        batch = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)(["s1 s2 s3", "s4"], padding=True,
                                                                             return_tensors="pt")
        for auto in autos:
            model = getattr(transformers, auto).from_pretrained(folder, trust_remote_code=True).eval()
            assert not type(model).__module__.startswith("hf_spt"), type(model).__module__
            with torch.no_grad():
                torch.save(model(**batch)[0], f"{folder}/remote_{auto}.pt")
        if "AutoModel" in autos:  # the pipeline loads the folder with AutoModel
            features = pipeline("feature-extraction", model=folder, trust_remote_code=True, device="cpu")
            assert not type(features.model).__module__.startswith("hf_spt"), type(features.model).__module__
            torch.save(torch.tensor(features("s1 s2 s3")), f"{folder}/remote_features.pt")
''')

SPT_AUTO_CLASSES = {"AutoConfig", "AutoModel", "AutoModelForMaskedLM", "AutoModelForSequenceClassification"}


def test_trust_remote_code_loads_every_head_without_hf_spt(tmp_path):
    """Each saved folder maps every class its copied code holds, whichever class saved it: an SPT
    masked-LM checkpoint loads as a classifier (run_classification.py's `--trust_remote_code`), as the
    bare encoder and in the feature-extraction pipeline, in an interpreter where hf_spt cannot be imported."""
    tok = tokenizer()
    backbone = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)
    spt_autos = ["AutoModel", "AutoModelForMaskedLM", "AutoModelForSequenceClassification"]
    models = {
        "spt_classifier": (build(SptForSequenceClassification, "alibi"), spt_autos, SPT_AUTO_CLASSES),
        "spt_mlm": (build(SptForMaskedLM, "rotary"), spt_autos, SPT_AUTO_CLASSES),
        "spt_encoder": (build(SptModel, "learned"), spt_autos, SPT_AUTO_CLASSES),
        "backbone_classifier": (BackboneForSequenceClassification(BackboneClassifierConfig(backbone=backbone,
                                                                                           num_labels=2)).eval(),
                                ["AutoModelForSequenceClassification"],
                                {"AutoConfig", "AutoModelForSequenceClassification"}),
    }
    folders = {}
    for name, (model, autos, mapped) in models.items():
        model.save_pretrained(tmp_path / name)
        tok.save_pretrained(tmp_path / name)
        assert set(json.loads((tmp_path / name / "config.json").read_text())["auto_map"]) == mapped, name
        folders[str(tmp_path / name)] = autos
    env = {"HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules"), "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", HIDDEN_PACKAGE_LOADER, json.dumps(folders)], env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    batch = tok(["s1 s2 s3", "s4"], padding=True, return_tensors="pt")
    single = tok(["s1 s2 s3"], return_tensors="pt")
    for name, (model, autos, _) in models.items():
        folder = tmp_path / name
        encoder = model.base_model  # the SPT encoder (or BERT backbone) inside every head
        for auto in autos:
            remote = torch.load(folder / f"remote_{auto}.pt")
            if auto == type(model)._auto_class:  # the class that saved the folder
                torch.testing.assert_close(remote, first_output(model, batch))
            elif auto == "AutoModel":
                torch.testing.assert_close(remote, first_output(encoder, batch))  # the encoder's hidden states
            else:
                assert remote.shape[0] == 2  # another head on the same encoder: new head weights, right batch
        if "AutoModel" in autos:
            torch.testing.assert_close(torch.load(folder / "remote_features.pt"), first_output(encoder, single))


def test_trainer_evaluate_with_run_mlm_accuracy_metric(tmp_path):
    """run_mlm.py's `preprocess_logits_for_metrics` (argmax over (B, T, V)) and its masked accuracy."""
    def preprocess_logits_for_metrics(logits, labels):
        return logits.argmax(dim=-1)

    def compute_metrics(prediction):
        predictions, labels = prediction.predictions.reshape(-1), prediction.label_ids.reshape(-1)
        real = labels != -100
        return {"accuracy": float((predictions[real] == labels[real]).mean())}

    tok = tokenizer()
    data = Dataset.from_dict({"input_ids": [[5 + i, 6, 7, 8, 9, 10][: 3 + i % 3] for i in range(8)]})
    args = TrainingArguments(output_dir=str(tmp_path), per_device_eval_batch_size=4, report_to=[], use_cpu=True)
    trainer = Trainer(build(SptForMaskedLM, "sinusoidal"), args, eval_dataset=data,
                      data_collator=DataCollatorForLanguageModeling(tok, mlm_probability=0.5, seed=0),
                      preprocess_logits_for_metrics=preprocess_logits_for_metrics, compute_metrics=compute_metrics)
    metrics = trainer.evaluate()
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0 and metrics["eval_loss"] > 0
