"""Figures name arms in the docs' words and give each arm one colour (`arm_labels`); a configuration by the title its
study file gives it (`budget_study.study_titles`)."""

from __future__ import annotations

import pytest
import yaml

from hf_spt.errors import UserInputError
from hf_spt.experiments.suites.budget_study import (STUDIES_DIR, shipped_study_titles, study_grid, study_names,
                                                    study_titles)
from hf_spt.reports.arm_labels import ARM_COLOURS, arm_colour, arm_words, config_words

TITLES_BEFORE = {"digits8": "digits, 8x8 pixels (64 tokens)", "digits16": "digits, 16x16 pixels (256 tokens)",
                 "digits16_n150": "digits 16x16, 150 labelled pictures",
                 "digits16_n300": "digits 16x16, 300 labelled pictures",
                 "digits16_n600": "digits 16x16, 600 labelled pictures",
                 "digits16_mechanism": "digits 16x16, mechanism arms",
                 "digits32": "digits, 32x32 pixels (1,024 tokens)", "digits32_e40": "digits 32x32, 40 SPT epochs",
                 "digits16_whole_budget": "digits 16x16, scratch given SPT's whole budget",
                 "digits16_n300_whole_budget": "digits 16x16, 300 pictures, scratch given SPT's whole budget",
                 "pathfinder24_cl4_d0": "Pathfinder 24x24, 4 dashes",
                 "pathfinder24_cl2_d0": "Pathfinder 24x24, 2 dashes",
                 "pathfinder24_cl2_d0_left": "Pathfinder 24x24, column label",
                 "pathfinder24_cl2_d0_left_seeds": "Pathfinder 24x24, column label, three seeds"}
"""The words the published figures name the shipped configurations by (the table `arm_labels` held before the
studies' files did): a published figure drawn again reads the same."""
TITLES_SINCE = {"mnist14_n1000": "MNIST 14x14, 1,000 labelled pictures",
                "mnist14_n3000": "MNIST 14x14, 3,000 labelled pictures",
                "mnist14_n1000_declared": "MNIST 14x14, 1,000 labelled pictures (declared)",
                "mnist14_n1000_permuted": "MNIST 14x14 permuted, 1,000 labelled pictures",
                "mnist28_n1000": "MNIST 28x28, 1,000 labelled pictures",
                "mnist14_n1000_mechanism": "MNIST 14x14, 1,000 labelled pictures (mechanism pilot)",
                "mnist14_mechanism": "MNIST 14x14, 1,000 labelled pictures (mechanism, declared)",
                "mnist14_mechanism_permuted": "MNIST 14x14 permuted, 1,000 labelled pictures (mechanism, declared)"}
"""Studies shipped since (issue 56's MNIST pilot, preregistered study and locality study)."""


def test_arms_read_as_the_docs_name_them():
    assert arm_words("spt") == "SPT" and arm_words("spt_e10") == "SPT, 10 epochs"
    assert arm_words("scratch_compute_matched_e40") == "compute-matched scratch (SPT's 40 epochs)"
    assert arm_words("spt_L1_e40") == "1-layer SPT, 40 epochs" and arm_words("my_arm") == "my_arm"
    titles = shipped_study_titles()
    assert config_words("digits16_n600", titles) == "digits 16x16, 600 labelled pictures"
    assert config_words("mine", titles) == "mine" and config_words("digits16_n600") == "digits16_n600"  # code names


def test_the_shipped_studies_title_their_configurations_as_the_published_figures_do():
    assert shipped_study_titles() == {**TITLES_BEFORE, **TITLES_SINCE}
    assert study_titles("digits_length") == {key: TITLES_BEFORE[key] for key in ("digits8", "digits16")}
    assert study_titles("pathfinder_cl2_patience") == {}  # no title: its figures keep the code name


def test_a_title_changes_no_grid_and_a_misspelt_key_is_still_refused(tmp_path):
    for name in study_names():  # the grid parser never sees a title
        assert "title" not in repr(study_grid(name).tasks)
    study = yaml.safe_load((STUDIES_DIR / "digits_length.yaml").read_text())
    untitled = tmp_path / "untitled.yaml"
    for spec in study["tasks"].values():
        del spec["title"]
    untitled.write_text(yaml.safe_dump(study))
    assert study_grid(str(untitled)) == study_grid("digits_length")
    study["tasks"]["digits8"]["titel"] = "8x8"
    misspelt = tmp_path / "misspelt.yaml"
    misspelt.write_text(yaml.safe_dump(study))
    with pytest.raises(UserInputError, match="titel"):
        study_grid(str(misspelt))
    del study["tasks"]["digits8"]["titel"]
    study["tasks"]["digits8"]["title"] = ["8x8"]
    misspelt.write_text(yaml.safe_dump(study))
    with pytest.raises(UserInputError, match="title"):
        study_titles(str(misspelt))


def test_every_arm_has_its_own_colour_whatever_its_budget():
    assert len(set(ARM_COLOURS.values())) == len(ARM_COLOURS)
    assert arm_colour("spt_e10", 0) == arm_colour("spt_e40", 5) == arm_colour("spt", 2)
    assert arm_colour("scratch_alibi", 0) != arm_colour("scratch_rotary", 0) != arm_colour("scratch_L1", 0)
    assert arm_colour("unknown", 3) == "C3"
