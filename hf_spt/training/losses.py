"""Loss weighting for unbalanced data: class weights (fine-tuning) and token weights (SPT).

Balestriero & Huang: self-supervised learning is supervision with very fine labels, so the
class-reweighting of supervised learning carries over to the SPT loss, where each token id is
a class. "The Fair Language Model Paradox" shows that the plain token average lets rare tokens
degrade; inverse-frequency weights give each token id the same total weight.

Both weightings are weighted means, sum_i w[y_i] * loss_i / sum_i w[y_i] (PyTorch's
`cross_entropy(weight=...)`), normalised so that the weights average to 1 over the training
data: the loss scale, and so the learning rate, stays comparable with unweighted training.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch
from torch.nn import functional as F

from ..errors import UserInputError

TOKEN_WEIGHTING = ("none", "inverse_frequency")


def class_weights_from_spec(spec: str | None, labels: Sequence[int], num_labels: int) -> list[float] | None:
    """Class weights from a `--class_weighting` spec: None/"none", "balanced", or a comma list of `num_labels` floats.

    "balanced" is scikit-learn's rule, n_samples / (num_labels * count_c): every class then carries
    the same total weight over the training labels (a class absent from them gets weight 0).
    """
    if spec is None or spec == "none":
        return None
    if spec == "balanced":
        counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=num_labels).astype(np.float64)
        weights = np.divide(len(labels), num_labels * counts, out=np.zeros_like(counts), where=counts > 0)
        return weights.tolist()
    try:
        weights = [float(value) for value in spec.split(",")]
    except ValueError:
        raise UserInputError(f"--class_weighting {spec!r}: use none, balanced, or {num_labels} comma-separated numbers.") from None
    if len(weights) != num_labels or min(weights) < 0:
        raise UserInputError(f"--class_weighting {spec!r}: give {num_labels} non-negative numbers, one per class.")
    return weights


def token_id_counts(sequences: Iterable[Sequence[int]], vocab_size: int) -> torch.Tensor:
    """Occurrences (V,) of every token id in `sequences` (int64); the one token count of SPT weighting and analysis."""
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for ids in sequences:
        counts += torch.bincount(torch.as_tensor(ids, dtype=torch.long), minlength=vocab_size)[:vocab_size]
    return counts


def inverse_frequency_token_weights(sequences: Iterable[Sequence[int]], vocab_size: int) -> torch.Tensor:
    """Weights (V,) proportional to 1 / count of each token id in `sequences`, averaging 1 per occurrence.

    w_v = total / (num_distinct * count_v), so sum_v count_v * w_v = total. Ids absent from the
    training inputs get the weight of a single occurrence (they can only appear at evaluation).
    """
    counts = token_id_counts(sequences, vocab_size).double()
    total, distinct = counts.sum(), (counts > 0).sum()
    if total == 0:
        raise UserInputError("Token weighting needs training inputs: the training set has no tokens.")
    return (total / (distinct * counts.clamp(min=1.0))).float()


def _lm_targets(labels: torch.Tensor, flat_logits: bool, shift: bool) -> torch.Tensor:
    """The labels an LM loss scores: shifted for causal LMs, the labelled ones only for flat logits."""
    if shift:
        labels = labels[:, 1:]
    return labels[labels != -100] if flat_logits else labels


def weighted_token_loss(
    logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor, shift: bool, total_weight: torch.Tensor | None = None
) -> torch.Tensor:
    """Token-weighted cross-entropy of language-model `logits` against `labels` (-100 = ignored).

    `logits` are (B, T, V) for any masked or causal LM (`shift`: position t predicts t+1), or
    (N, V) at the N labelled positions only (`SptForMaskedLM` with `sparse_prediction`).
    sum_i w[y_i] * loss_i is divided by `total_weight` (`label_weight_total` over every batch of
    the optimizer step, so gradient accumulation gives the full batch's loss), else by this
    batch's sum_i w[y_i].
    """
    if shift:
        logits = logits[:, :-1]
    labels = _lm_targets(labels, logits.dim() == 2 and labels.dim() == 2, shift)
    weights = weights.to(device=logits.device)
    flat_logits, flat_labels = logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1)
    if total_weight is None:
        return F.cross_entropy(flat_logits, flat_labels, weight=weights, ignore_index=-100)
    total = F.cross_entropy(flat_logits, flat_labels, weight=weights, ignore_index=-100, reduction="sum")
    return total / total_weight.to(total.device)


def weighted_class_loss(
    logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor, total_weight: torch.Tensor | None = None
) -> torch.Tensor:
    """Class-weighted cross-entropy of single-label logits (B, C) against labels (B,).

    sum_i w[y_i] * loss_i divided by `total_weight` (over every batch of the optimizer step),
    else by this batch's sum_i w[y_i].
    """
    weights = weights.to(logits.device)
    if total_weight is None:
        return F.cross_entropy(logits.float(), labels.long(), weight=weights)
    total = F.cross_entropy(logits.float(), labels.long(), weight=weights, reduction="sum")
    return total / total_weight.to(total.device)


def label_weight_total(label_batches: Iterable[torch.Tensor], weights: torch.Tensor, shift: bool = False) -> torch.Tensor:
    """sum_i w[y_i] over the labelled positions (-100 skipped) of all the batches of one optimizer step.

    The weighted losses divide by it under gradient accumulation, as transformers' losses divide by
    the Trainer's `num_items_in_batch` (`shift`: causal LM labels, position 0 never scored).
    """
    total = torch.zeros((), dtype=torch.float64)
    for labels in label_batches:
        targets = _lm_targets(labels, True, shift).long().cpu()
        total += weights.double().cpu()[targets].sum()
    return total.float()


__all__ = ["TOKEN_WEIGHTING", "class_weights_from_spec", "token_id_counts",
           "inverse_frequency_token_weights", "weighted_token_loss", "weighted_class_loss", "label_weight_total"]
