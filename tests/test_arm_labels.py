"""Figures name arms in the docs' words and give each arm one colour (`arm_labels`)."""

from __future__ import annotations

from hf_spt.reports.arm_labels import ARM_COLOURS, arm_colour, arm_words, config_words


def test_arms_read_as_the_docs_name_them():
    assert arm_words("spt") == "SPT" and arm_words("spt_e10") == "SPT, 10 epochs"
    assert arm_words("scratch_compute_matched_e40") == "compute-matched scratch (SPT's 40 epochs)"
    assert arm_words("spt_L1_e40") == "1-layer SPT, 40 epochs" and arm_words("my_arm") == "my_arm"
    assert config_words("digits16_n600") == "digits 16x16, 600 labelled pictures" and config_words("mine") == "mine"


def test_every_arm_has_its_own_colour_whatever_its_budget():
    assert len(set(ARM_COLOURS.values())) == len(ARM_COLOURS)
    assert arm_colour("spt_e10", 0) == arm_colour("spt_e40", 5) == arm_colour("spt", 2)
    assert arm_colour("scratch_alibi", 0) != arm_colour("scratch_rotary", 0) != arm_colour("scratch_L1", 0)
    assert arm_colour("unknown", 3) == "C3"
