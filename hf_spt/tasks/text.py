"""LRA Text: IMDB movie-review sentiment at byte level, 2 classes, 4096 bytes (1000 selectable).

Sources, in order: `data_dir` as the original IMDB release (`aclImdb/{train,test}/{pos,neg}/*.txt`)
or a folder saved by `DatasetDict.save_to_disk` (columns `text`, `label`); with no `data_dir`,
`load_dataset("imdb")` from the Hub. LRA evaluates on IMDB's test split and has no validation
split; hf_spt carves one (`validation_fraction` of train, seeded) so the best checkpoint is
chosen without looking at test.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Annotated

from datasets import Dataset, DatasetDict

from ..models.tokenization_spt import build_byte_tokenizer
from ..value_checks import FRACTION, POSITIVE_INT
from .common import (DataFormatError, carve_validation, hub_dataset, is_saved_dataset, load_saved_dataset,
                     require_path, rows_to_dataset, byte_encode_column)
from .registry import Task, TaskPreset, register_task

LABEL_NAMES = ["neg", "pos"]
LAYOUT = ("  DATA_DIR/train/neg/*.txt, DATA_DIR/train/pos/*.txt, DATA_DIR/test/neg/*.txt, DATA_DIR/test/pos/*.txt\n"
          "  (DATA_DIR = the aclImdb folder), or a DatasetDict saved with save_to_disk (columns text, label)")
SOURCE = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz, or load_dataset('imdb') when online."


def read_imdb_folder(path: str, fingerprint: str) -> Iterator[dict]:
    """Reviews of one aclImdb split folder (`pos/`, `neg/`) as {"text", "labels"}."""
    del fingerprint  # only keys the cache
    for label, name in enumerate(LABEL_NAMES):
        folder = require_path(Path(path) / name, f"IMDB {name} reviews", LAYOUT, SOURCE)
        for review in sorted(folder.glob("*.txt")):
            yield {"text": review.read_text(encoding="utf-8", errors="replace"), "labels": label}


def imdb_splits(data_dir: str | None, cache_dir: str | None) -> dict[str, Dataset]:
    """IMDB train and test with columns `text`, `labels`, from `data_dir` or the Hub."""
    if data_dir is None:
        data = hub_dataset("imdb", "Download aclImdb_v1.tar.gz (" + SOURCE.split(",")[0] + "), unpack it and pass "
                           "--data_dir PATH/aclImdb.", cache_dir=cache_dir)
    else:
        folder = require_path(data_dir, "IMDB data folder", LAYOUT, SOURCE)
        if is_saved_dataset(folder):
            data = load_saved_dataset(folder)
        else:
            data = {split: rows_to_dataset(read_imdb_folder, require_path(folder / split, f"IMDB {split} folder", LAYOUT,
                                                                          SOURCE), cache_dir) for split in ("train", "test")}
    splits = {}
    for split in ("train", "test"):
        if split not in data:
            raise DataFormatError(f"IMDB data from {data_dir or 'the Hub'} has no {split!r} split.")
        dataset = data[split]
        if "labels" not in dataset.column_names:
            dataset = dataset.rename_column("label", "labels")
        splits[split] = dataset.select_columns(["text", "labels"])
    return splits


PRESET = TaskPreset(
    max_length=4096,
    num_labels=2,
    mlm_probability=0.15,
    batch_size=32,
    model=dict(num_hidden_layers=6, hidden_size=512, num_attention_heads=8, intermediate_size=2048, pooling="mean"),
)


@register_task(
    "text",
    description="LRA Text: IMDB sentiment at byte level, 4096 bytes (task option max_length=1000 for the LRA code's "
    "setting), 2 classes.",
    needs="DATA_DIR = aclImdb/ ({train,test}/{pos,neg}/*.txt) or a saved DatasetDict; or the Hub's 'imdb' when online",
    preset=PRESET,
)
def load_text(
    data_dir: str | None = None,
    seed: int = 0,
    max_length: Annotated[int, POSITIVE_INT] = 4096,
    validation_fraction: Annotated[float, FRACTION] = 0.1,
    num_proc: Annotated[int, POSITIVE_INT] | None = None,
    cache_dir: str | None = None,
) -> Task:
    """IMDB as byte ids cut at `max_length`; validation carved from train with `seed`."""
    splits = imdb_splits(data_dir, cache_dir)
    train, validation = carve_validation(splits["train"], validation_fraction, seed)
    tokenizer = build_byte_tokenizer(model_max_length=max_length)
    dataset = DatasetDict(train=train, validation=validation, test=splits["test"])
    dataset = DatasetDict({split: byte_encode_column(data, "text", "input_ids", max_length, num_proc)
                           .remove_columns("text") for split, data in dataset.items()})
    preset = replace(PRESET, max_length=max_length)
    return Task("text", dataset, tokenizer, preset, label_names=LABEL_NAMES)


__all__ = ["LABEL_NAMES", "read_imdb_folder", "imdb_splits", "load_text"]
