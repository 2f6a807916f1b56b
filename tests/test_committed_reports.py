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
