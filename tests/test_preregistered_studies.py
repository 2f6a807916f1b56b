"""Preregistered studies (issue 56): a study file's `preregistered:` declaration parsed and checked, the report's
confirmatory section (primary first over the declared seeds only, interim until all have rows, secondaries Holm-
adjusted over the declared family, the power line, everything else exploratory) and the git check that the
declaration was committed before every primary row."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
import torch
import yaml
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from hf_spt.errors import UserInputError
from hf_spt.experiments.suites.budget_study import study_grid, study_preregistration
from hf_spt.experiments.suites.budget_preregistration import declaration_commit
from hf_spt.reports.budget_report import study_markdown
from hf_spt.reports.preregistration import (Contrast, Declaration, Preregistration, contrast_difference,
                                            preregistered_lines)
from hf_spt.reports.study_evidence import study_evidence, summarize_study
from hf_spt.runs.provenance import described_commit
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


def test_the_primary_counts_only_the_declared_seeds_and_says_interim_until_all_have_rows():
    interim = preregistered_lines(registration(), rows(seeds=(3, 10, 11)))
    text = "\n".join(interim)
    assert interim[0] == "## Preregistered: s" and "**interim: 2 of 4 seeds**" in text
    primary = next(line for line in interim if line.startswith("| primary |"))
    assert "| 2 of 4 | +2.5 |" in primary and "interim: 2 of 4 seeds" in primary  # seed 3 (-40 points) left out
    complete = preregistered_lines(registration(), rows())
    difference = contrast_difference(rows(), registration().primary, (10, 11, 12, 13))
    assert difference.seeds == [10, 11, 12, 13] and difference.mean == pytest.approx(0.035)
    primary = next(line for line in complete if line.startswith("| primary |"))
    assert "interim" not in "\n".join(complete) and f"| {difference.p_value:.3f} |" in primary
    assert "| 4 of 4 | +3.5 |" in primary and primary.endswith("significant at alpha 0.05 (ahead) |")


def test_secondaries_are_holm_adjusted_over_the_declared_family_and_the_power_line_uses_ttestpower():
    lines = preregistered_lines(registration(), rows())
    secondary = contrast_difference(rows(), Contrast("a", "spt", "scratch"), (10, 11, 12, 13))
    adjusted = multipletests([secondary.p_value, 1.0], method="holm")[1]  # config b has no rows: p = 1
    first, second = (line for line in lines if line.startswith("| secondary |"))
    assert f"| {secondary.p_value:.3f} | {adjusted[0]:.3f} |" in first and adjusted[0] == pytest.approx(
        2 * secondary.p_value)
    assert "| 0 of 4 |" in second and "no rows yet" in second
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


def test_git_says_whether_the_declaration_was_committed_before_every_primary_row(tmp_path):
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "t@t")
    git(tmp_path, "config", "user.name", "t")
    study = tmp_path / "studies" / "s.yaml"
    study.parent.mkdir()
    study.write_text(yaml.safe_dump(STUDY))
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "pilot")
    before = git(tmp_path, "rev-parse", "HEAD")
    study.write_text(yaml.safe_dump({**STUDY, "preregistered": DECLARED}))
    assert declaration_commit(study).commit is None  # written, not committed
    assert "is not committed" in declaration_commit(study).reason
    git(tmp_path, "commit", "-qam", "declare")
    declared = git(tmp_path, "rev-parse", "HEAD")
    study.write_text(yaml.safe_dump({**STUDY, "seeds": [10, 11], "preregistered": DECLARED}))
    git(tmp_path, "commit", "-qam", "more seeds, same declaration")
    after = git(tmp_path, "rev-parse", "HEAD")
    registration = study_preregistration(str(study))
    assert registration.declaration.commit == declared and registration.primary.control == "scratch_compute_matched_full"

    def line(commit, registration=registration):
        return next(text for text in preregistered_lines(registration, rows(commit=commit))
                    if text.startswith("Declaration"))

    assert line(after[:12]) == (f"Declaration: declared at commit {declared[:12]}, an ancestor in git of the commit of "
                                "every primary row (8 rows): declared before each of them.")
    dirty = line(f"{declared[:12]}-dirty")
    assert "declared before each" in dirty and dirty.endswith(
        "The commit of 4 seed(s)' rows (10, 11, 12, 13) carries uncommitted changes (\"-dirty\": that commit plus "
        "edits the rows do not name).")
    named = [{**row, "uncommitted": "docs/lra.md"} if row["seed"] == 10 else row
             for row in rows(commit=f"{declared[:12]}-dirty")]
    assert next(text for text in preregistered_lines(registration, named) if text.startswith("Declaration")).endswith(
        "that commit plus edits to docs/lra.md and edits the rows do not name).")
    assert "uncommitted" not in line(after[:12])
    assert "8 primary row(s) ran at a commit that does not hold the declaration (seeds 10, 11, 12, 13): NOT" in line(
        before[:12])
    assert "cannot tell" in line("unknown") and "cannot tell" in line("0123456789ab")
    study.write_text(yaml.safe_dump({**STUDY, "preregistered": {**DECLARED, "alpha": 0.01}}))  # changed, uncommitted
    changed = study_preregistration(str(study))
    assert "cannot tell (the declaration s.yaml holds is not committed)" in line(after[:12], changed)
    outside = tmp_path.parent / f"{tmp_path.name}_outside.yaml"
    outside.write_text(yaml.safe_dump({**STUDY, "preregistered": DECLARED}))
    assert declaration_commit(outside).reason.endswith("is not in a git checkout git can read")


def test_described_commits():
    assert described_commit("0123456789ab") == "0123456789ab"
    assert described_commit("0123456789ab-dirty") == "0123456789ab"
    assert described_commit("v1.0-3-g0123456789ab") == "0123456789ab"
    assert described_commit("unknown") is None and described_commit(None) is None


@pytest.mark.parametrize("change, message", [
    ({"primary": {"config": "zz", "arm": "spt", "control": "scratch"}}, "configuration 'zz'; the study's are a, b"),
    ({"primary": {"config": "a", "arm": "sptt", "control": "scratch"}}, "arm 'sptt'; the study's arms are scratch"),
    ({"primary": {"config": "a", "arm": "spt", "control": "spt"}}, "compares arm 'spt' with itself"),
    ({"primary": {"config": "a", "arm": "spt"}}, "must be a mapping of config, arm and control"),
    ({"seeds": "10-30"}, "seeds must be the whole list"),
    ({"seeds": [1, 1]}, "seeds must be the whole list"),
    ({"alpha": 5}, "alpha must be a number between 0 and 1"),
    ({"smallest_effect": -1}, "smallest_effect must be a number above 0"),
    ({"power": 0.9}, "has no key(s) power"),
    ({"secondary": [{"config": "b", "arm": "spt", "control": "nope"}]}, "secondary 1 names control 'nope'"),
])
def test_a_bad_declaration_stops_the_study_while_it_plans(tmp_path, change, message):
    study = tmp_path / "s.yaml"
    study.write_text(yaml.safe_dump({**STUDY, "preregistered": {**DECLARED, **change}}))
    with pytest.raises(UserInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
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
    assert "**interim: 2 of 3 seeds**" in report and "| primary | spt minus scratch, m | 2 of 3 |" in report
    assert "Declaration before the primary rows: cannot tell" in report and "## Exploratory" in report
    assert len(json.loads((tmp_path / "run" / "budget_study.json").read_text())) == 4
