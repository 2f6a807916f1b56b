"""Paired differences over seeds: what decides whether SPT's gain over a control is resolved by the seeds run.

Two arms run with the same seeds share each seed's data split, initial draw of everything but the arm's own
choices, and batch order; their seed-to-seed spread is largely shared. So the evidence for a gain is the spread
of the per-seed differences (SPT minus control, seed by seed), not either arm's spread over seeds. For n paired
seeds this module gives the differences, their mean, sample standard deviation (n - 1 in the denominator), a
95% interval mean ± t(0.975, n - 1) · sd / √n (Student t; no interval for one seed), and how many seeds SPT is
ahead in. Every suite report (budget study, LRA suite, ablation grid) writes its paired table through here, so
the same sentence reads the same way in every report: "not resolved with N seeds" where the interval includes 0.

Several comparisons are pooled with the seed as the unit (`seed_pool`): each seed's mean difference over them,
then the interval over seeds. The comparisons of one seed share its data split (and, against plain scratch, one
scratch run serves every budget), so they are not independent pairs: counting them as such would narrow the
interval by the square root of the comparisons pooled without the evidence for it.

A report of many intervals says how many it prints and how many exclude 0 (`interval_count`): at 95% each, an
interval whose true difference is 0 excludes 0 one time in 20, so a reader weighs one that does against the count.

The interval and the two-sided p of the mean difference are `scipy.stats.ttest_1samp`'s (the one-sample t-test of
the differences against 0, the paired t-test: its `confidence_interval` and `pvalue`), so the interval excludes 0
exactly when p < 0.05; only differences that are all equal (sd 0, where the t statistic is undefined) are decided
here: an interval of the one value, p 0 (1 when the value is 0). `t_quantile` (scipy's Student t) serves the
interval's multiplier where a report states it.

Where seeds ran with other CPU numerics (`stratified_difference`), a contrast is also given per stratum and as an
inverse-variance weighted mean of the strata's mean differences (weights n / sd², a normal 95% interval): a
sensitivity analysis, since a CPU's numerics change every arm of a seed alike but may shift the gain.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy import stats

from .seed_tables import one_decimal, rounded

CONFIDENCE = 0.95
PAIRED_NOTE = ("Paired by seed: each seed's difference, SPT (or the arm named) minus the control, in points; "
               "their mean, sample standard deviation (n - 1) and 95% interval, mean ± t(0.975, n - 1) · sd / √n "
               "(Student t); \"not resolved with N seeds\" where the interval includes 0; one seed gives no interval.")
PAIRED_HEADER = ["seeds", "difference per seed", "mean", "sd", "95% interval", "ahead", "verdict"]
STD_NOTE = "± is the sample standard deviation over seeds (n - 1), of each arm on its own; n/a for one seed"


def t_quantile(degrees: int, confidence: float = CONFIDENCE) -> float:
    """The t with P(|T| <= t) = `confidence`: the two-sided interval's multiplier (12.706 for 1 degree, 0.95)."""
    if degrees < 1:
        raise ValueError(f"a t quantile needs at least 1 degree of freedom, got {degrees}")
    return float(stats.t.ppf(0.5 + confidence / 2, degrees))


@dataclass(frozen=True)
class PairedDifference:
    """Per-seed differences treated minus control, as (seed, difference) pairs, one per seed."""

    pairs: tuple[tuple[Hashable, float], ...]

    def __post_init__(self):
        seeds = [seed for seed, _ in self.pairs]
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"one difference per seed, got seeds {seeds}: pool comparisons with `seed_pool`")

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

    @functools.cached_property
    def _test(self) -> Any:
        """`scipy.stats.ttest_1samp` of the differences against 0 (the paired t-test); None for one pair or
        differences all equal (module docstring)."""
        if self.sd is None or self.sd == 0:
            return None
        return stats.ttest_1samp(self.differences, 0.0)

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95% interval of the mean difference (scipy's `ttest_1samp(...).confidence_interval`: Student t, n - 1
        degrees of freedom); None for one pair; the one value for differences all equal."""
        if self.sd is None:
            return None
        if self._test is None:
            return self.mean, self.mean
        found = self._test.confidence_interval(CONFIDENCE)
        return float(found.low), float(found.high)

    @property
    def p_value(self) -> float | None:
        """Two-sided p of the paired t-test (scipy's `ttest_1samp(...).pvalue`); None for one pair. Differences all
        equal give 0 (1 when they are all 0)."""
        if self.sd is None:
            return None
        if self._test is None:
            return 1.0 if self.mean == 0 else 0.0
        return float(self._test.pvalue)

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
        """The seeds, in the pairs' order."""
        return [seed for seed, _ in self.pairs]

    def verdict(self) -> str:
        """"resolved: ahead"/"resolved: behind", "not resolved with N seeds" otherwise, or "one seed: no interval"."""
        if self.interval is None:
            return "one seed: no interval"
        if not self.resolved:
            return f"not resolved with {self.n} seeds"
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


@dataclass(frozen=True)
class StratifiedEstimate:
    """An inverse-variance weighted mean of several strata's mean differences and its normal 95% interval."""

    mean: float
    interval: tuple[float, float]
    strata: int


def stratified_estimate(strata: Sequence[PairedDifference]) -> StratifiedEstimate | None:
    """The strata's mean differences weighted by the inverse of their squared standard errors (n / sd²), with the
    interval mean ± z(0.975) / √(sum of weights) (module docstring); None for fewer than two strata or a stratum
    without a standard error (one seed, or differences all equal)."""
    if len(strata) < 2 or any(stratum.sd is None or stratum.sd == 0 for stratum in strata):
        return None
    weights = [stratum.n / stratum.sd ** 2 for stratum in strata]
    mean = sum(w * stratum.mean for w, stratum in zip(weights, strata)) / sum(weights)
    half = float(stats.norm.ppf(0.5 + CONFIDENCE / 2)) / math.sqrt(sum(weights))
    return StratifiedEstimate(mean, (mean - half, mean + half), len(strata))


def seed_pool(differences: Sequence[PairedDifference]) -> PairedDifference | None:
    """Several comparisons (e.g. a configuration's budgets, or a study's configurations) pooled with the seed as the
    unit: each seed's mean difference over them, for the seeds that every comparison holds (so each seed's mean is
    over the same comparisons), in the first comparison's seed order; None when no seed is in all of them."""
    common = [seed for seed in differences[0].seeds if all(seed in d.seeds for d in differences[1:])]
    by_seed = [dict(d.pairs) for d in differences]
    pairs = tuple((seed, statistics.fmean(values[seed] for values in by_seed)) for seed in common)
    return PairedDifference(pairs) if pairs else None


def interval_count(differences: Iterable[tuple[str, PairedDifference]]) -> str:
    """A report's sentence on its paired intervals, from (control, difference) of every row it prints: how many
    intervals, how many exclude 0, per control, and how many would by chance were every true difference 0."""
    counts: dict[str, list[int]] = {}
    for control, difference in differences:
        if difference.interval is not None:
            count = counts.setdefault(control, [0, 0])
            count[0] += 1
            count[1] += difference.resolved
    printed, excluding = sum(n for n, _ in counts.values()), sum(m for _, m in counts.values())
    if not printed:
        return "No paired interval (every comparison has one seed)."
    per_control = "; ".join(f"against {control}: {m} of {n}" for control, (n, m) in counts.items())
    return (f"{printed} paired interval{'s' * (printed > 1)}, {excluding} exclude{'s' * (excluding == 1)} 0 "
            f"({per_control}). At 95% each, were every true difference 0, about {printed / 20:.1f} of {printed} "
            "would exclude 0 by chance alone.")


def _signed(value: float, places: int) -> str:
    """`value` with its sign at `places` decimals, halves up (`seed_tables.rounded`); at two, trailing zeros
    dropped, so quarter points read exactly ("-4.25", "+2.5", "+33"); zero unsigned."""
    text = rounded(value, places)
    if places > 1:
        text = text.rstrip("0").rstrip(".")
    if float(text) == 0:
        return text.lstrip("-")
    return text if text.startswith("-") else f"+{text}"


def _bound(value: float) -> str:
    """An interval's end at one decimal, or at two where one would print 0 for an end that is not: "+0.04", so
    the end says which side of 0 it lies on."""
    text = _signed(value, 1)
    return _signed(value, 2) if float(text) == 0 and value != 0 else text


def paired_cells(difference: PairedDifference, scale: float = 100.0, verdict: str | None = None) -> list[str]:
    """The cells of `PAIRED_HEADER` for `difference`, values multiplied by `scale` (100: fractions as points); the
    verdict cell `verdict` where given (a row a report decides elsewhere), else the difference's own."""
    interval = difference.interval
    return [", ".join(map(str, difference.seeds)),
            ", ".join(_signed(scale * d, 2) for d in difference.differences),
            _signed(scale * difference.mean, 1),
            "n/a" if difference.sd is None else one_decimal(scale * difference.sd),
            "n/a" if interval is None else f"[{_bound(scale * interval[0])}, {_bound(scale * interval[1])}]",
            f"{difference.ahead} of {difference.n}", verdict or difference.verdict()]


def paired_table(labels: list[str], rows: list[tuple[list[str], PairedDifference]], scale: float = 100.0,
                 verdicts: Sequence[str | None] = ()) -> list[str]:
    """A markdown table: the `labels` columns (each row's label cells), then `PAIRED_HEADER`'s; `verdicts`, one per
    row where given, replaces a row's verdict cell where it is not None (`paired_cells`)."""
    header = [*labels, *PAIRED_HEADER]
    verdicts = list(verdicts) or [None] * len(rows)
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join([*cells, *paired_cells(difference, scale, verdict)]) + " |"
               for (cells, difference), verdict in zip(rows, verdicts, strict=True)])


__all__ = ["CONFIDENCE", "PAIRED_NOTE", "PAIRED_HEADER", "STD_NOTE", "t_quantile", "PairedDifference",
           "StratifiedEstimate", "stratified_estimate", "paired_difference", "seed_pool", "interval_count", "paired_cells", "paired_table"]
