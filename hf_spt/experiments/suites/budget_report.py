"""The budget study's report: `budget_study.{json,md,png}` and `budget_study_checkpoints.json`.

`budget_study.png`, per configuration (one row of panels each): test accuracy (0-100%) against
pretraining tokens (SPT, compute-matched scratch and any other arm per budget, scratch and the
control arms as horizontal lines), SPT's gain over each scratch arm, and per SPT checkpoint the MLM loss beside the unigram
loss and the near-2 proximity ratio of every layer: whether pretraining left the frequency plateau
and turned attention local, next to whether accuracy followed. Token axes are logarithmic; arms are named and
coloured as `arm_labels` says. `budget_study.md` adds SPT's differences paired by seed (`paired_seeds`), and
`budget_study_paired.png` draws them with their 95% intervals for each study of several configurations.
"""

from __future__ import annotations

import json
import statistics
import textwrap
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from ...analysis.plotting import saved_figure
from ...atomic_files import write_json, write_text
from ...errors import UserInputError
from ...runs.folder import read_json
from ...runs.provenance import PROVENANCE_KEYS
from .arm_labels import arm_colour, arm_words, config_words
from .paired_seeds import PAIRED_NOTE, STD_NOTE, paired_table
from .report_sources import join_by_config
from .seed_tables import mean_std_cell, one_decimal

STUDY_JSON_NAME = "budget_study.json"
CHECKPOINTS_JSON_NAME = "budget_study_checkpoints.json"
STUDY_MD_NAME = "budget_study.md"
STUDY_PLOT_NAME = "budget_study.png"
PAIRED_PLOT_NAME = "budget_study_paired.png"
_PAIRED_CONTROLS = {"scratch": "o", "scratch_compute_matched": "s"}  # the controls drawn, by marker


def _pct(stats: dict[str, float] | None) -> str:
    return mean_std_cell(stats, 100, seeds="()")


def _points(value: float | None) -> str:
    if value is None:
        return "n/a"
    text = one_decimal(100 * value)
    return text if text.startswith("-") else f"+{text}"


def _checkpoint_means(checkpoints: list[dict[str, Any]], config: str) -> dict[int, dict[int, dict[str, Any]]]:
    """{depth: {pretrain tokens: seed means of MLM loss, unigram loss and each layer's proximity ratio}} of a config;
    checkpoints of different depths are never averaged together."""
    groups: dict[int, dict[int, list[dict[str, Any]]]] = {}
    for row in checkpoints:
        if row["config"] == config:
            groups.setdefault(row["num_layers"], {}).setdefault(row["pretrain_tokens"], []).append(row)
    return {depth: {tokens: {"mlm_loss": statistics.fmean(r["mlm_loss"] for r in runs),
                             "unigram_loss": statistics.fmean(r["unigram_loss"] for r in runs),
                             "near_ratio_by_layer": [statistics.fmean(layers) for layers in
                                                     zip(*(r["near_ratio_by_layer"] for r in runs))],
                             "n": len(runs)}
                    for tokens, runs in sorted(by_tokens.items())}
            for depth, by_tokens in sorted(groups.items(), reverse=True)}


def _by_depth(probes: dict[int, dict[int, dict[str, Any]]], tokens: int,
              text: Callable[[dict[str, Any]], str]) -> str:
    """`text(probe)` of each depth's checkpoint at `tokens`, prefixed by the depth when the config has several."""
    found = [(depth, by_tokens[tokens]) for depth, by_tokens in probes.items() if tokens in by_tokens]
    if not found:
        return "n/a"
    return "; ".join(text(probe) if len(probes) == 1 else f"{depth} layer{'s' * (depth > 1)}: {text(probe)}"
                     for depth, probe in found)


def _other_budget_arms(entry: dict[str, Any]) -> list[str]:
    """The arm kinds a configuration has per pretraining budget besides SPT and compute-matched scratch (e.g. SPT
    with frozen attention), sorted."""
    return sorted({arm for budget in entry["budgets"] for arm in budget
                   if isinstance(budget[arm], dict) and arm not in ("spt", "scratch_compute_matched")})


def _paired_lines(comparisons: list[dict[str, Any]], pooled: list[dict[str, Any]]) -> list[str]:
    """A configuration's paired table (`paired_seeds`): one row per arm with pretrained weights and control, then
    SPT pooled over the configuration's budgets."""
    rows = [([f"{c['pretrain_epochs']:g}", c["arm"], c["control"]], c["difference"]) for c in comparisons]
    rows += [(["all", "spt", p["control"]], p["difference"]) for p in pooled]
    return ["", f"{PAIRED_NOTE} \"all\": every budget's pairs pooled (not independent: see the end).", "",
            *paired_table(["SPT epochs", "arm", "control"], rows)]


def _pooled_study_lines(pooled: list[dict[str, Any]]) -> list[str]:
    """SPT pooled over each study's configurations, and why pooled intervals are optimistic."""
    if not pooled:
        return []
    rows = [([p["scope"], ", ".join(p["configs"]), p["control"]], p["difference"]) for p in pooled]
    return ["## Pooled over a study's configurations", "",
            "SPT minus each control, every budget's and configuration's seed pairs of one study as one sample. Pairs of "
            "one seed share its data split (and, against plain scratch, one scratch run serves every budget), so "
            "they are not independent and a pooled interval is narrower than independent pairs would make it.", "",
            *paired_table(["study", "configurations", "control"], rows), ""]


def study_markdown(summary: dict[str, dict[str, Any]], checkpoints: list[dict[str, Any]],
                   evidence: dict[str, list[dict[str, Any]]]) -> str:
    """One table per configuration: a row per pretraining budget with both controls and the gains, the
    checkpoint's losses and proximity; then scratch and the control arms; then SPT's differences paired by seed
    (`evidence`: `budget_study.study_evidence`'s); last, the pools over a study's configurations."""
    lines = []
    scopes = set(summary)
    for config, entry in summary.items():
        probes = _checkpoint_means(checkpoints, config)
        extra = _other_budget_arms(entry)
        lines += [f"## {config}", "", f"Test accuracy (%), mean ± std (seeds; {STD_NOTE}); gains in points, from seed "
                  "means (the paired table below says which are resolved); MLM and unigram loss on masked validation "
                  "tokens; near-2 ratio per layer (1 = no preference for neighbours).",
                  "", "| SPT epochs | pretraining tokens | SPT | scratch, compute-matched | gain vs scratch | gain vs "
                  "compute-matched | MLM loss / unigram | near-2 ratio by layer |" + "".join(f" {a} |" for a in extra),
                  "|---|---|---|---|---|---|---|---|" + "---|" * len(extra)]
        for budget in entry["budgets"]:
            tokens = budget["budget_tokens"]
            losses = _by_depth(probes, tokens, lambda probe: f"{probe['mlm_loss']:.3f} / {probe['unigram_loss']:.3f}")
            ratios = _by_depth(probes, tokens, lambda probe: ", ".join(f"{r:.2f}" for r in probe["near_ratio_by_layer"]))
            lines.append(f"| {budget['pretrain_epochs']:g} | {budget['budget_tokens']:.2e} | {_pct(budget.get('spt'))} | "
                         f"{_pct(budget.get('scratch_compute_matched'))} | {_points(budget['gain_vs_scratch'])} | "
                         f"{_points(budget['gain_vs_compute_matched'])} | {losses} | {ratios} |"
                         + "".join(f" {_pct(budget.get(a))} |" for a in extra))
        lines += ["", "| arm (no pretraining) | test accuracy |", "|---|---|", f"| scratch | {_pct(entry['scratch'])} |"]
        lines += [f"| {arm} | {_pct(stats)} |" for arm, stats in entry["controls"].items()]
        comparisons = [c for c in evidence["paired"] if c["config"] == config]
        if comparisons:
            lines += _paired_lines(comparisons, [p for p in evidence["pooled"] if p["scope"] == config])
        lines.append("")
    lines += _pooled_study_lines([p for p in evidence["pooled"] if p["scope"] not in scopes])
    return "\n".join(lines)


def plot_study(summary: dict[str, dict[str, Any]], checkpoints: list[dict[str, Any]], path: Path) -> None:
    """`budget_study.png`: four panels per configuration with an SPT budget (module docstring). Arms are named
    and coloured as `arm_labels` says (a control arm's horizontal line in its own colour), legends sit beside their
    panels, and a checkpoint probed at one budget is drawn as a marker, so a single-budget panel shows it."""
    configs = [config for config, entry in summary.items() if entry["budgets"]]
    with saved_figure(path, nrows=len(configs), ncols=4, figsize=(26, 3.8 * len(configs)), squeeze=False) as (_, axes):
        for row, config in zip(axes, configs):
            entry, probes = summary[config], _checkpoint_means(checkpoints, config)
            tokens = [b["budget_tokens"] for b in entry["budgets"]]
            accuracy, gain, loss, proximity = row
            for index, arm in enumerate(("spt", "scratch_compute_matched", *_other_budget_arms(entry))):
                style = {"spt": "o-", "scratch_compute_matched": "s--"}.get(arm, "^:")
                points = [(t, b[arm]) for t, b in zip(tokens, entry["budgets"]) if b.get(arm)]
                if points:
                    accuracy.errorbar([t for t, _ in points], [100 * s["mean"] for _, s in points],
                                      yerr=[100 * s["std"] for _, s in points], fmt=style, capsize=3,
                                      color=arm_colour(arm, index), label=arm_words(arm))
            for index, (arm, stats) in enumerate(({"scratch": entry["scratch"]} | entry["controls"]).items()):
                if stats:
                    accuracy.axhline(100 * stats["mean"], linestyle=":", color=arm_colour(arm, index),
                                     label=arm_words(arm))
            # the whole 0-100 range: two arms that both predict one class differ by a class share, not a gain
            accuracy.set(xscale="log", xlabel="pretraining tokens", ylabel="test accuracy (%)",
                         title=config_words(config), ylim=(0, 100))
            _legend_beside(accuracy)
            for key, label in (("gain_vs_scratch", "SPT - scratch"), ("gain_vs_compute_matched",
                                                                      "SPT - compute-matched scratch")):
                points = [(t, b[key]) for t, b in zip(tokens, entry["budgets"]) if b[key] is not None]
                gain.plot([t for t, _ in points], [100 * g for _, g in points], "o-", label=label)
            gain.axhline(0, color="black", linewidth=0.8)
            gain.set(xscale="log", xlabel="pretraining tokens", ylabel="gain (points, seed means)", title="SPT's gain")
            _legend_beside(gain)
            for depth, by_tokens in probes.items():
                xs, label = list(by_tokens), "" if len(probes) == 1 else f", {depth} layer{'s' * (depth > 1)}"
                loss.plot(xs, [p["mlm_loss"] for p in by_tokens.values()], "o-", label=f"MLM loss{label}")
                loss.plot(xs, [p["unigram_loss"] for p in by_tokens.values()], "k--", marker="x", markersize=8,
                          label=f"unigram loss{label}")
                for layer, values in enumerate(zip(*(p["near_ratio_by_layer"] for p in by_tokens.values()))):
                    proximity.plot(xs, values, "o-", label=f"layer {layer}{label}")
            proximity.axhline(1, color="black", linewidth=0.8)
            loss.set(xscale="log", xlabel="pretraining tokens", ylabel="masked-token loss", title="SPT checkpoint")
            _legend_beside(loss)
            proximity.set(xscale="log", xlabel="pretraining tokens", ylabel="near-2 attention ratio",
                          title="attention proximity")
            _legend_beside(proximity)


def plot_paired(evidence: dict[str, list[dict[str, Any]]], path: Path) -> None:
    """`budget_study_paired.png`: per study of several configurations (a pooled scope), SPT minus each scratch
    control paired by seed, per configuration and SPT budget and pooled, as the mean with its 95% interval (one
    seed: the point alone). A gain is resolved where the bar clears the zero line."""
    scopes = [entry for entry in evidence["pooled"] if len(entry["configs"]) > 1]
    studies = list(dict.fromkeys(entry["scope"] for entry in scopes))
    with saved_figure(path, nrows=len(studies), ncols=1, figsize=(11, 3.6 * len(studies)), squeeze=False) as (_, axes):
        for (axis,), study in zip(axes, studies):
            configs = next(entry["configs"] for entry in scopes if entry["scope"] == study)
            for offset, (control, marker) in zip((-0.12, 0.12), _PAIRED_CONTROLS.items()):
                chosen = [c for c in evidence["paired"] if c["config"] in configs and c["arm"] == "spt"
                          and c["control"] == control]
                budgets = {config: sum(c["config"] == config for c in chosen) for config in configs}
                labels = [config_words(c["config"]) + (f", {c['pretrain_epochs']:g} SPT epochs"
                                                       if budgets[c["config"]] > 1 else "") for c in chosen]
                differences = [c["difference"] for c in chosen]
                differences += [entry["difference"] for entry in scopes
                                if entry["scope"] == study and entry["control"] == control]
                labels += ["pooled"] * (len(differences) - len(labels))
                for index, difference in enumerate(differences):
                    interval = difference.interval
                    error = None if interval is None else [[100 * (difference.mean - interval[0])],
                                                           [100 * (interval[1] - difference.mean)]]
                    axis.errorbar([index + offset], [100 * difference.mean], yerr=error, fmt=marker, capsize=3,
                                  color=arm_colour(control, 0), label=arm_words(control) if index == 0 else None)
                axis.set_xticks(range(len(labels)), [textwrap.fill(label, 24) for label in labels], fontsize=8)
            axis.axhline(0, color="black", linewidth=0.8)
            axis.set(ylabel="SPT minus control (points)", title=f"{study}: paired by seed, mean and 95% interval")
            _legend_beside(axis)


def _legend_beside(axis: Any) -> None:
    """The panel's legend to the right of it, where it covers no data."""
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))


def write_study_report(rows: list[dict[str, Any]], checkpoints: list[dict[str, Any]], summary: dict[str, Any],
                       evidence: dict[str, list[dict[str, Any]]], output_dir: Path) -> None:
    """Write the rows, checkpoint probes, tables (with `evidence`, `budget_study.study_evidence`'s) and figure
    into `output_dir`."""
    write_json(output_dir / STUDY_JSON_NAME, rows)
    write_json(output_dir / CHECKPOINTS_JSON_NAME, checkpoints)
    write_text(output_dir / STUDY_MD_NAME, "# Budget study\n\n" + study_markdown(summary, checkpoints, evidence))
    if any(entry["budgets"] for entry in summary.values()):  # a figure of gain against tokens needs a budget
        plot_study(summary, checkpoints, output_dir / STUDY_PLOT_NAME)
    if any(len(entry["configs"]) > 1 for entry in evidence["pooled"]):  # a study of several configurations
        plot_paired(evidence, output_dir / PAIRED_PLOT_NAME)


def combined_reports(folders: list[str | Path], replaced: Collection[str] = (), added: Collection[str] = ()
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows and checkpoint probes of several finished studies' reports, for one report over all their
    configurations; a configuration's rows and probes come from one folder (`report_sources.join_by_config`; a
    configuration in `replaced` from the last folder that holds it, one in `added` from every folder, as other
    seeds of one study)."""
    sources = []
    for folder in map(Path, folders):
        study = read_json(folder / STUDY_JSON_NAME)
        probes = read_json(folder / CHECKPOINTS_JSON_NAME)
        if not isinstance(study, list) or not isinstance(probes, list):
            raise UserInputError(f"{folder} holds no finished budget study report ({STUDY_JSON_NAME} and "
                                 f"{CHECKPOINTS_JSON_NAME} as lists): give the output folder of a run_budget_study.py run.")
        sources.append((folder, [("row", row) for row in study] + [("probe", probe) for probe in probes]))
    held = {entry[1]["config"] for _, entries in sources for entry in entries}
    for flag, named in (("--replace_configs", replaced), ("--add_seeds", added)):
        unknown = [config for config in named if config not in held]
        if unknown:
            raise UserInputError(f"{flag} {','.join(unknown)}: no folder holds such a configuration (they hold "
                                 f"{', '.join(sorted(held))}).")
    joined = join_by_config(sources, lambda entry: entry[1]["config"], lambda entry: entry[1]["seed"],
                            _report_settings, replaced, added)
    return [row for kind, row in joined if kind == "row"], [probe for kind, probe in joined if kind == "probe"]


# What a row or probe measured (or which seed it is, or which code ran it): the rest is what its study set, the
# same for every seed.
_MEASURED = {"seed", "test_accuracy", "eval_accuracy", "seconds", "best_eval_loss", "mlm_loss", "unigram_loss",
             "near_ratio_by_layer", *PROVENANCE_KEYS}


def _report_settings(entry: tuple[str, dict[str, Any]]) -> str:
    kind, values = entry
    return json.dumps([kind, {key: value for key, value in values.items() if key not in _MEASURED}], sort_keys=True)


__all__ = ["STUDY_JSON_NAME", "CHECKPOINTS_JSON_NAME", "STUDY_MD_NAME", "STUDY_PLOT_NAME", "PAIRED_PLOT_NAME",
           "study_markdown", "plot_study", "plot_paired", "write_study_report", "combined_reports"]
