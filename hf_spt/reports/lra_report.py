"""The LRA suite's table: measured arms beside the published numbers, as `lra_results.{json,md,png}`.

One row per task: test accuracy (%) of each of the suite's arms (`experiments.suites.lra.ARMS`), mean ±
std over seeds, with the published from-scratch Transformer and (where published per task) SPT
beside them, then the LRA average row over the LRA tasks that ran (Markov, in the mini suite, is
shown but never averaged). Below it, SPT minus each other arm paired by seed (`paired_seeds`: per-seed
differences, their mean, sd, 95% interval and verdict, and how many intervals exclude 0). A second table
gives the wall time per task and arm (mean over seeds; SPT's includes its pretraining job). The plot shows
the same bars with one-std error bars and the published scratch score as a marker.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ..analysis.plotting import saved_figure
from ..atomic_files import write_json, write_text
from ..tasks.lra_data import LRA_TASKS
from .paired_seeds import PAIRED_NOTE, STD_NOTE, PairedDifference, interval_count, paired_difference, paired_table
from .seed_tables import mean_std_cell, one_decimal, seed_scores, summarize

LRA_JSON_NAME = "lra_results.json"
LRA_MD_NAME = "lra_results.md"
LRA_PLOT_NAME = "lra_results.png"
PRETRAINING_PLOT_NAME = "lra_pretraining.png"
SPT_ARM = "spt"

# Published test accuracy (%). Scratch: the vanilla Transformer of the LRA leaderboard (Tay et al., "Long Range
# Arena", ICLR 2021, Table 1); its average is over these five tasks.
PUBLISHED_SCRATCH = {"listops": 36.37, "text": 64.27, "retrieval": 57.46, "image": 42.44, "pathfinder": 71.40}
PUBLISHED_SCRATCH_AVERAGE = 54.39
# SPT: Amos, Berant & Gupta, "Never Train from Scratch" (ICLR 2024, arXiv 2310.02980). Per-task numbers of the
# vanilla (absolute-position) Transformer with masked SPT are not copied here (None: shown "n/a") rather than
# guessed; they report that SPT lifts it by about 30 points on the LRA average, and that a rotary Transformer
# with masked SPT averages 86.2 (S4 from scratch: 86.1).
PUBLISHED_SPT: dict[str, float | None] = {task: None for task in LRA_TASKS}
PUBLISHED_SPT_NOTE = ("Amos et al. (ICLR 2024): masked SPT lifts the vanilla Transformer by about 30 points on the "
                      "LRA average; rotary Transformer + masked SPT averages 86.2 (S4 from scratch 86.1). Per-task "
                      "SPT numbers are left n/a here rather than guessed.")


def wall_seconds(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """{task: {arm: mean seconds over seeds}}; a row's `seconds` must already include its pretraining job."""
    times: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        if row.get("seconds") is not None:
            times.setdefault(row["task"], {}).setdefault(row["arm"], []).append(float(row["seconds"]))
    return {task: {arm: statistics.fmean(values) for arm, values in arms.items()} for task, arms in times.items()}


def lra_table(rows: list[dict[str, Any]], arms: list[str] | None = None) -> dict[str, Any]:
    """The table as data: the arms (`arms`, the suite's, so that an arm without rows shows "–"; default: the rows'),
    per task the arms' mean/std/n (%), wall seconds, the published numbers; and the average."""
    summary, seconds = summarize(rows), wall_seconds(rows)
    arm_order = list(arms) if arms is not None else list(dict.fromkeys(row["arm"] for row in rows))
    order = [*LRA_TASKS, *sorted(set(summary) - set(LRA_TASKS))]  # LRA's order, then the others (Markov)
    tasks: dict[str, Any] = {}
    for task, arms in sorted(summary.items(), key=lambda item: order.index(item[0])):
        tasks[task] = {
            "arms": {arm: {"mean": 100 * s["mean"], "std": 100 * s["std"], "n": s["n"],
                           "seconds": seconds.get(task, {}).get(arm)} for arm, s in arms.items()},
            "published_scratch": PUBLISHED_SCRATCH.get(task), "published_spt": PUBLISHED_SPT.get(task),
        }
    lra = [task for task in tasks if task in LRA_TASKS]
    average: dict[str, Any] = {"tasks": lra, "arms": {}}
    for arm in arm_order:
        means = [tasks[task]["arms"][arm]["mean"] for task in lra if arm in tasks[task]["arms"]]
        if lra and len(means) == len(lra):
            average["arms"][arm] = statistics.fmean(means)
    published = [PUBLISHED_SCRATCH[task] for task in lra]
    average["published_scratch"] = (PUBLISHED_SCRATCH_AVERAGE if len(lra) == len(LRA_TASKS)
                                    else statistics.fmean(published) if published else None)
    average["published_spt"] = None
    return {"arms": arm_order, "tasks": tasks, "average": average, "published_spt_note": PUBLISHED_SPT_NOTE,
            "paired": paired_rows(rows, arm_order, list(tasks))}


def paired_rows(rows: list[dict[str, Any]], arms: list[str], tasks: list[str]) -> list[dict[str, Any]]:
    """Per task of `tasks` (in that order), SPT minus each other arm of `arms`, paired by seed: {"task", "arm",
    "control", and `PairedDifference.to_dict` in points}."""
    paired, by_task = [], seed_scores(rows)
    for task, scores in ((task, by_task[task]) for task in tasks if task in by_task):
        for control in (arm for arm in arms if arm != SPT_ARM and arm in scores and SPT_ARM in scores):
            difference = paired_difference(scores[SPT_ARM], scores[control])
            if difference is not None:
                paired.append({"task": task, "arm": SPT_ARM, "control": control, **difference.to_dict(100)})
    return paired


def _cell(stats: dict[str, Any] | None) -> str:
    return mean_std_cell(stats, seeds="n=", missing="–")


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def markdown(table: dict[str, Any]) -> str:
    """Accuracy table (with the average row) and wall-time table, then the published SPT note."""
    arm_order = table["arms"]
    lines = [f"| task | {' | '.join(arm_order)} | published scratch | published SPT |",
             "|---|" + "---|" * (len(arm_order) + 2)]
    for task, entry in table["tasks"].items():
        lines.append(f"| {task} | " + " | ".join(_cell(entry["arms"].get(arm)) for arm in arm_order)
                     + f" | {_number(entry['published_scratch'])} | {_number(entry['published_spt'])} |")
    average = table["average"]
    if average["tasks"]:
        label = f"average ({len(average['tasks'])} LRA tasks)"
        values = ["–" if arm not in average["arms"] else one_decimal(average["arms"][arm]) for arm in arm_order]
        lines.append(f"| {label} | " + " | ".join(values)
                     + f" | {_number(average['published_scratch'])} | {_number(average['published_spt'])} |")
    lines += ["", f"Test accuracy (%), mean ± std (n = seeds); {STD_NOTE}.", ""]
    if table["paired"]:
        rows = [([entry["task"], entry["arm"], entry["control"]], PairedDifference.from_dict(entry))
                for entry in table["paired"]]
        count = interval_count((cells[2], difference) for cells, difference in rows)
        lines += [f"{PAIRED_NOTE} {count}", "", *paired_table(["task", "arm", "control"], rows, scale=1.0)]
    lines += ["", "Wall time per task and arm (seconds, mean over seeds; spt includes its pretraining):", "",
              "| task | " + " | ".join(arm_order) + " |", "|---|" + "---|" * len(arm_order)]
    for task, entry in table["tasks"].items():
        times = [entry["arms"].get(arm, {}).get("seconds") for arm in arm_order]
        lines.append(f"| {task} | " + " | ".join("–" if t is None else f"{t:.0f}" for t in times) + " |")
    lines += ["", table["published_spt_note"], ""]
    return "\n".join(lines)


def plot(table: dict[str, Any], path: Path) -> None:
    """Grouped bars (arm means, one-std error bars) per task, the published scratch score as a black marker."""
    tasks, arm_order = list(table["tasks"]), table["arms"]
    width = 0.8 / len(arm_order)
    with saved_figure(path, dpi=120, figsize=(max(6, 1.8 * len(tasks)), 4)) as (_, axis):
        for k, arm in enumerate(arm_order):
            stats = [table["tasks"][task]["arms"].get(arm) for task in tasks]
            positions = [i + (k - (len(arm_order) - 1) / 2) * width for i in range(len(tasks))]
            axis.bar(positions, [s["mean"] if s else 0 for s in stats], width, yerr=[s["std"] if s else 0 for s in stats],
                     capsize=3, label=arm)
        published = [(i, table["tasks"][task]["published_scratch"]) for i, task in enumerate(tasks)]
        published = [(i, value) for i, value in published if value is not None]
        if published:
            axis.scatter(*zip(*published), marker="_", s=400, color="black", zorder=3, label="published scratch")
        axis.set_xticks(range(len(tasks)), tasks)
        axis.set_ylabel("test accuracy (%)")
        axis.set_ylim(0, 100)
        axis.legend(loc="lower right", fontsize="small")


# {task: {seed: [(epoch, validation MLM loss)...]}}, every list with at least one point
# (`experiments.suites.lra.pretraining_curves`)
Curves = dict[str, dict[int, list[tuple[float, float]]]]


def pretraining_markdown(curves: Curves) -> str:
    """Per task: SPT's validation MLM loss at its first and best evaluation (mean over seeds) and the epochs run,
    so a reader sees whether pretraining moved at all (the curves: `lra_pretraining.png`)."""
    lines = ["SPT pretraining, validation MLM loss (mean over seeds; curves in lra_pretraining.png):", "",
             "| task | first evaluation | best | epochs | seeds |", "|---|---|---|---|---|"]
    for task, seeds in curves.items():
        runs = list(seeds.values())
        first = statistics.fmean(points[0][1] for points in runs)
        best = statistics.fmean(min(loss for _, loss in points) for points in runs)
        lines.append(f"| {task} | {first:.3f} | {best:.3f} | {max(p[-1][0] for p in runs):g} | {len(runs)} |")
    return "\n".join(lines + [""])


def plot_pretraining(curves: Curves, path: Path) -> None:
    """One panel per task: validation MLM loss against epoch, one line per seed."""
    tasks = list(curves)
    with saved_figure(path, dpi=120, ncols=len(tasks), figsize=(3.2 * len(tasks), 3), squeeze=False) as (_, axes):
        for axis, task in zip(axes[0], tasks):
            for seed, points in sorted(curves[task].items()):
                axis.plot(*zip(*points), marker=".", label=f"seed {seed}")
            axis.set_title(task)
            axis.set_xlabel("epoch")
            axis.legend(fontsize="small")
        axes[0][0].set_ylabel("validation MLM loss")


def write_lra_report(rows: list[dict[str, Any]], output_dir: Path, curves: Curves | None = None,
                     arms: list[str] | None = None) -> dict[str, Any]:
    """Write lra_results.json (the table, the rows and SPT's curves), .md and (with scores) .png, and with curves
    lra_pretraining.png; return the table (`arms`: as `lra_table`'s)."""
    table = lra_table(rows, arms)
    curves = curves or {}
    curves = {task: curves[task] for task in [*table["tasks"], *curves] if task in curves}  # the table's task order
    write_json(output_dir / LRA_JSON_NAME, {**table, "rows": rows, "pretraining_curves": curves})
    text = markdown(table) + ("\n" + pretraining_markdown(curves) if curves else "")
    write_text(output_dir / LRA_MD_NAME, text)
    if table["tasks"]:
        plot(table, output_dir / LRA_PLOT_NAME)
    if curves:
        plot_pretraining(curves, output_dir / PRETRAINING_PLOT_NAME)
    return table


__all__ = ["LRA_JSON_NAME", "LRA_MD_NAME", "LRA_PLOT_NAME", "PRETRAINING_PLOT_NAME", "PUBLISHED_SCRATCH",
           "PUBLISHED_SCRATCH_AVERAGE", "PUBLISHED_SPT", "wall_seconds", "lra_table", "paired_rows", "markdown", "pretraining_markdown",
           "plot", "plot_pretraining", "write_lra_report"]
