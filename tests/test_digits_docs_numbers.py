"""The digits studies' sentences in README.md and docs/lra.md, recomputed from the committed rows (issue 54).

Each test computes a number from `docs/lra/budget_study.json`, `docs/lra/budget_study_compute.json` or the shipped
study files and checks that the docs state it, so a sentence cannot say more than its rows: how many studies ship,
the steps and tokens of the labelled-data sizes, how far one seed's difference moved between two runs of its cell,
where a capped scratch run had its best epoch, that "resolved" is read as nominal beside the report's count, and that
the README's one line per study quotes the report's paired intervals.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml

from hf_spt.experiments.step_plan import phase_steps
from hf_spt.experiments.suites.budget_study import STUDIES_DIR, shipped_study_configs, study_names
from hf_spt.reports.study_evidence import study_evidence
from hf_spt.tasks.registry import task_preset

ROOT = Path(__file__).resolve().parent.parent
LRA = ROOT / "docs" / "lra"


def _prose(path: Path) -> str:
    """A doc's text with its line breaks read as spaces, as a reader reads a wrapped sentence."""
    return re.sub(r"\s+", " ", path.read_text())


README, LRA_DOC = _prose(ROOT / "README.md"), _prose(ROOT / "docs" / "lra.md")


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return json.loads((LRA / "budget_study.json").read_text())


def _row(rows: list[dict], config: str, arm: str, seed: int) -> dict:
    found = [row for row in rows if row["config"] == config and row["arm_name"] == arm and row["seed"] == seed]
    assert len(found) == 1, (config, arm, seed)
    return found[0]


def _study(name: str) -> dict:
    return yaml.safe_load((STUDIES_DIR / f"{name}.yaml").read_text())


def test_the_digits_studies_page_counts_and_lists_the_shipped_ones():
    digits = sorted(name for name in study_names() if name.startswith("digits"))
    words = {4: "Four", 5: "Five", 6: "Six", 7: "Seven"}[len(digits)]
    assert f"(`num_train`). {words} shipped studies, each" in LRA_DOC
    table = re.findall(r"^\| `(digits\w*)` \|", (ROOT / "docs" / "lra.md").read_text(), flags=re.MULTILINE)
    assert sorted(table) == digits


def test_the_labelled_data_sizes_get_the_same_tokens_and_the_steps_the_docs_state(rows):
    """Equal pretraining tokens at 150, 300 and 600 pictures (the rows), but not equal steps: an epoch's last batch
    is partial, so 150 and 300 pictures take 1,600 SPT steps where 600 take 1,520 (the Trainer's count)."""
    batch = task_preset("digits").batch_size
    steps, tokens = {}, {}
    for config, task in _study("digits_data_size")["tasks"].items():
        pictures = task["task_options"]["num_train"]
        steps[pictures] = phase_steps(pictures, batch, task["experiment"]["pretrain_epochs"], None, 1)[1]
        tokens[pictures] = {row["pretrain_tokens"] for row in rows if row["config"] == config and row["arm"] == "spt"}
    assert len({token for held in tokens.values() for token in held}) == 1
    full = _row(rows, "digits16", "spt_e40", 0)  # the full pool: its pretraining tokens over 40 epochs of 256 pixels
    pool = full["pretrain_tokens"] // (full["pretrain_epochs"] * 16 * 16)
    assert (pool, phase_steps(pool, batch, full["pretrain_epochs"], None, 1)[1]) == (1197, steps[600])
    assert steps[150] == steps[300] != steps[600]
    assert f"{steps[150]:,} SPT steps at 150 and 300 pictures, {steps[600]:,} at 600" in LRA_DOC
    assert (f"SPT {steps[150]:,} steps at 150 and 300 pictures ({math.ceil(150 / batch)} and {math.ceil(300 / batch)} "
            f"batches of {batch} an epoch), {steps[600]:,} at 600 and the full pool") in LRA_DOC
    assert "same optimizer steps" not in LRA_DOC


def test_the_seed_difference_that_moved_between_two_runs_of_one_cell(rows):
    """The same 300-picture cells ran in `digits_data_size` and again in `digits_whole_budget`: SPT minus
    compute-matched scratch moved most in seed 1, and the later run of seeds 1 and 2 is at another commit."""
    def difference(config: str, seed: int) -> float:
        return 100 * (_row(rows, config, "spt", seed)["test_accuracy"]
                      - _row(rows, config, "scratch_compute_matched", seed)["test_accuracy"])

    moved = {seed: difference("digits16_n300_whole_budget", seed) - difference("digits16_n300", seed)
             for seed in (0, 1, 2)}
    seed, most = max(moved.items(), key=lambda item: abs(item[1]))
    assert (seed, round(most, 2)) == (1, 17.75)
    assert f"one seed's difference moved by {most:g} points between two runs of its cell" in LRA_DOC  # in short
    assert (f"by {most:g} between two committed runs of one cell (300 pictures, seed {seed}, SPT minus compute-matched "
            f"scratch: {difference('digits16_n300', seed):+g} in `digits_data_size`, "
            f"{difference('digits16_n300_whole_budget', seed):+g} in `digits_whole_budget`)") in LRA_DOC
    assert "14 points" not in README + LRA_DOC
    for seed in (1, 2):
        assert (_row(rows, "digits16_n300", "spt", seed).get("commit")
                != _row(rows, "digits16_n300_whole_budget", "spt", seed).get("commit"))
    assert "seeds 1 and 2 at another commit and CPU" in README


def test_the_capped_scratch_seed_had_its_best_inside_its_patience():
    """digits16 scratch, seed 0, ran to its 60-epoch cap with its best validation five epochs before it: the cap
    stopped a run that patience had not yet stopped, not one still improving."""
    curve = next(curve for curve in json.loads((LRA / "budget_study_compute.json").read_text())
                 if (curve["config"], curve["arm"], curve["seed"]) == ("digits16", "scratch", 0))
    experiment = _study("digits_length")["experiment"]
    epochs = [epoch for epoch, _ in curve["points"]]
    best_epoch, best = max(curve["points"], key=lambda point: (point[1], -point[0]))
    assert max(epochs) == experiment["finetune_epochs"]
    assert max(epochs) - best_epoch < experiment["early_stopping_patience"]
    assert (f"One scratch seed at 16x16 (seed 0) ran to its {max(epochs):g}-epoch cap, its best validation "
            f"({100 * best:.1f}%) at epoch {best_epoch:g}, inside its patience of "
            f"{experiment['early_stopping_patience']}") in LRA_DOC


def test_resolved_is_nominal_beside_the_reports_count_and_survives_no_correction(rows):
    """The report's paired intervals (`budget_study.md`'s first line) as the docs count them; no interval survives
    a Bonferroni correction over them, the ALiBi ones included; each arm paired with ALiBi is one of three."""
    evidence = study_evidence(rows, shipped_study_configs())
    shown = [entry["difference"] for entry in (*evidence["paired"], *evidence["pooled"])
             if entry["difference"].interval is not None]
    excluding = [difference for difference in shown if difference.resolved]
    printed = len(shown)
    assert (LRA / "budget_study.md").read_text().startswith(
        f"# Budget study\n\nPaired by seed: {printed} paired intervals, {len(excluding)} exclude 0")
    smallest = min(difference.p_value for difference in excluding)
    assert smallest > 0.05 / printed
    assert f"as {len(excluding)} of the report's {printed} do ({printed / 20:.1f} would by chance)" in README
    assert (f"as {len(excluding)} of the {printed} in [budget_study.md](lra/budget_study.md) do (about "
            f"{printed / 20:.1f} would by chance); none survives a correction over the {printed}") in LRA_DOC
    assert (f"prints {printed} paired intervals and {len(excluding)} exclude 0, where about {printed / 20:.1f} would "
            f"by chance were every true difference 0; none survives a Bonferroni correction over the {printed} (the "
            f"smallest p, {smallest:.4f}, against 0.05 / {printed} = {0.05 / printed:.5f})") in LRA_DOC
    alibi = [entry for entry in evidence["paired"]
             if entry["config"] == "digits16_mechanism" and entry["control"] == "scratch_alibi"]
    assert [entry["arm"] for entry in alibi] == ["spt", "spt_qk", "spt_frozen_attention"]
    assert all(entry["difference"].resolved and entry["difference"].ahead == 3 for entry in alibi)
    assert "the three arms paired with it, SPT, its W_Q/W_K and SPT with attention frozen" in LRA_DOC
    assert "every SPT arm is ahead of it" not in LRA_DOC


@pytest.mark.parametrize("doc, start, end", [("README.md", "## Results", "## Layout"),
                                             ("docs/lra.md", "## What is resolved, in short", "## Real pictures"),
                                             ("docs/lra.md", "## Real pictures", "### Re-running a committed cell")])
def test_every_resolved_of_the_digits_results_says_nominal_or_not(doc, start, end):
    """In the digits results every "resolved" is a negative ("not resolved", "no ... is resolved") or says it is
    nominal ("nominally resolved", "resolved (nominal)"): an unadjusted 95% interval, which the report counts. The
    section's own heading and link targets (a heading's anchor) are not sentences."""
    text = re.sub(r"\]\([^)]*\)", "]", _prose(ROOT / doc))
    section = text[text.index(start) + len(start):text.index(end)]
    bare = [section[max(0, match.start() - 50):match.end()]
            for match in re.finditer(r"resolv\w*", section, flags=re.IGNORECASE)
            if not re.search(r"\b(?:not|no|none|neither)\b|nominal", section[max(0, match.start() - 50):match.start()],
                             flags=re.IGNORECASE)
            and not section[match.start() - 1:match.start()] == '"'
            and not section[match.end():match.end() + 10] == " (nominal)"]
    assert bare == []


def _interval_rows(report: str) -> dict[str, list[float]]:
    """A committed report's paired rows: each 95% interval as printed, with the means printed beside it."""
    means: dict[str, list[float]] = {}
    for line in report.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        for index, cell in enumerate(cells):
            if re.fullmatch(r"\[[+-]?[\d.]+, [+-]?[\d.]+\]", cell):  # mean | sd | interval, or a declared test's
                mean = cells[index - 2] if re.fullmatch(r"[+-]?[\d.]+", cells[index - 2]) else cells[index - 1]
                means.setdefault(cell, []).append(float(mean))  # mean | interval
    return means


def test_the_readme_results_lines_quote_the_reports_intervals():
    """Each study's line in the README's results table quotes paired rows of the committed reports (every budget
    study report under docs/lra and the LRA suite's): every "mean [low, high]" is a printed interval with that mean (to the rounding of
    the line), and a line says "resolved (nominal)" exactly when one of its intervals excludes 0."""
    reports = [*sorted(LRA.glob("**/budget_study.md")), LRA / "lra_results.md"]  # the pilots' own folders too
    printed = _interval_rows("".join(report.read_text() for report in reports))
    text = (ROOT / "README.md").read_text()
    lines = [line for line in text[text.index("## Results"):text.index("## Layout")].splitlines()
             if line.startswith("| [")]
    assert len(lines) >= 10
    quoted = 0
    for line in lines:
        excludes = []
        for mean, low, high in re.findall(r"([+-][\d.]+)\*{0,2} \[([+-]?[\d.]+), ([+-]?[\d.]+)\]", line):
            means = printed.get(f"[{low}, {high}]", [])
            assert any(abs(float(mean) - value) <= 0.051 for value in means), (line[:60], mean, low, high, means)
            excludes.append(float(low) > 0 or float(high) < 0)
            quoted += 1
        assert line.rstrip(" |").rsplit("|", 1)[-1].strip().startswith("resolved (nominal)") == any(excludes), line
    assert quoted >= 15


def test_the_compute_figures_sit_in_their_studys_section_after_a_compute_paragraph():
    """Each validation-against-compute figure of the digits studies (docs/lra.md) sits in the section of a study
    that ran its configuration, right after a paragraph on accuracy against compute, not after a test result
    about another study (the README, which once showed some after `digits_whole_budget`'s result, shows none)."""
    configs = shipped_study_configs()
    text = (ROOT / "docs" / "lra.md").read_text()
    part = text[text.index("## Real pictures"):text.index("### Re-running a committed cell")]
    figure = re.compile(r"^!\[[^\]]*\]\(lra/budget_study_compute_(\w+)\.png\)$")
    shown = 0
    for section in re.split(r"^### ", part, flags=re.MULTILINE)[1:]:
        study = re.search(r"\(`(digits\w*)`\)", section.splitlines()[0])
        paragraphs = section.split("\n\n")
        for number, paragraph in enumerate(paragraphs):
            names = [figure.match(line) for line in paragraph.strip().splitlines()]
            if not names or not all(names):
                continue
            assert study, section.splitlines()[0]
            assert {name.group(1) for name in names} <= set(configs[study.group(1)]), (study.group(1), paragraph)
            assert re.search(r"against compute|FLOPs", paragraphs[number - 1], flags=re.IGNORECASE), paragraph
            shown += len(names)
    assert shown == len(re.findall(r"^!\[[^\]]*\]\(lra/budget_study_compute_digits", part, flags=re.MULTILINE)) >= 9
    assert "budget_study_compute_" not in (ROOT / "README.md").read_text()
