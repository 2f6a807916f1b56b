"""Seed statistics and how every suite report writes them in a table cell, shared by the suites' reports.

One definition of "mean ± std over seeds" for the ablation, LRA, budget-study and compute reports, so
that the same numbers read the same way in every table.
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Iterable, Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

MISSING_CELL = "n/a"


def mean_std(values: list[float]) -> dict[str, float]:
    """{"mean", "std", "n"} of seed results (sample std; 0 for one seed, whose spread `mean_std_cell` prints as
    n/a: a figure's error bar of 0 is no bar, a table's "± 0.0" would read as a measured spread)."""
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "n": len(values)}


def rounded(value: float, places: int) -> str:
    """`value` at `places` decimals, halves rounded up (away from 0) as a reader rounds by hand: 63.75 is "63.8" at
    one and -7.875 "-7.88" at two, although the floats nearest them (0.6375 * 100 = 63.7499...) would print "63.7"
    and "-7.87" with `:.1f` / `:.2f`."""
    return str(Decimal(repr(round(value, 9))).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def one_decimal(value: float) -> str:
    """`value` at one decimal, halves rounded up (`rounded`): 63.75 is "63.8" and 2.25 "2.3"."""
    return rounded(value, 1)


def mean_std_cell(stats: dict[str, Any] | None, scale: float = 1.0, seeds: str = "", missing: str = MISSING_CELL) -> str:
    """`stats` (`mean_std`'s) as "M ± S" at one decimal, the values multiplied by `scale` (100: fractions as
    percent), S "n/a" for one seed (no spread); `seeds` appends the seed count: "" none, "()" as "(3)", "n=" as
    "(n=3)". `missing` stands for None."""
    if not stats:
        return missing
    spread = MISSING_CELL if stats["n"] == 1 else one_decimal(scale * stats["std"])
    text = f"{one_decimal(scale * stats['mean'])} ± {spread}"
    if seeds == "()":
        return f"{text} ({stats['n']})"
    if seeds == "n=":
        return f"{text} (n={stats['n']})"
    return text


def seed_scores(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, dict[Hashable, float]]]:
    """{task: {arm: {seed: test accuracy}}} of a grid's rows (those with a test accuracy), in first-seen order: what
    each arm's mean ± std (`summarize`) and the paired differences (`paired_seeds`) are computed from."""
    scores: dict[str, dict[str, dict[Hashable, float]]] = {}
    for row in rows:
        if row["test_accuracy"] is not None:
            scores.setdefault(row["task"], {}).setdefault(row["arm"], {})[row["seed"]] = float(row["test_accuracy"])
    return scores


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """{task: {arm: {"mean", "std", "n"}}} of test accuracy over seeds, arms in their first-seen order."""
    return {task: {arm: mean_std(list(by_seed.values())) for arm, by_seed in arms.items()}
            for task, arms in seed_scores(rows).items()}


__all__ = ["MISSING_CELL", "mean_std", "rounded", "one_decimal", "mean_std_cell", "seed_scores", "summarize"]
