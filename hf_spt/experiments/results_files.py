"""A run folder's results: `results.json` and the same table as `results.md`, listing every finished arm
the folder holds.

A run trains (or reuses) the arms of its `--mode`; its folder may hold other finished arms, left by a
run of another mode (a `--mode spt` re-run into a compare run's folder). Those are read back from their
`phase.json` and listed too, so a re-run never drops an arm that is on disk. One that does not go with
this run (trained with another seed or on other data, or fine-tuned from another pretraining than the
folder's `pretrain/`, told by definition digests, never by paths) is listed with a `note` saying so, which
`results.md` prints under its table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..atomic_files import write_json, write_text
from ..runs.folder import PHASE_RESULT_NAME, read_json
from ..runs.phase_definition import dataset_fingerprint, definition_digest, read_definition
from ..tasks import Task
from .modes import MODES, PRETRAIN_FOLDER

ARM_FOLDERS = tuple(dict.fromkeys(("scratch", "spt", *(arm.name for mode in MODES.values() for arm in mode.arms))))
"""Every arm a run folder can hold (each in the folder of its name), in the order results list them."""


def results_table(task_name: str, arms: list[dict[str, Any]]) -> str:
    """Markdown table of the arms' test and validation scores and times; with a LoRA arm, their trainable
    parameters too; then the arms' notes."""
    counts = any(arm.get("finetune_method") == "lora" for arm in arms)
    header = "| arm | test accuracy | validation accuracy |" + (" trainable parameters |" if counts else "")
    lines = [f"Task: {task_name}", "", header + " seconds |", "|---|---|---|" + ("---|" if counts else "") + "---|"]
    for arm in arms:
        trained = f" {arm['trainable_parameters']:,} of {arm['total_parameters']:,} |" if counts else ""
        lines.append(
            f"| {arm['arm']} | {arm.get('test_accuracy', float('nan')):.4f} "
            f"| {arm.get('eval_accuracy', float('nan')):.4f} |{trained} {arm['seconds']:.1f} |"
        )
    notes = [f"- {arm['arm']}: {arm['note']}" for arm in arms if "note" in arm]
    return "\n".join(lines + (["", "Notes:", *notes] if notes else [])) + "\n"


def write_results(output_dir: Path, task_name: str, arms: list[dict[str, Any]], extra: dict[str, Any]) -> None:
    """`results.json` ({"task", "arms": [...]}, plus run settings) and the same table as `results.md`."""
    output_dir.mkdir(parents=True, exist_ok=True)
    write_json(output_dir / "results.json", {"task": task_name, "arms": arms, **extra})
    write_text(output_dir / "results.md", results_table(task_name, arms))


def _started_from(recorded: dict[str, Any] | None, pretraining: dict[str, Any] | None) -> bool | None:
    """Whether the arm defined by `recorded` was fine-tuned from the phase defined by `pretraining` (the run folder's
    `pretrain/`), told by the definition digest the arm recorded as its start, never by a path (a copied or moved
    folder, or a relative `--output_dir` re-run from another folder, names the same pretraining by another path).
    None: the arm started from no phase folder (or the run folder holds no recorded pretraining), so there is
    nothing to match."""
    start = (recorded or {}).get("init_from") or {}
    if pretraining is None or "phase_definition" not in start:
        return None
    return start["phase_definition"] == definition_digest(pretraining)


def _apart(
    recorded: dict[str, Any] | None, seed: int, data: dict[str, str], pretraining: dict[str, Any] | None
) -> list[str]:
    """Why an arm read back, whose folder recorded the definition `recorded`, does not go with this run (none: it
    does)."""
    if recorded is None:
        return ["its folder records no phase definition, so what it was trained with is unknown"]
    notes = []
    if recorded.get("seed") != seed:
        notes.append(f"trained with seed {recorded.get('seed')}, this run with seed {seed}")
    if recorded.get("data") != data:
        notes.append("trained on other data than this run's")
    if _started_from(recorded, pretraining) is False:
        notes.append(f"fine-tuned from another pretraining than this folder's {PRETRAIN_FOLDER}/ (an earlier one, "
                     "trained again since, or another folder's)")
    return notes


def listed_arms(
    output_dir: Path, trained: list[dict[str, Any]], task: Task, seed: int, pretrain: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The arms `results.json` lists: those this run trained (or reused), and every other finished arm in the
    folder, read back (with a `note` when it does not go with this run), in `ARM_FOLDERS` order. An arm read
    back that was fine-tuned from the folder's `pretrain/` names it as its start, as a reused arm does
    (`phases.run_phase`). With the run's pretraining result (`pretrain`), an arm started from it that goes with
    this run counts its time too (`pretrain_seconds`, and `seconds` as their sum)."""
    by_name, data, arms = {arm["arm"]: arm for arm in trained}, None, []
    pretraining = read_definition(output_dir / PRETRAIN_FOLDER)
    for name in ARM_FOLDERS:
        arm = by_name.get(name)
        recorded = read_definition(output_dir / name)
        from_pretraining = _started_from(recorded, pretraining)
        if arm is None:
            if (arm := read_json(output_dir / name / PHASE_RESULT_NAME)) is None:
                continue
            data = data or {split: dataset_fingerprint(task.dataset[split]) for split in ("train", "validation", "test")}
            if notes := _apart(recorded, seed, data, pretraining):
                arm = {**arm, "note": "; ".join(notes)}
            elif from_pretraining:
                arm = {**arm, "init_from": str(output_dir / PRETRAIN_FOLDER)}
        if pretrain is not None and "note" not in arm and from_pretraining:
            arm = {**arm, "pretrain_seconds": pretrain["seconds"], "seconds": arm["seconds"] + pretrain["seconds"]}
        arms.append(arm)
    return arms


__all__ = ["PHASE_RESULT_NAME", "ARM_FOLDERS", "results_table", "write_results", "listed_arms"]
