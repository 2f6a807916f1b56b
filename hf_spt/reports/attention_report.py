"""Each arm's attention after fine-tuning, as a budget study reports it: `budget_study_attention.{json,png}` and a
table of `budget_study.md`'s exploratory part.

Rows are `experiments.suites.budget_study.attention_rows`'s, one per finished cell: its configuration, arm and
seed, the near-k ratio of every layer and every layer's head-mean proximity profile (`analysis.attention_probe`).
The table gives each configuration's arms with the ratio by layer averaged over seeds; the figure draws, per layer,
each arm's mean profile (attention A[i, i + d] against the signed distance d), one column per configuration, so a
configuration and its permuted twin stand side by side: a diagonal band is a peak at d = 0 and its neighbours.
Exploratory: nothing here is declared.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..analysis.plotting import saved_figure
from ..atomic_files import write_json
from .arm_labels import arm_colour, config_words

ATTENTION_JSON_NAME = "budget_study_attention.json"
ATTENTION_PLOT_NAME = "budget_study_attention.png"


def _by_arm(rows: Sequence[Mapping[str, Any]], config: str) -> dict[str, list[Mapping[str, Any]]]:
    """A configuration's rows grouped by arm name, in first-seen order."""
    found: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row["config"] == config:
            found.setdefault(row["arm_name"], []).append(row)
    return found


def _layer_means(rows: Sequence[Mapping[str, Any]], key: str) -> list[Any]:
    """Per layer, the mean over `rows` (seeds) of `key` (a number per layer, or a profile per layer)."""
    layers = zip(*(row[key] for row in rows))
    if key == "near_ratio_by_layer":
        return [statistics.fmean(values) for values in layers]
    return [[statistics.fmean(points) for points in zip(*profiles)] for profiles in layers]


def attention_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The exploratory table of each configuration's arms after fine-tuning (module docstring); [] without rows."""
    if not rows:
        return []
    near = rows[0]["near"]
    lines = ["## Attention after fine-tuning (exploratory)", "",
             f"Each arm's fine-tuned model on {rows[0]['num_examples']} validation inputs: near-{near} ratio per layer "
             f"(attention mass within |i - j| <= {near} over uniform attention's; 1 = no preference for neighbours), "
             f"the mean over seeds; profiles in {ATTENTION_PLOT_NAME}.", "",
             f"| configuration | arm | seeds | near-{near} ratio by layer |", "|---|---|---|---|"]
    for config in dict.fromkeys(row["config"] for row in rows):
        for arm, found in _by_arm(rows, config).items():
            ratios = ", ".join(f"{ratio:.2f}" for ratio in _layer_means(found, "near_ratio_by_layer"))
            lines.append(f"| {config} | {arm} | {', '.join(str(row['seed']) for row in found)} | {ratios} |")
    return [*lines, ""]


def plot_attention(rows: Sequence[Mapping[str, Any]], path: Path, titles: Mapping[str, str] | None = None) -> None:
    """`budget_study_attention.png`: a row of panels per layer, a column per configuration, each arm's profile
    (mean over seeds) in its colour (module docstring)."""
    configs = list(dict.fromkeys(row["config"] for row in rows))
    depth = max(len(row["near_ratio_by_layer"]) for row in rows)
    with saved_figure(path, nrows=depth, ncols=len(configs), figsize=(6.5 * len(configs), 3.6 * depth),
                      squeeze=False) as (_, axes):
        for column, config in enumerate(configs):
            for index, (arm, found) in enumerate(_by_arm(rows, config).items()):
                for layer, profile in enumerate(_layer_means(found, "profile_by_layer")):
                    axes[layer][column].plot(found[0]["distances"], profile, marker=".", color=arm_colour(arm, index),
                                             label=f"{arm} ({len(found)} seed{'s' * (len(found) > 1)})")
            for layer in range(depth):
                axis = axes[layer][column]
                axis.set(xlabel="signed distance d = j - i", ylabel="mean attention A[i, i + d]",
                         title=f"{config_words(config, titles)}: layer {layer}")
                axis.legend(fontsize=8)


def write_attention_report(rows: Sequence[Mapping[str, Any]], shown: Sequence[Mapping[str, Any]], output_dir: Path,
                           titles: Mapping[str, str] | None = None) -> None:
    """Write every row (`ATTENTION_JSON_NAME`: the record, as `budget_study.json` keeps every row, so a folder joined
    later with `--combine` still has each seed's attention) and, where `shown` (the rows the report may show) has any,
    the figure of those."""
    write_json(output_dir / ATTENTION_JSON_NAME, list(rows))
    if shown:
        plot_attention(shown, output_dir / ATTENTION_PLOT_NAME, titles)


__all__ = ["ATTENTION_JSON_NAME", "ATTENTION_PLOT_NAME", "attention_lines", "plot_attention", "write_attention_report"]
