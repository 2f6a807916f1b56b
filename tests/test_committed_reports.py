"""Every committed table's numbers, regenerated from its committed rows by today's code, are the committed ones
(issue 56: the statistics moved to scipy.stats; a change of the interval's arithmetic must not move a printed
digit). budget_study.md is compared whole; lra_results.md and docs/ablation/results.md predate notes their
writers have since gained, so their table lines (every line starting "|") are compared."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from hf_spt.experiments.suites.budget_study import shipped_study_configs
from hf_spt.reports import grid_report
from hf_spt.reports.budget_report import study_markdown
from hf_spt.reports.lra_report import lra_table, markdown, pretraining_markdown
from hf_spt.reports.study_evidence import study_evidence, summarize_study

DOCS = Path(__file__).resolve().parent.parent / "docs"


def table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def test_the_budget_study_report_regenerates_byte_for_byte():
    rows = json.loads((DOCS / "lra" / "budget_study.json").read_text())
    checkpoints = json.loads((DOCS / "lra" / "budget_study_checkpoints.json").read_text())
    text = "# Budget study\n\n" + study_markdown(summarize_study(rows), checkpoints,
                                                 study_evidence(rows, shipped_study_configs()))
    assert text == (DOCS / "lra" / "budget_study.md").read_text()


def test_the_lra_table_regenerates_with_the_same_numbers():
    committed = json.loads((DOCS / "lra" / "lra_results.json").read_text())
    curves = committed["pretraining_curves"]
    text = markdown(lra_table(committed["rows"], committed["arms"])) + ("\n" + pretraining_markdown(curves)
                                                                        if curves else "")
    expected = table_lines((DOCS / "lra" / "lra_results.md").read_text())
    assert table_lines(text) == expected and len(expected) > 10


def test_the_ablation_table_regenerates_with_the_same_numbers():
    rows = [{**row, "seed": int(row["seed"]), "test_accuracy": float(row["test_accuracy"])}
            for row in csv.DictReader((DOCS / "ablation" / "results.csv").open(newline=""))]
    text = grid_report.markdown_table(grid_report.summarize(rows)) + "\n" + grid_report.paired_markdown(rows)
    expected = table_lines((DOCS / "ablation" / "results.md").read_text())
    assert table_lines(text) == expected and len(expected) > 10


def confirmatory_section(study: str) -> tuple[list[str], str]:
    """A declared study's confirmatory section as today's code writes it from the committed rows, and its committed
    report, after asserting the two agree line for line from the report's "## Preregistered" heading on (the
    declaration line aside: it reads git's history, which a shallow clone lacks)."""
    from hf_spt.experiments.suites.budget_study import study_preregistration
    from hf_spt.reports.preregistration import preregistered_lines

    folder = DOCS / "lra" / study
    lines = preregistered_lines(study_preregistration(study), json.loads((folder / "budget_study.json").read_text()))
    committed = (folder / "budget_study.md").read_text()
    start = committed.splitlines().index(lines[0])
    assert [line for line in lines if not line.startswith("Declaration")] == [
        line for line in committed.splitlines()[start:start + len(lines)] if not line.startswith("Declaration")]
    return lines, committed


def test_the_declared_mnist_report_regenerates_and_says_what_it_checked():
    """Issue 64: the preregistered MNIST report's confirmatory section, regenerated from its committed rows by today's
    code, is the committed one, and its declaration line checks every declared row (88: four arms of 22 seeds)."""
    import subprocess

    lines, _ = confirmatory_section("mnist_preregistered")
    held = subprocess.run(["git", "cat-file", "-e", "bacaad90b9b9^{commit}"], cwd=DOCS, capture_output=True)
    if held.returncode == 0:  # a clone with the declaration's history (not a shallow one)
        declaration = next(line for line in lines if line.startswith("Declaration"))
        assert "as committed at bacaad90b9b9" in declaration and "Checked 88 declared rows" in declaration
        assert declaration.endswith("the declaration's commit is an ancestor of every one's commit, and each ran "
                                    "under the declared definition.")


def test_the_declared_mechanism_report_regenerates_and_names_its_one_numerics_label():
    """Issue 65 items 6 and 7: the mechanism study's confirmatory section, regenerated from its committed rows by
    today's code, is the committed one; every seed ran with one numerics label, so in place of the per-label
    sensitivity table it names that label (a report whose seeds mix labels prints the table)."""
    _, committed = confirmatory_section("mnist_mechanism")
    rows = json.loads((DOCS / "lra" / "mnist_mechanism" / "budget_study.json").read_text())
    assert len({json.dumps(row["numerics"], sort_keys=True) for row in rows}) == 1
    assert ("Numerics: each declared contrast's seeds ran with one numerics label (portable AVX2, MKL AUTO on AMD "
            "EPYC), so the sensitivity analysis by numerics has a single stratum") in committed
    assert "Sensitivity analysis, not a test" not in committed
