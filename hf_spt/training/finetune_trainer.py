"""Trainer of the fine-tuning phase: sequence classification with the task's labels."""

from __future__ import annotations

import functools

import evaluate
import numpy as np
import torch
from datasets import Dataset
from transformers import EvalPrediction, PreTrainedModel, PreTrainedTokenizerBase, Trainer

from ..errors import UserInputError
from .collators import DataCollatorForClassification, check_pad_multiple, model_max_width
from .arguments import FinetuneArguments
from .length_grouping import LengthGroupedSamplingMixin
from .losses import label_weight_total, weighted_class_loss
from .metrics import SHIPPED_METRICS, load_metric
from .model_card import ModelCardMixin
from .padding_free import check_padding_free, runs_a_kernel


@functools.cache
def shipped_metric_modules() -> tuple[evaluate.EvaluationModule, ...]:
    """The shipped `evaluate` modules (accuracy, macro-F1), loaded on first use and kept for every later evaluation."""
    return tuple(load_metric(name) for name in SHIPPED_METRICS)


def classification_metrics(prediction: EvalPrediction) -> dict[str, float]:
    """Accuracy and macro-F1 (the shipped `evaluate` modules, loaded once) for single-label logits (B, C);
    exact-match accuracy for multi-label; MSE for regression."""
    logits, labels = prediction.predictions, prediction.label_ids
    if isinstance(logits, tuple):
        logits = logits[0]
    if logits.ndim == 2 and logits.shape[1] > 1 and labels.ndim == 1:
        predicted = logits.argmax(axis=-1)
        scores = {}
        for module in shipped_metric_modules():
            scores.update(module.compute(predictions=predicted, references=labels))
        return scores
    if labels.ndim == 2:  # multi-label: a label set is right when every bit is
        return {"accuracy": float(((logits > 0) == (labels > 0.5)).all(axis=-1).mean())}
    return {"mse": float(np.mean((logits.reshape(labels.shape) - labels) ** 2))}


class FinetuneTrainer(LengthGroupedSamplingMixin, ModelCardMixin, Trainer):
    """`Trainer` for classification: padding collator and accuracy metrics by default; length-grouped
    batches (a pair by its longer document) and evaluation order: `LengthGroupedSamplingMixin`;
    `args.padding_free`: packed batches (`check_padding_free` says when). On an accelerator its collator leaves
    out the attention mask of a batch none of whose rows is padded (`without_attention_mask`: no host sync for
    transformers' all-ones check; CPU batches keep it, so CPU runs compute exactly as before). Its padded widths
    stop at the model's positions, and a `pad_to_multiple_of` larger than them is refused (`check_pad_multiple`)."""

    def __init__(
        self,
        model: PreTrainedModel,
        args: FinetuneArguments,
        train_dataset: Dataset,
        eval_dataset: Dataset | None = None,
        processing_class: PreTrainedTokenizerBase | None = None,
        data_collator=None,
        compute_metrics=classification_metrics,
        **kwargs,
    ):
        kernel_path = False
        if args.padding_free:
            kernel_path = runs_a_kernel(check_padding_free(model, args))
            if data_collator is not None:
                raise UserInputError("padding_free builds its own packing collator: pass no data_collator.")
        if data_collator is None:
            if processing_class is None:
                raise ValueError("FinetuneTrainer needs the tokenizer (processing_class) or a data_collator.")
            max_width = model_max_width(model)
            check_pad_multiple(args.pad_to_multiple_of, max_width)
            data_collator = DataCollatorForClassification(processing_class, args.pad_to_multiple_of, args.padding_free,
                                                          omit_full_attention_mask=args.device.type != "cpu",
                                                          max_width=max_width, return_seq_idx=not kernel_path)
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
        self.class_weights = None if args.class_weights is None else torch.tensor(args.class_weights)
        if self.class_weights is not None and len(self.class_weights) != model.config.num_labels:
            raise UserInputError(
                f"class_weights has {len(self.class_weights)} entries but the model has {model.config.num_labels} labels."
            )

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        """The step's batches; with `class_weights`, their total label weight replaces the label count
        `num_items_in_batch`, so the weighted loss is right under gradient accumulation."""
        batch_samples, num_items_in_batch = super().get_batch_samples(epoch_iterator, num_batches, device)
        if self.class_weights is not None and num_items_in_batch is not None:
            labels = (batch["labels"] for batch in batch_samples)
            num_items_in_batch = label_weight_total(labels, self.class_weights).to(device)
        return batch_samples, num_items_in_batch

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """The model's loss, or with `class_weights` the class-weighted cross-entropy (same forward pass)."""
        labels = inputs.get("labels")
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch)
        if self.class_weights is not None and labels is not None:
            if labels.dim() != 1 or labels.is_floating_point():
                raise UserInputError("class_weights apply to single-label classification only (integer labels, one per row).")
            loss = weighted_class_loss(outputs["logits"], labels, self.class_weights, num_items_in_batch)
            # divided by the step's total weight when the Trainer counted it, else a per-batch mean it divides itself
            self.loss_is_scaled_for_ga = num_items_in_batch is not None
        return (loss, outputs) if return_outputs else loss


__all__ = ["FinetuneTrainer", "classification_metrics"]
