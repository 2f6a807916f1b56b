"""A study file's `preregistered:` mapping: parsed and checked against its grid, and the commit git says declared it.

    preregistered:
      primary: {config: mnist14_n1000, arm: spt, control: scratch_compute_matched_full}
      seeds: [10, 11, 12, ...]          # the whole list, fixed before any row
      alpha: 0.05
      smallest_effect: 1.0              # points of test accuracy
      secondary:                        # optional; Holm-adjusted over this list
        - {config: mnist14_n1000, arm: spt, control: scratch_compute_matched}
      pilot_sd: 2.0                     # optional: the pilot's sd of the differences (points), for the power line
      alpha_spending: {rule: obrien_fleming, looks: [8, 16]}   # optional: interim looks (seeds with rows)

A contrast's `control` may be a list (the arm minus their mean), it may name a `twin` configuration (the same
contrast there subtracted, seed by seed: a difference in differences; `reports.preregistration.Contrast`) and a
`smallest_effect` of its own, in points, where its claim is sized differently from the study's (the verdict reads
its interval against it; the power line uses the primary's).

Arms are named as in the study's `arms:` (a budget arm with its suffix, `spt_e40`), configurations as its task
keys; every contrast is declared once (the primary is no secondary). Every value is checked while the study plans
(finite numbers in their ranges: a smallest effect from 0.01 to 100 points, a pilot sd below 100), so a value the
power line cannot use stops the plan, not the report after every cell has trained. The report
(`reports.preregistration`) tests the contrasts as declared.

The declaration binds the whole study (`study_definition`: the parsed file less `output_dir`, the `seeds` a launch
trains and the tasks' `title`s, none of which changes a row). Its commit is the oldest commit from which that
definition is the one the file holds now: a later change to the recipe, model, arms, budgets or declaration moves
it; a comment does not. One the working copy changed and no commit holds is not committed; a commit that deleted
the file is passed over (a file restored unchanged keeps its declaration), and the file's history is read in the
repository that holds it, which the report names.
"""

from __future__ import annotations

import copy
import functools
import math
import subprocess
from pathlib import Path
from typing import Any

import yaml

from ...errors import UserInputError
from ...reports.preregistration import SPENDING_RULES, AlphaSpending, Contrast, Declaration, Preregistration
from ...runs.phase_definition import definition_digest
from ...runs.provenance import git_output
from .grid import Grid

PREREGISTERED_KEY = "preregistered"
RUN_BOOKKEEPING = ("output_dir", "seeds")
"""Top-level study settings that say where and which seeds a launch trains, not what a row is."""
TITLE_KEY = "title"
SMALLEST_EFFECT_FLOOR = 0.01
"""Points: an effect below one test example in 10,000 is below what a test accuracy can show."""
_KEYS = {"primary", "seeds", "alpha", "smallest_effect", "secondary", "pilot_sd", "alpha_spending"}
_REQUIRED = ("primary", "seeds", "alpha", "smallest_effect")
_EXAMPLE = ("e.g. preregistered: {primary: {config: CONFIG, arm: spt, control: scratch}, seeds: [10, 11, ...], "
            "alpha: 0.05, smallest_effect: 1.0}")


_CONTRAST_KEYS = {"config", "arm", "control", "twin", "smallest_effect"}


def _contrast(value: Any, what: str, grid: Grid, path: Path) -> Contrast:
    """A declared contrast: {config, arm, control} with `control` one arm or a list (the arm minus their mean), an
    optional `twin` configuration (the same contrast there subtracted) and an optional `smallest_effect` of its own
    (points), checked against the grid."""
    if not isinstance(value, dict) or not {"config", "arm", "control"} <= set(value) <= _CONTRAST_KEYS:
        raise UserInputError(f"{path}: {PREREGISTERED_KEY} {what} must be a mapping of config, arm and control (one "
                             f"arm, or a list of arms: minus their mean), and optionally twin and smallest_effect, "
                             f"got {value!r}.")
    arms = [arm.name for arm in grid.arms]
    configs = [value["config"]] + ([value["twin"]] if "twin" in value else [])
    for config in configs:
        if config not in grid.tasks:
            raise UserInputError(f"{path}: {PREREGISTERED_KEY} {what} names configuration {config!r}; the study's "
                                 f"are {', '.join(grid.tasks)}.")
    if len(set(configs)) != len(configs):
        raise UserInputError(f"{path}: {PREREGISTERED_KEY} {what} names {configs[0]!r} as its own twin.")
    controls = value["control"] if isinstance(value["control"], list) else [value["control"]]
    if not controls or len(set(map(str, controls))) != len(controls):
        raise UserInputError(f"{path}: {PREREGISTERED_KEY} {what} control is one arm or a list of distinct arms, got "
                             f"{value['control']!r}.")
    for name in (value["arm"], *controls):
        if name not in arms:
            raise UserInputError(f"{path}: {PREREGISTERED_KEY} {what} names arm {name!r}; the study's arms are "
                                 f"{', '.join(arms)}.")
        for config in configs:
            if not next(arm for arm in grid.arms if arm.name == name).runs_on(config):
                raise UserInputError(f"{path}: {PREREGISTERED_KEY} {what} names arm {name!r}, which does not run on "
                                     f"configuration {config!r} (its tasks:).")
    if value["arm"] in controls:
        raise UserInputError(f"{path}: {PREREGISTERED_KEY} {what} compares arm {value['arm']!r} with itself.")
    control = controls[0] if len(controls) == 1 and not isinstance(value["control"], list) else tuple(sorted(controls))
    return Contrast(value["config"], value["arm"], control, value.get("twin"),
                    _smallest_effect(value, path, f"{what} "))


def _number(block: dict[str, Any], key: str, path: Path, low: float, high: float | None,
            where: str = "") -> float | None:
    value = block.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not (
            low < value and (high is None or value < high)):
        bounds = f"between {low:g} and {high:g}" if high is not None else f"above {low:g}"
        raise UserInputError(f"{path}: {PREREGISTERED_KEY} {where}{key} must be a finite number {bounds}, "
                             f"got {value!r}.")
    return float(value)


def _alpha_spending(value: Any, seeds: int, path: Path) -> AlphaSpending | None:
    """The declared interim looks: a known spending rule and ascending seed counts between 2 and the seeds."""
    if value is None:
        return None
    looks = value.get("looks") if isinstance(value, dict) else None
    if (not isinstance(value, dict) or set(value) != {"rule", "looks"} or value["rule"] not in SPENDING_RULES
            or not isinstance(looks, list) or not looks
            or any(isinstance(k, bool) or not isinstance(k, int) or not 2 <= k < seeds for k in looks)
            or looks != sorted(set(looks))):
        raise UserInputError(f"{path}: {PREREGISTERED_KEY} alpha_spending must be {{rule: {' or '.join(SPENDING_RULES)}, "
                             f"looks: [seeds with rows at each interim look, ascending, from 2 to {seeds - 1}]}}, "
                             f"got {value!r}.")
    return AlphaSpending(value["rule"], tuple(looks))


def _smallest_effect(block: dict[str, Any], path: Path, where: str = "") -> float | None:
    """`block`'s smallest_effect (None where it declares none), refused while the study plans where the power line
    and verdicts cannot use it: not a finite positive number, or below `SMALLEST_EFFECT_FLOOR` or above 100 points.
    `where` names the contrast in the message (the study's own value: none)."""
    smallest = _number(block, "smallest_effect", path, 0, None, where)
    if smallest is not None and (smallest < SMALLEST_EFFECT_FLOOR or smallest > 100):
        raise UserInputError(f"{path}: {PREREGISTERED_KEY} {where}smallest_effect is in points of test accuracy, from "
                             f"{SMALLEST_EFFECT_FLOOR:g} to 100; got {smallest:g}.")
    return smallest


def parse_preregistration(block: Any, path: Path, grid: Grid, study: str) -> Preregistration:
    """The declaration of a study file checked against its grid; a malformed one is a one-line error naming it.
    Its `declaration` is left for `declaration_commit` (git is not asked while a run plans)."""
    if not isinstance(block, dict):
        raise UserInputError(f"{path}: {PREREGISTERED_KEY} must be a mapping ({_EXAMPLE}), got {block!r}.")
    unknown, missing = sorted(set(block) - _KEYS), [key for key in _REQUIRED if key not in block]
    if unknown or missing:
        raise UserInputError(f"{path}: {PREREGISTERED_KEY} " + "; ".join(
            [f"has no key(s) {', '.join(unknown)}"] * bool(unknown) + [f"lacks {', '.join(missing)}"] * bool(missing))
            + f"; its keys: {', '.join(sorted(_KEYS))} ({_EXAMPLE}).")
    seeds = block["seeds"]
    if (not isinstance(seeds, list) or not seeds or len(set(seeds)) != len(seeds)
            or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds)):
        raise UserInputError(f"{path}: {PREREGISTERED_KEY} seeds must be the whole list of distinct non-negative "
                             f"seeds, fixed in advance, got {seeds!r}.")
    secondary = block.get("secondary") or []
    if not isinstance(secondary, list):
        raise UserInputError(f"{path}: {PREREGISTERED_KEY} secondary must be a list of contrasts, got {secondary!r}.")
    primary = _contrast(block["primary"], "primary", grid, path)
    secondaries = tuple(_contrast(c, f"secondary {i + 1}", grid, path) for i, c in enumerate(secondary))
    seen = [primary]
    for index, contrast in enumerate(secondaries):
        if contrast in seen:
            again = "the primary" if contrast == primary else f"secondary {seen.index(contrast)}"
            raise UserInputError(f"{path}: {PREREGISTERED_KEY} secondary {index + 1} ({contrast.words()}) repeats "
                                 f"{again}: declare each contrast once (a repeat would count twice in Holm's family).")
        seen.append(contrast)
    return Preregistration(
        study=study, primary=primary, seeds=tuple(seeds), alpha=_number(block, "alpha", path, 0, 1),
        smallest_effect=_smallest_effect(block, path), secondary=secondaries,
        pilot_sd=_number(block, "pilot_sd", path, 0, 100),
        alpha_spending=_alpha_spending(block.get("alpha_spending"), len(seeds), path))


def study_definition(raw: dict[str, Any]) -> dict[str, Any]:
    """What a study file defines (module docstring): its parsed content less `RUN_BOOKKEEPING` and the tasks'
    titles; `raw` is left as it is."""
    definition = {key: value for key, value in copy.deepcopy(raw).items() if key not in RUN_BOOKKEEPING}
    for spec in (definition.get("tasks") or {}).values() if isinstance(definition.get("tasks"), dict) else ():
        if isinstance(spec, dict):
            spec.pop(TITLE_KEY, None)
    return definition


def study_definition_digest(raw: dict[str, Any]) -> str:
    """The digest of `study_definition(raw)` that rows record and the declaration check compares."""
    return definition_digest(study_definition(raw))


def _definition_of(text: str | None) -> str | None:
    """The definition digest of a study file's text (None: no text, or text that is no YAML/JSON mapping)."""
    if text is None:
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return study_definition_digest(data) if isinstance(data, dict) else None


def _text_at(top: Path, commit: str, relative: str) -> str | None:
    """The file's text at `commit` (None where the commit holds no such file, e.g. the one that deleted it)."""
    try:
        return git_output(top, "show", f"{commit}:{relative}")
    except subprocess.SubprocessError:
        return None


def declaration_commit(path: Path) -> Declaration:
    """Where git says the study file at `path` declared its whole definition (module docstring), and a reader of its
    definition at any commit of that repository, for rows that record none."""
    path = path.resolve()
    current = _definition_of(path.read_text(encoding="utf-8"))
    try:
        top = Path(git_output(path.parent, "rev-parse", "--show-toplevel"))
        relative = path.relative_to(top).as_posix()
        history = git_output(top, "log", "--format=%H", "--", relative).split()  # newest first, deletions included
    except (OSError, subprocess.SubprocessError, ValueError):
        return Declaration(None, None, f"{path} is not in a git checkout git can read")
    found = None
    for commit in history:
        text = _text_at(top, commit, relative)
        if text is None:  # the commit that deleted the file: no definition to compare, and none ran under it
            continue
        if _definition_of(text) != current:
            break
        found = commit
    if found is None:
        return Declaration(None, top, f"the study definition {path.name} holds is not committed in {top}", relative)
    return Declaration(found, top, "", relative,
                       functools.lru_cache(maxsize=None)(lambda commit: _definition_of(_text_at(top, commit, relative))))


__all__ = ["PREREGISTERED_KEY", "RUN_BOOKKEEPING", "TITLE_KEY", "SMALLEST_EFFECT_FLOOR", "parse_preregistration",
           "study_definition", "study_definition_digest", "declaration_commit"]
