"""Metrics through `evaluate`, from modules shipped in the package (no Hub)."""

import numpy as np
import pytest
from transformers import EvalPrediction

from hf_spt.training.finetune_trainer import classification_metrics
from hf_spt.training.metrics import load_metric


def test_shipped_accuracy_and_macro_f1_load_offline_and_compute():
    assert load_metric("accuracy").compute(predictions=[0, 1, 1, 2], references=[0, 1, 0, 2]) == {"accuracy": 0.75}
    # per class F1: 0 -> 2/3, 1 -> 2/3, 2 -> 1
    macro = load_metric("macro_f1").compute(predictions=[0, 1, 1, 2], references=[0, 1, 0, 2])["macro_f1"]
    assert macro == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)


def test_macro_f1_weighs_classes_equally():
    # the majority class right, the minority class always missed: accuracy 0.9, macro-F1 far lower
    references, predictions = [0] * 9 + [1], [0] * 10
    assert load_metric("accuracy").compute(predictions=predictions, references=references)["accuracy"] == 0.9
    assert load_metric("macro_f1").compute(predictions=predictions, references=references)["macro_f1"] == pytest.approx(
        (2 * 9 / (2 * 9 + 1)) / 2)


def test_hub_metric_offline_says_what_to_do(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="not shipped with hf_spt"):
        load_metric("bleu_that_is_not_here")


def test_classification_metrics_report_accuracy_and_macro_f1():
    logits = np.array([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0], [0.0, 2.0]])
    scores = classification_metrics(EvalPrediction(predictions=logits, label_ids=np.array([0, 1, 1, 1])))
    assert scores["accuracy"] == 0.75
    assert scores["macro_f1"] == pytest.approx((2 / 3 + 0.8) / 2)


def test_metric_modules_load_once_across_evaluations(monkeypatch):
    import hf_spt.training.finetune_trainer as finetune

    loaded = []
    monkeypatch.setattr(finetune, "load_metric", lambda name: loaded.append(name) or load_metric(name))
    finetune.shipped_metric_modules.cache_clear()
    prediction = EvalPrediction(predictions=np.array([[2.0, 0.0], [0.0, 1.0]]), label_ids=np.array([0, 0]))
    first, second = classification_metrics(prediction), classification_metrics(prediction)
    assert first == second == {"accuracy": 0.5, "macro_f1": pytest.approx(1 / 3)}
    assert loaded == ["accuracy", "macro_f1"]
    finetune.shipped_metric_modules.cache_clear()
