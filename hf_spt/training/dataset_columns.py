"""The columns of a tokenized task that the encoder reads: its `input_ids` (and a pair's second document's
`pair_input_ids`), labels never; what SPT trains on, what sampling and the compute counts are measured over."""

from __future__ import annotations

from datasets import Dataset, concatenate_datasets


def inputs_only(dataset: Dataset) -> Dataset:
    """The inputs SPT reads: `input_ids` only, labels never. For pair tasks both documents are rows."""
    inputs = dataset.select_columns(["input_ids"])
    if "pair_input_ids" in dataset.column_names:
        pairs = dataset.select_columns(["pair_input_ids"]).rename_column("pair_input_ids", "input_ids")
        inputs = concatenate_datasets([inputs, pairs])
    return inputs


def input_lengths(dataset: Dataset) -> list[int]:
    """Token counts of the sequences the encoder reads from `dataset` (`inputs_only`: both documents of a pair)."""
    return list(map(len, inputs_only(dataset)["input_ids"]))


__all__ = ["input_lengths", "inputs_only"]
