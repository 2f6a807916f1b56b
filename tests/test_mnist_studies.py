"""The MNIST studies fit together as issues 56 and 65 declare them: the preregistered study's seeds are none of the
pilot's or the exploratory study's, its configuration is the one the pilot measured (so the pilot's spread sizes
it), its declared seeds reach the power its own power line asks for, and the locality study differs from it only
in the pixels (28x28, or permuted); the mechanism study runs that configuration and recipe unchanged, on new seeds,
with its claims declared as issue 65 states them."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

from hf_spt.experiments.suites.budget_study import study_grid, study_preregistration
from hf_spt.reports.preregistration import seeds_for_power

DECLARED, PILOT, LOCALITY = "mnist_preregistered", "mnist_pilot", "mnist_locality"
DECLARED_CONFIG, PILOT_CONFIG = "mnist14_n1000_declared", "mnist14_n1000"
ROOT = Path(__file__).resolve().parents[1]
README_MARKER = "<!-- preregistered-result: filled from docs/lra/mnist_preregistered/budget_study.md -->"


def _setup(study: str, config: str) -> dict:
    """What a configuration of a study trains with: its task (options and budgets), model, shared settings, arms."""
    grid = study_grid(study)
    return {"task": asdict(grid.task_spec(config)), "model": grid.model, "experiment": grid.experiment,
            "arms": [asdict(arm) for arm in grid.arms]}


def test_the_declared_seeds_are_fixed_and_none_was_used_before():
    registration = study_preregistration(DECLARED)
    assert list(registration.seeds) == study_grid(DECLARED).seeds  # the study trains exactly the declared seeds
    assert len(registration.seeds) >= 20
    assert not set(registration.seeds) & (set(study_grid(PILOT).seeds) | set(study_grid(LOCALITY).seeds))


def test_the_declared_configuration_is_the_one_the_pilot_measured():
    declared, pilot = _setup(DECLARED, DECLARED_CONFIG), _setup(PILOT, PILOT_CONFIG)
    assert declared["task"] == pilot["task"] and declared["model"] == pilot["model"]
    assert declared["experiment"] == pilot["experiment"]
    assert sorted(declared["arms"], key=str) == sorted(pilot["arms"], key=str)


def test_the_declared_seeds_give_the_power_the_pilot_asks_for():
    registration = study_preregistration(DECLARED)
    assert registration.pilot_sd is not None
    assert len(registration.seeds) >= seeds_for_power(registration.pilot_sd, registration.smallest_effect,
                                                      registration.alpha)


def test_the_locality_study_changes_only_the_pixels():
    declared = _setup(DECLARED, DECLARED_CONFIG)
    changes = {"mnist28_n1000": {"image_size": 28}, "mnist14_n1000_permuted": {"permuted": True}}
    for config, change in changes.items():
        setup = _setup(LOCALITY, config)
        options = setup["task"]["task_options"]
        assert {key: options[key] for key in change} == change
        assert {k: v for k, v in options.items() if k not in change} == {
            k: v for k, v in declared["task"]["task_options"].items() if k not in change}
        assert setup["task"]["experiment"] == declared["task"]["experiment"]
        assert (setup["model"], setup["experiment"]) == (declared["model"], declared["experiment"])
        assert sorted(setup["arms"], key=str) == sorted(declared["arms"], key=str)


def test_the_readme_leads_with_the_preregistered_report():
    """The README's first results table quotes the committed report's primary row: its seeds so far, mean and
    interval, and says "interim" exactly while seeds are missing (so the lead cannot go stale as rows land)."""
    report = (ROOT / "docs" / "lra" / "mnist_preregistered" / "budget_study.md").read_text()
    primary = next(line for line in report.splitlines() if line.startswith("| primary |"))
    cells = [cell.strip() for cell in primary.strip("|").split("|")]
    seeds, mean, interval = cells[2], cells[3], cells[4]
    have, declared = (int(number) for number in seeds.split(" of "))
    readme = (ROOT / "README.md").read_text()
    results = readme[readme.index("## Results"):]
    lead = results[results.index(README_MARKER):].splitlines()[3]  # marker, header, rule, then the row
    assert f"{have} of {declared}" in lead and f"{mean} {interval}" in lead
    assert ("interim" in lead) == (have < declared)


MECHANISM, MECHANISM_PILOT = "mnist_mechanism", "mnist_mechanism_pilot"
MECHANISM_CONFIG, MECHANISM_TWIN = "mnist14_mechanism", "mnist14_mechanism_permuted"


def test_the_mechanism_study_runs_the_declared_configuration_and_recipe_unchanged():
    """Issue 65: the mechanism claims are tested on the declared study's configuration and recipe, so the two studies
    stand side by side; its permuted twin differs only in the pixels' order."""
    declared, mechanism = _setup(DECLARED, DECLARED_CONFIG), _setup(MECHANISM, MECHANISM_CONFIG)
    assert mechanism["task"] == declared["task"]
    assert (mechanism["model"], mechanism["experiment"]) == (declared["model"], declared["experiment"])
    twin = _setup(MECHANISM, MECHANISM_TWIN)["task"]
    assert twin["task_options"] == {**declared["task"]["task_options"], "permuted": True}
    assert twin["experiment"] == declared["task"]["experiment"]


def test_the_mechanism_declaration_uses_new_seeds_and_reaches_its_power():
    registration = study_preregistration(MECHANISM)
    assert list(registration.seeds) == study_grid(MECHANISM).seeds and len(registration.seeds) >= 12
    used = {seed for study in (DECLARED, PILOT, LOCALITY, MECHANISM_PILOT) for seed in study_grid(study).seeds}
    assert not set(registration.seeds) & used
    assert len(registration.seeds) >= seeds_for_power(registration.pilot_sd,
                                                      registration.smallest_for(registration.primary),
                                                      registration.alpha)


def test_the_mechanism_claims_are_declared_as_the_issue_states_them():
    """The primary is "attention alone recovers more than half of SPT's gain over plain scratch"; the locality claim
    is declared against both scratch controls on the permuted twin; the mechanism arms run on the original order
    only, and the twin holds SPT and both controls."""
    registration = study_preregistration(MECHANISM)
    assert registration.primary.words() == "spt_attention minus the mean of scratch and spt, mnist14_mechanism"
    twins = {c.control for c in registration.secondary if c.twin == MECHANISM_TWIN}
    assert twins == {"scratch", "scratch_compute_matched_full"}
    assert {c.arm for c in registration.secondary if c.twin is None} == {"spt_qk", "spt_mlp", "spt_frozen_attention"}
    grid = study_grid(MECHANISM)
    assert sorted(arm.name for arm in grid.arms if arm.runs_on(MECHANISM_TWIN)) == [
        "scratch", "scratch_compute_matched_full", "spt"]
    assert len([arm for arm in grid.arms if arm.runs_on(MECHANISM_CONFIG)]) == 7


MECHANISM_MARKER = "<!-- mechanism-result: filled from docs/lra/mnist_mechanism/budget_study.md -->"


def _mechanism_readme_rows() -> list[list[str]]:
    readme = (ROOT / "README.md").read_text()
    lines = readme[readme.index(MECHANISM_MARKER):].splitlines()[3:]  # marker, header, rule, then a row a claim
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[:lines.index("")]]


def _mechanism_report_claims(report: str) -> list[list[str]]:
    """The cells of the committed mechanism report's tested rows (primary, then the secondaries); [] while interim."""
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in report.splitlines()
            if line.startswith(("| primary |", "| secondary |"))]


def test_the_readme_quotes_the_mechanism_report_claim_by_claim():
    """Issue 65 item 7: the README's second declared table has one row a claim, in the declaration's order, quoting
    the committed report: each claim's seeds with rows while the study is interim (the report shows no estimate
    then), its mean, interval and verdict once every declared seed is in; 0 seeds before the first row."""
    registration = study_preregistration(MECHANISM)
    rows = _mechanism_readme_rows()
    assert [row[0] for row in rows] == ["primary"] + ["secondary"] * len(registration.secondary)
    declared = len(registration.seeds)
    report_path = ROOT / "docs" / "lra" / "mnist_mechanism" / "budget_study.md"
    if not report_path.exists():
        assert all(row[3] == f"interim: 0 of {declared} seeds" for row in rows)
        return
    report = report_path.read_text()
    interim = next((line for line in report.splitlines() if line.startswith("**interim:")), None)
    if interim is not None:
        for contrast, row in zip(registration.contrasts, rows):
            have = re.search(re.escape(contrast.words()) + r": (\d+) of", interim).group(1)
            assert row[3] == f"interim: {have} of {declared} seeds"
        return
    for cells, row in zip(_mechanism_report_claims(report), rows):
        assert f"{cells[3]} {cells[4]}" in row[3] and cells[8].split(" (")[0] in row[3]


MECHANISM_SUMMARY = "<!-- mechanism-summary: from docs/lra/mnist_mechanism/budget_study.md -->"


def test_the_lra_summary_quotes_every_mechanism_claim_or_none():
    """docs/lra.md's summary paragraph on the declared mechanism study says no estimate is shown while the report is
    interim, and once every declared seed is in quotes each claim's mean, interval and verdict from the report, so
    no claim's answer is left out of the page a reader starts on."""
    text = (ROOT / "docs" / "lra.md").read_text()
    paragraph = " ".join(text[text.index(MECHANISM_SUMMARY):].split("\n\n")[0].splitlines()[1:])
    report = (ROOT / "docs" / "lra" / "mnist_mechanism" / "budget_study.md").read_text()
    claims = _mechanism_report_claims(report)
    if not claims:
        assert "**interim:" in report and "No estimate is shown before all 12 seeds have rows" in paragraph
        return
    assert len(claims) == 1 + len(study_preregistration(MECHANISM).secondary)
    for cells in claims:
        assert f"{cells[3]} {cells[4]}" in paragraph, cells[1]
        assert cells[8].split(" (")[0] in paragraph, cells[1]
