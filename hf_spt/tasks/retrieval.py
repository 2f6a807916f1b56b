"""LRA Retrieval: do two ACL Anthology papers cite one another? Byte level, 4000 bytes per paper, a pair task.

Files, exactly as released (lra_release/tsv_data): `DATA_DIR/new_aan_pairs.{train,eval,test}.tsv`,
tab-separated, no header, columns `label id1 id2 text1 text2`. The first paper becomes
`input_ids`, the second `pair_input_ids`; the classifier is two-tower (one shared encoder,
classifier on [u, v, u*v, u-v]) and SPT pretrains on both papers of every pair.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Annotated

from datasets import DatasetDict

from ..errors import MissingInputError
from ..models.tokenization_spt import build_byte_tokenizer
from ..value_checks import POSITIVE_INT
from .common import DataFormatError, byte_encode_column, require_path, rows_to_dataset
from .registry import Task, TaskPreset, register_task

SPLIT_FILES = {"train": "new_aan_pairs.train.tsv", "validation": "new_aan_pairs.eval.tsv",
               "test": "new_aan_pairs.test.tsv"}
LABELS = {"0": 0, "1": 1, "0.0": 0, "1.0": 1}
LAYOUT = ("  DATA_DIR/new_aan_pairs.train.tsv, new_aan_pairs.eval.tsv, new_aan_pairs.test.tsv\n"
          "  (tab-separated, no header; columns label id1 id2 text1 text2)")
SOURCE = "the LRA release (lra_release.gz from google-research/long-range-arena, folder lra_release/tsv_data)."


def read_aan_tsv(path: str, fingerprint: str) -> Iterator[dict]:
    """Rows of a released AAN pairs TSV as {"text1", "text2", "labels"}; bad rows name file and line."""
    del fingerprint  # only keys the cache
    with open(path, encoding="utf-8", errors="replace", newline="\n") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():  # a blank line (a trailing newline too many): no example
                continue
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) != 5:
                raise DataFormatError(f"{path}, line {line_number}: expected 5 tab-separated fields "
                                      f"(label id1 id2 text1 text2), found {len(fields)}.")
            if fields[0] not in LABELS:
                raise DataFormatError(f"{path}, line {line_number}: unknown label {fields[0]!r}; expected 0 or 1.")
            yield {"text1": fields[3], "text2": fields[4], "labels": LABELS[fields[0]]}


PRESET = TaskPreset(
    max_length=4000,
    num_labels=2,
    mlm_probability=0.15,
    batch_size=32,
    model=dict(num_hidden_layers=4, hidden_size=128, num_attention_heads=4, intermediate_size=512, pooling="mean"),
)


@register_task(
    "retrieval",
    description="LRA Retrieval: ACL Anthology citation pairs, byte level, 4000 bytes per paper, two-tower, 2 classes.",
    needs="DATA_DIR/new_aan_pairs.{train,eval,test}.tsv (LRA release, lra_release/tsv_data)",
    preset=PRESET,
)
def load_retrieval(
    data_dir: str | None = None,
    seed: int = 0,
    max_length: Annotated[int, POSITIVE_INT] = 4000,
    num_proc: Annotated[int, POSITIVE_INT] | None = None,
    cache_dir: str | None = None,
) -> Task:
    """Both papers as byte ids cut at `max_length`; `seed` is unused (the release fixes the splits)."""
    if data_dir is None:
        raise MissingInputError(f"The retrieval task needs its files: pass --data_dir.\nExpected layout:\n{LAYOUT}\n"
                                f"Where the data come from: {SOURCE}")
    folder = require_path(data_dir, "Retrieval data folder", LAYOUT, SOURCE)
    tokenizer = build_byte_tokenizer(model_max_length=max_length)
    splits = {}
    for split, file_name in SPLIT_FILES.items():
        rows = rows_to_dataset(read_aan_tsv, require_path(Path(folder) / file_name, f"Retrieval {split} file",
                                                          LAYOUT, SOURCE), cache_dir)
        rows = byte_encode_column(rows, "text1", "input_ids", max_length, num_proc)
        rows = byte_encode_column(rows, "text2", "pair_input_ids", max_length, num_proc)
        splits[split] = rows.remove_columns(["text1", "text2"])
    preset = replace(PRESET, max_length=max_length)
    return Task("retrieval", DatasetDict(splits), tokenizer, preset, label_names=["unrelated", "cited"], is_pair=True)


__all__ = ["SPLIT_FILES", "read_aan_tsv", "load_retrieval"]
