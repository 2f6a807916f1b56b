"""Paired differences over seeds (`paired_seeds`): the t quantile against a published table, one hand-computed
case, one seed (no interval), and how the budget study pairs arms and pools configurations."""

from __future__ import annotations

import math

import pytest

from hf_spt.experiments.suites.budget_study import paired_comparisons, study_evidence
from hf_spt.experiments.suites.paired_seeds import PairedDifference, paired_cells, paired_difference, pooled, t_quantile

# Two-sided 95% points of Student's t, NIST/SEMATECH e-Handbook of Statistical Methods, table 1.3.6.7.2 (column
# 0.975, three decimals).
NIST_T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 10: 2.228, 30: 2.042,
              100: 1.984}


@pytest.mark.parametrize("degrees", NIST_T_975)
def test_t_quantile_matches_the_published_table(degrees):
    assert round(t_quantile(degrees), 3) == NIST_T_975[degrees]


def test_a_hand_computed_case():
    """digits32, 10 SPT epochs, test accuracy of SPT and compute-matched scratch in seeds 0-2 (0-1 scale)."""
    difference = paired_difference({0: 0.69, 1: 0.6475, 2: 0.6475}, {0: 0.7175, 1: 0.69, 2: 0.705})
    assert difference.differences == pytest.approx([-0.0275, -0.0425, -0.0575])
    assert difference.mean == pytest.approx(-0.0425)
    # deviations +0.015, 0, -0.015: sum of squares 4.5e-4 over n - 1 = 2 gives variance 2.25e-4
    assert difference.sd == pytest.approx(0.015)
    half = 4.303 * 0.015 / math.sqrt(3)  # t(0.975, 2) from the table
    low, high = difference.interval
    assert (low, high) == pytest.approx((-0.0425 - half, -0.0425 + half), abs=1e-5)
    assert difference.ahead == 0 and difference.resolved and difference.verdict() == "resolved: behind"
    assert paired_cells(difference) == ["0, 1, 2", "-2.75, -4.25, -5.75", "-4.3", "1.5", "[-8.0, -0.5]", "0 of 3",
                                        "resolved: behind"]


def test_one_seed_gives_no_interval_and_zero_inside_is_not_resolved():
    one = paired_difference({0: 0.76, 1: 0.5}, {0: 0.7125})  # only seed 0 in both
    assert one.n == 1 and one.sd is None and one.interval is None and not one.resolved
    assert one.verdict() == "one seed: no interval"
    assert paired_cells(one)[3:6] == ["n/a", "n/a", "1 of 1"]
    wide = paired_difference({0: 0.6, 1: 0.7, 2: 0.8}, {0: 0.65, 1: 0.6, 2: 0.6})
    assert wide.interval[0] < 0 < wide.interval[1] and wide.verdict() == "not resolved with 3 seeds"
    assert paired_difference({0: 0.5}, {1: 0.5}) is None
    assert pooled([one, wide]).verdict() == "not resolved with 4 pairs"
    assert PairedDifference.from_dict(wide.to_dict()) == wide


def _row(config, arm, seed, accuracy, budget=0, pretrained=False, depth=2, model=None):
    return {"config": config, "arm": arm, "seed": seed, "test_accuracy": accuracy, "budget_tokens": budget,
            "pretrain_tokens": budget if pretrained else 0, "pretrain_epochs": 4 if budget else None,
            "num_layers": depth, "model": model}


def test_the_study_pairs_each_pretrained_arm_with_the_controls_of_its_depth_and_budget():
    rows = [row for seed, shift in enumerate((0.0, 0.02, 0.04)) for row in (
        _row("c", "scratch_alibi", seed, 0.4, model={"position_embedding_type": "alibi"}),
        _row("c", "scratch", seed, 0.5 + shift), _row("c", "spt", seed, 0.7 + shift, 100, True),
        _row("c", "scratch_compute_matched", seed, 0.6, 100), _row("c", "scratch_compute_matched", seed, 0.6, 200),
        _row("c", "scratch_L1", seed, 0.5, depth=1), _row("c", "spt_L1", seed, 0.55, 100, True, depth=1),
        _row("d", "scratch", seed, 0.5), _row("d", "spt", seed, 0.6 + shift, 100, True))]
    found = [(c["config"], c["arm"], c["control"]) for c in paired_comparisons(rows)]
    assert found == [("c", "spt", "scratch"), ("c", "spt", "scratch_compute_matched"), ("c", "spt", "scratch_alibi"),
                     ("c", "spt_L1", "scratch_L1"), ("d", "spt", "scratch")]
    first = paired_comparisons(rows)[0]["difference"]
    assert first.differences == pytest.approx([0.2, 0.2, 0.2]) and first.resolved
    pooled_rows = study_evidence(rows, {"study": ["c", "d", "elsewhere"]})["pooled"]
    assert [(p["scope"], p["control"], p["difference"].n) for p in pooled_rows] == [("study", "scratch", 6)]


def test_the_grid_and_lra_reports_pair_spt_with_their_controls():
    from hf_spt.experiments.suites.grid_report import paired_markdown
    from hf_spt.experiments.suites.lra_report import lra_table, markdown

    rows = [{"task": "listops", "arm": arm, "seed": seed, "test_accuracy": accuracy, "seconds": 1.0}
            for seed in (0, 1) for arm, accuracy in (("scratch", 0.30), ("scratch_compute_matched", 0.31 + 0.01 * seed),
                                                      ("spt", 0.33 + 0.02 * seed))]
    table = lra_table(rows, ["scratch", "scratch_compute_matched", "spt"])
    assert [(p["control"], p["differences"]) for p in table["paired"]] == [
        ("scratch", pytest.approx([3.0, 5.0])), ("scratch_compute_matched", pytest.approx([2.0, 3.0]))]
    assert "| listops | spt | scratch | 0, 1 | +3, +5 | +4.0 | 1.4 | [-8.7, +16.7] | 2 of 2 | not resolved with 2 seeds |" \
        in markdown(table)
    grid = paired_markdown(rows)
    assert "| listops | spt | scratch |" in grid and "| listops | spt | scratch_compute_matched |" in grid
    assert "| listops | scratch_compute_matched | scratch |" in grid
