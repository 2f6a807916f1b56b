"""The accuracy-against-compute report: does SPT pay for its pretraining? (`analysis.compute` counts the FLOPs;
`experiments.suites.compute_curves` computes each finished run's curve.)

Writes, into the report folder, `<prefix>_compute.json` (one curve per run: config, arm, seed,
pretraining FLOPs, FLOPs per fine-tuning epoch, (epoch, validation accuracy) points, test accuracy),
`<prefix>_compute.md` (per configuration and arm: best validation, test, compute; and, for each SPT
arm, the compute at which each scratch arm's best-so-far validation accuracy, averaged over seeds,
first reaches SPT's best, or "never") and `<prefix>_compute_<config>.png` (the curves: each seed thin,
the seeds' mean best-so-far thick in a band from the lowest to the highest seed's best-so-far, FLOPs on a log
axis; each seed's test accuracy marked at the compute of the checkpoint it kept, and the seeds' mean of both;
arms named and coloured as `arm_labels` says, a configuration titled by the words its study file gives it, an arm
kind's budgets in different line styles, the legend beside the axes). Validation chose the checkpoint, so the curves
can favour an arm that test does not: the markers say what the kept checkpoints score on test. The curves come in
as data (or from a `<prefix>_compute.json` written before, `read_compute_curves`): nothing here runs or reads a
run folder.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from pathlib import Path

from ..analysis.compute import ArmCurve, ComputeCurve, arm_curve
from ..analysis.plotting import saved_figure
from ..atomic_files import write_json, write_text
from ..errors import MissingInputError, UserInputError
from ..runs.folder import read_json
from .arm_labels import arm_colour, arm_words, config_words
from .seed_tables import mean_std, mean_std_cell, one_decimal

_BUDGET_STYLES = ("-", "--", "-.", ":")  # line style of a configuration's first, second... SPT budget


def _is_scratch(arm: str) -> bool:
    return arm == "scratch" or arm.startswith("scratch_compute_matched")


def _is_spt(arm: str) -> bool:
    return arm == "spt" or arm.startswith("spt_e")


def by_config(curves: list[ComputeCurve]) -> dict[str, dict[str, ArmCurve]]:
    """{config: {arm: the seeds' combined curve}}, in first-seen order."""
    grouped: dict[str, dict[str, list[ComputeCurve]]] = {}
    for curve in curves:
        if curve.points:
            grouped.setdefault(curve.config, {}).setdefault(curve.arm, []).append(curve)
    return {config: {arm: arm_curve(runs) for arm, runs in arms.items()} for config, arms in grouped.items()}


def _flops(value: float | None) -> str:
    return "never" if value is None else f"{value:.2e}"


def _test(curve: ArmCurve) -> str:
    if not curve.test_accuracies:
        return "n/a"
    return mean_std_cell(mean_std(curve.test_accuracies), 100)  # as the budget report does: the same digits


def compute_markdown(curves: list[ComputeCurve]) -> str:
    """Per configuration: each arm's best validation, test and compute; then where scratch catches each SPT arm."""
    out = []
    for config, arms in by_config(curves).items():
        out += [f"## {config}", "", "| arm | seeds | best validation % (mean) | test %, mean ± sample std over seeds "
                "| pretraining FLOPs | total training FLOPs (mean) |", "|---|---|---|---|---|---|"]
        for arm, curve in arms.items():
            out.append(f"| {arm} | {curve.seeds} | {one_decimal(100 * curve.best)} | {_test(curve)} | "
                       f"{_flops(curve.pretrain_flops) if curve.pretrain_flops else '0'} | {curve.total_flops:.2e} |")
        scratch = [arm for arm in arms if _is_scratch(arm)]
        spt = [arm for arm in arms if _is_spt(arm)]
        if scratch and spt:
            out += ["", "Compute (training FLOPs, pretraining included) at which the seeds' mean best-so-far validation "
                    "accuracy first reaches the SPT arm's best:", "",
                    "| SPT arm | its best validation % | SPT reaches it at | " + " | ".join(scratch) + " |",
                    "|---|---|---|" + "---|" * len(scratch)]
            for arm in spt:
                target = arms[arm].best
                out.append(f"| {arm} | {one_decimal(100 * target)} | {_flops(arms[arm].first_reaching(target))} | "
                           + " | ".join(_flops(arms[other].first_reaching(target)) for other in scratch) + " |")
        out.append("")
    return "\n".join(out)


def plot_compute(curves: list[ComputeCurve], config: str, path: Path, titles: Mapping[str, str] | None = None) -> None:
    """Validation accuracy against cumulative training FLOPs of one configuration's arms, and the test accuracy of
    each run's kept checkpoint at its compute (module docstring), titled by `titles` ({configuration: its study
    file's title}; else its code name)."""
    from matplotlib.lines import Line2D

    arms = by_config(curves)[config]
    budgets = sorted({curve.pretrain_flops for curve in arms.values() if curve.pretrain_flops})
    with saved_figure(path, dpi=100, figsize=(12, 5.5)) as (_, axis):
        for index, (arm, combined) in enumerate(arms.items()):
            color = arm_colour(arm, index)
            # an arm kind has one colour; its budgets (spt_e10, spt_e40) differ by line style, in budget order
            style = _BUDGET_STYLES[budgets.index(combined.pretrain_flops) % len(_BUDGET_STYLES)] if (
                combined.pretrain_flops and len(budgets) > 1) else "-"
            runs = [c for c in curves if c.config == config and c.arm == arm and c.points]
            for curve in runs:
                axis.plot(curve.flops(), [100 * a for _, a in curve.points], color=color, alpha=0.3, linewidth=0.8,
                          linestyle=style)
            axis.fill_between(combined.flops, [100 * v for v in combined.lowest_so_far],
                              [100 * v for v in combined.highest_so_far], color=color, alpha=0.12, linewidth=0)
            axis.plot(combined.flops, [100 * b for b in combined.best_so_far], color=color, linewidth=2, marker="o",
                      markersize=3, linestyle=style,
                      label=f"{arm_words(arm)} ({combined.seeds} seed{'s' * (combined.seeds > 1)})")
            tested = [(curve.kept_flops(), 100 * curve.test_accuracy) for curve in runs
                      if curve.test_accuracy is not None]
            if tested:
                axis.plot(*zip(*tested), linestyle="none", marker="D", markersize=5, markerfacecolor="none",
                          color=color)
                axis.plot([statistics.fmean(f for f, _ in tested)], [statistics.fmean(t for _, t in tested)],
                          marker="D", markersize=10, color=color, markeredgecolor="black", zorder=4)
            if combined.pretrain_flops:  # where the arm's fine-tuning starts: its pretraining's cost
                axis.axvline(combined.pretrain_flops, color=color, linestyle=":", linewidth=1)
        axis.set(xscale="log", ylim=(0, 102))
        axis.set_xlabel("cumulative training FLOPs (pretraining included; dotted: pretraining's cost)", fontsize=10)
        axis.set_ylabel("accuracy (%): validation curves, test diamonds", fontsize=10)
        axis.set_title(f"{config_words(config, titles)}: accuracy against compute", fontsize=11)
        axis.tick_params(labelsize=10)
        handles, labels = axis.get_legend_handles_labels()
        handles += [Line2D([], [], linestyle="none", marker="D", markersize=5, markerfacecolor="none", color="black"),
                    Line2D([], [], linestyle="none", marker="D", markersize=10, color="0.6", markeredgecolor="black")]
        labels += ["a seed's test accuracy, at its\nkept checkpoint's compute", "the seeds' mean (test, compute)"]
        # beside the axes: ten arms' legend inside would cover their curves
        axis.legend(handles, labels, fontsize=10, loc="upper left", bbox_to_anchor=(1.01, 1), title_fontsize=10,
                    title="validation: thick, mean best-so-far;\nband, lowest to highest seed;\nthin, each seed")


def write_compute_report(curves: list[ComputeCurve], output_dir: str | Path, prefix: str,
                         titles: Mapping[str, str] | None = None) -> list[Path]:
    """Write `<prefix>_compute.{json,md}` and one `<prefix>_compute_<config>.png` per configuration (titled by
    `titles`, `plot_compute`); the files."""
    if not curves:
        raise UserInputError(f"No finished fine-tuning run with a per-epoch validation record under {output_dir}: "
                             "nothing to draw.")
    output_dir = Path(output_dir)
    written = [output_dir / f"{prefix}_compute.json", output_dir / f"{prefix}_compute.md"]
    write_json(written[0], [curve.to_dict() for curve in curves])
    write_text(written[1], f"# Accuracy against compute\n\n{compute_markdown(curves)}")
    for config in by_config(curves):
        written.append(output_dir / f"{prefix}_compute_{config}.png")
        plot_compute(curves, config, written[-1], titles)
    return written


def read_compute_curves(path: str | Path) -> list[ComputeCurve]:
    """The curves of a `<prefix>_compute.json` written before (to redraw or combine without the run folders)."""
    data = read_json(path)
    if not isinstance(data, list):
        raise MissingInputError(f"{path} holds no compute curves (a list written by write_compute_report).")
    return [ComputeCurve.from_dict(entry) for entry in data]


__all__ = ["by_config", "compute_markdown", "plot_compute", "write_compute_report", "read_compute_curves"]
