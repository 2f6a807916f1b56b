"""A preregistered study's confirmatory test: the contrasts, seeds and thresholds a study file declared before its
rows existed, tested as declared.

A study file's `preregistered:` mapping (parsed by `experiments.suites.budget_preregistration`) names the primary
contrast (a configuration, the arm tested and its control, by arm name), the seeds (the whole list, fixed in advance),
alpha, the smallest effect of interest (points of test accuracy), any secondary contrasts and, optionally, an
alpha-spending rule for interim looks. The declaration binds the whole study file: its definition (everything
that defines a row: tasks, model, recipe, arms, budgets and the declaration itself; not `output_dir`, the seeds a
launch trains or the figures' titles) is digested (`Declaration.definition`), and the declaration's commit is the
oldest commit from which that definition is unchanged. The report prints, before anything else:

- the primary: the paired difference over the declared seeds only (a seed outside the list, a pilot's, is not
  counted), its mean, 95% interval, two-sided p of the paired t-test (`paired_seeds`, `scipy.stats`) and the
  seeds ahead, once every declared seed has both arms' rows. Until then it shows progress only ("interim: k of n
  seeds"): no estimate, p or verdict, so nobody stops when a look happens to favour them. A declaration with an
  alpha-spending rule (`AlphaSpending`) tests the primary at its declared looks instead, each at the alpha the rule
  spends there;
- the secondaries, each with its p adjusted by Holm over the family the file declares (statsmodels'
  `multipletests`; a secondary without rows counts as p = 1, so the family stays the declared one), shown, like
  the primary, once every declared seed is in (a secondary still missing seeds then is not tested, and counts as
  p = 1 in the family);
- where a contrast's seeds ran with other CPU numerics, the contrast per numerics label and an inverse-variance
  stratified estimate beside the pooled one (`paired_seeds.stratified_estimate`): a sensitivity analysis;
- the power line: from the declared seeds once all are in (else the `pilot_sd` the file declares), the seeds a
  two-sided paired t-test at alpha needs for 80% power at the smallest effect (statsmodels' `TTestPower`);
- what the declaration check found (`declaration_line`): for every declared row (the primary's and secondaries'
  arms, declared seeds), whether the declaration's commit is an ancestor in git of the commit the row ran at
  (`runs.provenance.row_commit`: the full hash it records, or its `git describe`), and whether the row ran under
  the declared definition (the digest the row records, or for a row written before rows recorded one, the study
  file's definition at the row's commit); each row that fails either is named, and where git cannot tell, why,
  with the repository each side was read from.

Everything else the report prints is labelled exploratory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from ..numerics import numerics_label
from ..runs.provenance import commit_in, is_ancestor, row_commit
from .paired_seeds import PairedDifference, paired_cells, stratified_estimate

POWER = 0.8
EXPLORATORY_NOTE = ("Everything below is exploratory: comparisons the study did not declare, each interval at 95% "
                    "with no correction for how many there are (weigh them against the count that follows).")
SPENDING_RULES = ("obrien_fleming", "pocock")
"""Lan-DeMets spending functions an `AlphaSpending` may name (`spent_alpha`)."""


@dataclass(frozen=True)
class Contrast:
    """An arm minus its control in one configuration, paired by seed (arms by their names in the study file). The
    control may be several arms (`controls`): the arm minus their mean ("attention alone recovers more than half of
    SPT's gain over scratch": attention-only minus the mean of SPT and scratch). With a `twin` configuration, the same
    contrast there is subtracted: a difference in differences within each seed ("the gain shrinks where the order
    has no locality": SPT minus scratch in the original order, minus the same in the permuted twin)."""

    config: str
    arm: str
    control: str | tuple[str, ...]
    twin: str | None = None
    smallest_effect: float | None = field(default=None, compare=False)
    """Points: this claim's own smallest effect of interest, where it differs from the study's (None: the study's);
    not part of what the contrast is, so a contrast declared twice is a repeat whatever its effect."""

    @property
    def controls(self) -> tuple[str, ...]:
        return (self.control,) if isinstance(self.control, str) else tuple(self.control)

    @property
    def simple(self) -> bool:
        """One arm minus one control in one configuration: what an exploratory paired table repeats."""
        return isinstance(self.control, str) and self.twin is None

    def terms(self) -> tuple[tuple[str, str, float], ...]:
        """(configuration, arm, weight) of every score the contrast adds up, seed by seed."""
        one = ((self.config, self.arm, 1.0),
               *((self.config, control, -1.0 / len(self.controls)) for control in self.controls))
        return one if self.twin is None else (*one, *((self.twin, arm, -weight) for _, arm, weight in one))

    def configs(self) -> tuple[str, ...]:
        return (self.config,) if self.twin is None else (self.config, self.twin)

    def words(self) -> str:
        controls = self.controls[0] if len(self.controls) == 1 else f"the mean of {' and '.join(self.controls)}"
        return f"{self.arm} minus {controls}, {self.config}" + (f", minus the same in {self.twin}" if self.twin else "")


@dataclass(frozen=True)
class Declaration:
    """Where git says a study file's declaration was committed: the commit, the repository that holds it and the
    file's path in it, or None and why there is none; `definition_at` gives the digest of the study definition the
    file held at a commit (None where it held none git can read), for rows that record no digest of their own."""

    commit: str | None
    repository: Path | None = None
    reason: str = ""
    path: str | None = None
    definition_at: Callable[[str], str | None] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class AlphaSpending:
    """Interim looks declared in advance: after `looks[k]` declared seeds have rows the primary is tested at the
    alpha the Lan-DeMets spending function `rule` spends between the previous look and this one, the last look at
    all seeds taking what remains. Testing each look at its increment alone is Bonferroni's split of the spent
    alpha, which holds the overall error at alpha whatever the looks' correlation (conservative beside exact
    group-sequential bounds)."""

    rule: str
    looks: tuple[int, ...]


@dataclass(frozen=True)
class Preregistration:
    """A study file's `preregistered:` mapping (module docstring); `smallest_effect` and `pilot_sd` in points;
    `study_file` the study as its rows name it (`study` of a row), `definition` its definition's digest."""

    study: str
    primary: Contrast
    seeds: tuple[int, ...]
    alpha: float
    smallest_effect: float
    secondary: tuple[Contrast, ...] = ()
    pilot_sd: float | None = None
    alpha_spending: AlphaSpending | None = None
    study_file: str | None = None
    definition: str | None = None
    declaration: Declaration = field(default_factory=lambda: Declaration(None, None, "not looked up"))

    @property
    def contrasts(self) -> tuple[Contrast, ...]:
        return (self.primary, *self.secondary)

    def smallest_for(self, contrast: Contrast) -> float:
        """The smallest effect of interest (points) `contrast` was declared with: its own, else the study's."""
        return self.smallest_effect if contrast.smallest_effect is None else contrast.smallest_effect

    def roles(self) -> dict[tuple[str, str, str], str]:
        """{(config, arm, control): "primary" or "secondary"} of the declared contrasts: what an exploratory table
        repeating one of them points back to instead of deciding it again."""
        roles = {(c.config, c.arm, c.control): "secondary" for c in self.secondary if c.simple}
        if self.primary.simple:
            roles[self.primary.config, self.primary.arm, self.primary.control] = "primary"
        return roles

    def owns(self, row: Mapping[str, Any]) -> bool:
        """Whether `row` belongs to this declaration's study: it names the study file (`study`), or, written before
        rows named their study, it holds a declared configuration."""
        if row.get("study") is not None:
            return row["study"] == self.study_file
        return row["config"] in {config for contrast in self.contrasts for config in contrast.configs()}

    def declared_rows(self, rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The rows a declared contrast reads: this study's, of a declared configuration, arm and seed."""
        arms = {(config, arm) for c in self.contrasts for config, arm, _ in c.terms()}
        return [row for row in rows if self.owns(row) and row["seed"] in self.seeds
                and (row["config"], row.get("arm_name")) in arms]


def contrast_difference(rows: Sequence[Mapping[str, Any]], contrast: Contrast,
                        seeds: Sequence[int]) -> PairedDifference | None:
    """The contrast's paired difference (test accuracy, 0-1: each seed's weighted sum of its terms' scores,
    `Contrast.terms`) over those of `seeds` every term has a row of, in `seeds`' order; None when they share none."""
    found: dict[tuple[str, str], dict[int, float]] = {}
    for row in rows:
        if row["test_accuracy"] is not None:
            found.setdefault((row["config"], row.get("arm_name")), {})[row["seed"]] = float(row["test_accuracy"])
    terms = contrast.terms()
    pairs = tuple((seed, sum(weight * found[config, arm][seed] for config, arm, weight in terms)) for seed in seeds
                  if all(seed in found.get((config, arm), {}) for config, arm, _ in terms))
    return PairedDifference(pairs) if pairs else None


def holm_adjusted(p_values: Sequence[float | None], alpha: float) -> list[float]:
    """Holm's step-down adjustment (statsmodels' `multipletests`) of a declared family; a missing p counts as 1."""
    from statsmodels.stats.multitest import multipletests

    if not p_values:
        return []
    return [float(p) for p in multipletests([1.0 if p is None else p for p in p_values], alpha=alpha,
                                            method="holm")[1]]


def power_at(seeds: int, effect_size: float, alpha: float) -> float:
    """The power of a two-sided paired t-test at `alpha` over `seeds` pairs for a standardized effect (mean / sd),
    from the noncentral t distribution (scipy), the quantity statsmodels' `TTestPower` solves for. The lower tail,
    P(T < -t; δ), is read as the upper tail of the mirrored distribution, P(T > t; -δ), which scipy computes where
    its cdf gives NaN far in the tail (δ of 30 and more)."""
    critical = stats.t.ppf(1 - alpha / 2, seeds - 1)
    noncentrality = effect_size * math.sqrt(seeds)
    return float(stats.nct.sf(critical, seeds - 1, noncentrality) + stats.nct.sf(critical, seeds - 1, -noncentrality))


SEARCHED_SEEDS = 1000
"""Where statsmodels' solver finds no root, the counts from 2 up to this are tried one by one (`seeds_for_power`)."""


def seeds_for_power(sd: float, smallest_effect: float, alpha: float, power: float = POWER) -> int | None:
    """Seeds a two-sided paired t-test at `alpha` needs to detect `smallest_effect` with `power`, when the per-seed
    differences spread with standard deviation `sd` (same units; statsmodels' `TTestPower`): at least 2, the
    fewest a paired t-test takes. For a large effect (about 5.5 sds or more) the solver returns NaN, or a count it
    did not converge on (10 for 15 sds), so its answer stands only where the power (`power_at`) confirms it is the
    smallest count that reaches `power` (and is at most `SEARCHED_SEEDS`); else the counts from 2 to `SEARCHED_SEEDS`
    are tried one by one, and None where none reaches it (an effect too small against the spread for any study)."""
    import warnings

    from statsmodels.stats.power import TTestPower

    if sd <= 0:
        return 2
    effect_size = smallest_effect / sd
    with warnings.catch_warnings():  # a failed solve says so by returning NaN, handled below
        warnings.simplefilter("ignore")
        solved = TTestPower().solve_power(effect_size=effect_size, alpha=alpha, power=power, alternative="two-sided")
    needed = float(np.asarray(solved).reshape(-1)[0])  # statsmodels 0.14 answers a failed solve with a 1-array
    if math.isfinite(needed) and needed <= SEARCHED_SEEDS:  # statsmodels 0.14 may answer 1e22 for a tiny effect
        count = max(2, math.ceil(needed))
        reaches = power_at(count, effect_size, alpha) >= power
        if reaches and (count == 2 or power_at(count - 1, effect_size, alpha) < power):
            return count
    return next((seeds for seeds in range(2, SEARCHED_SEEDS + 1) if power_at(seeds, effect_size, alpha) >= power),
                None)


def spent_alpha(rule: str, fraction: float, alpha: float) -> float:
    """Alpha the Lan-DeMets spending function `rule` has spent at information fraction `fraction` (0-1):
    O'Brien-Fleming type 2 - 2 Φ(z(1 - alpha/2) / √t), Pocock type alpha · ln(1 + (e - 1) t)."""
    if fraction <= 0:
        return 0.0
    if rule == "obrien_fleming":
        return float(2 - 2 * stats.norm.cdf(stats.norm.ppf(1 - alpha / 2) / math.sqrt(fraction)))
    if rule == "pocock":
        return alpha * math.log(1 + (math.e - 1) * fraction)
    raise ValueError(f"unknown spending rule {rule!r}; known: {', '.join(SPENDING_RULES)}")


def look_alphas(spending: AlphaSpending, seeds: int, alpha: float) -> list[tuple[int, float]]:
    """(seeds with rows, nominal alpha) of each look `spending` declares, then of the final look at all `seeds`
    (`AlphaSpending`): the increments of the spending function, the last one what remains of `alpha`."""
    looks, spent, found = [*spending.looks, seeds], 0.0, []
    for look in looks:
        total = alpha if look == seeds else spent_alpha(spending.rule, look / seeds, alpha)
        found.append((look, total - spent))
        spent = total
    return found


def _p(p: float | None) -> str:
    return "n/a" if p is None else "< 0.001" if p < 0.001 else f"{p:.3f}"


def _against_smallest(difference: PairedDifference, smallest: float) -> str:
    """Where the interval lies against the smallest effect of interest (points), so a verdict says no more than it:
    a gain whose whole interval is below it is a gain smaller than the study was sized to find."""
    low, high = (abs(100 * end) for end in sorted(difference.interval, key=abs))
    if high < smallest:
        return f", the whole interval below the smallest effect of interest, {smallest:g} points"
    if low >= smallest:
        return f", the whole interval at or beyond the smallest effect of interest, {smallest:g} points"
    return f", the interval reaching across the smallest effect of interest, {smallest:g} points"


def _row(role: str, contrast: Contrast, difference: PairedDifference | None, expected: int, declared: int,
         p: float | None, adjusted: float | None, alpha: float, smallest: float) -> str:
    """A tested contrast's row of the confirmatory table (`preregistered_lines`): no estimate for one with fewer
    than the `expected` seeds the test reads (of the `declared`)."""
    seeds = f"{0 if difference is None else difference.n} of {declared}"
    if difference is None or difference.n < expected:
        return (f"| {role} | {contrast.words()} | {seeds} | n/a | n/a | n/a | n/a | n/a | "
                f"{'no rows' if difference is None else 'interim'}: not tested |")
    cells = paired_cells(difference)
    deciding = adjusted if adjusted is not None else p
    if deciding is None:
        verdict = "one seed: no test"
    else:
        verdict = (f"{'significant' if deciding < alpha else 'not significant'} at alpha {alpha:.3g}"
                   + (f" ({'ahead' if difference.mean > 0 else 'behind'}{_against_smallest(difference, smallest)})"
                      if deciding < alpha else ""))
    return (f"| {role} | {contrast.words()} | {seeds} | {cells[2]} | {cells[4]} | {_p(p)} | "
            f"{'–' if adjusted is None and role == 'primary' else _p(adjusted)} | {cells[5]} | {verdict} |")


def power_line(registration: Preregistration, primary: PairedDifference | None, complete: bool) -> str:
    """Seeds needed for 80% power at the declared smallest effect, from the declared seeds once every one has rows,
    else from the pilot (an interim spread is a look at the data too)."""
    if complete and primary is not None and primary.sd is not None:
        sd, source = 100 * primary.sd, f"the {primary.n} declared seeds"
    elif registration.pilot_sd is not None:
        sd, source = registration.pilot_sd, "the pilot (pilot_sd declared in the study file)"
    else:
        return ("Power: no estimate yet (it needs every declared seed's rows, or a pilot_sd declared in the study "
                "file).")
    smallest = registration.smallest_for(registration.primary)
    needed = seeds_for_power(sd, smallest, registration.alpha)
    count = (f"needs {needed} seeds" if needed is not None
             else "finds no number of seeds that reaches it (the effect is too small against the spread)")
    return (f"Power: from {source}, the differences' sd is {sd:.2f} points; a two-sided paired t-test at alpha "
            f"{registration.alpha:g} {count} for {POWER:.0%} power at the smallest effect of interest, "
            f"{smallest:g} points (statsmodels TTestPower); {len(registration.seeds)} are declared.")


def _seed_list(seeds: Sequence[int]) -> str:
    return ", ".join(map(str, sorted(set(seeds))))


def _order_problem(declaration: Declaration, row: Mapping[str, Any]) -> str | None:
    """Why `row`'s commit does not show the declaration before it: None where the declaration's commit is an
    ancestor of it; "after" where git says it is not; else why git cannot tell."""
    commit = row_commit(row)
    if commit is None:
        return "no commit recorded"
    if not commit_in(declaration.repository, commit):
        return f"commit {commit[:12]} not in {declaration.repository}"
    return None if is_ancestor(declaration.repository, declaration.commit, commit) else "after"


def _definition_problem(registration: Preregistration, row: Mapping[str, Any]) -> str | None:
    """Why `row` cannot be shown to have run under the declared definition: None where its recorded digest (or the
    study file at its commit) equals the declared one; "other" where it differs; else why it cannot be told."""
    recorded = row.get("study_definition")
    if recorded is not None:
        return None if recorded == registration.definition else "other"
    commit, declaration = row_commit(row), registration.declaration
    if commit is None or declaration.definition_at is None:
        return "no definition recorded"
    path = declaration.path or ""
    if str(row.get("commit", "")).endswith("-dirty") and path in (row.get("uncommitted") or "").split(", "):
        return "the study file was edited on top of its commit"
    at_commit = declaration.definition_at(commit)
    if at_commit is None:
        return f"no study file {path} at commit {commit[:12]}"
    return None if at_commit == registration.definition else "other"


def declaration_line(registration: Preregistration, rows: Sequence[Mapping[str, Any]]) -> str:
    """What the declaration check found for every declared row (module docstring)."""
    declaration, declared = registration.declaration, registration.declared_rows(rows)
    if not declared:
        return "Declaration: no declared row yet to check it against."
    if declaration.commit is None:
        return f"Declaration before the declared rows: cannot tell ({declaration.reason})."
    order: dict[str, list[int]] = {}
    definition: dict[str, list[int]] = {}
    recorded = sum(row.get("study_definition") is not None for row in declared)
    for row in declared:
        if (problem := _order_problem(declaration, row)) is not None:
            order.setdefault(problem, []).append(row["seed"])
        if (problem := _definition_problem(registration, row)) is not None:
            definition.setdefault(problem, []).append(row["seed"])
    repository = ("this checkout" if declaration.repository == Path.cwd().resolve()
                  else f"the repository at {declaration.repository}")
    where = (f"the whole study definition (digest {registration.definition}) as committed at "
             f"{declaration.commit[:12]} in {repository} ({declaration.path}); each row's commit is looked up there "
             "(a row records the commit of the hf_spt checkout that ran it)")
    checked = (f"{len(declared)} declared rows (the declared contrasts' arms at the declared seeds; {recorded} "
               f"record the definition they ran under, {len(declared) - recorded} are checked against the study file "
               "at their commit)")
    dirty = sorted({row["seed"] for row in declared if str(row.get("commit")).endswith("-dirty")})
    uncommitted = (f" The commit of seed(s) {_seed_list(dirty)}'s rows carries uncommitted changes (\"-dirty\"; the "
                   "files are named in the rows)." if dirty else "")
    if not order and not definition:
        return (f"Declaration: {where}. Checked {checked}: the declaration's commit is an ancestor of every one's "
                f"commit, and each ran under the declared definition.{uncommitted}")
    parts = [f"{len(seeds)} row(s) ran at a commit that does not hold the declaration (seeds {_seed_list(seeds)}): "
             "NOT declared before them" if problem == "after" else
             f"{len(seeds)} row(s) cannot be ordered against it, {problem} (seeds {_seed_list(seeds)})"
             for problem, seeds in order.items()]
    parts += [f"{len(seeds)} row(s) ran under ANOTHER study definition than the declared one (seeds "
              f"{_seed_list(seeds)})" if problem == "other" else
              f"{len(seeds)} row(s) cannot be matched to the declared definition, {problem} (seeds {_seed_list(seeds)})"
              for problem, seeds in definition.items()]
    return f"Declaration: {where}. Checked {checked}: {'; '.join(parts)}.{uncommitted}"


def _sensitivity_lines(registration: Preregistration, rows: Sequence[Mapping[str, Any]],
                       differences: Sequence[PairedDifference | None]) -> list[str]:
    """Each declared contrast per numerics label of its seeds and the inverse-variance stratified estimate, where
    its seeds ran with more than one (module docstring); where none mixes, one line naming the labels the seeds ran
    with, so a reader sees the analysis was not skipped."""
    found = []
    for contrast, difference in zip(registration.contrasts, differences):
        if difference is None:
            continue
        labels: dict[int, set[str]] = {}
        for row in rows:
            if (row["config"], row.get("arm_name")) in {(config, arm) for config, arm, _ in contrast.terms()}:
                labels.setdefault(row["seed"], set()).add(numerics_label(row))
        strata: dict[str, list[int]] = {}
        for seed in difference.seeds:
            strata.setdefault(" / ".join(sorted(labels.get(seed, {"unrecorded"}))), []).append(seed)
        if len(strata) < 2:
            continue
        parts = [PairedDifference(tuple((s, d) for s, d in difference.pairs if s in seeds))
                 for seeds in strata.values()]
        found += [f"| {contrast.words()} | {label} | {_seed_list(seeds)} | {cells[2]} | {cells[4]} |"
                  for (label, seeds), part in zip(strata.items(), parts) for cells in [paired_cells(part)]]
        pooled = paired_cells(difference)
        found.append(f"| {contrast.words()} | all, pooled (as tested) | {difference.n} seeds | {pooled[2]} "
                     f"| {pooled[4]} |")
        estimate = stratified_estimate(parts)
        found.append(f"| {contrast.words()} | stratified by numerics (inverse-variance) | {difference.n} seeds | "
                     + ("n/a | a stratum has no standard error |" if estimate is None else
                        f"{100 * estimate.mean:+.1f} | [{100 * estimate.interval[0]:+.1f}, "
                        f"{100 * estimate.interval[1]:+.1f}] |"))
    if not found:
        labels = sorted({numerics_label(row) for row in registration.declared_rows(rows)})
        return [f"Numerics: each declared contrast's seeds ran with one numerics label ({'; '.join(labels)}), so the "
                "sensitivity analysis by numerics has a single stratum: the pooled estimate tested above.", ""]
    return ["Sensitivity analysis, not a test: the seeds of a contrast below ran with other CPU numerics, so each "
            "contrast is also given per numerics label and as the strata's "
            "inverse-variance weighted mean (weights n / sd², normal 95% interval) beside the pooled estimate "
            "tested above.", "", "| contrast | numerics | seeds | mean | 95% interval |", "|---|---|---|---|---|",
            *found, ""]


def _look(registration: Preregistration, available: int) -> tuple[int, float] | None:
    """The latest look of the declaration's alpha-spending rule that `available` seeds reach: (its seeds, its
    nominal alpha); None without a rule or before its first look."""
    if registration.alpha_spending is None:
        return None
    reached = [look for look in look_alphas(registration.alpha_spending, len(registration.seeds), registration.alpha)
               if look[0] <= available]
    return reached[-1] if reached else None


def withheld_units(registrations: Sequence[Preregistration],
                   rows: Sequence[Mapping[str, Any]]) -> set[tuple[str, str, int]]:
    """(config, arm name, seed) of the declared rows whose test is not shown yet (`preregistered_lines`: not every
    declared seed in, no declared look reached): a report leaves them out of everything it prints besides the
    confirmatory section, whose estimate they would otherwise give away."""
    held = set()
    for registration in registrations:
        primary = contrast_difference([r for r in rows if registration.owns(r)], registration.primary,
                                      registration.seeds)
        available = 0 if primary is None else primary.n
        if available < len(registration.seeds) and _look(registration, available) is None:
            held |= {(row["config"], row.get("arm_name"), row["seed"]) for row in registration.declared_rows(rows)}
    return held


def preregistered_lines(registration: Preregistration, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The report's confirmatory section (module docstring) as markdown lines; only this study's rows
    (`Preregistration.owns`) count."""
    rows = [row for row in rows if registration.owns(row)]
    seeds, declared = registration.seeds, len(registration.seeds)
    primary = contrast_difference(rows, registration.primary, seeds)
    available = 0 if primary is None else primary.n
    complete = available == declared
    spending = registration.alpha_spending
    lines = [f"## Preregistered: {registration.study}", "",
             f"Declared in the study file: primary {registration.primary.words()}; seeds "
             f"{', '.join(map(str, seeds))} ({declared}); alpha {registration.alpha:g}; smallest effect of interest "
             f"{registration.smallest_for(registration.primary):g} points"
             + "".join(f" ({c.words()}: {c.smallest_effect:g})" for c in registration.secondary
                       if c.smallest_effect is not None)
             + f"; {len(registration.secondary)} secondary contrast(s)"
             + (f"; interim looks at {', '.join(map(str, spending.looks))} seeds, alpha spent by the "
                f"{spending.rule} rule" if spending else "; no interim look") + ". Only the "
             "declared seeds count. Differences in points of test accuracy, paired by seed: mean, 95% interval "
             "(Student t), two-sided p of the paired t-test (scipy.stats); the secondaries' p adjusted by Holm over "
             "the declared secondaries (statsmodels multipletests; one without rows counts as p = 1).", ""]
    look = None if complete else _look(registration, available)
    if not complete and look is None:
        progress = [f"{c.words()}: {0 if (d := contrast_difference(rows, c, seeds)) is None else d.n} of {declared}"
                    for c in registration.contrasts]
        return [*lines, f"**interim: {available} of {declared} seeds** with the primary's rows. No estimate, p or "
                "verdict is shown before every declared seed has its rows"
                + (" (or a declared interim look is reached)" if spending else " (no interim look was declared)")
                + f"; seeds with rows: {'; '.join(progress)}.", "", power_line(registration, primary, False), "",
                declaration_line(registration, rows), ""]
    tested = seeds if look is None else tuple(s for s in seeds if s in primary.seeds)[:look[0]]
    alpha = registration.alpha if look is None else look[1]
    differences = [contrast_difference(rows, contrast, tested) for contrast in registration.contrasts]
    primary, secondaries = differences[0], differences[1:]
    adjusted = holm_adjusted([None if d is None or d.n < len(tested) else d.p_value for d in secondaries], alpha)
    if look is not None:
        lines += [f"**interim look at {look[0]} of {declared} seeds** (the first {look[0]} declared seeds with rows), "
                  f"tested at the alpha the {spending.rule} rule spends here, {alpha:.3g}; not significant means "
                  "go on to the next look.", ""]
    lines += ["| role | contrast | seeds | mean | 95% interval | p | Holm-adjusted p | ahead | verdict |",
              "|---|---|---|---|---|---|---|---|---|",
              _row("primary", registration.primary, primary, len(tested), declared, primary and primary.p_value,
                   None, alpha, registration.smallest_for(registration.primary))]
    lines += [_row("secondary", contrast, difference, len(tested), declared, difference and difference.p_value, p,
                   alpha, registration.smallest_for(contrast))
              for contrast, difference, p in zip(registration.secondary, secondaries, adjusted)]
    return [*lines, "", *_sensitivity_lines(registration, rows, differences),
            power_line(registration, primary, complete), "", declaration_line(registration, rows), ""]


__all__ = ["POWER", "EXPLORATORY_NOTE", "SPENDING_RULES", "Contrast", "Declaration", "AlphaSpending",
           "Preregistration", "contrast_difference", "holm_adjusted", "power_at", "SEARCHED_SEEDS", "seeds_for_power",
           "spent_alpha", "look_alphas", "power_line", "declaration_line", "withheld_units", "preregistered_lines"]
