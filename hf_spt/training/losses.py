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

CLASS_WEIGHTING = ("none", "balanced")
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
        raise ValueError(f"--class_weighting {spec!r}: use none, balanced, or {num_labels} comma-separated numbers.") from None
    if len(weights) != num_labels or min(weights) < 0:
        raise ValueError(f"--class_weighting {spec!r}: give {num_labels} non-negative numbers, one per class.")
    return weights


def inverse_frequency_token_weights(sequences: Iterable[Sequence[int]], vocab_size: int) -> torch.Tensor:
    """Weights (V,) proportional to 1 / count of each token id in `sequences`, averaging 1 per occurrence.

    w_v = total / (num_distinct * count_v), so sum_v count_v * w_v = total. Ids absent from the
    training inputs get the weight of a single occurrence (they can only appear at evaluation).
    """
    counts = torch.zeros(vocab_size, dtype=torch.float64)
    for ids in sequences:
        counts += torch.bincount(torch.as_tensor(ids, dtype=torch.long), minlength=vocab_size)[:vocab_size].double()
    total, distinct = counts.sum(), (counts > 0).sum()
    if total == 0:
        raise ValueError("Token weighting needs training inputs: the training set has no tokens.")
    return (total / (distinct * counts.clamp(min=1.0))).float()


def weighted_token_loss(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor, shift: bool) -> torch.Tensor:
    """Token-weighted cross-entropy of language-model `logits` against `labels` (-100 = ignored).

    `logits` are (B, T, V) for any masked or causal LM (`shift`: position t predicts t+1), or
    (N, V) at the N labelled positions only, as `SptForMaskedLM` returns them.
    """
    if shift:
        logits, labels = logits[:, :-1], labels[:, 1:]
    if logits.dim() == 2 and labels.dim() == 2:  # flat logits: one row per labelled position
        labels = labels[labels != -100]
    weights = weights.to(device=logits.device)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), weight=weights,
                           ignore_index=-100)


def weighted_class_loss(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Class-weighted cross-entropy of single-label logits (B, C) against labels (B,)."""
    return F.cross_entropy(logits.float(), labels.long(), weight=weights.to(logits.device))


__all__ = ["CLASS_WEIGHTING", "TOKEN_WEIGHTING", "class_weights_from_spec", "inverse_frequency_token_weights",
           "weighted_token_loss", "weighted_class_loss"]
