"""How the reports' figures name and colour arms and configurations: in the words the docs use, one colour per arm.

The tables keep the code names (they are the rows' keys); a figure is read beside the docs' prose, so it says
"compute-matched scratch", not `scratch_compute_matched`. One table of arms here, read by every suite's figures, so
an arm reads and looks the same in each. A configuration (a study's task key) is named by the `title:` its study file
gives it, which the report is handed (`config_words`): the words of a study live with the study.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

ARM_WORDS = {"scratch": "scratch", "scratch_compute_matched": "compute-matched scratch", "spt": "SPT",
             "spt_qk": "fresh model with SPT's W_Q/W_K", "spt_frozen_attention": "SPT, attention frozen",
             "scratch_alibi": "ALiBi scratch", "scratch_rotary": "rotary scratch", "scratch_L1": "1-layer scratch",
             "spt_L1": "1-layer SPT", "scratch_compute_matched_L1": "1-layer compute-matched scratch",
             "scratch_frozen_attention": "scratch, attention frozen",
             "scratch_compute_matched_full": "compute-matched scratch, whole budget"}
"""Arm kind (the name without its `_e<E>` budget) -> the words the docs use."""

ARM_COLOURS = {"scratch": "tab:gray", "scratch_compute_matched": "tab:orange", "spt": "tab:blue",
               "spt_qk": "tab:purple", "spt_frozen_attention": "tab:cyan", "scratch_alibi": "tab:red",
               "scratch_rotary": "tab:green", "scratch_L1": "tab:brown", "spt_L1": "tab:pink",
               "scratch_compute_matched_L1": "tab:olive", "scratch_frozen_attention": "black",
               "scratch_compute_matched_full": "gold"}
"""Arm kind -> its colour in every figure (matplotlib's tab10, black and gold: twelve distinct colours)."""

_BUDGET = re.compile(r"_e([0-9.]+)$")


def _kind_and_budget(arm: str) -> tuple[str, str | None]:
    match = _BUDGET.search(arm)
    return (arm[:match.start()], match.group(1)) if match else (arm, None)


def arm_words(arm: str) -> str:
    """`arm` (a kind, or a name with its `_e<E>` budget) in the docs' words: "SPT, 10 epochs",
    "compute-matched scratch (SPT's 10 epochs)"; an arm of no table entry keeps its code name."""
    kind, epochs = _kind_and_budget(arm)
    words = ARM_WORDS.get(kind, kind)
    if epochs is None:
        return words
    return f"{words}, {epochs} epochs" if kind.startswith("spt") else f"{words} (SPT's {epochs} epochs)"


def arm_colour(arm: str, index: int) -> str:
    """`arm`'s colour (its kind's), or for an arm of no table entry the `index`-th of matplotlib's cycle."""
    return ARM_COLOURS.get(_kind_and_budget(arm)[0], f"C{index % 10}")


def config_words(config: str, titles: Mapping[str, str] | None = None) -> str:
    """A configuration in the docs' words, its title in `titles` ({configuration: title}: the `title:` its study file
    gives it, `experiments.suites.budget_study.study_titles`), or else its code name."""
    return (titles or {}).get(config, config)


__all__ = ["ARM_WORDS", "ARM_COLOURS", "arm_words", "arm_colour", "config_words"]
