"""Accuracy against total compute: does SPT pay for its pretraining? (`analysis.compute` counts the FLOPs.)

For every finished fine-tuning run of a study (a grid's cells) or of a `run_spt.py` run (its arms), the
validation accuracy after each epoch against cumulative training FLOPs, pretraining included: an SPT
arm's curve starts at its pretraining's cost (every epoch it ran, whichever checkpoint it kept), a
hybrid-init or frozen arm's too. The FLOPs of an epoch are counted over the real lengths of the
phase's training inputs, rebuilt from the recorded task settings.

Writes, into the report folder, `<prefix>_compute.json` (one curve per run: config, arm, seed,
pretraining FLOPs, FLOPs per fine-tuning epoch, (epoch, validation accuracy) points, test accuracy),
`<prefix>_compute.md` (per configuration and arm: best validation, test, compute; and, for each SPT
arm, the compute at which each scratch arm's best-so-far validation accuracy, averaged over seeds,
first reaches SPT's best, or "never") and `<prefix>_compute_<config>.png` (the curves: each seed thin,
the seeds' mean best-so-far thick in a band from the lowest to the highest seed's best-so-far, FLOPs on a log
axis; each seed's test accuracy marked at the compute of the checkpoint it kept, and the seeds' mean of both;
arms named and coloured as `arm_labels` says, an arm kind's budgets in different line styles, the legend beside
the axes). Validation chose the checkpoint, so the curves can favour an arm that test does not: the markers
say what the kept checkpoints score on test.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ...analysis.compute import ArmCurve, ComputeCurve, arm_curve, epoch_accuracies, training_flops
from ...analysis.plotting import saved_figure
from ...atomic_files import write_json, write_text
from ...errors import MissingInputError, UserInputError
from ...runs.folder import PHASE_RESULT_NAME, read_json
from ...training.dataset_columns import input_lengths
from ..arguments import DataArguments
from ..phases import LOG_HISTORY_NAME
from ..pipeline import prepare_pretrain_task, prepare_task
from ..run_results import ARM_FOLDERS
from ..run_spec import task_requests
from .arm_labels import arm_colour, arm_words, config_words
from .grid_runner import prepare_unit
from .report_sources import join_by_config
from .seed_tables import mean_std, mean_std_cell, one_decimal
from .run_records import read_record, recorded_settings, run_record
from .grid import GRID_RECORD_NAME, Grid, cells, parse_grid, pretrain_job

CONFIG_NAME = "config.json"
SOURCES_FLAG = "--runs"
"""The flag that names the finished runs read (`run_compute_curves.py`'s), for the messages about them."""
_BUDGET_STYLES = ("-", "--", "-.", ":")  # line style of a configuration's first, second... SPT budget


def _config(folder: Path) -> SimpleNamespace:
    config = read_json(folder / CONFIG_NAME)
    needed = ("hidden_size", "num_hidden_layers", "intermediate_size")
    if not isinstance(config, dict) or any(name not in config for name in needed):
        raise MissingInputError(f"{folder / CONFIG_NAME}: a model config with {', '.join(needed)} is needed to count "
                                "the phase's FLOPs.")
    return SimpleNamespace(**config)


def pretraining_flops(folder: Path, lengths: list[int]) -> float:
    """FLOPs of a finished pretraining phase: every epoch it ran (`phase.json`) over its training inputs."""
    result = read_json(folder / PHASE_RESULT_NAME)
    if result is None or result.get("phase") != "pretrain":
        raise MissingInputError(f"{folder} holds no finished pretraining phase ({PHASE_RESULT_NAME}), so the compute "
                                "of the arms that start from it is unknown.")
    return float(result["epochs"]) * training_flops(_config(folder), lengths, head="masked_lm")


def phase_curve(folder: Path, config_name: str, arm: str, seed: int, lengths: list[int],
                pretrain_flops: float, result: dict[str, Any]) -> ComputeCurve:
    """The curve (`analysis.compute.ComputeCurve`) of a finished fine-tuning phase whose `phase.json` is `result`."""
    history = read_json(folder / LOG_HISTORY_NAME)
    if not isinstance(history, list):
        raise MissingInputError(f"{folder / LOG_HISTORY_NAME} is missing: the phase's per-epoch validation is needed "
                                "for its compute curve.")
    return ComputeCurve(config_name, arm, seed, pretrain_flops, training_flops(_config(folder), lengths),
                        epoch_accuracies(history), result.get("test_accuracy"))


def grid_compute_curves(grid: Grid) -> list[ComputeCurve]:
    """One curve per finished cell of a grid (a study), in the grid's order."""
    tasks: dict = {}
    lengths: dict[tuple[str, int], list[int]] = {}

    def lengths_of(task_key: str, seed: int) -> list[int]:
        if (task_key, seed) not in lengths:
            lengths[task_key, seed] = input_lengths(prepare_unit(grid, task_key, seed, None, tasks)[0].dataset["train"])
        return lengths[task_key, seed]

    curves = []
    for cell in cells(grid):
        folder = cell.folder(grid)
        result = read_json(folder / PHASE_RESULT_NAME)
        if result is None:
            continue
        job = pretrain_job(grid, cell)
        spent = pretraining_flops(job.folder(grid), lengths_of(job.task, cell.seed)) if job else 0.0
        curves.append(phase_curve(folder, cell.task, cell.arm, cell.seed, lengths_of(cell.task, cell.seed), spent,
                                  result))
    return curves


def run_compute_curves(run: str | Path) -> list[ComputeCurve]:
    """One curve per finished arm of a `run_spt.py` output folder, on the task settings its `results.json` records.
    An arm that started from weights other than the run's own pretraining is left out (its compute is unknown)."""
    run = Path(run)
    record = run_record(run, SOURCES_FLAG, instead=None)
    data, seed = recorded_settings(record, {}, set())
    request, source = task_requests(DataArguments(**data))
    task = prepare_task(request, seed)
    lengths = input_lengths(task.dataset["train"])
    pretrain_lengths = (input_lengths(prepare_pretrain_task(source, task, seed).dataset["train"]) if source
                        else lengths)
    curves = []
    for arm in record["arms"]:
        if arm["arm"] not in ARM_FOLDERS or not (run / arm["arm"]).is_dir():
            continue
        spent = 0.0
        if arm.get("init_from"):
            if Path(arm["init_from"]).name != "pretrain":
                print(f"{arm['arm']}: starts from {arm['init_from']}, whose compute is unknown; left out.")
                continue
            spent = pretraining_flops(run / "pretrain", pretrain_lengths)
        curves.append(phase_curve(run / arm["arm"], record["task"], arm["arm"], seed, lengths, spent, arm))
    return curves


def folder_compute_curves(folder: str | Path) -> list[ComputeCurve]:
    """The curves of a finished study or ablation folder (its `grid.json`) or of a `run_spt.py` output folder."""
    folder = Path(folder)
    if (folder / GRID_RECORD_NAME).is_file():
        record = folder / GRID_RECORD_NAME
        grid = parse_grid(read_record(record, SOURCES_FLAG, instead=None), str(record))
        grid.output_dir = str(folder)  # the folder may have moved since the grid ran
        return grid_compute_curves(grid)
    return run_compute_curves(folder)


def combined_curves(sources: list[str | Path], replaced: Collection[str] = (), added: Collection[str] = ()
                    ) -> list[ComputeCurve]:
    """The curves of several finished folders or `*_compute.json` files, for one report; a configuration's curves
    come from one source (`report_sources.join_by_config`; a configuration in `replaced` from the last source that
    holds it, one in `added` from every source, as other seeds of one study: same arms, same FLOPs per epoch and
    pretraining FLOPs)."""
    found = [(source, read_compute_curves(source) if source.suffix == ".json" else folder_compute_curves(source))
             for source in map(Path, sources)]
    return join_by_config(found, lambda curve: curve.config, lambda curve: curve.seed,
                          lambda curve: (curve.arm, curve.pretrain_flops, curve.flops_per_epoch), replaced, added)


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


def plot_compute(curves: list[ComputeCurve], config: str, path: Path) -> None:
    """Validation accuracy against cumulative training FLOPs of one configuration's arms, and the test accuracy of
    each run's kept checkpoint at its compute (module docstring)."""
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
        axis.set_title(f"{config_words(config)}: accuracy against compute", fontsize=11)
        axis.tick_params(labelsize=10)
        handles, labels = axis.get_legend_handles_labels()
        handles += [Line2D([], [], linestyle="none", marker="D", markersize=5, markerfacecolor="none", color="black"),
                    Line2D([], [], linestyle="none", marker="D", markersize=10, color="0.6", markeredgecolor="black")]
        labels += ["a seed's test accuracy, at its\nkept checkpoint's compute", "the seeds' mean (test, compute)"]
        # beside the axes: ten arms' legend inside would cover their curves
        axis.legend(handles, labels, fontsize=10, loc="upper left", bbox_to_anchor=(1.01, 1), title_fontsize=10,
                    title="validation: thick, mean best-so-far;\nband, lowest to highest seed;\nthin, each seed")


def write_compute_report(curves: list[ComputeCurve], output_dir: str | Path, prefix: str) -> list[Path]:
    """Write `<prefix>_compute.{json,md}` and one `<prefix>_compute_<config>.png` per configuration; the files."""
    if not curves:
        raise UserInputError(f"No finished fine-tuning run with a per-epoch validation record under {output_dir}: "
                             "nothing to draw.")
    output_dir = Path(output_dir)
    written = [output_dir / f"{prefix}_compute.json", output_dir / f"{prefix}_compute.md"]
    write_json(written[0], [curve.to_dict() for curve in curves])
    write_text(written[1], f"# Accuracy against compute\n\n{compute_markdown(curves)}")
    for config in by_config(curves):
        written.append(output_dir / f"{prefix}_compute_{config}.png")
        plot_compute(curves, config, written[-1])
    return written


def read_compute_curves(path: str | Path) -> list[ComputeCurve]:
    """The curves of a `<prefix>_compute.json` written before (to redraw or combine without the run folders)."""
    data = read_json(path)
    if not isinstance(data, list):
        raise MissingInputError(f"{path} holds no compute curves (a list written by write_compute_report).")
    return [ComputeCurve.from_dict(entry) for entry in data]


__all__ = ["SOURCES_FLAG", "pretraining_flops", "phase_curve", "grid_compute_curves", "run_compute_curves",
           "folder_compute_curves", "combined_curves", "by_config", "compute_markdown", "plot_compute", "write_compute_report", "read_compute_curves"]
