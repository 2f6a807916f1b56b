"""Trainer of the fine-tuning phase: sequence classification with the task's labels."""

from __future__ import annotations

import numpy as np
from datasets import Dataset
from transformers import EvalPrediction, PreTrainedModel, PreTrainedTokenizerBase, Trainer

from .collator import DataCollatorForClassification
from .finetune_config import FinetuneTrainingArguments


def classification_metrics(prediction: EvalPrediction) -> dict[str, float]:
    """Accuracy for single-label logits (B, C); exact-match accuracy for multi-label; MSE for regression."""
    logits, labels = prediction.predictions, prediction.label_ids
    if isinstance(logits, tuple):
        logits = logits[0]
    if logits.ndim == 2 and logits.shape[1] > 1 and labels.ndim == 1:
        return {"accuracy": float((logits.argmax(axis=-1) == labels).mean())}
    if labels.ndim == 2:  # multi-label: a label set is right when every bit is
        return {"accuracy": float(((logits > 0) == (labels > 0.5)).all(axis=-1).mean())}
    return {"mse": float(np.mean((logits.reshape(labels.shape) - labels) ** 2))}


class FinetuneTrainer(Trainer):
    """`Trainer` for classification: padding collator and accuracy metrics by default."""

    def __init__(
        self,
        model: PreTrainedModel,
        args: FinetuneTrainingArguments,
        train_dataset: Dataset,
        eval_dataset: Dataset | None = None,
        processing_class: PreTrainedTokenizerBase | None = None,
        data_collator=None,
        compute_metrics=classification_metrics,
        **kwargs,
    ):
        if data_collator is None:
            if processing_class is None:
                raise ValueError("FinetuneTrainer needs the tokenizer (processing_class) or a data_collator.")
            data_collator = DataCollatorForClassification(processing_class)
        super().__init__(
            model=model,
            args=args,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=processing_class,
            data_collator=data_collator,
            compute_metrics=compute_metrics,
            **kwargs,
        )


__all__ = ["FinetuneTrainer", "classification_metrics"]
