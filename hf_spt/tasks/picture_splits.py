"""Seeded splits of a labelled picture set, shared by the picture tasks (`digits`, `mnist`).

`stratified_order` shuffles each class and interleaves the classes by rank, so every prefix holds each class in
proportion to its count (give or take one picture): fixed held-out splits are its prefixes under `split_seed`, and
`training_subset` takes a prefix of the training pool under the run's seed. Proportional, not balanced: MNIST's
pool of 58,000 gives 90-113 pictures a digit at `num_train` 1,000. A small prefix can miss a class, so
`training_subset` refuses a size under `smallest_full_subset`, the least at which every seed's draw holds every
class; larger sizes draw exactly what they always drew.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserInputError


def stratified_order(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices of `labels` shuffled within each class and interleaved by rank: picture j of a class of n (after its
    shuffle) ranks (j + u) / n, with one uniform u a class, so every prefix holds the classes in proportion."""
    per_class = [rng.permutation(np.flatnonzero(labels == label)) for label in np.unique(labels)]
    rank = np.empty(len(labels), dtype=np.float64)
    for indices in per_class:
        rank[indices] = (np.arange(len(indices)) + rng.random()) / len(indices)
    return np.argsort(rank, kind="stable")


def smallest_full_subset(labels: np.ndarray) -> int:
    """The least prefix of `stratified_order(labels, ...)` that holds every class whatever the seed: class c's first
    picture ranks below 1 / n_c, where class d has at most ceil(n_d / n_c) pictures, so it comes at place
    1 + sum over d != c of ceil(n_d / n_c) at worst (reached as c's u nears 1 and the others' near 0)."""
    counts = np.unique(labels, return_counts=True)[1].tolist()
    return max(sum(-(-other // count) for other in counts) for count in counts)  # d == c adds c's own 1


def training_subset(pool: np.ndarray, labels: np.ndarray, num_train: int | None, seed: int, task: str) -> np.ndarray:
    """`num_train` pictures of the training pool `pool` (indices into `labels`), a prefix of its `stratified_order`
    under `seed`: each class in proportion to its share of the pool (None: the whole pool). `task` names the task in
    the error for a size that some seed's draw would leave a class out of, or one over the pool."""
    if num_train is None:
        return pool
    smallest = smallest_full_subset(labels[pool])
    if not smallest <= num_train <= len(pool):
        raise UserInputError(f"{task}: num_train must be between {smallest} (the least that holds every class "
                             f"whatever the seed) and the training pool's {len(pool)}, got {num_train}.")
    return np.sort(pool[stratified_order(labels[pool], np.random.default_rng(seed))[:num_train]])


__all__ = ["stratified_order", "smallest_full_subset", "training_subset"]
