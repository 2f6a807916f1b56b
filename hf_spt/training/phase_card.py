"""A phase's model card data: where its weights came from and how it trained, from the phase's own values.

The card (`model_card.SptModelCardData`) knows nothing of command-line flags; `phase_card_data` fills it from
one phase of the two-phase pipeline: its starting weights (named without a local absolute path), pretraining
objective and masking rate, the parts taken from another checkpoint and the frozen ones, its training settings.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from transformers import PreTrainedConfig, TrainingArguments

from .model_card import PRETRAINING_TASKS, CARD_TRAINING_FIELDS, SptModelCardData


def starting_weights_reference(
    init_from: str | Path | None, phase_folder: str | Path, hub_model_id: str | None
) -> tuple[str | None, str | None]:
    """How a card names the weights a phase started from: (the name, the `base_model` Hub id or None).

    Never a local absolute path, which a Hub push would publish: a folder of this run that the run
    pushed (`hub_model_id` set, the folder a sibling of `phase_folder`) is named by the Hub id it
    went to, `hub_model_id-<folder name>`; any other local folder by its path relative to the run
    folder (the parent of `phase_folder`); a Hub id as it is.
    """
    if init_from is None:
        return None, None
    if not Path(init_from).exists():
        return str(init_from), str(init_from)
    source, run_folder = Path(init_from).resolve(), Path(phase_folder).resolve().parent
    if hub_model_id and source.parent == run_folder:
        return f"{hub_model_id}-{source.name}", f"{hub_model_id}-{source.name}"
    return Path(os.path.relpath(source, run_folder)).as_posix(), None


def _part_text(part: str, init: str | None, layers: dict[str, list[str]] | None) -> str:
    """`qk of pretrain (layers 0, 1: 4 tensors)`: a transplanted part and what of it was loaded."""
    if layers is None:
        return f"{part} of {init}"
    where = ", ".join(name for name in layers if name != "-")
    count = sum(len(keys) for keys in layers.values())
    return f"{part} of {init} ({f'layers {where}: ' if where else ''}{count} tensors)"


def phase_card_data(
    task_name: str,
    train_rows: int,
    config: PreTrainedConfig,
    objective: str,
    mlm_probability: float,
    phase: str,
    args: TrainingArguments,
    init_from: str | Path | None = None,
    pretrain_epochs: float | None = None,
    extra_training: dict[str, Any] | None = None,
    init_parts: str | None = None,
    freeze_parts: str | None = None,
    pretraining_data: str | None = None,
    adapter: dict[str, Any] | None = None,
    loaded: dict[str, dict[str, list[str]]] | None = None,
) -> SptModelCardData:
    """Card data of one pipeline phase on task `task_name` of `train_rows` training rows (metrics are filled in
    when the phase ends).

    `objective` and `mlm_probability`: the SPT objective and masking rate of the pretraining behind these weights
    (stated only when there was one). `phase` is "pretrain" or a fine-tuning arm; `init_from` the weights it started from;
    `pretrain_epochs` the epochs the pretraining phase behind these weights ran (None: none, or unknown).
    `init_parts`: only these parts came from `init_from` (hybrid init; None: all but the head);
    `freeze_parts`: parts kept at their initial values. `pretraining_data`: what the pretraining
    phase behind `init_from` read, as its phase.json recorded it (cross-task SPT: another task's
    inputs); None: this phase's task. `adapter`: a LoRA arm's peft settings and base weights.
    `loaded`: with `init_parts`, the keys loaded per part and layer (`LoadReport.loaded_by_part`),
    so the card says which layers each part reached.
    """
    backbone = getattr(config, "backbone", None) or config
    had_spt = phase in ("pretrain", "spt") or pretrain_epochs is not None
    objective = objective if had_spt else None
    hub_prefix = args.hub_model_id.removesuffix(f"-{Path(args.output_dir).name}") if args.push_to_hub else None
    init, base_model = starting_weights_reference(init_from, args.output_dir, hub_prefix)
    training = {name: getattr(args, name) for name in CARD_TRAINING_FIELDS}
    training.update(extra_training or {})
    return SptModelCardData(
        model_name=f"{task_name}-{phase}",
        phase=phase,
        task_name=task_name,
        architecture=backbone.model_type,
        objective=objective,
        init_from=init,
        base_model=base_model,
        pretraining_data=(pretraining_data or f"the training inputs of task {task_name} ({train_rows} "
                          "rows, labels unused)") if had_spt else None,
        pretraining_task=PRETRAINING_TASKS[objective] if objective else None,
        pretrain_epochs=pretrain_epochs if had_spt else None,
        mlm_probability=mlm_probability if objective == "masked" else None,
        init_parts=([_part_text(part, init, (loaded or {}).get(part)) for part in init_parts.split(",")] if init_parts
                      else [f"all weights of {init} except the task head"] if init else []),
        freeze_parts=freeze_parts.split(",") if freeze_parts else [],
        adapter=adapter,
        seed=args.seed,
        training=training,
        hub_model_id=args.hub_model_id if args.push_to_hub else None,
    )


__all__ = ["phase_card_data", "starting_weights_reference"]
