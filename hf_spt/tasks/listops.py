"""LRA ListOps: nested MIN/MAX/MED/SM expressions over digits, 10 classes (the expression's value).

From the released TSVs (`basic_{train,val,test}.tsv`, header `Source\\tTarget`) in `data_dir`,
or, with no `data_dir`, from `listops_generator` (seeded; the TSVs are written once to the
datasets cache and read from there). Parentheses only carry the tree's nesting, which the
`]` tokens already give, so they are dropped: a sequence is at most 2000 tokens (LRA's lengths).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Annotated

from datasets import DatasetDict, config

from ..errors import UserInputError
from ..models.tokenization_spt import NUM_SPECIAL_TOKENS, build_word_tokenizer
from ..value_checks import POSITIVE_INT
from .common import DataFormatError, require_path, rows_to_dataset
from .listops_generator import OPERATORS, SPLIT_FILES, apply_operator, generate_listops, write_listops_tsv
from .registry import Task, TaskPreset, register_task

VOCABULARY = [str(d) for d in range(10)] + list(OPERATORS) + ["]"]
LAYOUT = "  DATA_DIR/basic_train.tsv, basic_val.tsv, basic_test.tsv  (tab-separated, header 'Source\\tTarget')"
SOURCE = ("the LRA release (lra_release.gz from google-research/long-range-arena, folder listops-1000), or "
          "`python run_scripts/generate_listops.py --output_dir DIR`, or no --data_dir to generate them.")


def strip_parentheses(source: str) -> str:
    """The source's tokens without "(" and ")", space-separated."""
    return " ".join(token for token in source.split() if token not in ("(", ")"))


def evaluate_listops(source: str) -> int:
    """Value of a ListOps expression (with or without parentheses), by a stack machine.

    Parsed apart from the generator (which computes labels while it grows trees) so that tests
    can check every generated label against it; both apply the operators of `apply_operator`.
    """
    stack: list[list] = []
    result = None
    for token in source.split():
        if token in ("(", ")"):
            continue
        if token in OPERATORS:
            stack.append([token])
        elif token == "]":
            if not stack or len(stack[-1]) < 2:
                raise UserInputError(f"']' closes no operator with arguments in {source[:80]!r}...")
            operator, *values = stack.pop()
            value = apply_operator(operator, values)
            if stack:
                stack[-1].append(value)
            else:
                result = value
        elif token.isdigit() and len(token) == 1:
            if not stack:
                raise UserInputError(f"Digit {token} outside any operator in {source[:80]!r}...")
            stack[-1].append(int(token))
        else:
            raise UserInputError(f"Unknown ListOps token {token!r}.")
    if stack or result is None:
        raise UserInputError(f"Unbalanced ListOps expression {source[:80]!r}...")
    return result


def read_listops_tsv(path: str, fingerprint: str) -> Iterator[dict]:
    """Rows of a released ListOps TSV as {"input_ids" (no parentheses), "labels"}; bad rows name file and line.

    Token ids come from a dict lookup of the 15 symbols (ids 4.., as the task's word tokenizer
    gives them), several times faster than running the tokenizer over 2000-token strings.
    """
    del fingerprint  # only keys the cache
    token_ids = {symbol: NUM_SPECIAL_TOKENS + i for i, symbol in enumerate(VOCABULARY)}
    with open(path, newline="") as handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header != ["Source", "Target"]:
            raise DataFormatError(f"{path}, line 1: expected the header 'Source\\tTarget', found {header!r}.")
        for line, row in enumerate(reader, start=2):
            if not "".join(row).strip():  # a blank line (a trailing newline too many): no example
                continue
            if len(row) != 2:
                raise DataFormatError(f"{path}, line {line}: expected 2 tab-separated fields (Source, Target), found {len(row)}.")
            source, target = row
            if target not in VOCABULARY[:10]:
                raise DataFormatError(f"{path}, line {line}: unknown label {target!r}; ListOps labels are 0-9.")
            tokens = source.replace("(", " ").replace(")", " ").split()
            try:
                ids = list(map(token_ids.__getitem__, tokens))
            except KeyError as error:
                raise DataFormatError(f"{path}, line {line}: unknown token {error.args[0]!r}; ListOps uses "
                                      f"{VOCABULARY} and parentheses.") from None
            yield {"input_ids": ids, "labels": int(target)}


def generated_listops_dir(
    seed: int, sizes: dict[str, int], min_length: int, max_length: int, cache_dir: str | None = None,
    num_workers: int | None = None,
) -> Path:
    """Where generated TSVs are cached (`cache_dir` or the datasets cache), written once per setting."""
    name = f"listops_seed{seed}_" + "_".join(str(n) for n in sizes.values()) + f"_len{min_length}-{max_length}"
    folder = Path(cache_dir or config.HF_DATASETS_CACHE) / "hf_spt" / name
    if not all((folder / SPLIT_FILES[split]).is_file() for split in sizes):
        examples = generate_listops(sizes, seed, num_workers, min_length=min_length, max_length=max_length)
        for split, rows in examples.items():
            write_listops_tsv(rows, folder / SPLIT_FILES[split])
    return folder


PRESET = TaskPreset(
    max_length=2000,
    num_labels=10,
    mlm_probability=0.1,
    batch_size=32,
    model=dict(num_hidden_layers=6, hidden_size=512, num_attention_heads=8, intermediate_size=2048, pooling="mean"),
)


@register_task(
    "listops",
    description="LRA ListOps: value (0-9) of nested MIN/MAX/MED/SM expressions, up to 2000 tokens, 10 classes.",
    needs="DATA_DIR/basic_{train,val,test}.tsv (LRA release), or nothing: generated (seeded, 96k/2k/2k)",
    preset=PRESET,
)
def load_listops(
    data_dir: str | None = None,
    seed: int = 0,
    num_train: Annotated[int, POSITIVE_INT] = 96000,
    num_validation: Annotated[int, POSITIVE_INT] = 2000,
    num_test: Annotated[int, POSITIVE_INT] = 2000,
    min_length: Annotated[int, POSITIVE_INT] = 500,
    max_length: Annotated[int, POSITIVE_INT] = 2000,
    num_proc: Annotated[int, POSITIVE_INT] | None = None,
    cache_dir: str | None = None,
) -> Task:
    """Load the released TSVs from `data_dir`, or generate `num_train/num_validation/num_test` trees.

    `num_proc` is the number of generator processes (default: all CPUs).
    """
    sizes = {"train": num_train, "validation": num_validation, "test": num_test}
    if data_dir is None:
        folder = generated_listops_dir(seed, sizes, min_length, max_length, cache_dir, num_proc)
    else:
        folder = require_path(data_dir, "ListOps data folder", LAYOUT, SOURCE)
    tokenizer = build_word_tokenizer(VOCABULARY, model_max_length=max_length, dropped_characters="()")
    splits = {}
    for split, file_name in SPLIT_FILES.items():
        path = require_path(Path(folder) / file_name, f"ListOps {split} file", LAYOUT, SOURCE)
        splits[split] = rows_to_dataset(read_listops_tsv, path, cache_dir)
    preset = replace(PRESET, max_length=max_length)
    return Task("listops", DatasetDict(splits), tokenizer, preset, label_names=VOCABULARY[:10])


__all__ = ["VOCABULARY", "evaluate_listops", "strip_parentheses", "read_listops_tsv", "load_listops"]
