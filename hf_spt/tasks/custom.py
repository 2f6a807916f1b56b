"""The user's own classification data: CSV, JSON/JSONL or Parquet files, or a saved `datasets` folder.

Files as in transformers' run_glue: `train_file` (required unless `data_dir` is a saved
DatasetDict), `validation_file`, `test_file`; a missing validation or test split is carved from
train (`validation_fraction` each, seeded). Columns: `text_column` (and `text_pair_column` for
pairs, which become a two-tower task) tokenized at byte level, or an `input_ids` column of
token ids used as is (ids 0-3 are [PAD], [MASK], [CLS], [UNK]; every id an integer below
`vocab_size`, by default below the largest id + 1, at most 65536); `label_column` holds integer
class ids or strings (one kind per column), which map to ids in sorted order (or the order of
`label_names`) and land in the model config's id2label. The task is classification only: the
training labels must hold two classes at least, and float labels (regression targets) are an
error, never a silent regression. Without `max_length` the longest example sets the length, up to
MAX_IMPLIED_LENGTH; a longer example is an error naming its row.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, DatasetDict, Json, load_dataset
from datasets.exceptions import DatasetGenerationError

from ..errors import MissingInputError
from ..models.tokenization_spt import build_byte_tokenizer, build_word_tokenizer
from ..value_checks import FRACTION, POSITIVE_INT
from .common import (DataFormatError, carve_validation, content_cache_dir, is_saved_dataset, load_saved_dataset, require_path,
                     byte_encode_column, utf8_error)
from .registry import Task, TaskPreset, register_task

BUILDERS = {".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}
LAYOUT = ("  --train_file FILE [--validation_file FILE] [--test_file FILE] (.csv, .tsv, .json, .jsonl, .parquet; one "
          "example per row),\n  or --data_dir FOLDER saved by DatasetDict.save_to_disk (a 'train' split at least)")
SOURCE = "your own data."
MAX_INFERRED_VOCAB = 65536
# The longest length a file may set by itself: Path-X's 16384 tokens, the longest sequences of the package's tasks.
# Attention memory grows with the square of the length, so a stray 200,000-byte row would size a model no GPU holds.
MAX_IMPLIED_LENGTH = 16384


def read_files(files: dict[str, str], cache_dir: str | None) -> DatasetDict:
    """Load the given split files with the `datasets` builder their extension names."""
    paths = {split: require_path(path, f"Custom {split} file", LAYOUT, SOURCE) for split, path in files.items()}
    suffixes = {path.suffix.lower() for path in paths.values()}
    if len(suffixes) != 1 or next(iter(suffixes)) not in BUILDERS:
        raise DataFormatError(f"Custom data files must share one extension among {sorted(BUILDERS)}; got {sorted(suffixes)}.")
    suffix = suffixes.pop()
    options = {"delimiter": "\t"} if suffix == ".tsv" else {}
    cache_dir = content_cache_dir(list(paths.values()), cache_dir)  # a file changed in place is read again
    data = DatasetDict()
    for split, path in paths.items():
        # text files are checked first: the JSON reader stores invalid UTF-8 silently and fails later
        if suffix != ".parquet" and (not_utf8 := utf8_error(path)) is not None:
            raise not_utf8
        try:
            data[split] = load_dataset(BUILDERS[suffix], data_files=str(path), split="train", cache_dir=cache_dir,
                                       **options)
        except (DatasetGenerationError, pa.ArrowException) as error:  # a truncated parquet file is the latter
            raise DataFormatError(f"Could not read {path}: {getattr(error, '__cause__', None) or error}") from None
        except ValueError as error:
            if "corresponds to no data" not in str(error):
                raise
            raise DataFormatError(f"Custom {split} split is empty ({path} holds no rows).") from None
    return data


def label_mapping(train: Dataset, label_column: str, label_names: list[str] | None) -> list[str] | None:
    """Label names (index = id) when labels are strings; None when they are already integer ids."""
    values = train.unique(label_column)
    if label_names is not None:
        return [str(name) for name in label_names]
    if all(isinstance(value, str) for value in values):
        return sorted(values)
    if all(isinstance(value, int) and not isinstance(value, bool) for value in values):
        return None
    raise DataFormatError(f"Label column {label_column!r} must hold class names (strings) or class ids (integers); "
                          f"found {sorted(map(repr, values))[:5]}.")


def describe(value: Any) -> str:
    """A cell's value for a message: its JSON kind and (shortened) repr, e.g. `the integer 1`."""
    kinds = {str: "the string", bool: "the boolean", int: "the integer", float: "the number", list: "the list",
             dict: "the object"}
    shown = repr(value)
    return f"{kinds.get(type(value), type(value).__name__)} {shown if len(shown) <= 40 else shown[:37] + '...'}"


def check_label_cells(data: Dataset, where: str, label_column: str) -> None:
    """Every label cell holds a value, all of one kind (class names or class ids); else an error naming the rows.

    A JSON column mixing kinds reaches `datasets` as its `Json` feature, which Arrow cannot compare
    (`unique` raised ArrowNotImplementedError); the error names a row of each kind instead.
    """
    column = data.data.column(label_column)
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise DataFormatError(f"{where}, row {row + 1}: the label (column {label_column!r}) is empty; give every "
                              "example its class (or drop the row).")
    if not isinstance(data.features[label_column], Json):
        return
    first_of_kind: dict[type, tuple[int, Any]] = {}
    for row, value in enumerate(data[label_column]):
        first_of_kind.setdefault(type(value), (row, value))
    examples = ", ".join(f"row {row + 1} holds {describe(value)}" for row, value in first_of_kind.values())
    problem = "mixes kinds of values" if len(first_of_kind) > 1 else "holds no class names or ids"
    raise DataFormatError(f"{where}: label column {label_column!r} {problem}: {examples}. Give every label as a "
                          "class name (a string, e.g. \"1\") or every label as a class id (an integer).")


def check_classes(train: Dataset, label_column: str, where: str) -> None:
    """Classification needs two classes in train at least: with one, transformers would take the single
    output for regression, train through the whole budget, and report no accuracy."""
    classes = sorted(train.unique(label_column), key=str)
    if len(classes) < 2:
        raise DataFormatError(f"{where}: column {label_column!r} holds a single class {classes} in the training "
                              "data; classification needs examples of two classes at least.")


def encode_labels(data: Dataset, split: str, label_column: str, names: list[str] | None, num_labels: int) -> Dataset:
    """`labels` as ids; an unknown name or an id out of range is an error naming the split and the value."""
    known = names if names is not None else list(range(num_labels))
    unknown = sorted(set(data.unique(label_column)) - set(known), key=str)
    if unknown:
        raise DataFormatError(f"Custom {split} split: unknown label(s) {unknown[:5]} in column {label_column!r}; "
                              f"the labels are {known[:20]} (from train, or --task_options label_names).")
    if names is None:
        return data.rename_column(label_column, "labels") if label_column != "labels" else data
    index = {name: i for i, name in enumerate(names)}
    return data.map(lambda batch: {"labels": [index[v] for v in batch[label_column]]}, batched=True,
                    remove_columns=[label_column] if label_column != "labels" else None, desc=f"labels of {split}")


def check_token_ids(data: Dataset, where: str, vocab_size: int | None) -> int:
    """The largest id of the `input_ids` column; ids that are not integers in [0, vocab) are an error naming the row.

    Without `vocab_size` the vocabulary is the largest id + 1, capped at MAX_INFERRED_VOCAB so that a
    stray huge id cannot allocate gigabytes of embeddings before anything fails.
    """
    column = data.data.column("input_ids").combine_chunks()
    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)) or not pa.types.is_integer(
            column.type.value_type):
        raise DataFormatError(f"{where}: the input_ids column must hold lists of integer token ids, found {column.type}.")
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise DataFormatError(f"{where}, row {row + 1}: input_ids is empty (null).")
    empty = np.flatnonzero(pc.list_value_length(column).to_numpy(zero_copy_only=False) == 0)
    if empty.size:
        raise DataFormatError(f"{where}, row {int(empty[0]) + 1}: input_ids is an empty list; every example needs at "
                              "least one token (drop the row).")
    limit = vocab_size or MAX_INFERRED_VOCAB
    ids = pc.list_flatten(column).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero((ids < 0) | (ids >= limit))
    if bad.size:
        offsets = column.offsets.to_numpy()
        row = int(np.searchsorted(offsets, bad[0], side="right") - 1)
        bad_id = int(ids[bad[0]])
        fix = (" Token ids are never negative." if bad_id < 0 else "" if vocab_size else
               " Ids that large need --task_options '{\"vocab_size\": N}' (and a model to match).")
        raise DataFormatError(f"{where}, row {row + 1}: token id {bad_id} is outside [0, {limit}): ids 0-3 "
                              f"are [PAD], [MASK], [CLS], [UNK], the others tokens of your vocabulary.{fix}")
    return int(ids.max()) if ids.size else 0


def check_text_cells(data: Dataset, where: str, columns: list[str]) -> None:
    """Every cell of the text `columns` holds a string; an empty (null) or non-text cell is an error naming the row."""
    for name in columns:
        column = data.data.column(name)
        if column.null_count:
            row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
            raise DataFormatError(f"{where}, column {name!r}, row {row + 1}: the cell is empty; give every example "
                                  "its text (or drop the row).")
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            row, value = next((row, value) for row, value in enumerate(data[name]) if not isinstance(value, str))
            raise DataFormatError(f"{where}, column {name!r}, row {row + 1}: the cell holds {describe(value)}, not "
                                  "text; give every example its text as a string (quoted in JSON).")
        empty = np.flatnonzero(pc.utf8_length(column.combine_chunks()).to_numpy(zero_copy_only=False) == 0)
        if empty.size:
            raise DataFormatError(f"{where}, column {name!r}, row {int(empty[0]) + 1}: the text is empty (\"\"); an "
                                  "example of zero tokens trains on nothing: give it its text (or drop the row).")


def check_implied_length(data: Dataset, where: str, columns: list[str], limit: int) -> None:
    """Without a given `max_length` the longest example sets it; an example longer than `limit` tokens is an
    error naming its row and the fix, before any model is sized to it. Text is one token per UTF-8 byte."""
    for name in columns:
        column = data.data.column(name)
        text = pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        lengths = (pc.binary_length(column) if text else pc.list_value_length(column)).to_numpy(zero_copy_only=False)
        if lengths.size and lengths.max() > limit:
            row = int(np.argmax(lengths > limit))
            unit = "bytes (tokens)" if text else "token ids"
            raise DataFormatError(f"{where}, row {row + 1}: column {name!r} holds {int(lengths[row])} {unit}, more than "
                                  f"the {limit} a data file may set as the length by itself. Pass --max_length N "
                                  f"--truncation to cut the examples to N tokens (e.g. --max_length {limit} "
                                  "--truncation), or --max_length N alone if every example fits in N.")


PRESET = TaskPreset(
    max_length=None,  # the longest example, unless max_length is given
    num_labels=None,  # from the training labels
    mlm_probability=0.15,
    batch_size=32,
    model=dict(num_hidden_layers=4, hidden_size=128, num_attention_heads=4, intermediate_size=512, pooling="mean"),
)


@register_task(
    "custom",
    description="Your own classification data: text (or text pairs, or input_ids) and labels (names or ids).",
    needs="--train_file [--validation_file --test_file] (CSV/TSV/JSON/JSONL/Parquet), or --data_dir with a saved DatasetDict",
    preset=PRESET,
)
def load_custom(
    data_dir: str | None = None,
    seed: int = 0,
    train_file: str | None = None,
    validation_file: str | None = None,
    test_file: str | None = None,
    text_column: str = "text",
    text_pair_column: str | None = None,
    label_column: str = "label",
    label_names: list[str] | None = None,
    vocab_size: Annotated[int, POSITIVE_INT] | None = None,
    max_length: Annotated[int, POSITIVE_INT] | None = None,
    max_implied_length: Annotated[int, POSITIVE_INT] | None = MAX_IMPLIED_LENGTH,
    validation_fraction: Annotated[float, FRACTION] = 0.1,
    num_proc: Annotated[int, POSITIVE_INT] | None = None,
    cache_dir: str | None = None,
) -> Task:
    """Load, label-encode and byte-tokenize the user's data; `max_length` defaults to the longest example.

    That default is bounded by `max_implied_length` (None: unbounded), so a stray huge row stops here, naming
    the row, instead of sizing the model; `run_spt.py --max_length N` lifts the bound (the length is given).
    """
    if data_dir is not None and train_file is None:
        folder = require_path(data_dir, "Custom data folder", LAYOUT, SOURCE)
        if not is_saved_dataset(folder):
            raise MissingInputError(f"{folder} is not a saved DatasetDict (no dataset_dict.json).\nExpected:\n{LAYOUT}")
        data = load_saved_dataset(folder)
    elif train_file is not None:
        files = {"train": train_file, "validation": validation_file, "test": test_file}
        data = read_files({split: path for split, path in files.items() if path is not None}, cache_dir)
    else:
        raise MissingInputError(f"The custom task needs data.\nExpected:\n{LAYOUT}")
    if "train" not in data:
        raise DataFormatError(f"Custom data has no 'train' split (found {list(data)}).")
    for split, split_data in data.items():
        if len(split_data) == 0:
            raise DataFormatError(f"Custom {split} split is empty ({files.get(split) if train_file else data_dir}).")
        needed = [c for c in (label_column, text_pair_column) if c] + (
            [] if "input_ids" in split_data.column_names else [text_column])
        missing = [c for c in needed if c not in split_data.column_names]
        if missing:
            raise DataFormatError(f"Custom {split} split has no column(s) {missing}; it has {split_data.column_names}. "
                                  "Name them with --text_column, --text_pair_column, --label_column.")
        where = files[split] if train_file else f"{data_dir} ({split} split)"
        if "input_ids" in split_data.column_names:
            check_token_ids(split_data, where, vocab_size)
            sequences = ["input_ids"]
        else:
            sequences = [c for c in (text_column, text_pair_column) if c]
            check_text_cells(split_data, where, sequences)
        if max_length is None and max_implied_length is not None:
            check_implied_length(split_data, where, sequences, max_implied_length)
        check_label_cells(split_data, where, label_column)
    names = label_mapping(data["train"], label_column, label_names)
    check_classes(data["train"], label_column, files["train"] if train_file else f"{data_dir} (train split)")
    num_labels = len(names) if names is not None else max(data["train"].unique(label_column)) + 1
    splits = {split: encode_labels(split_data, split, label_column, names, num_labels) for split, split_data in data.items()}
    train = splits["train"]
    for split in ("validation", "test"):
        if split not in splits:
            train, splits[split] = carve_validation(train, validation_fraction, seed)
    splits["train"] = train
    pretokenized = "input_ids" in train.column_names
    if pretokenized:
        largest = vocab_size - 1 if vocab_size else max(check_token_ids(data, split, None) for split, data in splits.items())
        tokenizer = build_byte_tokenizer() if largest < 260 else build_word_tokenizer([f"t{i}" for i in range(4, largest + 1)])
    else:
        tokenizer = build_byte_tokenizer()
    dataset = DatasetDict()
    for split, split_data in splits.items():
        if not pretokenized:
            split_data = byte_encode_column(split_data, text_column, "input_ids", max_length, num_proc)
            if text_pair_column:
                split_data = byte_encode_column(split_data, text_pair_column, "pair_input_ids", max_length, num_proc)
        keep = [c for c in ("input_ids", "pair_input_ids", "labels") if c in split_data.column_names]
        dataset[split] = split_data.select_columns(keep)
    longest = max(len(ids) for data in dataset.values() for column in ("input_ids", "pair_input_ids")
                  if column in data.column_names for ids in data[column])
    max_length = longest if max_length is None else max_length
    tokenizer.model_max_length = max_length
    preset = replace(PRESET, max_length=max_length, num_labels=num_labels)
    return Task("custom", dataset, tokenizer, preset, label_names=names, is_pair=bool(text_pair_column))


__all__ = ["BUILDERS", "MAX_INFERRED_VOCAB", "MAX_IMPLIED_LENGTH", "read_files", "label_mapping", "describe",
           "check_label_cells", "check_classes", "encode_labels", "check_token_ids", "check_text_cells",
           "check_implied_length", "load_custom"]
