"""How the reports' figures name and colour arms and configurations: in the words the docs use, one colour per arm.

The tables keep the code names (they are the rows' keys); a figure is read beside the docs' prose, so it says
"compute-matched scratch", not `scratch_compute_matched`. One table here, read by every suite's figures, so
an arm reads and looks the same in each.
"""

from __future__ import annotations

import re

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

CONFIG_WORDS = {"digits8": "digits, 8x8 pixels (64 tokens)", "digits16": "digits, 16x16 pixels (256 tokens)",
                "digits16_n150": "digits 16x16, 150 labelled pictures",
                "digits16_n300": "digits 16x16, 300 labelled pictures",
                "digits16_n600": "digits 16x16, 600 labelled pictures",
                "digits16_mechanism": "digits 16x16, mechanism arms", "digits32": "digits, 32x32 pixels (1,024 tokens)",
                "digits32_e40": "digits 32x32, 40 SPT epochs",
                "digits16_whole_budget": "digits 16x16, scratch given SPT's whole budget",
                "digits16_n300_whole_budget": "digits 16x16, 300 pictures, scratch given SPT's whole budget",
                "pathfinder24_cl4_d0": "Pathfinder 24x24, 4 dashes", "pathfinder24_cl2_d0": "Pathfinder 24x24, 2 dashes",
                "pathfinder24_cl2_d0_left": "Pathfinder 24x24, column label",
                "pathfinder24_cl2_d0_left_seeds": "Pathfinder 24x24, column label, three seeds"}
"""A shipped study's configuration (task key) -> the words the docs use."""

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


def config_words(config: str) -> str:
    """A configuration in the docs' words, or its code name."""
    return CONFIG_WORDS.get(config, config)


__all__ = ["ARM_WORDS", "ARM_COLOURS", "CONFIG_WORDS", "arm_words", "arm_colour", "config_words"]
