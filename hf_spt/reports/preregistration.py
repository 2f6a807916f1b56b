"""A preregistered study's confirmatory test: the contrasts, seeds and thresholds a study file declared before its
rows existed, tested as declared.

A study file's `preregistered:` mapping (parsed by `experiments.suites.budget_preregistration`) names the primary contrast
(a configuration, the arm tested and its control, by arm name), the seeds (the whole list, fixed in advance),
alpha, the smallest effect of interest (points of test accuracy) and any secondary contrasts. The report prints,
before anything else:

- the primary: the paired difference over the declared seeds only (a seed outside the list, a pilot's, is not
  counted), its mean, 95% interval, two-sided p of the paired t-test (`paired_seeds`, `scipy.stats`) and the
  seeds ahead; "interim: k of n seeds" until every declared seed has both arms' rows;
- the secondaries, each with its p adjusted by Holm over the family the file declares (statsmodels'
  `multipletests`; a secondary without rows counts as p = 1, so the family stays the declared one);
- the power line: from the declared seeds so far (at least two; else the `pilot_sd` the file declares), the seeds
  a two-sided paired t-test at alpha needs for 80% power at the smallest effect (statsmodels' `TTestPower`);
- whether the declaration was committed before every primary row: the declaration's commit (the oldest commit
  from which the file's declaration is unchanged) must be an ancestor of each row's recorded commit in git, or
  the report says it cannot tell, and why.

Everything else the report prints is labelled exploratory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..runs.provenance import described_commit, is_ancestor
from .paired_seeds import PairedDifference, paired_cells

POWER = 0.8
EXPLORATORY_NOTE = ("Everything below is exploratory: comparisons the study did not declare, each interval at 95% "
                    "with no correction for how many there are (weigh them against the count that follows).")


Roles = Mapping[tuple[str, str, str], str]
"""{(config, arm, control): "primary" or "secondary"}: a study's declared contrasts (`Preregistration.roles`)."""


@dataclass(frozen=True)
class Contrast:
    """An arm minus its control in one configuration, paired by seed (arms by their names in the study file)."""

    config: str
    arm: str
    control: str

    def words(self) -> str:
        return f"{self.arm} minus {self.control}, {self.config}"


@dataclass(frozen=True)
class Declaration:
    """Where git says a study file's declaration was committed: the commit and the repository that holds it, or
    None and why there is none."""

    commit: str | None
    repository: Path | None = None
    reason: str = ""


@dataclass(frozen=True)
class Preregistration:
    """A study file's `preregistered:` mapping (module docstring); `smallest_effect` and `pilot_sd` in points."""

    study: str
    primary: Contrast
    seeds: tuple[int, ...]
    alpha: float
    smallest_effect: float
    secondary: tuple[Contrast, ...] = ()
    pilot_sd: float | None = None
    declaration: Declaration = field(default_factory=lambda: Declaration(None, None, "not looked up"))

    def roles(self) -> Roles:
        """{(config, arm, control): "primary" or "secondary"} of the declared contrasts: what an exploratory table
        repeating one of them points back to instead of deciding it again."""
        return {**{(c.config, c.arm, c.control): "secondary" for c in self.secondary},
                (self.primary.config, self.primary.arm, self.primary.control): "primary"}


def declared_verdict(comparison: Mapping[str, Any], roles: Roles) -> str | None:
    """The verdict cell of an exploratory paired row (a `config`, `arm` and `control`) that repeats a declared
    contrast (`roles`: `Preregistration.roles`): where that contrast is tested; None for one not declared."""
    role = roles.get((comparison["config"], comparison["arm"], comparison["control"]))
    return None if role is None else f"declared {role}: tested above"


def contrast_difference(rows: Sequence[dict[str, Any]], contrast: Contrast,
                        seeds: Sequence[int]) -> PairedDifference | None:
    """The contrast's paired difference (test accuracy, 0-1) over those of `seeds` both arms have a row of, in
    `seeds`' order; None when they share none."""

    def scores(arm: str) -> dict[int, float]:
        found = {row["seed"]: float(row["test_accuracy"]) for row in rows
                 if row["config"] == contrast.config and row.get("arm_name") == arm
                 and row["test_accuracy"] is not None}
        return {seed: found[seed] for seed in seeds if seed in found}

    treated, control = scores(contrast.arm), scores(contrast.control)
    pairs = tuple((seed, treated[seed] - control[seed]) for seed in treated if seed in control)
    return PairedDifference(pairs) if pairs else None


def holm_adjusted(p_values: Sequence[float | None], alpha: float) -> list[float]:
    """Holm's step-down adjustment (statsmodels' `multipletests`) of a declared family; a missing p counts as 1."""
    from statsmodels.stats.multitest import multipletests

    if not p_values:
        return []
    return [float(p) for p in multipletests([1.0 if p is None else p for p in p_values], alpha=alpha,
                                            method="holm")[1]]


def seeds_for_power(sd: float, smallest_effect: float, alpha: float, power: float = POWER) -> int:
    """Seeds a two-sided paired t-test at `alpha` needs to detect `smallest_effect` with `power`, when the per-seed
    differences spread with standard deviation `sd` (same units; statsmodels' `TTestPower`)."""
    from statsmodels.stats.power import TTestPower

    if sd <= 0:
        return 2
    return math.ceil(TTestPower().solve_power(effect_size=smallest_effect / sd, alpha=alpha, power=power,
                                              alternative="two-sided"))


def _p(p: float | None) -> str:
    return "n/a" if p is None else "< 0.001" if p < 0.001 else f"{p:.3f}"


def _row(role: str, contrast: Contrast, difference: PairedDifference | None, declared: int, p: float | None,
         adjusted: float | None, alpha: float) -> str:
    if difference is None:
        return f"| {role} | {contrast.words()} | 0 of {declared} | n/a | n/a | n/a | n/a | n/a | no rows yet |"
    cells = paired_cells(difference)
    deciding = adjusted if adjusted is not None else p
    if difference.n < declared:
        verdict = f"interim: {difference.n} of {declared} seeds"
    elif deciding is None:
        verdict = "one seed: no test"
    else:
        verdict = (f"{'significant' if deciding < alpha else 'not significant'} at alpha {alpha:g}"
                   + (f" ({'ahead' if difference.mean > 0 else 'behind'})" if deciding < alpha else ""))
    return (f"| {role} | {contrast.words()} | {difference.n} of {declared} | {cells[2]} | {cells[4]} | {_p(p)} | "
            f"{'–' if adjusted is None and role == 'primary' else _p(adjusted)} | {cells[5]} | {verdict} |")


def power_line(registration: Preregistration, primary: PairedDifference | None) -> str:
    """Seeds needed for 80% power at the declared smallest effect, from the declared seeds so far or the pilot."""
    if primary is not None and primary.sd is not None:
        sd, source = 100 * primary.sd, f"the {primary.n} declared seed{'s' * (primary.n > 1)} so far"
    elif registration.pilot_sd is not None:
        sd, source = registration.pilot_sd, "the pilot (pilot_sd declared in the study file)"
    else:
        return ("Power: no estimate yet (it needs two declared seeds with rows, or a pilot_sd declared in the study "
                "file).")
    needed = seeds_for_power(sd, registration.smallest_effect, registration.alpha)
    return (f"Power: from {source}, the differences' sd is {sd:.2f} points; a two-sided paired t-test at alpha "
            f"{registration.alpha:g} needs {needed} seeds for {POWER:.0%} power at the smallest effect of interest, "
            f"{registration.smallest_effect:g} points (statsmodels TTestPower); {len(registration.seeds)} are declared.")


def declaration_line(registration: Preregistration, rows: Sequence[dict[str, Any]]) -> str:
    """Whether the declaration's commit is an ancestor of the commit every primary row was run at (module
    docstring), or that git cannot tell, and why."""
    contrast, declaration = registration.primary, registration.declaration
    primary_rows = [row for row in rows if row["config"] == contrast.config and row["seed"] in registration.seeds
                    and row.get("arm_name") in (contrast.arm, contrast.control)]
    if not primary_rows:
        return "Declaration: no primary row yet to check it against."
    if declaration.commit is None:
        return f"Declaration before the primary rows: cannot tell ({declaration.reason})."
    verdicts: dict[bool | None, list[int]] = {True: [], False: [], None: []}
    for row in primary_rows:
        commit = described_commit(row.get("commit"))
        verdicts[None if commit is None else is_ancestor(declaration.repository, declaration.commit, commit)].append(
            row["seed"])
    where = f"declared at commit {declaration.commit[:12]}"
    dirty = [row for row in primary_rows if str(row.get("commit")).endswith("-dirty")]
    named = sorted({path for row in dirty if row.get("uncommitted") for path in row["uncommitted"].split(", ")})
    unnamed = any(not row.get("uncommitted") for row in dirty)  # rows written before the paths were recorded
    edits = " and ".join(filter(None, [named and f"edits to {', '.join(named)}",
                                       unnamed and "edits the rows do not name"]))
    seeds = sorted({row["seed"] for row in dirty})
    uncommitted = (f" The commit of {len(seeds)} seed(s)' rows ({', '.join(map(str, seeds))}) carries uncommitted "
                   f"changes (\"-dirty\": that commit plus {edits})." if dirty else "")
    if not verdicts[False] and not verdicts[None]:
        return (f"Declaration: {where}, an ancestor in git of the commit of every primary row "
                f"({len(primary_rows)} rows): declared before each of them.{uncommitted}")
    parts = []
    if verdicts[False]:
        parts.append(f"{len(verdicts[False])} primary row(s) ran at a commit that does not hold the declaration "
                     f"(seeds {', '.join(map(str, sorted(set(verdicts[False]))))}): NOT declared before them")
    if verdicts[None]:
        parts.append(f"{len(verdicts[None])} row(s) with no recorded commit or one this repository does not hold "
                     f"(seeds {', '.join(map(str, sorted(set(verdicts[None]))))}): cannot tell")
    return f"Declaration: {where}; {'; '.join(parts)}.{uncommitted}"


def preregistered_lines(registration: Preregistration, rows: Sequence[dict[str, Any]]) -> list[str]:
    """The report's confirmatory section (module docstring) as markdown lines."""
    seeds, declared = registration.seeds, len(registration.seeds)
    primary = contrast_difference(rows, registration.primary, seeds)
    secondaries = [contrast_difference(rows, contrast, seeds) for contrast in registration.secondary]
    adjusted = holm_adjusted([None if d is None else d.p_value for d in secondaries], registration.alpha)
    complete = primary is not None and primary.n == declared
    lines = [f"## Preregistered: {registration.study}", "",
             f"Declared in the study file: primary {registration.primary.words()}; seeds "
             f"{', '.join(map(str, seeds))} ({declared}); alpha {registration.alpha:g}; smallest effect of interest "
             f"{registration.smallest_effect:g} points; {len(registration.secondary)} secondary contrast(s). Only the "
             "declared seeds count. Differences in points of test accuracy, paired by seed: mean, 95% interval "
             "(Student t), two-sided p of the paired t-test (scipy.stats); the secondaries' p adjusted by Holm over "
             "the declared secondaries (statsmodels multipletests; one without rows counts as p = 1).", ""]
    if not complete:
        lines += [f"**interim: {0 if primary is None else primary.n} of {declared} seeds** (the primary is tested "
                  "when every declared seed has both arms' rows).", ""]
    lines += ["| role | contrast | seeds | mean | 95% interval | p | Holm-adjusted p | ahead | verdict |",
              "|---|---|---|---|---|---|---|---|---|",
              _row("primary", registration.primary, primary, declared, primary and primary.p_value, None,
                   registration.alpha)]
    lines += [_row("secondary", contrast, difference, declared, difference and difference.p_value, p,
                   registration.alpha) for contrast, difference, p in zip(registration.secondary, secondaries, adjusted)]
    return [*lines, "", power_line(registration, primary), "", declaration_line(registration, rows), ""]


__all__ = ["POWER", "EXPLORATORY_NOTE", "Contrast", "Declaration", "Preregistration", "Roles", "declared_verdict",
           "contrast_difference", "holm_adjusted", "seeds_for_power", "power_line", "declaration_line", "preregistered_lines"]
