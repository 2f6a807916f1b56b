"""Length-aware batching: spend compute on real tokens when sequence lengths vary.

A batch is padded to its longest row, so random batches of variable-length data are mostly
padding (generated ListOps, 500-2000 tokens: 45% of positions, 65% of the attention work).
transformers' `LengthGroupedSampler` (`train_sampling_strategy="group_by_length"`) shuffles,
cuts the order into mega-batches of 50 batches and sorts each by length, which leaves 1-3%.

- `default_sampling_strategy`: the rule for a task's default, from its training lengths:
  grouped when their coefficient of variation (std / mean) exceeds `LENGTH_SPREAD_THRESHOLD`,
  random otherwise (fixed-length tasks: Image, Pathfinder, Markov).
- `grouping_lengths`: the length each row is grouped by, read from Arrow without decoding the
  rows. A two-tower row (`pair_input_ids`) counts as its longer document: each tower is padded
  on its own, and the longer document bounds both (on IMDB-like pairs it leaves less padding
  than the sum of both lengths or the first document's length).
- `LengthGroupedSamplingMixin`: a Trainer whose grouped sampler reads those lengths, and whose
  evaluation keeps the dataset's order whatever the training sampler, so per-example outputs
  line up with the rows and evaluation scores do not depend on how training batches are drawn.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
from datasets import Dataset
from torch.utils.data import Sampler, SequentialSampler
from transformers.trainer_pt_utils import LengthGroupedSampler
from transformers.trainer_utils import has_length

LENGTH_SPREAD_THRESHOLD = 0.1  # std/mean of the lengths; random batches of 32 then pad about 15% or more
SEQUENCE_COLUMNS = ("input_ids", "pair_input_ids")
ARROW_BATCH = 65_536


def column_lengths(dataset: Dataset, column: str) -> np.ndarray:
    """Lengths of the list column `column`, row by row (Arrow list lengths, rows never decoded)."""
    rows = dataset.select_columns([column]).with_format("arrow")
    parts = [pc.list_value_length(batch[column]).to_numpy(zero_copy_only=False) for batch in rows.iter(ARROW_BATCH)]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)


def grouping_lengths(dataset: Dataset) -> list[int]:
    """The length each row is grouped by: its `input_ids`, or for a pair the longer of its two documents."""
    columns = [column for column in SEQUENCE_COLUMNS if column in dataset.column_names]
    return np.max([column_lengths(dataset, column) for column in columns], axis=0).tolist()


def lengths_vary(lengths: list[int] | np.ndarray) -> bool:
    """Whether lengths spread enough for grouping to pay: coefficient of variation above the threshold."""
    lengths = np.asarray(lengths, dtype=np.float64)
    return bool(len(lengths) > 1 and lengths.mean() > 0 and lengths.std() / lengths.mean() > LENGTH_SPREAD_THRESHOLD)


def default_sampling_strategy(train: Dataset) -> str:
    """`train_sampling_strategy` a phase training on `train` defaults to: group_by_length or random."""
    return "group_by_length" if lengths_vary(grouping_lengths(train)) else "random"


class LengthGroupedSamplingMixin:
    """Trainer sampling: grouped batches read `grouping_lengths`; evaluation reads rows in order.

    transformers would compute the lengths by decoding every row (minutes at LRA sizes), and
    would group evaluation batches too, which reorders `predict` outputs and makes a phase's
    evaluation loss depend on the training sampler.
    """

    def _get_train_sampler(self, train_dataset: Dataset | None = None) -> Sampler | None:
        """transformers' sampler of `train_sampling_strategy`; a grouped one reads `grouping_lengths`."""
        train_dataset = train_dataset if train_dataset is not None else self.train_dataset
        if self.args.train_sampling_strategy != "group_by_length" or not isinstance(train_dataset, Dataset):
            return super()._get_train_sampler(train_dataset)
        batch = self.args.train_batch_size * self.args.gradient_accumulation_steps
        return LengthGroupedSampler(batch, lengths=grouping_lengths(train_dataset))

    def _get_eval_sampler(self, eval_dataset: Dataset) -> Sampler | None:
        """transformers' sampler of ungrouped evaluation, whatever the training sampler."""
        if eval_dataset is None or not has_length(eval_dataset) or self.args.world_size > 1:
            return None  # distributed: accelerate shards the dataset in order
        return SequentialSampler(eval_dataset)


__all__ = ["LENGTH_SPREAD_THRESHOLD", "column_lengths", "grouping_lengths", "lengths_vary", "default_sampling_strategy",
           "LengthGroupedSamplingMixin"]
