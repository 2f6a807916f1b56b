"""Preregistered studies (issue 56): a study file's `preregistered:` declaration parsed and checked, the report's
confirmatory section (primary first over the declared seeds only, interim until all have rows, secondaries Holm-
adjusted over the declared family, the power line, everything else exploratory) and the git check that the
declaration was committed before every primary row."""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import pytest
import torch
import yaml
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from hf_spt.errors import UserInputError
from hf_spt.experiments.suites.budget_study import study_grid, study_preregistration
from hf_spt.experiments.suites.budget_preregistration import declaration_commit
from hf_spt.reports.budget_report import study_markdown
from hf_spt.reports.budget_report import write_study_report
from hf_spt.reports.preregistration import (AlphaSpending, Contrast, Declaration, Preregistration, contrast_difference,
                                            look_alphas, power_at, preregistered_lines, seeds_for_power, spent_alpha,
                                            withheld_units)
from hf_spt.reports.study_evidence import study_evidence, summarize_study
from hf_spt.runs.provenance import described_commit, row_commit
from hf_spt.scripts import run_budget_study

ARMS = [{"name": "scratch"}, {"name": "spt", "pretrain": True},
        {"name": "scratch_compute_matched", "compute_matched": True},
        {"name": "scratch_compute_matched_full", "compute_matched": True, "early_stopping": False}]
DECLARED = {"primary": {"config": "a", "arm": "spt", "control": "scratch_compute_matched_full"},
            "seeds": [10, 11, 12, 13], "alpha": 0.05, "smallest_effect": 2.0,
            "secondary": [{"config": "a", "arm": "spt", "control": "scratch"},
                          {"config": "b", "arm": "spt", "control": "scratch_compute_matched_full"}]}
STUDY = {"output_dir": "runs/x", "seeds": [10],
         "tasks": {"a": {"task": "digits", "task_options": {"image_size": 8, "num_train": 100}},
                   "b": {"task": "digits", "task_options": {"image_size": 8, "num_train": 300}}},
         "experiment": {"pretrain_epochs": 2, "finetune_epochs": 2}, "arms": ARMS}

# SPT's and the controls' test accuracies per seed (config a): seed 3 is a pilot seed, outside the declaration
SCORES = {"spt": {3: 0.50, 10: 0.62, 11: 0.60, 12: 0.65, 13: 0.61},
          "scratch_compute_matched_full": {3: 0.90, 10: 0.58, 11: 0.59, 12: 0.60, 13: 0.57},
          "scratch": {3: 0.10, 10: 0.55, 11: 0.57, 12: 0.58, 13: 0.60}}


def rows(seeds=(3, 10, 11, 12, 13), commit="abc", config="a"):
    return [{"config": config, "arm": arm, "arm_name": arm, "seed": seed, "test_accuracy": SCORES[arm][seed],
             "commit": commit} for arm in SCORES for seed in seeds]


def registration(**changes) -> Preregistration:
    values = dict(study="s", primary=Contrast("a", "spt", "scratch_compute_matched_full"), seeds=(10, 11, 12, 13),
                  alpha=0.05, smallest_effect=2.0, secondary=(Contrast("a", "spt", "scratch"),
                                                              Contrast("b", "spt", "scratch_compute_matched_full")),
                  declaration=Declaration(None, None, "no git here"))
    return Preregistration(**{**values, **changes})


def test_the_primary_counts_only_the_declared_seeds_and_shows_nothing_but_progress_until_all_have_rows():
    """Issue 64 item 4: an interim report (no alpha-spending rule declared) shows how many seeds have rows and no
    estimate, interval, p or verdict of any declared contrast."""
    interim = preregistered_lines(registration(), rows(seeds=(3, 10, 11)))
    text = "\n".join(interim)
    assert interim[0] == "## Preregistered: s" and "**interim: 2 of 4 seeds** with the primary's rows" in text
    assert "no interim look was declared" in text and "spt minus scratch, a: 2 of 4" in text
    assert not any(line.startswith("| primary |") for line in interim)
    assert "+2.5" not in text and "significant at" not in text and "| p |" not in text
    assert "Power: from the pilot" not in text and "Power: no estimate yet" in text  # the interim spread is a look
    complete = preregistered_lines(registration(), rows())
    difference = contrast_difference(rows(), registration().primary, (10, 11, 12, 13))
    assert difference.seeds == [10, 11, 12, 13] and difference.mean == pytest.approx(0.035)
    primary = next(line for line in complete if line.startswith("| primary |"))
    assert "**interim" not in "\n".join(complete) and f"| {difference.p_value:.3f} |" in primary
    assert "| 4 of 4 | +3.5 |" in primary and primary.endswith(
        "significant at alpha 0.05 (ahead, the interval reaching across the smallest effect of interest, 2 points) |")


def test_an_alpha_spending_rule_tests_the_primary_at_its_declared_looks():
    spending = AlphaSpending("obrien_fleming", (2,))
    looks = look_alphas(spending, 4, 0.05)
    assert [look for look, _ in looks] == [2, 4] and sum(alpha for _, alpha in looks) == pytest.approx(0.05)
    assert looks[0][1] == pytest.approx(2 - 2 * stats.norm.cdf(stats.norm.ppf(0.975) / math.sqrt(0.5)))
    assert spent_alpha("pocock", 1.0, 0.05) == pytest.approx(0.05)
    one = "\n".join(preregistered_lines(registration(alpha_spending=spending), rows(seeds=(3, 10))))
    assert "**interim: 1 of 4 seeds**" in one and "(or a declared interim look is reached)" in one
    look = preregistered_lines(registration(alpha_spending=spending), rows(seeds=(3, 10, 11, 12)))
    text = "\n".join(look)
    assert "**interim look at 2 of 4 seeds** (the first 2 declared seeds with rows)" in text
    primary = next(line for line in look if line.startswith("| primary |"))
    assert "| 2 of 4 | +2.5 |" in primary and f"at alpha {looks[0][1]:.3g}" in primary
    assert withheld_units([registration(alpha_spending=spending)], rows(seeds=(3, 10))) and not withheld_units(
        [registration(alpha_spending=spending)], rows(seeds=(3, 10, 11)))


def test_an_interim_report_leaves_the_declared_rows_out_of_its_exploratory_part(tmp_path):
    """Issue 64 item 4: the exploratory tables and figures would give the interim estimate away (SPT's and each
    control's means over the declared seeds): until the test is shown they hold the other seeds only."""
    all_rows = [{**row, "pretrain_tokens": 1000 * (row["arm"] == "spt"), "num_layers": 2,
                 "budget_tokens": 0 if row["arm"] == "scratch" else 1000,
                 "pretrain_epochs": None if row["arm"] == "scratch" else 10} for row in rows(seeds=(3, 10, 11))]
    attention = [{"config": row["config"], "arm_name": row["arm_name"], "seed": row["seed"], "near": 2,
                  "near_ratio_by_layer": [1.5], "distances": [-1, 0, 1], "profile_by_layer": [[0.2, 0.6, 0.2]],
                  "num_examples": 4} for row in all_rows]
    write_study_report(all_rows, [], {}, tmp_path, preregistrations=[registration()], attention=attention)
    # the attention record keeps every row, so a seed's folder joined later still brings its attention; the table
    # and figure hold seed 3 alone
    assert {row["seed"] for row in json.loads((tmp_path / "budget_study_attention.json").read_text())} == {3, 10, 11}
    report = (tmp_path / "budget_study.md").read_text()
    exploratory = report[report.index("## Exploratory"):]
    assert "## Attention after fine-tuning (exploratory)" in exploratory and "| 3 | 1.50 |" in exploratory
    assert "The declared rows (6) are left out of the exploratory part" in report
    assert "| 3 |" in exploratory and "10, 11" not in exploratory and "(1)" in exploratory  # seed 3 alone
    assert len(json.loads((tmp_path / "budget_study.json").read_text())) == 9  # the record keeps every row
    write_study_report(all_rows, [], {}, tmp_path)  # no declaration: nothing withheld
    assert "3, 10, 11" in (tmp_path / "budget_study.md").read_text()


def test_secondaries_are_holm_adjusted_over_the_declared_family_and_the_power_line_uses_ttestpower():
    lines = preregistered_lines(registration(), rows())
    secondary = contrast_difference(rows(), Contrast("a", "spt", "scratch"), (10, 11, 12, 13))
    adjusted = multipletests([secondary.p_value, 1.0], method="holm")[1]  # config b has no rows: p = 1
    first, second = (line for line in lines if line.startswith("| secondary |"))
    assert f"| {secondary.p_value:.3f} | {adjusted[0]:.3f} |" in first and adjusted[0] == pytest.approx(
        2 * secondary.p_value)
    assert "| 0 of 4 |" in second and "no rows: not tested" in second
    primary = contrast_difference(rows(), registration().primary, (10, 11, 12, 13))
    needed = math.ceil(TTestPower().solve_power(effect_size=2.0 / (100 * primary.sd), alpha=0.05, power=0.8,
                                                alternative="two-sided"))
    assert f"needs {needed} seeds for 80% power at the smallest effect of interest, 2 points" in "\n".join(lines)
    pilot = "\n".join(preregistered_lines(registration(pilot_sd=4.0), []))
    expected = math.ceil(TTestPower().solve_power(effect_size=0.5, alpha=0.05, power=0.8, alternative="two-sided"))
    assert f"from the pilot (pilot_sd declared in the study file), the differences' sd is 4.00 points" in pilot
    assert f"needs {expected} seeds" in pilot and "**interim: 0 of 4 seeds**" in pilot


def test_the_report_opens_with_the_declaration_and_labels_the_rest_exploratory():
    all_rows = [{**row, "pretrain_tokens": 0, "budget_tokens": 0, "num_layers": 2, "pretrain_epochs": None}
                for row in rows()]
    declared = preregistered_lines(registration(), all_rows)
    text = study_markdown(summarize_study(all_rows), [], study_evidence(all_rows, {}), declared)
    assert text.startswith("## Preregistered: s")
    assert text.index("| primary |") < text.index("## Exploratory") < text.index("Paired by seed:")
    assert "Everything below is exploratory" in text
    assert study_markdown(summarize_study(all_rows), [], study_evidence(all_rows, {})).startswith("Paired by seed:")


def test_exploratory_rows_repeating_a_declared_contrast_point_back_to_its_test():
    """Config a's paired table repeats the primary and a secondary over every seed (pilot seed 3 included): those
    rows say where they are tested, carry no verdict of their own and leave the exploratory count."""
    def shaped(row):  # as a budget study writes it: SPT and the compute-matched control at one 10-epoch budget
        budget = None if row["arm"] == "scratch" else 10
        return {**row, "pretrain_epochs": budget, "num_layers": 2, "budget_tokens": 1000 * bool(budget),
                "pretrain_tokens": 1000 * (row["arm"] == "spt")}

    all_rows = [shaped(row) for row in rows()]
    evidence = study_evidence(all_rows, {})
    plain = study_markdown(summarize_study(all_rows), [], evidence)
    text = study_markdown(summarize_study(all_rows), [], evidence, preregistered_lines(registration(), all_rows),
                          registration().roles())
    exploratory = text[text.index("## Exploratory"):]
    primary = next(line for line in exploratory.splitlines() if "| spt | scratch_compute_matched_full |" in line)
    secondary = next(line for line in exploratory.splitlines() if "| spt | scratch |" in line)
    assert primary.endswith("| declared primary: tested above |") and "3, 10, 11, 12, 13" in primary
    assert secondary.endswith("| declared secondary: tested above |")
    assert "Paired by seed: no interval beyond the declared contrasts" in exploratory
    assert "| spt | scratch |" in plain and "tested above" not in plain and plain.startswith("Paired by seed: 2 paired")
    assert registration().roles() == {("a", "spt", "scratch_compute_matched_full"): "primary",
                                      ("a", "spt", "scratch"): "secondary",
                                      ("b", "spt", "scratch_compute_matched_full"): "secondary"}


def git(folder: Path, *arguments: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *arguments], capture_output=True, text=True,
                          check=True).stdout.strip()


def git_repository(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    git(folder, "init", "-q")
    git(folder, "config", "user.email", "t@t")
    git(folder, "config", "user.name", "t")
    return folder


def commit_study(folder: Path, content: dict, message: str) -> str:
    study = folder / "studies" / "s.yaml"
    study.parent.mkdir(exist_ok=True)
    study.write_text(yaml.safe_dump(content))
    git(folder, "add", "-A")
    git(folder, "commit", "-qm", message)
    return git(folder, "rev-parse", "HEAD")


def declaration_of(registration, rows):
    return next(text for text in preregistered_lines(registration, rows) if text.startswith("Declaration"))


def test_git_says_whether_the_declaration_was_committed_before_every_declared_row(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    repository = git_repository(tmp_path)
    before = commit_study(repository, STUDY, "pilot")
    study = repository / "studies" / "s.yaml"
    study.write_text(yaml.safe_dump({**STUDY, "preregistered": DECLARED}))
    assert declaration_commit(study).commit is None  # written, not committed
    assert "is not committed" in declaration_commit(study).reason
    declared = commit_study(repository, {**STUDY, "preregistered": DECLARED}, "declare")
    after = commit_study(repository, {**STUDY, "seeds": [10, 11], "output_dir": "elsewhere",
                                      "preregistered": DECLARED}, "more seeds, same study")
    registration = study_preregistration(str(study))
    assert registration.declaration.commit == declared and registration.primary.control == "scratch_compute_matched_full"

    def line(commit, registration=registration):
        return declaration_of(registration, rows(commit=commit))

    assert line(after[:12]) == (
        f"Declaration: the whole study definition (digest {registration.definition}) as committed at {declared[:12]} "
        "in this checkout (studies/s.yaml); each row's commit is looked up there (a row records the commit of the "
        "hf_spt checkout that ran it). Checked 12 declared rows (the declared contrasts' arms at the declared seeds; "
        "0 record the definition they ran under, 12 are checked against the study file at their commit): the "
        "declaration's commit is an ancestor of every one's commit, and each ran under the declared definition.")
    dirty = line(f"{declared[:12]}-dirty")
    assert "ancestor of every one's commit" in dirty and dirty.endswith(
        "The commit of seed(s) 10, 11, 12, 13's rows carries uncommitted changes (\"-dirty\"; the files are named in "
        "the rows).")
    edited = [{**row, "uncommitted": "studies/s.yaml"} for row in rows(commit=f"{declared[:12]}-dirty")]
    assert ("12 row(s) cannot be matched to the declared definition, the study file was edited on top of its commit"
            in declaration_of(registration, edited))
    assert "12 row(s) ran at a commit that does not hold the declaration (seeds 10, 11, 12, 13): NOT" in line(
        before[:12])
    assert "no commit recorded" in line("unknown") and f"commit 0123456789ab not in {tmp_path}" in line("0123456789ab")
    study.write_text(yaml.safe_dump({**STUDY, "preregistered": {**DECLARED, "alpha": 0.01}}))  # changed, uncommitted
    changed = study_preregistration(str(study))
    assert "cannot tell (the study definition s.yaml holds is not committed" in line(after[:12], changed)
    outside = tmp_path.parent / f"{tmp_path.name}_outside.yaml"
    outside.write_text(yaml.safe_dump({**STUDY, "preregistered": DECLARED}))
    assert declaration_commit(outside).reason.endswith("is not in a git checkout git can read")


def test_the_declaration_binds_the_whole_study_not_its_block(tmp_path, monkeypatch):
    """Issue 64 item 1: a recipe changed after the declaration moves the declaration's commit, rows run before the
    change are no longer declared before, and a row that records another definition is named whatever its commit."""
    monkeypatch.chdir(tmp_path)
    repository = git_repository(tmp_path)
    declared = commit_study(repository, {**STUDY, "preregistered": DECLARED}, "declare")
    commented = repository / "studies" / "s.yaml"
    commented.write_text("# a comment changes no row\n" + commented.read_text())
    git(repository, "commit", "-qam", "comment")
    assert study_preregistration(str(commented)).declaration.commit == declared
    changed = commit_study(repository, {**STUDY, "experiment": {**STUDY["experiment"], "learning_rate": 0.01},
                                        "preregistered": DECLARED}, "another recipe")
    registration = study_preregistration(str(commented))
    assert registration.declaration.commit == changed  # the block is the same, the study is not
    early = declaration_of(registration, rows(commit=declared[:12]))
    assert "12 row(s) ran at a commit that does not hold the declaration" in early
    assert "12 row(s) ran under ANOTHER study definition than the declared one (seeds 10, 11, 12, 13)" in early
    recorded = [{**row, "study_definition": "0" * 16} if row["seed"] == 12 else row for row in rows(commit=changed)]
    assert "3 row(s) ran under ANOTHER study definition than the declared one (seeds 12)" in declaration_of(
        registration, recorded)
    matching = [{**row, "study_definition": registration.definition} for row in rows(commit=changed)]
    assert "12 record the definition they ran under" in declaration_of(registration, matching)


def test_rows_at_a_tag_a_restored_study_file_and_another_repository(tmp_path, monkeypatch):
    """Issue 64 item 2: a row at an annotated tag is checked on the full hash it records; a study file deleted and
    restored unchanged keeps its declaration; a study kept outside the repository of the rows' commits says which
    repository it looked in."""
    monkeypatch.chdir(tmp_path)
    repository = git_repository(tmp_path / "repo")
    declared = commit_study(repository, {**STUDY, "preregistered": DECLARED}, "declare")
    git(repository, "tag", "-a", "v1.0", "-m", "release")
    assert described_commit("v1.0") is None and described_commit(git(repository, "describe", "--always")) is None
    tagged = [{**row, "commit_hash": declared} for row in rows(commit="v1.0")]
    assert row_commit(tagged[0]) == declared
    registration = study_preregistration(str(repository / "studies" / "s.yaml"))
    assert "ancestor of every one's commit" in declaration_of(registration, tagged)
    assert "no commit recorded" in declaration_of(registration, rows(commit="v1.0"))
    git(repository, "rm", "-q", "studies/s.yaml")
    git(repository, "commit", "-qm", "delete")
    restored = commit_study(repository, {**STUDY, "preregistered": DECLARED}, "restore")
    again = study_preregistration(str(repository / "studies" / "s.yaml"))
    assert again.declaration.commit == declared
    assert "ancestor of every one's commit" in declaration_of(again, rows(commit=restored[:12]))
    other = git_repository(tmp_path / "other")
    commit_study(other, {**STUDY, "preregistered": DECLARED}, "a user's study")
    theirs = study_preregistration(str(other / "studies" / "s.yaml"))
    line = declaration_of(theirs, rows(commit=declared[:12]))
    assert f"in the repository at {other}" in line and f"not in {other}" in line


def test_the_power_line_counts_seeds_for_large_and_textbook_effects():
    """Issue 64 item 3: where statsmodels' solver returns NaN (an effect of about 5.5 sds or more) the count comes
    from the power itself, never from ceil(NaN); the textbook value: d 0.5, alpha 0.05, 80% power, 34 pairs."""
    assert seeds_for_power(8.0, 4.0, 0.05) == 34 and seeds_for_power(1.0, 0.5, 0.05) == 34
    assert seeds_for_power(0.7, 4.0, 0.05) == 3  # d 5.7: the solver's NaN; two seeds give 0.44, three 0.99
    assert seeds_for_power(0.1, 4.0, 0.05) == 2  # two seeds already give the power
    assert seeds_for_power(0.0, 4.0, 0.05) == 2
    assert seeds_for_power(100.0, 1.0e-9, 0.05) is None  # the solver finds no count, nor do 1,000 seeds
    pilot = "\n".join(preregistered_lines(registration(pilot_sd=0.5), []))
    assert "needs 3 seeds for 80% power" in pilot
    clear = [{"config": "a", "arm_name": arm, "seed": seed, "test_accuracy": 0.5 + gain + 0.001 * seed * bool(gain)}
             for seed in (10, 11, 12, 13) for arm, gain in (("spt", 0.2), ("scratch_compute_matched_full", 0.0))]
    report = "\n".join(preregistered_lines(registration(), clear))  # sd 0.13 points against 2: 15 sds
    assert "the differences' sd is 0.13 points" in report and "needs 2 seeds for 80% power" in report
    assert power_at(2, 2 / 0.129, 0.05) >= 0.8 and math.isfinite(power_at(6, 2 / 0.129, 0.05))  # solver: NaN


def test_a_contrast_may_take_the_mean_of_controls_or_subtract_a_twin_configuration(tmp_path):
    """Issue 65's claims as paired contrasts: "attention alone recovers more than half of SPT's gain" is the arm
    minus the mean of SPT and scratch; "the gain shrinks without locality" is SPT minus scratch in one configuration
    minus the same in its permuted twin, each seed's difference of differences."""
    study = tmp_path / "s.yaml"
    declared = {**DECLARED, "primary": {"config": "a", "arm": "scratch_compute_matched_full",
                                        "control": ["spt", "scratch"]},
                "secondary": [{"config": "a", "arm": "spt", "control": "scratch", "twin": "b"}]}
    study.write_text(yaml.safe_dump({**STUDY, "preregistered": declared}))
    registration = study_preregistration(str(study))
    half, locality = registration.primary, registration.secondary[0]
    assert half.words() == "scratch_compute_matched_full minus the mean of scratch and spt, a"
    assert locality.words() == "spt minus scratch, a, minus the same in b"
    twin = [{**row, "config": "b", "test_accuracy": row["test_accuracy"] / 2} for row in rows()]
    both = rows() + twin
    expected = {seed: SCORES["scratch_compute_matched_full"][seed] - (SCORES["spt"][seed] + SCORES["scratch"][seed]) / 2
                for seed in (10, 11, 12, 13)}
    assert dict(contrast_difference(both, half, (10, 11, 12, 13)).pairs) == pytest.approx(expected)
    gains = {seed: SCORES["spt"][seed] - SCORES["scratch"][seed] for seed in (10, 11, 12, 13)}
    assert dict(contrast_difference(both, locality, (10, 11, 12, 13)).pairs) == pytest.approx(
        {seed: gain / 2 for seed, gain in gains.items()})
    assert contrast_difference(rows(), locality, (10, 11, 12, 13)) is None  # no twin rows: no seed has every term
    assert registration.roles() == {}  # neither is a pairwise row an exploratory table repeats
    assert {(row["config"], row["arm_name"]) for row in registration.declared_rows(both)} == {
        ("a", "spt"), ("a", "scratch"), ("a", "scratch_compute_matched_full"), ("b", "spt"), ("b", "scratch")}
    lines = preregistered_lines(registration, both)
    assert any(line.startswith("| secondary | spt minus scratch, a, minus the same in b | 4 of 4 |") for line in lines)


def test_a_claim_may_declare_its_own_smallest_effect(tmp_path):
    """Issue 65: each claim is sized by its own smallest effect of interest where it declares one (the verdict reads
    its interval against that one, the header names it, the power line uses the primary's); the others keep the
    study's."""
    study = tmp_path / "s.yaml"
    declared = {**DECLARED, "primary": {**DECLARED["primary"], "smallest_effect": 0.5},
                "secondary": [{"config": "a", "arm": "spt", "control": "scratch", "smallest_effect": 3.0},
                              DECLARED["secondary"][1]]}
    study.write_text(yaml.safe_dump({**STUDY, "preregistered": declared}))
    declared_study = study_preregistration(str(study))
    own, plain = declared_study.secondary
    assert declared_study.smallest_for(declared_study.primary) == 0.5 and declared_study.smallest_for(own) == 3.0
    assert plain.smallest_effect is None and declared_study.smallest_for(plain) == 2.0
    assert own == Contrast("a", "spt", "scratch")  # the effect sizes a claim; it is not part of which contrast it is
    text = "\n".join(preregistered_lines(declared_study, rows()))
    assert "smallest effect of interest 0.5 points (spt minus scratch, a: 3);" in text
    primary = contrast_difference(rows(), declared_study.primary, (10, 11, 12, 13))
    assert 0.5 <= 100 * min(primary.interval) < 2.0  # beyond the claim's own effect, not beyond the study's
    assert "the whole interval at or beyond the smallest effect of interest, 0.5 points" in text
    assert "power at the smallest effect of interest, 0.5 points" in text
    plain_text = "\n".join(preregistered_lines(registration(), rows()))  # the study's 2 points for all
    assert "the interval reaching across the smallest effect of interest, 2 points" in plain_text
    for bad, message in ((0.001, "secondary 1 smallest_effect is in points of test accuracy, from 0.01 to 100"),
                         ("big", "secondary 1 smallest_effect must be a finite number above 0")):
        declared["secondary"][0]["smallest_effect"] = bad
        study.write_text(yaml.safe_dump({**STUDY, "preregistered": declared}))
        with pytest.raises(UserInputError, match=re.escape(message)):
            study_grid(str(study))


def test_described_commits():
    assert described_commit("0123456789ab") == "0123456789ab"
    assert described_commit("0123456789ab-dirty") == "0123456789ab"
    assert described_commit("v1.0-3-g0123456789ab") == "0123456789ab"
    assert described_commit("unknown") is None and described_commit(None) is None
    assert described_commit("v1.0") is None and described_commit("v1.0-dirty") is None  # a bare tag: no hash
    assert row_commit({"commit": "v1.0", "commit_hash": "f" * 40}) == "f" * 40
    assert row_commit({"commit": "0123456789ab-dirty"}) == "0123456789ab" and row_commit({}) is None


@pytest.mark.parametrize("change, message", [
    ({"primary": {"config": "zz", "arm": "spt", "control": "scratch"}}, "configuration 'zz'; the study's are a, b"),
    ({"primary": {"config": "a", "arm": "sptt", "control": "scratch"}}, "arm 'sptt'; the study's arms are scratch"),
    ({"primary": {"config": "a", "arm": "spt", "control": "spt"}}, "compares arm 'spt' with itself"),
    ({"primary": {"config": "a", "arm": "spt"}}, "must be a mapping of config, arm and control"),
    ({"seeds": "10-30"}, "seeds must be the whole list"),
    ({"seeds": [1, 1]}, "seeds must be the whole list"),
    ({"alpha": 5}, "alpha must be a finite number between 0 and 1"),
    ({"smallest_effect": -1}, "smallest_effect must be a finite number above 0"),
    ({"smallest_effect": float("inf")}, "smallest_effect must be a finite number above 0"),
    ({"smallest_effect": 1.0e-9}, "smallest_effect is in points of test accuracy, from 0.01 to 100; got 1e-09"),
    ({"pilot_sd": float("inf")}, "pilot_sd must be a finite number between 0 and 100"),
    ({"smallest_effect": 101}, "smallest_effect is in points of test accuracy, from 0.01 to 100; got 101"),
    ({"secondary": [{"config": "a", "arm": "spt", "control": "scratch"}] * 2},
     "secondary 2 (spt minus scratch, a) repeats secondary 1: declare each contrast once"),
    ({"secondary": [DECLARED["primary"]]}, "secondary 1 (spt minus scratch_compute_matched_full, a) repeats the primary"),
    ({"primary": {"config": "a", "arm": "spt", "control": ["scratch", "scratch"]}}, "a list of distinct arms"),
    ({"primary": {"config": "a", "arm": "spt", "control": "scratch", "twin": "a"}}, "names 'a' as its own twin"),
    ({"primary": {"config": "a", "arm": "spt_a_only", "control": "scratch", "twin": "b"}},
     "names arm 'spt_a_only', which does not run on configuration 'b'"),
    ({"primary": {"config": "b", "arm": "spt_a_only", "control": "scratch"}},
     "names arm 'spt_a_only', which does not run on configuration 'b'"),
    ({"alpha_spending": {"rule": "haybittle", "looks": [2]}}, "alpha_spending must be {rule: obrien_fleming or pocock"),
    ({"alpha_spending": {"rule": "pocock", "looks": [3, 2]}}, "looks: [seeds with rows at each interim look, ascending"),
    ({"alpha_spending": {"rule": "pocock", "looks": [4]}}, "from 2 to 3"),
    ({"power": 0.9}, "has no key(s) power"),
    ({"secondary": [{"config": "b", "arm": "spt", "control": "nope"}]}, "secondary 1 names arm 'nope'"),
])
def test_a_bad_declaration_stops_the_study_while_it_plans(tmp_path, change, message):
    study = tmp_path / "s.yaml"
    arms = [*ARMS, {"name": "spt_a_only", "pretrain": True, "tasks": ["a"]}]
    study.write_text(yaml.safe_dump({**STUDY, "arms": arms, "preregistered": {**DECLARED, **change}}))
    with pytest.raises(UserInputError, match=re.escape(message)):
        study_grid(str(study))


def test_a_declaration_changes_nothing_the_study_runs(tmp_path):
    plain, declared = tmp_path / "plain.yaml", tmp_path / "declared.yaml"
    plain.write_text(yaml.safe_dump(STUDY))
    declared.write_text(yaml.safe_dump({**STUDY, "preregistered": DECLARED}))
    assert study_grid(str(declared)) == study_grid(str(plain))
    assert study_preregistration(str(plain)) is None


def test_a_declared_study_run_reports_its_primary_first(tmp_path):
    torch.set_num_threads(1)
    study = {"output_dir": str(tmp_path / "run"), "seeds": [0, 1],
             "tasks": {"m": {"task": "markov", "task_options": {"num_train": 32, "num_validation": 16,
                                                                 "num_test": 16, "length": 12}}},
             "experiment": {"finetune_epochs": 1, "pretrain_epochs": 1, "report_to": "none",
                            "per_device_train_batch_size": 8},
             "model": {"num_hidden_layers": 1, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 16},
             "arms": [{"name": "scratch"}, {"name": "spt", "pretrain": True}],
             "preregistered": {"primary": {"config": "m", "arm": "spt", "control": "scratch"}, "seeds": [0, 1, 2],
                               "alpha": 0.05, "smallest_effect": 5}}
    study_file = tmp_path / "study.yaml"
    study_file.write_text(yaml.safe_dump(study))
    run_budget_study.run(run_budget_study.BudgetStudyArguments(study=str(study_file), probe_examples=8))
    report = (tmp_path / "run" / "budget_study.md").read_text()
    assert report.startswith("# Budget study\n\n## Preregistered: study\n")
    assert "**interim: 2 of 3 seeds** with the primary's rows" in report and "| primary |" not in report
    assert "spt minus scratch, m: 2 of 3" in report
    assert "Declaration before the declared rows: cannot tell" in report and "## Exploratory" in report
    written = json.loads((tmp_path / "run" / "budget_study.json").read_text())
    assert len(written) == 4 and {row["study"] for row in written} == {str(study_file)}
    assert {row["study_definition"] for row in written} == {study_preregistration(str(study_file)).definition}


def study_folder(folder: Path, study: str | None, config: str = "a") -> Path:
    """A finished study's report folder, its rows naming `study` (None: rows written before rows named it)."""
    folder.mkdir(parents=True)
    shaped = [{**row, "task": "digits", "pretrain_tokens": 1000 * (row["arm"] == "spt"), "num_layers": 2,
               "budget_tokens": 0 if row["arm"] == "scratch" else 1000, "model": None, "seconds": 1.0,
               "pretrain_epochs": None if row["arm"] == "scratch" else 10,
               **({} if study is None else {"study": study})} for row in rows(config=config)]
    (folder / "budget_study.json").write_text(json.dumps(shaped))
    (folder / "budget_study_checkpoints.json").write_text("[]")
    return folder


def test_a_declaration_follows_the_rows_of_its_own_study_through_combine(tmp_path, monkeypatch):
    """Issue 64 item 8: --combine reports a declaration for the rows that name its study file, not for rows that
    share a configuration name: a user's undeclared study with the shipped declared study's configuration name
    opens with no declaration, and a user's own declared study keeps its confirmatory section."""
    monkeypatch.chdir(tmp_path)
    undeclared = tmp_path / "mine.yaml"
    undeclared.write_text(yaml.safe_dump({**STUDY, "tasks": {"mnist14_n1000_declared": STUDY["tasks"]["a"]}}))
    source = study_folder(tmp_path / "runs" / "mine", str(undeclared), config="mnist14_n1000_declared")
    run_budget_study.run(run_budget_study.BudgetStudyArguments(combine=str(source), output_dir=str(tmp_path / "c1")))
    assert "## Preregistered" not in (tmp_path / "c1" / "budget_study.md").read_text()
    declared = tmp_path / "declared.yaml"
    declared.write_text(yaml.safe_dump({**STUDY, "preregistered": DECLARED}))
    source = study_folder(tmp_path / "runs" / "declared", str(declared))
    run_budget_study.run(run_budget_study.BudgetStudyArguments(combine=str(source), output_dir=str(tmp_path / "c2")))
    report = (tmp_path / "c2" / "budget_study.md").read_text()
    assert report.startswith("# Budget study\n\n## Preregistered: declared\n") and "| primary |" in report
    declared.unlink()
    run_budget_study.run(run_budget_study.BudgetStudyArguments(combine=str(source), output_dir=str(tmp_path / "c3")))
    assert (f"Rows name the study file {declared}, which is not at hand here" in
            (tmp_path / "c3" / "budget_study.md").read_text())
