"""The budget study: SPT's gain over both scratch controls as a function of pretraining tokens.

A study is an ablation grid (`grid.py`) shipped as a file under `studies/` (or any grid file of
the user's): one task configuration per task key, and arms that sweep the pretraining budget:
`spt_e<E>` (SPT for E epochs, then fine-tuned) with its control `scratch_compute_matched_e<E>`
(random init, SPT's optimizer steps at E epochs plus the fine-tuning budget), `scratch` (the same
fine-tuning budget), and control arms such as scratch with built-in locality (`model:
{position_embedding_type: alibi}`). Every arm is fine-tuned until validation accuracy stops
improving (early stopping). It runs on the grid's machinery: resumable unit by unit, split between
ranks. A study file's task may also hold a `title:`, the words the report's figures name that configuration by
(`study_titles`); taken out before the grid is parsed, it changes no run.

Rows (`budget_study.json`, one per finished cell): `task` (registered name), `config` (task key),
`arm` (the arm's kind: its name without the `_e<E>` budget suffix), `arm_name`, `seed`,
`test_accuracy` and `eval_accuracy` (0-1), `pretrain_epochs`, `pretrain_tokens` (tokens this
arm's weights were pretrained on: epochs x the real tokens of the pretraining inputs; 0 for
scratch arms), `budget_tokens` (the SPT budget the row belongs to: its own, or for a
compute-matched arm the budget whose steps it was given), `seconds` (SPT's include pretraining), and
`commit` and `versions` (`runs.provenance`; absent from rows of cells run before they were recorded).
Each SPT checkpoint is probed once (`analysis.checkpoint_probe`: MLM loss against the unigram
loss, near-2 proximity ratio per layer), cached in its folder as `checkpoint_probe.json`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...analysis.checkpoint_probe import probe_checkpoint
from ...atomic_files import write_json
from ...errors import UserInputError
from ...reports.paired_seeds import paired_difference, seed_pool
from ...reports.seed_tables import mean_std
from ...runs.folder import PHASE_RESULT_NAME, read_json
from ...runs.provenance import recorded_provenance
from ...training.dataset_columns import input_lengths
from ..phase_arguments import masking_rate
from ..settings_files import read_settings_file
from .grid_runner import prepare_unit, rows_with_pretraining
from .grid import GRID_RECORD_NAME, Grid, arm_named, arm_pretrain_epochs, parse_grid, pretrain_jobs
from .run_records import read_record


STUDIES_DIR = Path(__file__).with_name("studies")
PROBE_NAME = "checkpoint_probe.json"
TITLE_KEY = "title"
"""A study file's task may hold, besides its grid settings, the words its figures name it by."""
_BUDGET_SUFFIX = re.compile(r"_e[0-9.]+$")


def study_names() -> list[str]:
    """The studies shipped with the package (`studies/*.yaml`)."""
    return sorted(path.stem for path in STUDIES_DIR.glob("*.yaml"))


def _study_file(study: str) -> tuple[Path, dict[str, Any]]:
    """The path and content of a shipped study (by name) or of a grid file (by path)."""
    path = STUDIES_DIR / f"{study}.yaml"
    if not path.exists():
        path = Path(study)
        if not path.suffix:
            raise UserInputError(f"Unknown study {study!r}: name one of {', '.join(study_names())}, or give a grid "
                                 "file (.yaml/.json).")
    raw = read_settings_file(path, "Study file")
    if not isinstance(raw, dict):
        raise UserInputError(f"Study file {path} holds a mapping (tasks, seeds, arms...), not {type(raw).__name__}.")
    return path, raw


def _taken_titles(raw: dict[str, Any], path: Path) -> dict[str, str]:
    """{task key: its `title`}, each taken out of its task in `raw`: the words of a study's figures, not a setting of
    its grid (whose parser refuses any other key it does not know)."""
    tasks = raw.get("tasks")
    titles = {}
    for key, spec in (tasks.items() if isinstance(tasks, dict) else ()):
        if isinstance(spec, dict) and TITLE_KEY in spec:
            title = spec.pop(TITLE_KEY)
            if not isinstance(title, str) or not title.strip():
                raise UserInputError(f"{path}: task {key!r} has {TITLE_KEY} {title!r}; a title is the words its "
                                     "figures name the configuration by, a non-empty string.")
            titles[key] = title
    return titles


def study_grid(study: str, seeds: list[int] | None = None, output_dir: str | None = None) -> Grid:
    """The grid of a shipped study (by name) or of a grid file (by path), with `seeds` and `output_dir` over the
    file's when given; a task's `title` is the report's (`study_titles`), not the grid's."""
    path, raw = _study_file(study)
    _taken_titles(raw, path)
    if seeds:
        raw["seeds"] = list(seeds)
    if output_dir:
        raw["output_dir"] = output_dir
    grid = parse_grid(raw, str(path))
    for arm in grid.arms:  # the report groups an arm's rows by its kind and budget, read off its name
        suffix = f"_e{arm.pretrain_epochs:g}" if arm.pretrain_epochs is not None else ""
        if suffix and arm.name != arm_kind(arm.name, arm.pretrain_epochs) + suffix:
            raise UserInputError(f"{path}: study arm {arm.name!r} has pretrain_epochs {arm.pretrain_epochs:g}, so its "
                                 f"name ends in _e{arm.pretrain_epochs:g} (e.g. spt_e{arm.pretrain_epochs:g}): the "
                                 "study's report reads an arm's kind and budget off its name.")
    return grid


def study_titles(study: str) -> dict[str, str]:
    """{configuration: its title} of a shipped study (by name) or a grid file (by path): the words its figures name
    each configuration by (`reports.arm_labels.config_words`), given as `title:` on the study file's tasks."""
    path, raw = _study_file(study)
    return _taken_titles(raw, path)


def shipped_study_titles() -> dict[str, str]:
    """{configuration: its title} over every shipped study, for a report that joins several; one configuration
    titled differently by two studies is refused."""
    titles: dict[str, str] = {}
    for name in study_names():
        for config, title in study_titles(name).items():
            if titles.setdefault(config, title) != title:
                raise UserInputError(f"Shipped studies title configuration {config!r} both {titles[config]!r} and "
                                     f"{title!r} ({name}): give it one title.")
    return titles


def seeds_on_record(output_dir: str | Path) -> list[int]:
    """The seeds of the grid a study folder's `grid.json` records (its last run), [] for a new folder. A run that
    names other seeds reports these too: training seed 2 into a folder that holds seeds 0 and 1 reports all three,
    not seed 2 alone."""
    record = Path(output_dir) / GRID_RECORD_NAME
    return parse_grid(read_record(record), str(record)).seeds if record.is_file() else []


def arm_kind(name: str, pretrain_epochs: float | None) -> str:
    """`spt_e10` -> `spt`, `scratch_compute_matched_e10` -> `scratch_compute_matched`: budget arms share a kind."""
    return _BUDGET_SUFFIX.sub("", name) if pretrain_epochs is not None else name


class _Tokens:
    """Real tokens of a (task key, seed)'s pretraining inputs, counted once per study."""

    def __init__(self, grid: Grid):
        self.grid, self.tasks, self.counts = grid, {}, {}

    def per_epoch(self, task_key: str, seed: int) -> int:
        if (task_key, seed) not in self.counts:
            task = prepare_unit(self.grid, task_key, seed, None, self.tasks)[0]
            self.counts[task_key, seed] = sum(input_lengths(task.dataset["train"]))
        return self.counts[task_key, seed]


def study_rows(grid: Grid) -> list[dict[str, Any]]:
    """One row per finished cell (module docstring), in the grid's order."""
    tokens = _Tokens(grid)
    rows = []
    for row in rows_with_pretraining(grid):
        arm = arm_named(grid, row["arm"])
        source = arm.pretrain_task or row["task"]
        if arm.pretrain:
            epochs = row["pretrain_epochs"]
        elif arm.compute_matched:  # the SPT budget whose steps it was given
            epochs = arm_pretrain_epochs(grid, arm, row["seed"], source)
        else:
            epochs = None
        budget = int(epochs * tokens.per_epoch(source, row["seed"])) if epochs else 0
        rows.append({"task": grid.tasks[row["task"]].task, "config": row["task"],
                     "arm": arm_kind(arm.name, arm.pretrain_epochs), "arm_name": arm.name, "seed": row["seed"],
                     "test_accuracy": row["test_accuracy"], "eval_accuracy": row["eval_accuracy"],
                     "pretrain_epochs": epochs, "pretrain_tokens": budget if arm.pretrain else 0,
                     "budget_tokens": budget, "num_layers": row["num_layers"], "init_parts": arm.init_parts,
                     "freeze_parts": arm.freeze_parts, "model": arm.model or None, "seconds": row["seconds"],
                     **recorded_provenance(row)})
    return rows


def checkpoint_rows(grid: Grid, num_examples: int = 256) -> list[dict[str, Any]]:
    """One row per finished SPT checkpoint: its budget, best validation MLM loss (`phase.json`) and the probe
    (`analysis.checkpoint_probe`), computed once and cached in the checkpoint's folder."""
    tokens, rows = _Tokens(grid), []
    for job in sorted(pretrain_jobs(grid), key=lambda job: (job.task, job.seed, job.num_layers, job.epochs)):
        result = read_json(job.folder(grid) / PHASE_RESULT_NAME)
        if result is None:
            continue
        probe = read_json(job.folder(grid) / PROBE_NAME)
        if probe is None or probe.get("num_examples_asked") != num_examples:
            task, _, run = prepare_unit(grid, job.task, job.seed, job.num_layers, tokens.tasks)
            probe = {**probe_checkpoint(job.folder(grid), task, masking_rate(run.pretrain, task), num_examples=num_examples,
                                        seed=job.seed), "num_examples_asked": num_examples}
            write_json(job.folder(grid) / PROBE_NAME, probe)
        rows.append({"config": job.task, "seed": job.seed, "pretrain_epochs": job.epochs, "num_layers": job.num_layers,
                     "pretrain_tokens": int(job.epochs * tokens.per_epoch(job.task, job.seed)),
                     "best_eval_loss": result.get("eval_loss"), "seconds": result.get("seconds"),
                     **{k: probe[k] for k in ("mlm_loss", "unigram_loss", "mlm_probability", "near",
                                              "near_ratio_by_layer")}, **recorded_provenance(result)})
    return rows


def summarize_study(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{config: {"scratch": stats, "controls": {arm: stats}, "budgets": [{budget_tokens, pretrain_epochs, arm
    kind: stats..., "gain_vs_scratch", "gain_vs_compute_matched"}]}}, test accuracy's mean, std and n over seeds;
    a gain is the difference of seed means."""
    summary: dict[str, dict[str, Any]] = {}
    for config in dict.fromkeys(row["config"] for row in rows):
        mine = [row for row in rows if row["config"] == config and row["test_accuracy"] is not None]
        groups: dict[tuple[str, int], list[float]] = {}
        for row in mine:
            groups.setdefault((row["arm"], row["budget_tokens"]), []).append(float(row["test_accuracy"]))
        stats = {key: mean_std(values) for key, values in groups.items()}
        scratch = stats.get(("scratch", 0))
        budgets = []
        for tokens in sorted({t for (arm, t) in stats if t and arm in ("spt", "scratch_compute_matched")}):
            entry: dict[str, Any] = {"budget_tokens": tokens, "pretrain_epochs": next(
                row["pretrain_epochs"] for row in mine if row["budget_tokens"] == tokens)}
            entry.update({arm: s for (arm, t), s in stats.items() if t == tokens})
            spt, matched = entry.get("spt"), entry.get("scratch_compute_matched")
            entry["gain_vs_scratch"] = spt["mean"] - scratch["mean"] if spt and scratch else None
            entry["gain_vs_compute_matched"] = spt["mean"] - matched["mean"] if spt and matched else None
            budgets.append(entry)
        controls = {arm: s for (arm, t), s in stats.items() if not t and arm != "scratch"}
        summary[config] = {"scratch": scratch, "controls": controls, "budgets": budgets}
    return summary


def shipped_study_configs() -> dict[str, list[str]]:
    """{shipped study: its configurations (task keys)}: which configurations of a combined report one study ran,
    so their paired differences can be pooled."""
    return {name: list(read_settings_file(STUDIES_DIR / f"{name}.yaml", "Study file")["tasks"]) for name in study_names()}


def _control_rank(row: dict[str, Any], budget_tokens: int) -> int | None:
    """Where `row`'s arm comes among the controls of an SPT arm of `budget_tokens`: 0 plain scratch (no budget, no
    model change), 1 the compute-matched scratch of that budget, 2 any other arm without pretrained weights (ALiBi,
    rotary); None for an arm with pretrained weights or the compute-matched scratch of another budget."""
    if row["pretrain_tokens"] or row["budget_tokens"] not in (0, budget_tokens):
        return None
    if row["budget_tokens"]:
        return 1
    return 0 if row.get("model") is None else 2


def paired_comparisons(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The evidence for each SPT gain, paired by seed (`paired_seeds`): in each configuration, every arm with
    pretrained weights (SPT, and SPT's parts: hybrid init, frozen attention) minus each control of the same depth
    (plain scratch, the compute-matched scratch of its budget, then the other arms without pretraining), for every
    pair of arms with a seed in common: {"config", "arm", "pretrain_epochs", "budget_tokens", "num_layers",
    "control", "difference"} (test accuracy, 0-1), configurations in first-seen order, budgets ascending."""
    groups: dict[tuple[str, str, int, int], tuple[dict[str, Any], dict[int, float]]] = {}
    for row in rows:
        if row["test_accuracy"] is not None:
            key = (row["config"], row["arm"], row["budget_tokens"], row["num_layers"])
            groups.setdefault(key, (row, {}))[1][row["seed"]] = float(row["test_accuracy"])
    configs = list(dict.fromkeys(row["config"] for row in rows))
    comparisons = []
    for (config, arm, tokens, depth), (first, scores) in sorted(groups.items(),
                                                                 key=lambda item: (configs.index(item[0][0]), item[0][2])):
        if not first["pretrain_tokens"]:
            continue
        controls = [(rank, key[1], control) for key, (row, control) in groups.items()
                    if key[0] == config and key[3] == depth and (rank := _control_rank(row, tokens)) is not None]
        for _, control_arm, control in sorted(controls, key=lambda item: item[0]):
            difference = paired_difference(scores, control)
            if difference is not None:
                comparisons.append({"config": config, "arm": arm, "pretrain_epochs": first["pretrain_epochs"],
                                    "budget_tokens": tokens, "num_layers": depth, "control": control_arm,
                                    "difference": difference})
    return comparisons


POOLED_CONTROLS = ("scratch", "scratch_compute_matched")


def pooled_comparisons(comparisons: list[dict[str, Any]], scopes: dict[str, list[str]]) -> list[dict[str, Any]]:
    """SPT (arm kind `spt`) minus plain and compute-matched scratch pooled over a scope's configurations and budgets
    with the seed as the unit (`paired_seeds.seed_pool`: each seed's mean difference, then the interval over
    seeds), for each scope ({name: configurations}) where that pools more than one comparison over more than one
    seed: {"scope", "configs", "control", "comparisons", "difference"}."""
    found = []
    for scope, configs in scopes.items():
        for control in POOLED_CONTROLS:
            chosen = [c for c in comparisons if c["config"] in configs and c["arm"] == "spt" and c["control"] == control]
            difference = seed_pool([c["difference"] for c in chosen]) if len(chosen) > 1 else None
            if difference is not None and difference.n > 1:
                found.append({"scope": scope, "configs": list(dict.fromkeys(c["config"] for c in chosen)),
                              "control": control, "comparisons": len(chosen), "difference": difference})
    return found


def study_evidence(rows: list[dict[str, Any]], studies: dict[str, list[str]]) -> dict[str, list[dict[str, Any]]]:
    """{"paired": `paired_comparisons`, "pooled": `pooled_comparisons` over each configuration's budgets, then over
    each study's configurations ({study: configurations}; a study with fewer than two configurations in the rows
    is left out: its pooled rows would be its configuration's)}."""
    comparisons = paired_comparisons(rows)
    configs = list(dict.fromkeys(row["config"] for row in rows))
    return {"paired": comparisons,
            "pooled": pooled_comparisons(comparisons, {config: [config] for config in configs})
            + pooled_comparisons(comparisons, {study: held for study, names in studies.items()
                                               if len(held := [c for c in names if c in configs]) > 1})}


__all__ = ["STUDIES_DIR", "PROBE_NAME", "TITLE_KEY", "study_names", "study_grid", "study_titles",
           "shipped_study_titles", "seeds_on_record", "arm_kind", "study_rows", "checkpoint_rows", "summarize_study",
           "shipped_study_configs", "paired_comparisons", "pooled_comparisons", "study_evidence"]
