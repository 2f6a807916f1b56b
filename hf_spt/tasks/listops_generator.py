"""Seeded ListOps generator following the LRA spec (lra_benchmarks/data/listops.py), and a TSV writer.

A tree node is an operator with probability `operator_probability` (0.25), a digit 0-9 otherwise,
and always a digit at `max_depth` (10). An operator (MIN, MAX, MED = int of the median, SM = sum
mod 10) takes randint(2, `max_args`) arguments. The root is an operator (a digit root has length
1 and would be rejected anyway). Trees are kept when `min_length < length < max_length` (500,
2000), where length counts operator, digit and closing `]` tokens, not parentheses; a tree is
abandoned as soon as it outgrows `max_length`, which changes nothing about the kept ones but
saves most of the time. Splits 96k/2k/2k, written as the released TSVs (`Source\\tTarget`, the
source in LRA's parenthesised form).

`hf_spt.scripts.generate_listops` writes `basic_{train,val,test}.tsv` into a folder:
    python run_scripts/generate_listops.py --output_dir data/listops [--num_train 96000] [--seed 0]
"""

from __future__ import annotations

import os
import random
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ..atomic_files import replaced_file
from ..errors import UserInputError

OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")
DIGITS = tuple(str(d) for d in range(10))
SPLIT_FILES = {"train": "basic_train.tsv", "validation": "basic_val.tsv", "test": "basic_test.tsv"}


class _TooLong(Exception):
    """Raised inside the recursion once a tree passes the length limit."""


def apply_operator(operator: str, values: list[int]) -> int:
    """Value of one ListOps operator (one of `OPERATORS`) on its arguments: MIN, MAX, MED (int of the median, as
    LRA) or SM (sum mod 10).

    The one definition of the operators, used by the generator and by `listops.evaluate_listops`.
    """
    if operator == "[MIN":
        return min(values)
    if operator == "[MAX":
        return max(values)
    if operator == "[SM":
        return sum(values) % 10
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) // 2  # int(np.median)


def _grow(draw, depth: int, spec: tuple[int, int, float], out: list[str], budget: list[int]) -> int:
    """Append an operator subtree's tokens (LRA's parenthesised form) to `out`; return its value.

    `draw` is a seeded `random.Random().random`; integer draws are `int(draw() * n)` (uniform,
    and several times faster than `randint` in this hot loop).
    """
    max_depth, max_args, operator_probability = spec
    operator = OPERATORS[int(draw() * 4)]
    num_args = 2 + int(draw() * (max_args - 1))
    budget[0] -= 2  # the operator and its closing bracket
    out.append("( " * (num_args + 1) + operator)
    values = []
    can_branch = depth + 1 < max_depth
    for _ in range(num_args):
        if can_branch and draw() < operator_probability:
            values.append(_grow(draw, depth + 1, spec, out, budget))
        else:
            digit = int(draw() * 10)
            budget[0] -= 1
            values.append(digit)
            out.append(DIGITS[digit])
        if budget[0] <= 0:
            raise _TooLong
        out.append(")")
    out.append("] )")
    return apply_operator(operator, values)


def generate_listops_example(
    rng: random.Random, min_length: int = 500, max_length: int = 2000, max_depth: int = 10, max_args: int = 10,
    operator_probability: float = 0.25,
) -> tuple[str, int]:
    """One kept tree: its source (LRA's parenthesised form) and its value (the label 0-9)."""
    spec = (max_depth, max_args, operator_probability)
    while True:
        out: list[str] = []
        budget = [max_length]
        try:
            value = _grow(rng.random, 1, spec, out, budget)
        except _TooLong:
            continue
        length = max_length - budget[0]
        if min_length < length < max_length:
            return " ".join(out), value


CHUNK_SIZE = 1000


def _generate_chunk(job: tuple[int, int, int, int, dict]) -> list[tuple[str, int]]:
    seed, split_index, chunk_index, size, spec = job
    rng = random.Random(f"listops-{seed}-{split_index}-{chunk_index}")
    return [generate_listops_example(rng, **spec) for _ in range(size)]


def tree_fits(min_length: int, max_length: int, max_depth: int = 10, max_args: int = 10) -> bool:
    """Whether some tree has `min_length < length < max_length`: o operators (2 tokens each, 2 to `max_args`
    arguments) hold o + 1 to o (max_args - 1) + 1 digits, so a length of 3o + 1 to o (max_args + 1) + 1 tokens; a
    `max_depth` of 2 or less leaves the root as the only operator (`_grow`)."""
    operators = range(1, 2) if max_depth <= 2 else range(1, max(max_length, 0) // 3 + 1)
    return any(max(3 * o + 1, min_length + 1) <= min(o * (max_args + 1) + 1, max_length - 1) for o in operators)


def check_lengths(min_length: int, max_length: int, max_depth: int = 10, max_args: int = 10) -> None:
    """A one-line error unless trees between `min_length` and `max_length` tokens can exist (`tree_fits`): the
    generator would draw forever."""
    if not tree_fits(min_length, max_length, max_depth, max_args):
        raise UserInputError(f"ListOps keeps trees with min_length < length < max_length and no tree fits between "
                             f"{min_length} and {max_length} (the shortest is 4 tokens: an operator, two digits, its "
                             "bracket); widen the range.")


def generate_listops(
    sizes: dict[str, int],
    seed: int = 0,
    num_workers: int | None = None,
    min_length: int = 500,
    max_length: int = 2000,
    max_depth: int = 10,
    max_args: int = 10,
    operator_probability: float = 0.25,
) -> dict[str, list[tuple[str, int]]]:
    """`{split: [(source, label), ...]}` for `sizes` like `{"train": 96000, ...}`.

    Work is cut into chunks of `CHUNK_SIZE` trees, each seeded from (seed, split, chunk), so the
    data depend on `seed` only, not on `num_workers` (default: all CPUs, in processes).
    """
    check_lengths(min_length, max_length, max_depth, max_args)
    spec = dict(min_length=min_length, max_length=max_length, max_depth=max_depth, max_args=max_args,
                operator_probability=operator_probability)
    jobs, owners = [], []
    for split_index, (split, size) in enumerate(sizes.items()):
        for chunk_index, start in enumerate(range(0, size, CHUNK_SIZE)):
            jobs.append((seed, split_index, chunk_index, min(CHUNK_SIZE, size - start), spec))
            owners.append(split)
    num_workers = num_workers or os.cpu_count() or 1
    if num_workers == 1 or len(jobs) == 1:
        chunks = map(_generate_chunk, jobs)
    else:
        with ProcessPoolExecutor(num_workers) as pool:
            chunks = list(pool.map(_generate_chunk, jobs))
    examples: dict[str, list[tuple[str, int]]] = {split: [] for split in sizes}
    for split, chunk in zip(owners, chunks):
        examples[split].extend(chunk)
    return examples


def write_listops_tsv(examples: list[tuple[str, int]], path: str | Path) -> None:
    """Write the released format: header `Source\\tTarget`, one tree and its value per line."""
    with replaced_file(path) as handle:
        handle.write("Source\tTarget\n")
        handle.writelines(f"{source}\t{label}\n" for source, label in examples)
