"""Paired differences over seeds (`paired_seeds`): the t quantile against a published table, one hand-computed
case, one seed (no interval), pools with the seed as the unit (the digits studies' committed seeds 0-2), the count
of intervals a report prints, and how the budget study pairs arms and pools configurations."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hf_spt.experiments.suites.budget_study import shipped_study_configs
from hf_spt.reports.study_evidence import paired_comparisons, study_evidence
from hf_spt.reports.paired_seeds import (PairedDifference, interval_count, paired_cells, paired_difference,
                                                    seed_pool, t_quantile)

COMMITTED_ROWS = Path(__file__).resolve().parent.parent / "docs" / "lra" / "budget_study.json"

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
    assert PairedDifference.from_dict(wide.to_dict()) == wide
    with pytest.raises(ValueError, match="one difference per seed"):
        PairedDifference(((0, 0.1), (0, 0.2)))


def test_a_seed_pool_averages_each_seeds_comparisons_over_the_seeds_all_of_them_hold():
    budgets = [paired_difference({0: 0.6, 1: 0.7, 2: 0.8}, {0: 0.5, 1: 0.5, 2: 0.5}),
               paired_difference({1: 0.9, 0: 0.4}, {0: 0.5, 1: 0.5})]  # seed 2 ran one budget only: left out
    pool = seed_pool(budgets)
    assert pool.seeds == [0, 1] and pool.differences == pytest.approx([0.0, 0.3])
    assert pool.n == 2 and pool.verdict() == "not resolved with 2 seeds"
    assert seed_pool([budgets[0], paired_difference({3: 0.5}, {3: 0.4})]) is None


# Test accuracy of SPT and compute-matched scratch in the digits studies' seeds 0, 1, 2 ({(configuration, SPT
# epochs): (SPT, compute-matched scratch)}), as docs/lra/budget_study.json holds them: issue 48's three pools.
DIGITS = {("digits8", 10): ((0.8075, 0.845, 0.8375), (0.91, 0.9075, 0.875)),
          ("digits8", 40): ((0.8425, 0.8625, 0.8075), (0.8975, 0.865, 0.895)),
          ("digits16_n150", 320): ((0.3325, 0.2625, 0.295), (0.2475, 0.26, 0.21)),
          ("digits16_n300", 160): ((0.45, 0.35, 0.405), (0.275, 0.2625, 0.355)),
          ("digits16_n600", 80): ((0.5775, 0.585, 0.6125), (0.585, 0.255, 0.4575))}


def _digits_rows() -> list[dict]:
    return [{"config": config, "arm": arm, "seed": seed, "test_accuracy": accuracy, "budget_tokens": epochs,
             "pretrain_tokens": epochs if arm == "spt" else 0, "pretrain_epochs": epochs, "num_layers": 2, "model": None}
            for (config, epochs), arms in DIGITS.items()
            for arm, scores in zip(("spt", "scratch_compute_matched"), arms) for seed, accuracy in enumerate(scores)]


def test_the_fixture_is_the_committed_rows():
    committed = {(row["config"], row["arm"], row["pretrain_epochs"], row["seed"]): row["test_accuracy"]
                 for row in json.loads(COMMITTED_ROWS.read_text())}
    for row in _digits_rows():
        assert committed[row["config"], row["arm"], row["pretrain_epochs"], row["seed"]] == row["test_accuracy"]


def test_the_seed_as_the_unit_gives_issue_48s_intervals():
    """8x8 over both budgets, the three labelled-data sizes, and the two smaller sizes: each seed's mean difference,
    then the t-interval over the three seeds (pooled as independent pairs they read [-9.5, -2.0] over 6 pairs and
    [+2.8, +18.6] over 9)."""
    evidence = study_evidence(_digits_rows(), shipped_study_configs())
    pools = {(p["scope"], p["control"]): p["difference"] for p in evidence["pooled"]}
    eight = pools["digits8", "scratch_compute_matched"]
    assert paired_cells(eight) == ["0, 1, 2", "-7.88, -3.25, -6.25", "-5.8", "2.3", "[-11.6, +0.04]", "0 of 3",
                                   "not resolved with 3 seeds"]
    assert paired_cells(pools["digits_data_size", "scratch_compute_matched"])[1:5] == [
        "+8.42, +14, +9.67", "+10.7", "2.9", "[+3.4, +18.0]"]
    smaller = [c["difference"] for c in evidence["paired"] if c["control"] == "scratch_compute_matched"
               and c["config"] in ("digits16_n150", "digits16_n300")]
    assert paired_cells(seed_pool(smaller))[4:] == ["[-2.9, +19.0]", "3 of 3", "not resolved with 3 seeds"]


def test_a_report_says_how_many_intervals_it_prints_and_how_many_exclude_0():
    resolved = paired_difference({0: 0.7, 1: 0.71, 2: 0.72}, {0: 0.5, 1: 0.5, 2: 0.5})
    wide = paired_difference({0: 0.6, 1: 0.7, 2: 0.8}, {0: 0.65, 1: 0.6, 2: 0.6})
    one = paired_difference({0: 0.7}, {0: 0.5})
    assert interval_count([("scratch", resolved), ("scratch", wide), ("scratch_alibi", resolved), ("scratch", one)]) == (
        "3 paired intervals, 2 exclude 0 (against scratch: 1 of 2; against scratch_alibi: 1 of 1). At 95% each, were "
        "every true difference 0, about 0.1 of 3 would exclude 0 by chance alone.")
    assert interval_count([("scratch", one)]) == "No paired interval (every comparison has one seed)."


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
    assert [(p["scope"], p["control"], p["comparisons"], p["difference"].n) for p in pooled_rows] == [
        ("study", "scratch", 2, 3)]  # c's and d's SPT minus scratch, three seeds


def test_the_grid_and_lra_reports_pair_spt_with_their_controls():
    from hf_spt.reports.grid_report import paired_markdown
    from hf_spt.reports.lra_report import lra_table, markdown

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


def test_p_and_interval_are_scipys_paired_t_test():
    """Issue 56: the interval and p come from scipy.stats, and agree with its one-sample t-test of the differences."""
    from scipy import stats

    scores = {0: 0.03, 1: -0.01, 2: 0.05, 3: 0.02, 4: 0.04}
    difference = paired_difference(scores, dict.fromkeys(scores, 0.0))
    result = stats.ttest_1samp(list(scores.values()), 0.0)
    assert difference.p_value == pytest.approx(result.pvalue, rel=1e-9)
    assert difference.interval == pytest.approx(tuple(result.confidence_interval(0.95)), rel=1e-9)
    assert difference.resolved == (difference.p_value < 0.05)
    assert paired_difference({0: 0.1}, {0: 0.0}).p_value is None  # one seed: no test
    assert paired_difference({0: 0.1, 1: 0.1}, {0: 0.0, 1: 0.0}).p_value == 0.0  # equal differences, sd 0


def test_p_and_interval_are_read_off_scipys_test_not_computed_again(monkeypatch):
    """Issue 64 item 5: `PairedDifference` asks `scipy.stats.ttest_1samp` for its p and interval (a stand-in's answer
    comes back unchanged) instead of computing the t-test itself and checking it against scipy."""
    from types import SimpleNamespace

    from hf_spt.reports import paired_seeds

    asked = []

    def stand_in(values, popmean):
        asked.append((list(values), popmean))
        return SimpleNamespace(pvalue=0.123, confidence_interval=lambda level: SimpleNamespace(low=-1.0, high=2.0))

    monkeypatch.setattr(paired_seeds.stats, "ttest_1samp", stand_in)
    difference = paired_difference({0: 0.03, 1: -0.01, 2: 0.05}, {0: 0.0, 1: 0.0, 2: 0.0})
    assert difference.p_value == 0.123 and difference.interval == (-1.0, 2.0)
    assert asked == [([0.03, -0.01, 0.05], 0.0)]  # asked once, the result kept


def test_the_declared_study_stratified_by_numerics_gives_the_sensitivity_figures():
    """Issue 64 item 5: the declared MNIST study's primary per numerics label (AMD seeds 100-108, Intel 109-121) and
    the inverse-variance stratified estimate, recomputed from the committed rows."""
    import json
    from pathlib import Path

    from hf_spt.reports.paired_seeds import stratified_estimate

    rows = json.loads((Path(__file__).resolve().parents[1] / "docs" / "lra" / "mnist_preregistered"
                       / "budget_study.json").read_text())
    scores = {(row["seed"], row["arm_name"]): row["test_accuracy"] for row in rows}

    def primary(seeds):
        return paired_difference({s: scores[s, "spt"] for s in seeds},
                                 {s: scores[s, "scratch_compute_matched_full"] for s in seeds})

    amd, intel = primary(range(100, 109)), primary(range(109, 122))
    assert {row["cpu"]["model"] for row in rows if row["seed"] < 109} == {"AMD EPYC"}
    assert [round(100 * v, 2) for v in (amd.mean, *amd.interval)] == [3.63, 1.37, 5.88]
    assert [round(100 * v, 2) for v in (intel.mean, *intel.interval)] == [1.03, -0.35, 2.41]
    estimate = stratified_estimate([amd, intel])
    assert [round(100 * v, 2) for v in (estimate.mean, *estimate.interval)] == [1.8, 0.76, 2.84]
    assert stratified_estimate([amd]) is None and stratified_estimate([amd, primary([100])]) is None
