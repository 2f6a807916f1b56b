"""Training compute counted from the model's shapes, and validation accuracy against it.

The question a user asks first is whether SPT pays for its compute: validation accuracy after each
epoch against cumulative training FLOPs, SPT's curve starting at its pretraining cost. FLOPs are
counted from the encoder's shapes, not by a profiler, per sequence of its own length n (padding
excluded: the useful work, the same whatever the batching), per layer of width d, MLP width f:

    projections Q, K, V, O  8 n d²      (four d x d matrix products, 2 FLOPs a multiply-add)
    attention scores, mix   4 n² d      (Q Kᵀ and the weighted sum of values)
    MLP                     4 n d f

plus the head: the masked-LM head's transform and decoder (2 n (d² + d V)) over every position,
or the classifier's pooled product. A training step costs three forwards (the backward pass
about two: Kaplan et al. 2020's convention); frozen weights skip their weight gradients but not
the backward through them, so frozen arms are counted at the same rate. transformers'
`Trainer.floating_point_ops` (6 x parameters x tokens) leaves out the n² attention term, which
at LRA lengths is most of the work (at n = 1,024 and d = 64 it is four times the projections'),
hence this count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

TRAINING_PASSES = 3  # forward + backward (about twice the forward)


def _shape(config: Any) -> tuple[int, int, int]:
    return config.hidden_size, config.num_hidden_layers, config.intermediate_size


def forward_flops(config: Any, lengths: Iterable[int], head: str = "classifier") -> float:
    """Forward FLOPs of the encoder plus `head` ("classifier" or "masked_lm") over sequences of `lengths` tokens."""
    if head not in ("classifier", "masked_lm"):
        raise ValueError(f"head is 'classifier' or 'masked_lm', got {head!r}.")
    d, layers, f = _shape(config)
    n = np.asarray(list(lengths), dtype=np.float64)
    per_layer = 8 * n * d * d + 4 * n * n * d + 4 * n * d * f
    total = layers * per_layer.sum()
    if head == "masked_lm":
        total += 2 * n.sum() * (d * d + d * config.vocab_size)
    else:
        labels = getattr(config, "num_labels", None) or len(getattr(config, "id2label", None) or {0: 0, 1: 1})
        total += 2 * len(n) * 2 * d * labels  # at most two pooled vectors (mean and last)
    return float(total)


def training_flops(config: Any, lengths: Iterable[int], head: str = "classifier") -> float:
    """FLOPs of one training epoch over sequences of `lengths` tokens (three forwards each)."""
    return TRAINING_PASSES * forward_flops(config, lengths, head)


def epoch_accuracies(log_history: Sequence[dict[str, Any]], metric: str = "eval_accuracy") -> list[tuple[float, float]]:
    """(epoch, validation metric) of each evaluation during training: the entries before the Trainer's closing
    summary (`train_runtime`), after which come re-evaluations of the kept model and the test set."""
    points = []
    for entry in log_history:
        if "train_runtime" in entry:
            break
        if metric in entry and "epoch" in entry:
            points.append((float(entry["epoch"]), float(entry[metric])))
    return points


@dataclass
class ComputeCurve:
    """One fine-tuning run's validation accuracy against cumulative training FLOPs (pretraining included)."""

    config: str
    arm: str
    seed: int
    pretrain_flops: float
    flops_per_epoch: float
    points: list[tuple[float, float]] = field(default_factory=list)  # (epoch, validation accuracy)
    test_accuracy: float | None = None

    def flops(self) -> list[float]:
        return [self.pretrain_flops + epoch * self.flops_per_epoch for epoch, _ in self.points]

    def running_best(self) -> list[float]:
        """The best validation accuracy so far after each epoch: what the kept checkpoint scores."""
        return list(np.maximum.accumulate([accuracy for _, accuracy in self.points])) if self.points else []

    def kept_flops(self) -> float:
        """Cumulative FLOPs at the checkpoint fine-tuning keeps, the one `test_accuracy` was measured on: the first
        epoch of the best validation accuracy (the Trainer's best model changes only on a strict improvement), for a
        phase that selects by validation accuracy, fine-tuning's default."""
        accuracies = [accuracy for _, accuracy in self.points]
        return self.flops()[accuracies.index(max(accuracies))]

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "arm": self.arm, "seed": self.seed, "pretrain_flops": self.pretrain_flops,
                "flops_per_epoch": self.flops_per_epoch, "points": [list(point) for point in self.points],
                "test_accuracy": self.test_accuracy}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ComputeCurve":
        return cls(**{**data, "points": [tuple(point) for point in data["points"]]})


@dataclass
class ArmCurve:
    """An arm's curves over seeds: the mean running best after each epoch, each seed's last value carried on
    after it stopped, at the seeds' mean cumulative FLOPs; and the lowest and highest seed's running best there."""

    arm: str
    seeds: int
    flops: list[float]
    best_so_far: list[float]
    lowest_so_far: list[float]
    highest_so_far: list[float]
    total_flops: float  # mean over seeds, pretraining included
    pretrain_flops: float  # mean over seeds (the seeds of an arm pretrain alike)
    test_accuracies: list[float]  # the seeds' that have one

    @property
    def best(self) -> float:
        return self.best_so_far[-1]

    def first_reaching(self, target: float, tolerance: float = 1e-9) -> float | None:
        """Cumulative FLOPs at which the mean best-so-far first reaches `target` (None: never)."""
        return next((flops for flops, value in zip(self.flops, self.best_so_far) if value >= target - tolerance), None)


def arm_curve(curves: list[ComputeCurve]) -> ArmCurve:
    """The seeds' curves of one arm combined (`ArmCurve`)."""
    longest = max(len(curve.points) for curve in curves)
    flops = np.array([[*curve.flops(), *[np.nan] * (longest - len(curve.points))] for curve in curves])
    best = np.array([[*curve.running_best(), *[curve.running_best()[-1]] * (longest - len(curve.points))]
                     for curve in curves])
    mean_flops = []
    for column in range(longest):  # a stopped seed would have spent per epoch what the others spend
        known = flops[:, column][~np.isnan(flops[:, column])]
        mean_flops.append(float(known.mean()))
    totals = [curve.flops()[-1] for curve in curves]
    return ArmCurve(curves[0].arm, len(curves), mean_flops, [float(v) for v in best.mean(axis=0)],
                    [float(v) for v in best.min(axis=0)], [float(v) for v in best.max(axis=0)],
                    float(np.mean(totals)), float(np.mean([curve.pretrain_flops for curve in curves])),
                    [curve.test_accuracy for curve in curves if curve.test_accuracy is not None])


__all__ = ["TRAINING_PASSES", "forward_flops", "training_flops", "epoch_accuracies", "ComputeCurve", "ArmCurve",
           "arm_curve"]
