"""The budget study's report: `budget_study.{json,md,png}` and `budget_study_checkpoints.json`.

`budget_study.png`, per configuration (one row of panels each): test accuracy (0-100%) against
pretraining tokens (SPT, compute-matched scratch and any other arm per budget, scratch and the
control arms as horizontal lines), SPT's gain over each scratch arm, and per SPT checkpoint the MLM loss beside the unigram
loss and the near-2 proximity ratio of every layer: whether pretraining left the frequency plateau
and turned attention local, next to whether accuracy followed. Token axes are logarithmic; arms are named and
coloured as `arm_labels` says. `budget_study.md` adds SPT's differences paired by seed (`paired_seeds`; pools of
several budgets or configurations with the seed as the unit) and how many of its intervals exclude 0, and
`budget_study_paired.png` draws them against each scratch control a configuration has (plain, compute-matched and,
where a study trains it, compute-matched given SPT's whole budget), each seed's difference beside the mean and its 95%
interval: the README's configurations and pools (`DOCS_PANELS`), and any other study of several configurations.
"""

from __future__ import annotations

import statistics
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.plotting import saved_figure
from ..atomic_files import write_json, write_text
from .arm_labels import arm_colour, arm_words, config_words
from .attention_report import attention_lines, write_attention_report
from .paired_seeds import PAIRED_NOTE, STD_NOTE, PairedDifference, interval_count, paired_table
from .preregistration import EXPLORATORY_NOTE, Preregistration, preregistered_lines, withheld_units
from .report_sources import numerics_notes
from .seed_tables import mean_std_cell, one_decimal
from .study_evidence import study_evidence, summarize_study

STUDY_JSON_NAME = "budget_study.json"
CHECKPOINTS_JSON_NAME = "budget_study_checkpoints.json"
STUDY_MD_NAME = "budget_study.md"
STUDY_PLOT_NAME = "budget_study.png"
PAIRED_PLOT_NAME = "budget_study_paired.png"
# the controls drawn where a row has them, by marker: a column titled by a study of scratch given SPT's whole budget
# draws that contrast, not only the plain and patient controls beside it
_PAIRED_CONTROLS = {"scratch": "o", "scratch_compute_matched": "s", "scratch_compute_matched_full": "D"}


Roles = Mapping[tuple[str, str, str], str]
"""{(config, arm, control): "primary" or "secondary"}: a study's declared contrasts (`Preregistration.roles`)."""


def declared_verdict(comparison: Mapping[str, Any], roles: Roles) -> str | None:
    """The verdict cell of an exploratory paired row (a `config`, `arm` and `control`) that repeats a declared
    contrast (`roles`): where that contrast is tested; None for one not declared."""
    role = roles.get((comparison["config"], comparison["arm"], comparison["control"]))
    return None if role is None else f"declared {role}: tested above"


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


POOL_NOTE = ("the seed is the unit: each seed's mean difference over the comparisons pooled (those seeds that "
             "every one holds), then the mean, sd and 95% interval over seeds; the comparisons of one seed share its "
             "data split (and, against plain scratch, one scratch run), so they are not independent pairs.")


def _paired_lines(comparisons: list[dict[str, Any]], pooled: list[dict[str, Any]], roles: Roles) -> list[str]:
    """A configuration's paired table (`paired_seeds`): one row per arm with pretrained weights and control, then
    SPT pooled over the configuration's budgets, seed by seed; a declared contrast's row points to its test."""
    rows = [([f"{c['pretrain_epochs']:g}", c["arm"], c["control"]], c["difference"]) for c in comparisons]
    rows += [(["all", "spt", p["control"]], p["difference"]) for p in pooled]
    verdicts = [declared_verdict(c, roles) for c in comparisons] + [None] * len(pooled)
    note = f" \"all\": SPT's budgets pooled; {POOL_NOTE}" if pooled else ""
    return ["", PAIRED_NOTE + note, "", *paired_table(["SPT epochs", "arm", "control"], rows, verdicts=verdicts)]


def _pooled_study_lines(pooled: list[dict[str, Any]]) -> list[str]:
    """SPT pooled over each study's configurations, seed by seed."""
    if not pooled:
        return []
    rows = [([p["scope"], ", ".join(p["configs"]), p["control"]], p["difference"]) for p in pooled]
    return ["## Pooled over a study's configurations", "",
            f"SPT minus each control over every budget and configuration of one study; {POOL_NOTE} \"difference per "
            "seed\" is each seed's mean.", "", *paired_table(["study", "configurations", "control"], rows), ""]


def _interval_line(evidence: dict[str, list[dict[str, Any]]], roles: Roles) -> str:
    """How many paired intervals exclude 0 (`paired_seeds.interval_count`) beyond the declared contrasts (`roles`)."""
    paired = [entry for entry in evidence["paired"] if declared_verdict(entry, roles) is None]
    if roles and not paired and not evidence["pooled"]:
        return "Paired by seed: no interval beyond the declared contrasts, which the preregistered table tests."
    count = interval_count((entry["control"], entry["difference"]) for entry in (*paired, *evidence["pooled"]))
    return ("Paired by seed, beyond the declared contrasts: " if roles else "Paired by seed: ") + count


def study_markdown(summary: dict[str, dict[str, Any]], checkpoints: list[dict[str, Any]],
                   evidence: dict[str, list[dict[str, Any]]], declared: Sequence[str] = (), roles: Roles | None = None) -> str:
    """One table per configuration: a row per pretraining budget with both controls and the gains, the
    checkpoint's losses and proximity; then scratch and the control arms; then SPT's differences paired by seed
    (`evidence`: `study_evidence.study_evidence`'s); last, the pools over a study's configurations. First, how many
    paired intervals all this prints and how many exclude 0. Before everything, a preregistered study's confirmatory
    section (`declared`: `preregistration.preregistered_lines`), the rest headed exploratory, where a paired row
    repeating a declared contrast (`roles`: `Preregistration.roles`) points back to it and is not counted."""
    roles = roles or {}
    lines = [*declared, "## Exploratory", "", EXPLORATORY_NOTE, ""] if declared else []
    lines += [_interval_line(evidence, roles), ""]
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
        lines += ["", "| arm (no pretraining) | test accuracy, mean ± std (seeds) |", "|---|---|",
                  f"| scratch | {_pct(entry['scratch'])} |"]
        lines += [f"| {arm} | {_pct(stats)} |" for arm, stats in entry["controls"].items()]
        comparisons = [c for c in evidence["paired"] if c["config"] == config]
        if comparisons:
            lines += _paired_lines(comparisons, [p for p in evidence["pooled"] if p["scope"] == config], roles)
        lines.append("")
    lines += _pooled_study_lines([p for p in evidence["pooled"] if p["scope"] not in scopes])
    return "\n".join(lines)


def plot_study(summary: dict[str, dict[str, Any]], checkpoints: list[dict[str, Any]], path: Path,
               titles: Mapping[str, str] | None = None) -> None:
    """`budget_study.png`: four panels per configuration with an SPT budget (module docstring). Arms are named
    and coloured as `arm_labels` says (a control arm's horizontal line in its own colour), a configuration's panels
    titled by `titles` ({configuration: its study file's title}; else its code name), legends sit beside their
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
                         title=config_words(config, titles), ylim=(0, 100))
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


@dataclass(frozen=True)
class PairedPanel:
    """A panel of `budget_study_paired.png`: `configs` ({configuration: its label}) drawn SPT budget by budget, then
    the seed-unit pools of `pools` ({scope: its label}): a configuration's (its budgets) right after its rows, a
    study's (its configurations) at the end."""

    title: str
    configs: dict[str, str]
    pools: dict[str, str]


DOCS_PANELS = (
    PairedPanel("sequence length, 1,197 labelled pictures",
                {"digits8": "8x8", "digits16": "16x16", "digits32": "32x32", "digits32_e40": "32x32"},
                {"digits8": "8x8, both budgets"}),
    PairedPanel("labelled-data size, 16x16 pixels",
                {"digits16_n600": "600 pictures", "digits16_n300": "300 pictures", "digits16_n150": "150 pictures"},
                {"digits_data_size": "150, 300, 600 pictures"}),
)
"""The README's results table ("Results: where does SPT pay?") as panels: its rows, its pools as the text states
them (8x8 over both budgets; the three labelled-data sizes). A study of several configurations that these leave
out gets a panel of its own (`paired_panels`)."""


def paired_panels(evidence: dict[str, list[dict[str, Any]]], titles: Mapping[str, str] | None = None
                  ) -> list[PairedPanel]:
    """The panels of `budget_study_paired.png` for `evidence` (`study_evidence.study_evidence`'s):
    each of `DOCS_PANELS` with a configuration in it (those it holds), then for each pooled study of several
    configurations that no panel drew, its configurations (labelled by `titles`, as `plot_study`'s) and its pool."""
    held = {c["config"] for c in evidence["paired"]}
    panels = [PairedPanel(panel.title, {config: label for config, label in panel.configs.items() if config in held},
                          panel.pools) for panel in DOCS_PANELS if held & set(panel.configs)]
    drawn = {config for panel in panels for config in panel.configs}
    studies: dict[str, dict[str, str]] = {}  # {study: {configuration: its label}}, in the evidence's order
    for entry in evidence["pooled"]:
        if len(entry["configs"]) > 1:
            studies.setdefault(entry["scope"], {}).update({config: config_words(config, titles)
                                                            for config in entry["configs"]})
    return panels + [PairedPanel(study, configs, {study: study}) for study, configs in studies.items()
                     if not set(configs) <= drawn]


def _panel_rows(panel: PairedPanel, evidence: dict[str, list[dict[str, Any]]]
                ) -> list[tuple[str, bool, dict[str, PairedDifference]]]:
    """(label, pooled, {control: SPT minus it}) of each row of `panel`, in its order (`PairedPanel`)."""

    def pool(scope: str) -> list[tuple[str, bool, dict[str, PairedDifference]]]:
        found = {e["control"]: e["difference"] for e in evidence["pooled"] if e["scope"] == scope}
        return [(f"{panel.pools[scope]}\npooled (seed means)", True, found)] if found else []

    rows = []
    for config, label in panel.configs.items():
        chosen = [c for c in evidence["paired"] if c["config"] == config and c["arm"] == "spt"
                  and c["control"] in _PAIRED_CONTROLS]
        for epochs in dict.fromkeys(c["pretrain_epochs"] for c in chosen):
            rows.append((f"{label}\n{epochs:g} SPT epochs", False,
                         {c["control"]: c["difference"] for c in chosen if c["pretrain_epochs"] == epochs}))
        rows += pool(config) if config in panel.pools else []
    return rows + [row for scope in panel.pools if scope not in panel.configs for row in pool(scope)]


def plot_paired(evidence: dict[str, list[dict[str, Any]]], path: Path, titles: Mapping[str, str] | None = None) -> None:
    """`budget_study_paired.png`: a panel per `paired_panels` panel, SPT minus each scratch control of
    `_PAIRED_CONTROLS` paired by seed in each row (a configuration's budget, or a pool on grey), as the mean with its
    95% interval (one seed: the point alone) and each seed's difference beside it (a pool's: each seed's mean),
    side by side in a panel for the controls its rows have. A gain is nominally resolved where the bar clears the
    zero line (unadjusted: `budget_study.md` counts the intervals). One legend, beside the first panel, naming
    every control drawn."""
    from matplotlib.legend_handler import HandlerTuple
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    panels = paired_panels(evidence, titles)
    panel_rows = [_panel_rows(panel, evidence) for panel in panels]
    drawn = [control for control in _PAIRED_CONTROLS if any(control in row[2] for rows in panel_rows for row in rows)]
    with saved_figure(path, dpi=100, nrows=len(panels), ncols=1, figsize=(13, 4.4 * len(panels)),
                      squeeze=False) as (_, axes):
        for (axis,), panel, rows in zip(axes, panels, panel_rows):
            for index, (_, pooled, _) in enumerate(rows):
                if pooled:
                    axis.axvspan(index - 0.45, index + 0.45, color="0.9", zorder=0)
            controls = [control for control in drawn if any(control in row[2] for row in rows)]
            for position, control in enumerate(controls):
                offset, marker = (position - (len(controls) - 1) / 2) * 0.68 / len(controls), _PAIRED_CONTROLS[control]
                for index, difference in ((index, row[2][control]) for index, row in enumerate(rows)
                                          if control in row[2]):
                    interval = difference.interval
                    error = None if interval is None else [[100 * (difference.mean - interval[0])],
                                                           [100 * (interval[1] - difference.mean)]]
                    axis.errorbar([index + offset], [100 * difference.mean], yerr=error, fmt=marker, markersize=7,
                                  capsize=4, color=arm_colour(control, 0))
                    axis.plot([index + offset + 0.08] * difference.n, [100 * d for d in difference.differences],
                              **_seed_style(control, marker))
            axis.set_xticks(range(len(rows)), ["\n".join(textwrap.fill(part, 24) for part in label.split("\n"))
                                               for label, _, _ in rows], fontsize=10)
            axis.set_xlim(-0.6, len(rows) - 0.4)
            axis.tick_params(axis="y", labelsize=10)
            axis.axhline(0, color="black", linewidth=0.8)
            axis.set_ylabel("SPT minus control (points)", fontsize=10)
            axis.set_title(f"{panel.title}: test accuracy, paired by seed", fontsize=11)
        means = [Line2D([], [], marker=_PAIRED_CONTROLS[control], color=arm_colour(control, 0), markersize=7)
                 for control in drawn]
        seeds = tuple(Line2D([], [], **_seed_style(control, _PAIRED_CONTROLS[control])) for control in drawn)
        axes[0][0].legend([*means, seeds, Patch(color="0.9")],
                          [*(textwrap.fill(arm_words(control), 24) for control in drawn), "each seed",
                           "pooled: the seed as\nthe unit (dots: seed means)"],
                          handler_map={tuple: HandlerTuple(ndivide=None)}, title="SPT minus (mean, 95% interval)",
                          fontsize=10, title_fontsize=10, loc="upper left", bbox_to_anchor=(1.01, 1))


def _seed_style(control: str, marker: str) -> dict[str, Any]:
    """How `plot_paired` draws one seed's difference: a small hollow marker of the control's."""
    return {"linestyle": "none", "marker": marker, "markersize": 4, "markerfacecolor": "none",
            "color": arm_colour(control, 0), "alpha": 0.8}


def _legend_beside(axis: Any) -> None:
    """The panel's legend to the right of it, where it covers no data."""
    axis.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1))


def write_study_report(rows: list[dict[str, Any]], checkpoints: list[dict[str, Any]], studies: Mapping[str, list[str]],
                       output_dir: Path, titles: Mapping[str, str] | None = None,
                       preregistrations: Sequence[Preregistration] = (), notes: Sequence[str] = (),
                       attention: Sequence[Mapping[str, Any]] = ()) -> None:
    """Write the rows, checkpoint probes, tables and figures into `output_dir`, each configuration in a figure titled
    by `titles` (`plot_study`), SPT's gains paired by seed and pooled over each of `studies` ({study: its
    configurations}; `study_evidence.study_evidence`). The tables open with each of `preregistrations` that owns a
    row (`Preregistration.owns`), tested as declared; a declared row whose test is not shown yet
    (`preregistration.withheld_units`) is left out of the rest, which would give its estimate away. `notes`: lines
    the report opens with (a named study file not at hand); `attention`: each cell's attention after fine-tuning
    (`attention_report`), its table at the end and its figure beside the report (the shown rows), its rows beside
    the report (every row, the record)."""
    write_json(output_dir / STUDY_JSON_NAME, rows)
    write_json(output_dir / CHECKPOINTS_JSON_NAME, checkpoints)
    reported = [registration for registration in preregistrations if any(map(registration.owns, rows))]
    declared = [line for registration in reported for line in preregistered_lines(registration, rows)]
    roles = {key: role for registration in reported for key, role in registration.roles().items()}
    withheld = withheld_units(reported, rows)
    shown = [row for row in rows if (row["config"], row.get("arm_name"), row["seed"]) not in withheld]
    if withheld:
        declared.append(f"The declared rows ({len(withheld)}) are left out of the exploratory part below until the "
                        "test above is shown.\n")
    summary, evidence = summarize_study(shown), study_evidence(shown, dict(studies))
    shown_attention = [row for row in attention if (row["config"], row["arm_name"], row["seed"]) not in withheld]
    write_text(output_dir / STUDY_MD_NAME, "# Budget study\n\n" + "".join(f"{note}\n\n" for note in notes)
               + numerics_notes(rows, "config", "configuration")
               + study_markdown(summary, checkpoints, evidence, declared, roles)
               + "".join(f"\n{line}" for line in attention_lines(shown_attention)))
    write_attention_report(attention, shown_attention, output_dir, titles)
    if any(entry["budgets"] for entry in summary.values()):  # a figure of gain against tokens needs a budget
        plot_study(summary, checkpoints, output_dir / STUDY_PLOT_NAME, titles)
    if paired_panels(evidence):  # the README's configurations, or a study of several configurations
        plot_paired(evidence, output_dir / PAIRED_PLOT_NAME, titles)


__all__ = ["STUDY_JSON_NAME", "CHECKPOINTS_JSON_NAME", "STUDY_MD_NAME", "STUDY_PLOT_NAME", "PAIRED_PLOT_NAME",
           "POOL_NOTE", "Roles", "declared_verdict", "PairedPanel", "DOCS_PANELS", "study_markdown", "plot_study", "paired_panels", "plot_paired",
           "write_study_report"]
