"""`tasks.picture_splits`: a stratified draw holds each class in proportion, and `training_subset` refuses a size
some seed's draw would leave a class out of (the least safe size is tight: one under it misses a class)."""

import numpy as np
import pytest

from hf_spt.errors import UserInputError
from hf_spt.tasks.picture_splits import smallest_full_subset, stratified_order, training_subset


def classes_held(labels, size, seeds=range(300)):
    """How many classes each seed's prefix of `size` holds."""
    return {len(np.unique(labels[stratified_order(labels, np.random.default_rng(seed))[:size]])) for seed in seeds}


def test_the_smallest_full_subset_holds_every_class_and_one_fewer_does_not_always():
    labels = np.repeat([0, 1], [4, 7])  # class 0's first picture comes third at worst: ceil(4/4) + ceil(7/4)
    assert smallest_full_subset(labels) == 3
    assert classes_held(labels, 3) == {2} and classes_held(labels, 2) == {1, 2}
    pool = np.arange(len(labels))
    assert len(np.unique(labels[training_subset(pool, labels, 3, seed=5, task="toy")])) == 2
    with pytest.raises(UserInputError, match=r"toy: num_train must be between 3 \(the least that holds every class"):
        training_subset(pool, labels, 2, seed=0, task="toy")
    with pytest.raises(UserInputError, match="and the training pool's 11, got 12"):
        training_subset(pool, labels, 12, seed=0, task="toy")
    assert smallest_full_subset(np.repeat(np.arange(10), 5)) == 10  # equal classes: one each
