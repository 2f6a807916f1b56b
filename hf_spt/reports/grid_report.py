"""Tables and plot of an ablation grid: `results.csv` (one row per cell), `results.md`, `results.png`.

`results.md` first names each task whose rows mix CPU numerics (portable and native), then gives, per task and arm, the test accuracy's mean and standard deviation over
seeds and, when the grid has arms named `scratch` and `spt`, the share of SPT's gain over
scratch that the arm recovers: (arm - scratch) / (spt - scratch), from the seed means; then every arm minus
scratch, and SPT minus compute-matched scratch, paired by seed (`paired_seeds`: per-seed differences, their
mean, sd, 95% interval and verdict), with how many intervals it prints and how many exclude 0.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from ..analysis.plotting import saved_figure
from ..atomic_files import write_text
from .report_sources import numerics_notes
from .paired_seeds import PAIRED_NOTE, STD_NOTE, interval_count, paired_difference, paired_table
from .seed_tables import mean_std_cell, seed_scores, summarize

RESULTS_CSV_NAME = "results.csv"
RESULTS_MD_NAME = "results.md"
RESULTS_PLOT_NAME = "results.png"
SCRATCH_ARM = "scratch"
SPT_ARM = "spt"
COMPUTE_MATCHED_ARM = "scratch_compute_matched"


def gain_recovered(arms: dict[str, dict[str, float]], arm: str) -> float | None:
    """(arm - scratch) / (spt - scratch) from seed means; None without both reference arms or a gain."""
    if SCRATCH_ARM not in arms or SPT_ARM not in arms:
        return None
    gain = arms[SPT_ARM]["mean"] - arms[SCRATCH_ARM]["mean"]
    return None if gain <= 0 else (arms[arm]["mean"] - arms[SCRATCH_ARM]["mean"]) / gain


def markdown_table(summary: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = []
    for task, arms in summary.items():
        lines += [f"Task: {task}", "", "| arm | test accuracy (mean ± std) | seeds | share of SPT's gain |",
                  "|---|---|---|---|"]
        for arm, stats in arms.items():
            share = gain_recovered(arms, arm)
            share_text = "n/a" if share is None else f"{100 * share:.0f}%"
            lines.append(f"| {arm} | {mean_std_cell(stats, 100)} | {stats['n']} | {share_text} |")
        lines.append("")
    return "\n".join(lines)


def paired_markdown(rows: list[dict[str, Any]]) -> str:
    """Per task, every arm minus scratch and SPT minus compute-matched scratch, paired by seed; "" without a pair."""
    table = []
    for task, scores in seed_scores(rows).items():
        pairs = [(arm, SCRATCH_ARM) for arm in scores if arm != SCRATCH_ARM]
        pairs += [(SPT_ARM, COMPUTE_MATCHED_ARM)] if SPT_ARM in scores and COMPUTE_MATCHED_ARM in scores else []
        for arm, control in pairs:
            difference = paired_difference(scores[arm], scores.get(control, {}))
            if difference is not None:
                table.append(([task, arm, control], difference))
    if not table:
        return ""
    count = interval_count((cells[2], difference) for cells, difference in table)
    return "\n".join([f"{PAIRED_NOTE} {count}", "", *paired_table(["task", "arm", "control"], table), ""])


def bar_plot(summary: dict[str, dict[str, dict[str, float]]], path: Path) -> None:
    """One panel per task: a bar per arm (mean test accuracy), error bars one std over seeds."""
    width = max(6, 0.7 * max(map(len, summary.values()))) * len(summary)
    with saved_figure(path, dpi=120, ncols=len(summary), figsize=(width, 4), squeeze=False) as (_, axes):
        for axis, (task, arms) in zip(axes[0], summary.items()):
            names = list(arms)
            means = [100 * arms[a]["mean"] for a in names]
            stds = [100 * arms[a]["std"] for a in names]
            axis.bar(range(len(names)), means, yerr=stds, capsize=3, color="tab:blue")
            if SCRATCH_ARM in arms:
                axis.axhline(100 * arms[SCRATCH_ARM]["mean"], color="gray", linestyle="--", linewidth=1, label="scratch")
                axis.legend(loc="lower right")
            axis.set_xticks(range(len(names)), names, rotation=45, ha="right")
            axis.set_ylabel("test accuracy (%)")
            axis.set_ylim(min(means) - max(stds) - 5, 100)
            axis.set_title(task)


def write_report(rows: list[dict[str, Any]], output_dir: Path) -> None:
    """Write results.csv, results.md and (when there are scores) results.png into `output_dir`."""
    output_dir.mkdir(parents=True, exist_ok=True)
    if rows:
        table = io.StringIO(newline="")
        # every row's keys (a row of a cell run before provenance was recorded lacks `commit` and `versions`);
        # a mapping (`versions`) as JSON
        writer = csv.DictWriter(table, fieldnames=list(dict.fromkeys(key for row in rows for key in row)))
        writer.writeheader()
        writer.writerows({key: json.dumps(value) if isinstance(value, dict) else value for key, value in row.items()}
                         for row in rows)
        write_text(output_dir / RESULTS_CSV_NAME, table.getvalue())
    summary = summarize(rows)
    paired = paired_markdown(rows)
    write_text(output_dir / RESULTS_MD_NAME, numerics_notes(rows, "task", "task") + markdown_table(summary)
               + (f"\n{STD_NOTE}.\n\n{paired}" if summary else ""))
    if summary:
        bar_plot(summary, output_dir / RESULTS_PLOT_NAME)


__all__ = ["RESULTS_CSV_NAME", "RESULTS_MD_NAME", "RESULTS_PLOT_NAME", "COMPUTE_MATCHED_ARM", "gain_recovered",
           "markdown_table", "paired_markdown", "bar_plot", "write_report"]
