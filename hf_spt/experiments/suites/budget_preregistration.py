"""A study file's `preregistered:` mapping: parsed and checked against its grid, and the commit git says declared it.

    preregistered:
      primary: {config: mnist14_n1000, arm: spt, control: scratch_compute_matched_full}
      seeds: [10, 11, 12, ...]          # the whole list, fixed before any row
      alpha: 0.05
      smallest_effect: 1.0              # points of test accuracy
      secondary:                        # optional; Holm-adjusted over this list
        - {config: mnist14_n1000, arm: spt, control: scratch_compute_matched}
      pilot_sd: 2.0                     # optional: the pilot's sd of the differences (points), for the power line

Arms are named as in the study's `arms:` (a budget arm with its suffix, `spt_e40`), configurations as its task
keys. The report (`reports.preregistration`) tests the contrasts as declared. The declaration's commit is the
oldest commit from which the file's `preregistered:` mapping is the one it holds now (later commits may change the
rest of the file); one the working copy changed and no commit holds is not committed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from ...errors import UserInputError
from ...reports.preregistration import Contrast, Declaration, Preregistration
from ...runs.provenance import git_output
from .grid import Grid

PREREGISTERED_KEY = "preregistered"
_KEYS = {"primary", "seeds", "alpha", "smallest_effect", "secondary", "pilot_sd"}
_REQUIRED = ("primary", "seeds", "alpha", "smallest_effect")
_EXAMPLE = ("e.g. preregistered: {primary: {config: CONFIG, arm: spt, control: scratch}, seeds: [10, 11, ...], "
            "alpha: 0.05, smallest_effect: 1.0}")


def _contrast(value: Any, what: str, grid: Grid, path: Path) -> Contrast:
    if not isinstance(value, dict) or set(value) != {"config", "arm", "control"}:
        raise UserInputError(f"{path}: {PREREGISTERED_KEY} {what} must be a mapping of config, arm and control, got "
                             f"{value!r}.")
    arms = [arm.name for arm in grid.arms]
    if value["config"] not in grid.tasks:
        raise UserInputError(f"{path}: {PREREGISTERED_KEY} {what} names configuration {value['config']!r}; the "
                             f"study's are {', '.join(grid.tasks)}.")
    for key in ("arm", "control"):
        if value[key] not in arms:
            raise UserInputError(f"{path}: {PREREGISTERED_KEY} {what} names {key} {value[key]!r}; the study's arms "
                                 f"are {', '.join(arms)}.")
    if value["arm"] == value["control"]:
        raise UserInputError(f"{path}: {PREREGISTERED_KEY} {what} compares arm {value['arm']!r} with itself.")
    return Contrast(value["config"], value["arm"], value["control"])


def _number(block: dict[str, Any], key: str, path: Path, low: float, high: float | None) -> float | None:
    value = block.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            low < value and (high is None or value < high)):
        bounds = f"between {low:g} and {high:g}" if high is not None else f"above {low:g}"
        raise UserInputError(f"{path}: {PREREGISTERED_KEY} {key} must be a number {bounds}, got {value!r}.")
    return float(value)


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
    return Preregistration(
        study=study, primary=_contrast(block["primary"], "primary", grid, path), seeds=tuple(seeds),
        alpha=_number(block, "alpha", path, 0, 1), smallest_effect=_number(block, "smallest_effect", path, 0, None),
        secondary=tuple(_contrast(c, f"secondary {i + 1}", grid, path) for i, c in enumerate(secondary)),
        pilot_sd=_number(block, "pilot_sd", path, 0, None))


def _declared(text: str) -> Any:
    """The `preregistered:` mapping of a study file's text (None: none, or text YAML cannot read)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return data.get(PREREGISTERED_KEY) if isinstance(data, dict) else None


def declaration_commit(path: Path) -> Declaration:
    """Where git says the study file at `path` declared its `preregistered:` mapping (module docstring)."""
    path = path.resolve()
    current = _declared(path.read_text(encoding="utf-8"))
    try:
        top = Path(git_output(path.parent, "rev-parse", "--show-toplevel"))
        relative = path.relative_to(top).as_posix()
        found = None
        for commit in git_output(top, "log", "--format=%H", "--", relative).split():  # newest first
            if _declared(git_output(top, "show", f"{commit}:{relative}")) != current:
                break
            found = commit
    except (OSError, subprocess.SubprocessError, ValueError):
        return Declaration(None, None, f"{path} is not in a git checkout git can read")
    if found is None:
        return Declaration(None, top, f"the declaration {path.name} holds is not committed")
    return Declaration(found, top)


__all__ = ["PREREGISTERED_KEY", "parse_preregistration", "declaration_commit"]
