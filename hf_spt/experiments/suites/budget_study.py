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
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...analysis.attention_probe import probe_attention
from ...analysis.checkpoint_probe import probe_checkpoint
from ...atomic_files import write_json
from ...errors import UserInputError
from ...runs.folder import PHASE_RESULT_NAME, read_json
from ...reports.preregistration import Preregistration
from ...runs.provenance import recorded_provenance
from ...training.dataset_columns import input_lengths
from ..phase_arguments import masking_rate
from ..settings_files import read_settings_file
from .grid_runner import prepare_unit, rows_with_pretraining
from .grid import (GRID_RECORD_NAME, Grid, arm_depth, arm_named, arm_pretrain_epochs, cells, parse_grid,
                   pretrain_jobs)
from .finished_runs import read_record
from .budget_preregistration import (PREREGISTERED_KEY, TITLE_KEY, declaration_commit, parse_preregistration,
                                     study_definition_digest)


STUDIES_DIR = Path(__file__).with_name("studies")
PROBE_NAME = "checkpoint_probe.json"
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
    declared = raw.pop(PREREGISTERED_KEY, None)
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
    if declared is not None:  # checked while the run plans: a bad declaration stops it before any training
        parse_preregistration(declared, path, grid, Path(study).stem)
    return grid


def study_preregistration(study: str) -> Preregistration | None:
    """The `preregistered:` declaration of a shipped study (by name) or a grid file (by path), with the commit git
    says declared it (`budget_preregistration.declaration_commit`); None for a study that declares nothing."""
    path, raw = _study_file(study)
    if raw.get(PREREGISTERED_KEY) is None:
        return None
    registration = parse_preregistration(raw[PREREGISTERED_KEY], path, study_grid(study), Path(study).stem)
    return replace(registration, study_file=study, definition=study_definition_digest(raw),
                   declaration=declaration_commit(path))


def rows_preregistrations(rows: list[dict[str, Any]]) -> tuple[list[Preregistration], list[str]]:
    """The declarations of the studies that `rows` name (`study`: a shipped study or a study file's path), plus the
    shipped declared studies for rows written before rows named their study; and a note for each named study file
    that is not at hand (its declaration, if any, cannot be tested here)."""
    named = dict.fromkeys(row["study"] for row in rows if row.get("study") is not None)
    found, missing = [], []
    for study in named:
        if study not in study_names() and not Path(study).is_file():
            missing.append(f"Rows name the study file {study}, which is not at hand here: a declaration it makes is "
                           "not tested in this report.")
        elif (registration := study_preregistration(study)) is not None:
            found.append(registration)
    if any(row.get("study") is None for row in rows):
        found += [registration for registration in shipped_study_preregistrations()
                  if registration.study_file not in named]
    return found, missing


def shipped_study_preregistrations() -> list[Preregistration]:
    """The declarations of the shipped studies that make one, for a report that joins several."""
    return [registration for name in study_names() if (registration := study_preregistration(name)) is not None]


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


def study_rows(grid: Grid, study: str | None = None) -> list[dict[str, Any]]:
    """One row per finished cell (module docstring), in the grid's order; with `study` (a shipped study's name or a
    study file's path), each row names it (`study`) and the digest of its definition (`study_definition`,
    `budget_preregistration.study_definition_digest`), which every cell was checked against before this report
    (`grid_runner.run_grid` refuses a unit whose recorded definition differs from the study's)."""
    named = {} if study is None else {"study": study, "study_definition": study_definition_digest(_study_file(study)[1])}
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
                     **named, **recorded_provenance(row)})
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


ATTENTION_PROBE_NAME = "attention_probe.json"
ATTENTION_EXAMPLES = 64


def attention_rows(grid: Grid, num_examples: int = ATTENTION_EXAMPLES) -> list[dict[str, Any]]:
    """One row per finished cell: its configuration, arm (kind and name), seed and depth, and its fine-tuned model's
    attention (`analysis.attention_probe`: near-2 ratio per layer and proximity profiles), computed once and cached
    in the cell's folder (`ATTENTION_PROBE_NAME`)."""
    tasks, rows = {}, []
    for cell in cells(grid):
        if read_json(cell.folder(grid) / PHASE_RESULT_NAME) is None:
            continue
        probe = read_json(cell.folder(grid) / ATTENTION_PROBE_NAME)
        if probe is None or probe.get("num_examples_asked") != num_examples:
            task = prepare_unit(grid, cell.task, cell.seed, None, tasks)[0]
            probe = {**probe_attention(cell.folder(grid), task, num_examples), "num_examples_asked": num_examples}
            write_json(cell.folder(grid) / ATTENTION_PROBE_NAME, probe)
        arm = arm_named(grid, cell.arm)
        rows.append({"config": cell.task, "arm": arm_kind(arm.name, arm.pretrain_epochs), "arm_name": arm.name,
                     "seed": cell.seed, "num_layers": arm_depth(grid, arm, cell.task),
                     **{key: probe[key] for key in ("near", "near_ratio_by_layer", "distances", "profile_by_layer",
                                                    "num_examples")}})
    return rows


def shipped_study_configs() -> dict[str, list[str]]:
    """{shipped study: its configurations (task keys)}: which configurations of a combined report one study ran,
    so their paired differences can be pooled."""
    return {name: list(read_settings_file(STUDIES_DIR / f"{name}.yaml", "Study file")["tasks"]) for name in study_names()}


__all__ = ["STUDIES_DIR", "PROBE_NAME", "TITLE_KEY", "study_names", "study_grid", "study_titles",
           "shipped_study_titles", "seeds_on_record", "arm_kind", "study_rows", "checkpoint_rows",
           "shipped_study_configs", "study_preregistration", "shipped_study_preregistrations", "rows_preregistrations",
           "ATTENTION_PROBE_NAME", "ATTENTION_EXAMPLES", "attention_rows"]
