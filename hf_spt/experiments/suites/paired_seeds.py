"""Paired differences over seeds: what decides whether SPT's gain over a control is resolved by the seeds run.

Two arms run with the same seeds share each seed's data split, initial draw of everything but the arm's own
choices, and batch order; their seed-to-seed spread is largely shared. So the evidence for a gain is the spread
of the per-seed differences (SPT minus control, seed by seed), not either arm's spread over seeds. For n paired
seeds this module gives the differences, their mean, sample standard deviation (n - 1 in the denominator), a
95% interval mean ± t(0.975, n - 1) · sd / √n (Student t; no interval for one seed), and how many seeds SPT is
ahead in. Every suite report (budget study, LRA suite, ablation grid) writes its paired table through here, so
the same sentence reads the same way in every report: "not resolved with N seeds" where the interval includes 0.

The t quantile is computed, not tabled: Student t's two-sided probability P(|T| <= t) for integer degrees of
freedom has a closed form (Abramowitz & Stegun, Handbook of Mathematical Functions, 26.7.3 and 26.7.4), solved
for 0.95 by bisection; the test checks it against the NIST/SEMATECH e-Handbook of Statistical Methods' table
(section 1.3.6.7.2: 12.706, 4.303, 3.182, ... for 1, 2, 3 ... degrees of freedom).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .seed_tables import one_decimal

CONFIDENCE = 0.95
PAIRED_NOTE = ("Paired by seed: each seed's difference, SPT (or the arm named) minus the control, in points; "
               "their mean, sample standard deviation (n - 1) and 95% interval, mean ± t(0.975, n - 1) · sd / √n "
               "(Student t); \"not resolved with N seeds\" where the interval includes 0; one seed gives no interval.")
PAIRED_HEADER = ["seeds", "difference per seed", "mean", "sd", "95% interval", "ahead", "verdict"]
STD_NOTE = "± is the sample standard deviation over seeds (n - 1), of each arm on its own"


def _central_probability(t: float, degrees: int) -> float:
    """P(|T| <= t) for Student's T with `degrees` (integer) degrees of freedom (A&S 26.7.3, 26.7.4)."""
    theta = math.atan(t / math.sqrt(degrees))
    sine, cosine = math.sin(theta), math.cos(theta)
    if degrees == 1:
        return 2 * theta / math.pi
    odd = degrees % 2
    term = total = cosine if odd else 1.0
    for k in range(3 if odd else 2, degrees - 1, 2):  # the series' terms up to cos^(degrees - 2)
        term *= (k - 1) / k * cosine * cosine
        total += term
    return 2 / math.pi * (theta + sine * total) if odd else sine * total


def t_quantile(degrees: int, confidence: float = CONFIDENCE) -> float:
    """The t with P(|T| <= t) = `confidence`: the two-sided interval's multiplier (12.706 for 1 degree, 0.95)."""
    if degrees < 1:
        raise ValueError(f"a t quantile needs at least 1 degree of freedom, got {degrees}")
    low, high = 0.0, 1.0
    while _central_probability(high, degrees) < confidence:
        low, high = high, 2 * high
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if _central_probability(middle, degrees) < confidence else (low, middle)
    return (low + high) / 2


@dataclass(frozen=True)
class PairedDifference:
    """Per-seed differences treated minus control, as (seed, difference) pairs (pooled: several per seed)."""

    pairs: tuple[tuple[Hashable, float], ...]

    @property
    def differences(self) -> list[float]:
        return [difference for _, difference in self.pairs]

    @property
    def n(self) -> int:
        return len(self.pairs)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.differences)

    @property
    def sd(self) -> float | None:
        """Sample standard deviation of the differences; None for one pair."""
        return statistics.stdev(self.differences) if self.n > 1 else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95% interval of the mean difference (Student t, n - 1 degrees of freedom); None for one pair."""
        if self.sd is None:
            return None
        half = t_quantile(self.n - 1) * self.sd / math.sqrt(self.n)
        return self.mean - half, self.mean + half

    @property
    def ahead(self) -> int:
        """Pairs in which the treated arm scored higher."""
        return sum(difference > 0 for difference in self.differences)

    @property
    def resolved(self) -> bool:
        """Whether the interval excludes 0 (False without an interval)."""
        return self.interval is not None and (self.interval[0] > 0 or self.interval[1] < 0)

    @property
    def seeds(self) -> list[Hashable]:
        """The seeds of the pairs, each once."""
        return list(dict.fromkeys(seed for seed, _ in self.pairs))

    def verdict(self) -> str:
        """"resolved: ahead"/"resolved: behind", "not resolved with N seeds" otherwise, or "one seed: no interval"."""
        if self.interval is None:
            return "one seed: no interval"
        if not self.resolved:
            return f"not resolved with {self.n} {'seeds' if len(self.seeds) == self.n else 'pairs'}"
        return "resolved: ahead" if self.mean > 0 else "resolved: behind"

    def to_dict(self, scale: float = 1.0) -> dict[str, Any]:
        """Plain JSON values, differences multiplied by `scale` (100: fractions as points)."""
        interval = self.interval
        return {"seeds": [seed for seed, _ in self.pairs], "differences": [scale * d for d in self.differences],
                "mean": scale * self.mean, "sd": None if self.sd is None else scale * self.sd,
                "interval": None if interval is None else [scale * interval[0], scale * interval[1]],
                "ahead": self.ahead, "n": self.n, "verdict": self.verdict()}


    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> PairedDifference:
        """The difference `to_dict` wrote (in its scale)."""
        return cls(tuple(zip(values["seeds"], values["differences"])))


def paired_difference(treated: Mapping[Hashable, float], control: Mapping[Hashable, float]) -> PairedDifference | None:
    """treated - control for every seed both hold ({seed: score} each), in the treated arm's seed order; None when
    they share no seed."""
    pairs = tuple((seed, treated[seed] - control[seed]) for seed in treated if seed in control)
    return PairedDifference(pairs) if pairs else None


def pooled(differences: Iterable[PairedDifference]) -> PairedDifference:
    """Every pair of `differences` as one sample (e.g. a configuration's budgets, or a study's configurations).
    Pairs of one seed share its data split, and against one control run shared by several budgets, that run too:
    they are not independent, so a pooled interval is narrower than independent seeds would make it."""
    return PairedDifference(tuple(pair for difference in differences for pair in difference.pairs))


def _signed(value: float, digits: str) -> str:
    """`value` with its sign, at one decimal (`digits` "one", halves up as `one_decimal`) or at most two ("two":
    quarter points stay exact); zero unsigned."""
    text = one_decimal(value) if digits == "one" else f"{value:.2f}".rstrip("0").rstrip(".")
    if float(text) == 0:
        return text.lstrip("-")
    return text if text.startswith("-") else f"+{text}"


def paired_cells(difference: PairedDifference, scale: float = 100.0) -> list[str]:
    """The cells of `PAIRED_HEADER` for `difference`, values multiplied by `scale` (100: fractions as points)."""
    interval = difference.interval
    seeds = ", ".join(map(str, difference.seeds))
    return [seeds if len(difference.seeds) == difference.n else f"{seeds} ({difference.n} pairs)",
            ", ".join(_signed(scale * d, "two") for d in difference.differences),
            _signed(scale * difference.mean, "one"),
            "n/a" if difference.sd is None else one_decimal(scale * difference.sd),
            "n/a" if interval is None else f"[{_signed(scale * interval[0], 'one')}, {_signed(scale * interval[1], 'one')}]",
            f"{difference.ahead} of {difference.n}", difference.verdict()]


def paired_table(labels: list[str], rows: list[tuple[list[str], PairedDifference]], scale: float = 100.0) -> list[str]:
    """A markdown table: the `labels` columns (each row's label cells), then `PAIRED_HEADER`'s."""
    header = [*labels, *PAIRED_HEADER]
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join([*cells, *paired_cells(difference, scale)]) + " |" for cells, difference in rows])


__all__ = ["CONFIDENCE", "PAIRED_NOTE", "PAIRED_HEADER", "STD_NOTE", "t_quantile", "PairedDifference",
           "paired_difference", "pooled", "paired_cells", "paired_table"]
