"""Joining finished reports (a budget study's rows and probes, compute curves) from several sources into one.

Each configuration comes from one source. The one exception is the same study re-run with more seeds: a
source whose entries of a configuration include every entry another source holds of it (equal entries:
the same runs, read back unchanged) supersedes that source, so `--combine docs/lra,runs/my_study` adds
seeds 2 and 3 to the seeds 0-1 a report already holds. Any other overlap is refused: two runs under one
configuration name may differ in code or settings, and merging them would report one run's number under
the other's name. A configuration named in `replaced` (a study re-run under newer code) is taken whole from
the last source that holds it, and every other source's entries of it are dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TypeVar

from ...errors import UserInputError

Entry = TypeVar("Entry")


def join_by_config(sources: Sequence[tuple[Path, list[Entry]]], config_of: Callable[[Entry], str],
                   replaced: Collection[str] = ()) -> list[Entry]:
    """The entries of every configuration, each from one source (or from the source that holds all of another's,
    or for a configuration in `replaced` from the last source that holds it: see the module's docstring), in the
    sources' order."""
    chosen: dict[str, int] = {}  # configuration -> index of the source it is taken from
    for index, (source, entries) in enumerate(sources):
        for config in dict.fromkeys(map(config_of, entries)):
            if config not in chosen or config in replaced:
                chosen[config] = index
                continue
            other, theirs = sources[chosen[config]]
            theirs = [entry for entry in theirs if config_of(entry) == config]
            mine = [entry for entry in entries if config_of(entry) == config]
            if all(entry in mine for entry in theirs):
                chosen[config] = index
            elif not all(entry in theirs for entry in mine):
                raise UserInputError(
                    f"Configuration {config!r} is in both {other} and {source}, and neither holds every run of the "
                    "other: combine each configuration from one study's folder (re-run the study with all its seeds "
                    "in one output folder instead), or, for a study re-run under newer code, name the configuration "
                    "in run_budget_study.py's --replace_configs to take it from the last source that holds it.")
    return [entry for index, (_, entries) in enumerate(sources) for entry in entries
            if chosen[config_of(entry)] == index]


__all__ = ["join_by_config"]
