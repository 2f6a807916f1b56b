"""Any transformers backbone through both phases: BERT (masked SPT), GPT-2 and Llama (causal SPT),
from random init and from a locally saved "pretrained" folder."""

from __future__ import annotations

import json

import pytest
import torch
from huggingface_hub import ModelCard
from tiny_backbone_runs import tiny_arguments, tiny_run
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSequenceClassification

import hf_spt  # noqa: F401  (registers the Auto classes)
from hf_spt.models.backbone_classifier import BackboneForSequenceClassification
from hf_spt.experiments.model_config import build_backbone_config
from hf_spt.training.model_factory import pretraining_model
from hf_spt.experiments.pipeline import prepare_task, run_experiment

CASES = [("bert", "masked", "mean"), ("gpt2", "causal", "last_mean"), ("llama", "causal", "last_mean")]


def _check_run(output_dir, model_type: str, pooling: str) -> None:
    results = json.loads((output_dir / "results.json").read_text())
    assert [arm["arm"] for arm in results["arms"]] == ["scratch", "spt"]
    for arm in ("scratch", "spt"):
        model = AutoModelForSequenceClassification.from_pretrained(output_dir / arm)
        assert isinstance(model, BackboneForSequenceClassification)
        assert model.config.backbone.model_type == model_type and model.config.pooling == pooling
        card = ModelCard.load(output_dir / arm / "README.md")
        phase = json.loads((output_dir / arm / "phase.json").read_text())
        test_accuracy = [r.metric_value for r in card.data.eval_results
                         if r.dataset_split == "test" and r.metric_type == "accuracy"]
        assert test_accuracy == [phase["test_accuracy"]]


@pytest.mark.parametrize("model_type,objective,pooling", CASES)
def test_from_scratch_through_both_phases(tmp_path, model_type, objective, pooling):
    weighting = dict(token_weighting="inverse_frequency", class_weighting="balanced") if model_type == "gpt2" else {}
    run_experiment(*tiny_arguments(tmp_path, model_type=model_type, from_scratch=True, pretrain_objective=objective,
                                   **weighting))
    _check_run(tmp_path, model_type, pooling)
    pretrained = AutoConfig.from_pretrained(tmp_path / "pretrain")
    assert pretrained.vocab_size == 20 and pretrained.max_position_embeddings == 16 and pretrained.hidden_size == 16
    spt_state = json.loads((tmp_path / "spt" / "phase.json").read_text())
    assert spt_state["init_from"] == str(tmp_path / "pretrain")


@pytest.mark.parametrize("model_type,objective,pooling", CASES)
def test_from_a_local_pretrained_folder(tmp_path, model_type, objective, pooling):
    run = tiny_run(tmp_path, model_type=model_type, from_scratch=True)
    task = prepare_task(run.task, seed=0)
    config = build_backbone_config(task, run.model)
    saved = pretraining_model(config, objective)
    saved.save_pretrained(tmp_path / "pretrained")
    task.tokenizer.save_pretrained(tmp_path / "pretrained")
    run_experiment(*tiny_arguments(tmp_path / "run", model_name_or_path=str(tmp_path / "pretrained"),
                                   hidden_size=None, num_attention_heads=None, intermediate_size=None,
                                   num_hidden_layers=None, pretrain_objective=objective))
    _check_run(tmp_path / "run", model_type, pooling)
    scratch_card = ModelCard.load(tmp_path / "run" / "scratch" / "README.md")
    assert scratch_card.data.spt["init_from"] == "../pretrained"  # relative to the run folder, never absolute
    # the fine-tuned backbone is the saved one after a few small steps, far closer to it than a random init
    saved_state = saved.base_model.state_dict()
    random_state = type(saved.base_model)(saved.config).state_dict()
    for arm in ("scratch", "spt"):
        tuned_state = AutoModelForSequenceClassification.from_pretrained(tmp_path / "run" / arm).backbone.state_dict()
        assert set(saved_state) <= set(tuned_state), arm
        moved = sum((tuned_state[k].float() - saved_state[k].float()).norm() ** 2 for k in saved_state) ** 0.5
        random = sum((random_state[k].float() - saved_state[k].float()).norm() ** 2 for k in saved_state) ** 0.5
        assert moved < 0.25 * random, f"{arm}: {moved:.3f} from the saved weights, a random init {random:.3f}"


def test_pretrained_backbone_weights_are_loaded(tmp_path):
    run = tiny_run(tmp_path, model_type="bert", from_scratch=True)
    config = build_backbone_config(prepare_task(run.task, seed=0), run.model)
    saved = pretraining_model(config, "masked")
    saved.save_pretrained(tmp_path)
    from hf_spt.training.model_factory import classification_model

    classifier = classification_model(config, tmp_path)
    torch.testing.assert_close(classifier.backbone.embeddings.word_embeddings.weight,
                               saved.bert.embeddings.word_embeddings.weight)
    fresh = classification_model(config)
    assert not torch.equal(fresh.backbone.embeddings.word_embeddings.weight, saved.bert.embeddings.word_embeddings.weight)


def test_wrong_objective_and_bad_sources_fail_clearly(tmp_path):
    run = tiny_run(tmp_path, model_type="gpt2", from_scratch=True)
    task = prepare_task(run.task, seed=0)
    gpt2 = build_backbone_config(task, run.model)
    with pytest.raises(ValueError, match="no masked-LM head.*--pretrain_objective causal"):
        pretraining_model(gpt2, "masked")
    from hf_spt.experiments.model_config import build_config

    spt_config = build_config(task, tiny_run(tmp_path).model)
    with pytest.raises(ValueError, match="needs a decoder architecture"):
        pretraining_model(spt_config, "causal")
    small = AutoModelForCausalLM.from_config(AutoConfig.for_model("gpt2", vocab_size=8, n_positions=16, n_embd=16,
                                                                  n_layer=1, n_head=2))
    small.save_pretrained(tmp_path / "small")
    with pytest.raises(ValueError, match="8 token embeddings.*20 token ids"):
        build_backbone_config(task, tiny_run(tmp_path, model_name_or_path=str(tmp_path / "small")).model)
    with pytest.raises(RuntimeError, match="not a local folder, and HF_HUB_OFFLINE is set"):
        build_backbone_config(task, tiny_run(tmp_path, model_name_or_path="someone/not-cached-model").model)


def test_masked_lm_of_any_encoder_reads_the_spt_collator(tmp_path):
    run = tiny_run(tmp_path, model_type="distilbert", from_scratch=True)
    config = build_backbone_config(prepare_task(run.task, seed=0), run.model)
    model = pretraining_model(config, "masked")
    assert isinstance(model, AutoModelForMaskedLM._model_mapping[type(config.backbone)])
    assert config.pooling == "mean" and config.backbone.dim == 16
