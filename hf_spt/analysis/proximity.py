"""Proximity profile of attention: how much attention mass goes to nearby tokens.

Coser et al. (arXiv 2605.21070) explain self-pretraining by a proximity bias: after SPT,
attention maps are diagonal-banded. Here that is measured on attention probabilities
(B, H, T, T) over real tokens only (`attention_mask`), and set against *uniform attention
over the same real tokens*, so a ratio of 1 means "no preference for neighbours" whatever the
sequence lengths and padding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class ProximityStats:
    """Running sums for one layer, accumulated batch by batch; `scores()` turns them into ratios.

    Per head: attention mass within |i - j| <= k, expected |i - j|, and the same two under
    uniform attention, summed over real query rows; and per signed distance d = j - i the summed
    attention A[i, i + d] and its count, for the profile.
    """

    max_distance: int
    near: int = 2
    rows: float = 0.0
    near_mass: torch.Tensor | None = None
    uniform_near_mass: float = 0.0
    distance: torch.Tensor | None = None
    uniform_distance: float = 0.0
    profile_sum: torch.Tensor | None = None
    profile_count: torch.Tensor | None = field(default=None)

    def update(self, probs: torch.Tensor, attention_mask: torch.Tensor | None) -> None:
        """Add a batch of attention probabilities (B, H, T, T) with its mask (B, T) (None: all real)."""
        probs = probs.detach().double()
        batch, heads, length, _ = probs.shape
        if length - 1 > self.max_distance:
            raise ValueError(f"Sequences of {length} tokens exceed max_distance={self.max_distance}; raise it.")
        real = torch.ones(batch, length, dtype=torch.bool) if attention_mask is None else attention_mask.bool().cpu()
        probs = probs.cpu()
        position = torch.arange(length)
        offset = (position[None, :] - position[:, None]).abs().double()  # (T, T) |j - i|
        near = offset <= self.near
        keys = real[:, None, :].double()  # (B, 1, T) real key columns
        rows = real.double()  # (B, T) real query rows
        count = keys.sum(-1)  # (B, 1) real tokens per sequence
        if self.near_mass is None:
            self.near_mass = torch.zeros(heads, dtype=torch.float64)
            self.distance = torch.zeros(heads, dtype=torch.float64)
            self.profile_sum = torch.zeros(heads, 2 * self.max_distance + 1, dtype=torch.float64)
            self.profile_count = torch.zeros(2 * self.max_distance + 1, dtype=torch.float64)
        weighted = probs * keys[:, None]  # (B, H, T, T): padded keys carry no mass
        self.near_mass += ((weighted * near).sum(-1) * rows[:, None]).sum((0, 2))
        self.distance += ((weighted * offset).sum(-1) * rows[:, None]).sum((0, 2))
        self.uniform_near_mass += float((((keys * near).sum(-1) / count) * rows).sum())
        self.uniform_distance += float((((keys * offset).sum(-1) / count) * rows).sum())
        self.rows += float(rows.sum())
        for d in range(-(length - 1), length):
            diagonal = probs.diagonal(offset=d, dim1=-2, dim2=-1)  # (B, H, T - |d|)
            query = position[: length - abs(d)] + max(-d, 0)
            valid = (real[:, query] & real[:, query + d]).double()  # (B, T - |d|)
            self.profile_sum[:, d + self.max_distance] += (diagonal * valid[:, None]).sum((0, 2))
            self.profile_count[d + self.max_distance] += float(valid.sum())

    def scores(self) -> dict[str, list[float] | float]:
        """Per-head and head-mean scores, each also as a ratio to uniform attention."""
        if self.near_mass is None or self.rows == 0:
            raise ValueError("No real tokens seen: call update() with at least one non-empty batch.")
        near = self.near_mass / self.rows
        distance = self.distance / self.rows
        uniform_near = self.uniform_near_mass / self.rows
        uniform_distance = self.uniform_distance / self.rows
        return {
            "near": self.near,
            f"near{self.near}_mass": near.tolist(),
            f"near{self.near}_uniform": uniform_near,
            f"near{self.near}_ratio": (near / uniform_near).tolist(),
            f"near{self.near}_ratio_mean": float((near / uniform_near).mean()),
            "mean_distance": distance.tolist(),
            "mean_distance_uniform": uniform_distance,
            "mean_distance_ratio": (distance / uniform_distance).tolist(),
            "mean_distance_ratio_mean": float((distance / uniform_distance).mean()),
        }

    def profile(self) -> tuple[list[int], torch.Tensor]:
        """Signed distances d = j - i seen, and the mean attention A[i, i + d] per head (H, num_d)."""
        seen = self.profile_count > 0
        distances = (torch.arange(2 * self.max_distance + 1) - self.max_distance)[seen].tolist()
        return distances, self.profile_sum[:, seen] / self.profile_count[seen]


def proximity_scores(
    attentions: tuple[torch.Tensor, ...], attention_mask: torch.Tensor | None, near: int = 2
) -> list[dict[str, list[float] | float]]:
    """Proximity scores of one batch, one dict per layer (see `ProximityStats.scores`)."""
    stats = []
    for probs in attentions:
        layer = ProximityStats(max_distance=probs.shape[-1] - 1, near=near)
        layer.update(probs, attention_mask)
        stats.append(layer.scores())
    return stats


__all__ = ["ProximityStats", "proximity_scores"]
