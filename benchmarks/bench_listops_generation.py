"""Time generating ListOps splits (default LRA's 96k/2k/2k) with hf_spt's generator.

Reference in the same run: a faithful port of LRA's own generator (lra_benchmarks/data/listops.py:
tuple trees, `random.randint`/`random.choice`, whole trees built before the length check) timed on
a sample of kept trees and scaled to the same number of trees, single process.

    python benchmarks/bench_listops_generation.py [--num_train 96000] [--num_workers 2] [--reference_sample 300]
"""

from __future__ import annotations

import argparse
import os
import random
import time

from hf_spt.tasks.listops_generator import generate_listops

LRA_OPERATORS = ["[MIN", "[MAX", "[MED", "[SM"]


def lra_generate_tree(depth: int, max_depth: int = 10, max_args: int = 10):
    """LRA's generate_tree, verbatim in logic (tree and length; value computed afterwards there)."""
    r = random.random() if depth < max_depth else 1
    if r > 0.25:
        return random.choice(range(10)), 1
    length = 2
    values = []
    for _ in range(random.randint(2, max_args)):
        sub_tree, sub_length = lra_generate_tree(depth + 1, max_depth, max_args)
        values.append(sub_tree)
        length += sub_length
    tree = (random.choice(LRA_OPERATORS), values[0])
    for value in values[1:]:
        tree = (tree, value)
    return (tree, "]"), length


def lra_seconds_per_tree(sample: int, min_length: int = 500, max_length: int = 2000) -> float:
    random.seed(0)
    start, kept = time.perf_counter(), 0
    while kept < sample:
        _, length = lra_generate_tree(1)
        kept += min_length < length < max_length
    return (time.perf_counter() - start) / sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num_train", type=int, default=96000)
    parser.add_argument("--num_validation", type=int, default=2000)
    parser.add_argument("--num_test", type=int, default=2000)
    parser.add_argument("--num_workers", type=int, default=os.cpu_count())
    parser.add_argument("--reference_sample", type=int, default=300)
    args = parser.parse_args()
    sizes = {"train": args.num_train, "validation": args.num_validation, "test": args.num_test}
    total = sum(sizes.values())
    start = time.perf_counter()
    examples = generate_listops(sizes, seed=0, num_workers=args.num_workers)
    ours = time.perf_counter() - start
    lengths = [len([t for t in source.split() if t not in "()"]) for rows in examples.values() for source, _ in rows]
    reference = lra_seconds_per_tree(args.reference_sample) * total
    print(f"splits {args.num_train}/{args.num_validation}/{args.num_test}, {args.num_workers} worker(s), "
          f"{os.cpu_count()} CPU(s); token lengths {min(lengths)}-{max(lengths)}, mean {sum(lengths) / len(lengths):.0f}")
    print(f"hf_spt generator:          {ours:8.1f} s")
    print(f"LRA generator (estimated): {reference:8.1f} s  (1 process, from {args.reference_sample} kept trees)")
    print(f"ratio LRA / hf_spt:        {reference / ours:8.1f}x")


if __name__ == "__main__":
    main()
