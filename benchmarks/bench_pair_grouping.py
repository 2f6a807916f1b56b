"""Which length to group two-tower pairs by: padding left by each key, no model involved.

Each tower of a pair batch is padded on its own, to its longest document, so a pair has two
lengths and the sampler one key. This draws pairs of independent IMDB-like lengths (or uniform
500-2000), groups them with transformers' `get_length_grouped_indices` by each candidate key and
prints the real share of the padded positions and of the attention work (sum of T^2) over both
towers. hf_spt groups pairs by the longer document (`hf_spt.training.length_grouping`).

Usage:
    python benchmarks/bench_pair_grouping.py --pairs 6400 --batch_size 32
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from transformers.trainer_pt_utils import get_length_grouped_indices

from bench_real_tokens import IMDB_MEDIAN_BYTES, IMDB_SIGMA

KEYS = {"random": None, "longer (hf_spt)": np.maximum, "sum": np.add, "first": lambda a, b: a}


def shares(a: np.ndarray, b: np.ndarray, order: list[int], batch_size: int) -> tuple[float, float]:
    """Real share of padded positions and of attention work, both towers, batches of `order`."""
    real = padded = real_square = padded_square = 0
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        for tower in (a[rows], b[rows]):
            real, padded = real + tower.sum(), padded + len(rows) * tower.max()
            real_square, padded_square = real_square + (tower**2).sum(), padded_square + len(rows) * tower.max() ** 2
    return real / padded, real_square / padded_square


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=6400, help="Pairs drawn.")
    parser.add_argument("--batch_size", type=int, default=32, help="Pairs per batch.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of lengths and sampler.")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    draws = {"imdb": lambda: np.clip(rng.lognormal(np.log(IMDB_MEDIAN_BYTES), IMDB_SIGMA, args.pairs).astype(int), 10, 4000),
             "uniform 500-2000": lambda: rng.integers(500, 2000, args.pairs)}
    for name, draw in draws.items():
        a, b = draw().astype(np.int64), draw().astype(np.int64)
        for key_name, key in KEYS.items():
            generator = torch.Generator().manual_seed(args.seed)
            order = (torch.randperm(args.pairs, generator=generator).tolist() if key is None else
                     get_length_grouped_indices(key(a, b).tolist(), args.batch_size, generator=generator))
            positions, attention = shares(a, b, order, args.batch_size)
            print(f"{name:17s} {key_name:16s} real share of positions {positions:.2f}, of attention work {attention:.2f}")


if __name__ == "__main__":
    main()
