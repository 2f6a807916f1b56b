"""Joining finished reports (a budget study's rows and probes, compute curves) from several sources into one.

Each configuration comes from one source, with three exceptions. The same study re-run with more seeds: a
source whose entries of a configuration include every entry another source holds of it (equal entries:
the same runs, read back unchanged) supersedes that source, so `--combine docs/lra,runs/my_study` adds
seeds 2 and 3 to the seeds 0-1 a report already holds. Any other overlap is refused: two runs under one
configuration name may differ in code or settings, and merging them would report one run's number under
the other's name. A configuration named in `replaced` (a study re-run under newer code) is taken whole from
the last source that holds it, and every other source's entries of it are dropped. A configuration named in
`added` is joined from every source that holds it: other seeds of the same study run into another folder (a
seed run on another machine, or after the first run's folder was lost). That join is refused unless the
sources hold different seeds and the same settings (each entry with its seed and measured values left out),
so the added seeds ran the same arms at the same budgets; that they ran the same code is the caller's word.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from pathlib import Path
from typing import TypeVar

from ..errors import UserInputError
from ..numerics import numerics_label

Entry = TypeVar("Entry")


def join_by_config(sources: Sequence[tuple[Path, list[Entry]]], config_of: Callable[[Entry], str],
                   seed_of: Callable[[Entry], int], settings_of: Callable[[Entry], Hashable],
                   replaced: Collection[str] = (), added: Collection[str] = ()) -> list[Entry]:
    """The entries of every configuration, each from one source (or from the source that holds all of another's,
    or for a configuration in `replaced` from the last source that holds it, or for one in `added` from every
    source, checked by `seed_of` and `settings_of`: see the module's docstring), in the sources' order."""
    chosen: dict[str, set[int]] = {}  # configuration -> indices of the sources it is taken from
    for index, (source, entries) in enumerate(sources):
        for config in dict.fromkeys(map(config_of, entries)):
            if config not in chosen or config in replaced:
                chosen[config] = {index}
                continue
            mine = [entry for entry in entries if config_of(entry) == config]
            theirs = [entry for other in sorted(chosen[config]) for entry in sources[other][1]
                      if config_of(entry) == config]
            held = ", ".join(str(sources[other][0]) for other in sorted(chosen[config]))
            if config in added:
                _check_added_seeds(config, held, theirs, source, mine, seed_of, settings_of)
                chosen[config].add(index)
            elif all(entry in mine for entry in theirs):
                chosen[config] = {index}
            elif not all(entry in theirs for entry in mine):
                raise UserInputError(
                    f"Configuration {config!r} is in both {held} and {source}, and neither holds every run of the "
                    "other: combine each configuration from one study's folder (re-run the study with all its seeds "
                    "in one output folder instead), or, for a study re-run under newer code, name the configuration "
                    "in run_budget_study.py's --replace_configs to take it from the last source that holds it, or, "
                    "for other seeds of the same study run into another folder, in --add_seeds to join them.")
    return [entry for index, (_, entries) in enumerate(sources) for entry in entries
            if index in chosen[config_of(entry)]]


def _check_added_seeds(config: str, held: str, theirs: list[Entry], source: Path, mine: list[Entry],
                       seed_of: Callable[[Entry], int], settings_of: Callable[[Entry], Hashable]) -> None:
    """Refuse to join `mine` to `theirs` unless they are other seeds of the same settings."""
    both = sorted({seed_of(entry) for entry in theirs} & {seed_of(entry) for entry in mine})
    if both:
        raise UserInputError(
            f"--add_seeds {config}: seed{'s' * (len(both) > 1)} {', '.join(map(str, both))} of {config!r} "
            f"{'are' if len(both) > 1 else 'is'} in both {held} and {source}; --add_seeds joins different seeds of "
            "one study (for a re-run of the same seeds give one folder, or --replace_configs).")
    ours, others = {settings_of(entry) for entry in mine}, {settings_of(entry) for entry in theirs}
    if ours != others:
        only_ours, only_theirs = sorted(map(str, ours - others)) or "none", sorted(map(str, others - ours)) or "none"
        raise UserInputError(
            f"--add_seeds {config}: {held} and {source} ran different settings under {config!r} (only in {source}: "
            f"{only_ours}; only in the other: {only_theirs}): joining their seeds would report one study's numbers "
            "under the other's; run the missing seeds with the same study file.")


def numerics_mixes(rows: Sequence[dict], group_key: str) -> dict[str, dict[str, list[int]]]:
    """{group: {numerics label: its seeds}} of every group (a row's `group_key`: a study's configuration, a grid's
    task) whose rows were made with more than one CPU numerics (`numerics.numerics_label`: "portable AVX2"
    or "native")."""
    by_group: dict[str, dict[str, list[int]]] = {}
    for row in rows:
        by_group.setdefault(row[group_key], {}).setdefault(numerics_label(row), []).append(row["seed"])
    return {group: {label: sorted(set(seeds)) for label, seeds in labels.items()}
            for group, labels in by_group.items() if len(labels) > 1}


def numerics_text(labels: dict[str, list[int]]) -> str:
    """"portable AVX2 (seeds 3, 4) and native (seeds 0, 1, 2)"."""
    return " and ".join(f"{label} (seed{'s' * (len(seeds) > 1)} {', '.join(map(str, seeds))})"
                        for label, seeds in labels.items())


def numerics_notes(rows: Sequence[dict], group_key: str, noun: str) -> str:
    """A report's paragraph naming each group (a `noun`) whose rows mix CPU numerics, or "" when none does."""
    mixes = numerics_mixes(rows, group_key)
    return "".join(f"Note: {noun} {group} mixes CPU numerics, {numerics_text(labels)}: its seeds ran with different "
                   "kernels, so their spread includes the CPU's (docs/lra.md).\n\n" for group, labels in mixes.items())


__all__ = ["join_by_config", "numerics_mixes", "numerics_text", "numerics_notes"]
