"""What defines a phase, recorded in its folder so that a re-run never reports another run's numbers.

A phase (the pretraining phase, a fine-tuning arm, an ablation cell, a shared pretraining job)
writes `phase_definition.json` before it trains: the hf_spt version, the seed, a content
fingerprint of every data split it reads, the model config, the training settings that change
its result, and where its weights start (a phase folder: its own definition digest; another local
checkpoint: a digest of its config and weight bytes; a Hub id: the id), parts taken, parts frozen. A re-run compares its definition with the recorded one: equal, it skips
the finished phase or resumes the interrupted one; different, it stops before any work and
lists each differing setting (old -> new), with the two ways out (another `--output_dir`, or
`--overwrite_output_dir`, which clears the phase folder first).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from datasets import Dataset
from transformers import PreTrainedConfig, TrainingArguments

from ..atomic_files import TEMPORARY_FILE, write_text
from ..errors import UserInputError
from ..tasks import Task
from ..training.checkpoints import content_digest
from ..training.model_card import package_version

DEFINITION_NAME = "phase_definition.json"
# config entries that saving or loading a model sets, which say nothing of what the model is
CONFIG_METADATA = frozenset({"transformers_version", "architectures", "auto_map", "dtype", "torch_dtype",
                             "_name_or_path", "use_cache"})
# TrainingArguments fields that change where or how a run reports, never what it learns.
REPORTING_FIELDS = frozenset({
    "output_dir", "logging_dir", "run_name", "report_to", "push_to_hub", "hub_model_id", "hub_strategy", "hub_token",
    "hub_private_repo", "hub_always_push", "hub_revision", "save_total_limit", "logging_steps", "logging_strategy",
    "logging_first_step", "logging_nan_inf_filter", "disable_tqdm", "dataloader_num_workers", "dataloader_pin_memory",
    "dataloader_persistent_workers", "dataloader_prefetch_factor", "overwrite_output_dir", "resume_from_checkpoint",
    "save_safetensors", "save_on_each_node", "save_only_model", "log_level", "log_level_replica", "log_on_each_node",
    "trackio_space_id", "project", "flush_denormal", "local_rank", "ddp_timeout", "include_num_input_tokens_seen",
})


class PhaseDefinitionMismatch(UserInputError):
    """The phase folder holds a phase defined differently from the one asked for."""


def dataset_fingerprint(dataset: Dataset) -> str:
    """A digest of the data's content (column names, types and values), independent of caches and paths."""
    if dataset._indices is not None:  # a selection or shuffle: hash the rows it shows, in its order
        dataset = dataset.flatten_indices()
    digest = hashlib.blake2b(digest_size=16)
    table = dataset.data.table
    # Arrow's stream format writes exactly the rows a (possibly sliced) table shows, streamed into the hash
    with pa.ipc.new_stream(pa.PythonFile(_HashSink(digest), mode="w"), table.schema) as writer:
        writer.write_table(table)
    return digest.hexdigest()


class _HashSink:
    """A write-only file that feeds what is written into a hash."""

    closed = False

    def __init__(self, digest: "hashlib._Hash"):
        self.digest = digest

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def training_settings(args: Any) -> dict[str, Any]:
    """The phase's `TrainingArguments` that change its result (everything but reporting and paths)."""
    return {key: value for key, value in sorted(args.to_dict().items()) if key not in REPORTING_FIELDS}


def definition_digest(definition: Mapping[str, Any]) -> str:
    """A short digest of a definition, recorded by the phases that start from this one."""
    return hashlib.blake2b(json.dumps(definition, sort_keys=True, default=str).encode(), digest_size=8).hexdigest()


def source_identity(
    init_from: str | Path | None, source_definition: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """Where a phase's weights start: a phase folder's definition digest (`source_definition`, the
    definition of a phase this run has yet to train, else the one recorded in `init_from`); for any
    other local checkpoint, the digest of its config and weight bytes, so new weights copied over the
    same path change the definition; for a Hub id, the id."""
    if init_from is None:
        return None
    recorded = source_definition
    if recorded is None and Path(init_from).is_dir():
        recorded = read_definition(Path(init_from))
    if recorded is not None:
        return {"phase_definition": definition_digest(recorded)}
    if Path(init_from).exists():
        return {"weights": content_digest(init_from)}
    return {"path": str(init_from)}


def phase_definition(
    *, phase: str, seed: int, data: Mapping[str, Dataset], model_config: Mapping[str, Any], args: Any,
    init_from: str | Path | None = None, init_parts: str | None = None, freeze_parts: str | None = None,
    extra: Mapping[str, Any] | None = None, source_definition: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything that defines one phase's result, as plain JSON values (`source_definition`: see `source_identity`)."""
    definition = {
        "hf_spt": package_version()[0],
        "phase": phase,
        "seed": seed,
        "data": {split: dataset_fingerprint(dataset) for split, dataset in sorted(data.items())},
        "model": {key: value for key, value in sorted(model_config.items()) if key not in CONFIG_METADATA},
        "training": training_settings(args),
        "init_from": source_identity(init_from, source_definition),
        "init_parts": init_parts,
        "freeze_parts": freeze_parts,
        **dict(extra or {}),
    }
    return json.loads(json.dumps(definition, default=str))  # the form it takes on disk, so comparisons are exact


def read_definition(folder: Path) -> dict[str, Any] | None:
    """The definition recorded in `folder`, or None when there is none (or it cannot be read)."""
    path = folder / DEFINITION_NAME
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return None


def differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Each setting that differs, as `name: old -> new` (nested settings joined with dots)."""
    if isinstance(old, dict) and isinstance(new, dict):
        lines = []
        for key in sorted(set(old) | set(new), key=str):
            name = f"{prefix}.{key}" if prefix else str(key)
            lines += differences(old.get(key, "<unset>"), new.get(key, "<unset>"), name)
        return lines
    return [] if old == new else [f"{prefix}: {old!r} -> {new!r}"]


RESTART_ADVICE = "Use another --output_dir, or --overwrite_output_dir to clear the phase folders and start over."


def holds_nothing(folder: Path) -> bool:
    """Whether `folder` is missing, empty, or holds only a definition killed mid-write."""
    killed = f".{DEFINITION_NAME}."  # `record_definition`'s temporary: `atomic_files.TEMPORARY_FILE` of its name
    return not folder.is_dir() or all(TEMPORARY_FILE.fullmatch(path.name) and path.name.startswith(killed)
                                      for path in folder.iterdir())


def phase_folder_problem(folder: Path, definition: Mapping[str, Any]) -> str | None:
    """Why `folder` cannot be this phase's (None: it can): it holds a phase defined otherwise, or an unrecorded one.

    An empty or missing folder (or one holding only a definition killed mid-write), and one whose
    recorded definition equals `definition`, pass.
    """
    if holds_nothing(folder):
        return None
    recorded = read_definition(folder)
    if recorded is None:
        return (f"{folder} holds files of an earlier run that recorded no {DEFINITION_NAME}, so whether it is the run "
                "asked for cannot be told.")
    changed = differences(recorded, dict(definition))
    if changed:
        listing = "\n  ".join(changed)
        return (f"{folder} holds a run defined differently from this one; reusing it would report its numbers as "
                f"this run's. Differences (recorded -> asked for):\n  {listing}")
    return None


def check_phase_folders(phases: Iterable[tuple[Path, Mapping[str, Any]]]) -> None:
    """Stop before any work when a folder holds a phase defined otherwise than the one it is for, or an unrecorded
    one (`phase_folder_problem`), listing every such folder, not only the first."""
    problems = [problem for folder, definition in phases if (problem := phase_folder_problem(folder, definition))]
    if problems:
        raise PhaseDefinitionMismatch("\n".join([*problems, RESTART_ADVICE]))


def check_phase_folder(folder: Path, definition: Mapping[str, Any]) -> None:
    """`check_phase_folders` for one folder."""
    check_phase_folders([(folder, definition)])


def record_definition(folder: Path, definition: Mapping[str, Any]) -> None:
    """Write the definition into the phase folder (atomically: a kill never leaves half a file)."""
    write_text(folder / DEFINITION_NAME, json.dumps(definition, indent=1, sort_keys=True))


def numerics_setting(numerics: str | None) -> dict[str, str]:
    """The definition's `numerics` entry: {"numerics": "portable AVX2"} for a phase pinned to portable CPU numerics
    (`hf_spt.numerics`), nothing for a native one, so that every definition recorded before the setting existed (all
    native) still matches its re-run, and a resume with the other numerics is refused."""
    return {"numerics": numerics} if numerics else {}


def pretrain_definition(
    task: Task, config: PreTrainedConfig, objective: str, args: TrainingArguments, init_from: str | Path | None,
    numerics: str | None = None,
) -> dict[str, Any]:
    """The pretraining phase's definition: the inputs it reads (train, validation), its model and masking, and its
    CPU numerics (`numerics_setting`)."""
    return phase_definition(
        phase="pretrain", seed=args.seed, data={split: task.dataset[split] for split in ("train", "validation")},
        model_config=config.to_dict(), args=args, init_from=init_from,
        extra={"task": task.name, "pretrain_objective": objective, **numerics_setting(numerics)},
    )


def finetune_definition(
    task: Task, config: PreTrainedConfig, arm: str, args: TrainingArguments, init_from: str | Path | None = None,
    init_parts: str | None = None, freeze_parts: str | None = None, source_definition: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None, numerics: str | None = None,
) -> dict[str, Any]:
    """A fine-tuning arm's definition: the splits it reads, its model, its starting weights (by the source
    phase's definition digest, so that re-pretraining changes it too), parts taken and frozen,
    `settings` the Trainer does not hold (the fine-tuning method and its LoRA settings, early stopping) and its
    CPU numerics (`numerics_setting`)."""
    return phase_definition(
        phase=arm, seed=args.seed, data={split: task.dataset[split] for split in ("train", "validation", "test")},
        model_config=config.to_dict(), args=args, init_from=init_from, init_parts=init_parts,
        freeze_parts=freeze_parts, extra={"task": task.name, **dict(settings or {}), **numerics_setting(numerics)},
        source_definition=source_definition,
    )


__all__ = ["DEFINITION_NAME", "PhaseDefinitionMismatch", "dataset_fingerprint", "training_settings",
           "definition_digest", "phase_definition", "numerics_setting", "pretrain_definition", "finetune_definition", "read_definition",
           "differences", "holds_nothing", "phase_folder_problem", "check_phase_folders", "check_phase_folder",
           "record_definition"]
