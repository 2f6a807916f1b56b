"""Each phase's Trainer arguments, from the flags both phases share and the phase's own.

The shared `TrainingArguments` flags (`SharedTrainingArguments`) reach both phases unchanged;
per phase, the budget (epochs, learning rate, batch size, max steps) is the per-phase flag, else
the generic flag, else our default (`ExperimentArguments.phase_setting`). Each phase writes to its
own folder and, with `--push_to_hub`, to its own Hub repo. The training sampler is the flag when
given, else the phase's data decide (`default_sampling_strategy`: length-grouped batches when
lengths vary). Data loaders pin memory and copy batches to the device without blocking the host,
and padded batches are widened to a multiple of 8, only when an accelerator can use it: on a
CPU-only machine PyTorch would warn at every evaluation, and wider batches only cost time (CPU
runs stay bit-identical to those before the multiple).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from transformers import TrainingArguments
from transformers.integrations import get_reporting_integration_callbacks

from ..errors import UserInputError, one_line
from ..tasks import Task
from ..training.arguments import FinetuneArguments, PretrainArguments
from ..training.hub_kernels import check_hub_kernels_available
from ..training.length_grouping import default_sampling_strategy
from ..training.losses import class_weights_from_spec
from ..training.dataset_columns import inputs_only
from .arguments import PHASE_ARGUMENTS, ExperimentArguments, SharedTrainingArguments


GPU_PAD_MULTIPLE = 8
"""Batch widths on an accelerator: a multiple of 8 keeps tensor-core and fused attention kernels on aligned shapes
(LRA's lengths vary: 99 widths in 100 ListOps batches, 77% of them not a multiple of 8)."""


def accelerator_available(training: TrainingArguments) -> bool:
    """Whether the Trainer will run on an accelerator (a GPU, MPS...), which pinned memory speeds up."""
    return not training.use_cpu and torch.accelerator.is_available()


def trainer_kwargs(
    exp: ExperimentArguments, training: SharedTrainingArguments, phase: str, folder: Path, preset_batch: int,
    epochs: float | None = None, sampling: str = "random",
) -> dict[str, Any]:
    """`TrainingArguments` keyword arguments of `phase` ("pretrain"/"finetune") writing to `folder`.

    `preset_batch`: the task preset's batch size, used when no flag sets one; `epochs` overrides
    the phase's epochs (the compute-matched scratch arm of the ablation grid); `sampling`: the
    training sampler when `--train_sampling_strategy` is not given.
    """
    batch = exp.phase_setting(training, phase, "batch_size")
    batch = preset_batch if batch is None else batch
    on_cpu = not accelerator_available(training)
    if training.fp16 and on_cpu:
        raise UserInputError("--fp16 needs a GPU; on this CPU-only machine it would be recorded and do nothing. Use "
                             "--bf16 (linear layers in bfloat16, attention in float32: docs/performance.md) or neither.")
    eval_batch = batch if training.per_device_eval_batch_size is None else training.per_device_eval_batch_size
    pin_memory = training.dataloader_pin_memory
    return {
        **training.phase_kwargs(phase),
        "output_dir": str(folder),
        "num_train_epochs": epochs if epochs is not None else exp.phase_setting(training, phase, "epochs"),
        "learning_rate": exp.phase_setting(training, phase, "learning_rate"),
        "per_device_train_batch_size": batch,
        "per_device_eval_batch_size": eval_batch,
        "max_steps": exp.phase_setting(training, phase, "max_steps"),
        "train_sampling_strategy": training.train_sampling_strategy or sampling,
        # with --push_to_hub: the phase's final model only (hub_strategy "end"), to HUB_MODEL_ID-<phase folder>
        "hub_model_id": f"{training.hub_model_id}-{folder.name}" if training.push_to_hub else None,
        "hub_strategy": training.hub_strategy or "end",
        "dataloader_pin_memory": not on_cpu if pin_memory is None else pin_memory,
        "pad_to_multiple_of": (None if on_cpu else GPU_PAD_MULTIPLE) if training.pad_to_multiple_of is None
        else training.pad_to_multiple_of,
        # on an accelerator, batches copied from pinned memory without blocking the host (Accelerate's non_blocking)
        "accelerator_config": ({"non_blocking": True} if not on_cpu else None) if training.accelerator_config is None
        else training.accelerator_config,
        # --bf16 without an accelerator: transformers asks for use_cpu, then autocasts on the CPU
        **({"use_cpu": True} if training.bf16 and on_cpu else {}),
    }


def masking_rate(exp: ExperimentArguments, task: Task) -> float:
    """`--mlm_probability` as given (validated elsewhere), the task preset's only when it is not given."""
    return task.preset.mlm_probability if exp.mlm_probability is None else exp.mlm_probability


def pretrain_arguments(
    task: Task, exp: ExperimentArguments, training: SharedTrainingArguments, folder: Path
) -> PretrainArguments:
    """The pretraining phase's arguments: the shared flags, its budget and its masking options."""
    return PretrainArguments(
        mlm_probability=masking_rate(exp, task),
        mask_replace_prob=exp.mask_replace_prob,
        random_replace_prob=exp.random_replace_prob,
        token_weighting=exp.token_weighting,
        **trainer_kwargs(exp, training, "pretrain", folder, task.preset.batch_size,
                         sampling=default_sampling_strategy(inputs_only(task.dataset["train"]))),
    )


def finetune_arguments(
    task: Task, exp: ExperimentArguments, training: SharedTrainingArguments, folder: Path, num_labels: int,
    epochs: float | None = None,
) -> FinetuneArguments:
    """A fine-tuning arm's arguments: the shared flags, its budget, and class weights counted on the training labels."""
    return FinetuneArguments(
        class_weights=class_weights_from_spec(exp.class_weighting, task.dataset["train"]["labels"], num_labels),
        **trainer_kwargs(exp, training, "finetune", folder, task.preset.batch_size, epochs,
                         sampling=default_sampling_strategy(task.dataset["train"])),
    )


def check_trainer_settings(exp: ExperimentArguments, training: SharedTrainingArguments, preset_batch: int,
                           output_dir: Path, phases: Iterable[str]) -> None:
    """Build each of `phases`' Trainer arguments as the phase will ("pretrain"/"finetune", the task preset's batch
    size `preset_batch`), and the reporting integrations `--report_to` names, before any data: a value transformers
    refuses (an optimizer or scheduler it lacks, an evaluation strategy the best-checkpoint rule cannot use, a
    reporter that is unknown or not installed, `--use_hub_kernels` without the `kernels` package) is a one-line user
    error naming the phase and the value."""
    if training.use_hub_kernels:
        check_hub_kernels_available()
    for phase in phases:
        kwargs = trainer_kwargs(exp, training, phase, output_dir / phase, preset_batch)
        try:
            args = PHASE_ARGUMENTS[phase](**kwargs)
        except ValueError as error:
            raise UserInputError(f"The {phase} phase's Trainer arguments: transformers refuses them: "
                                 f"{one_line(error)}") from None
        try:
            for integration in get_reporting_integration_callbacks(args.report_to):
                integration()  # an integration whose package is missing raises here, as it would in the Trainer
        except (ValueError, RuntimeError, ImportError) as error:
            raise UserInputError(f"--report_to {' '.join(args.report_to)}: {one_line(error)}") from None


__all__ = ["GPU_PAD_MULTIPLE", "accelerator_available", "masking_rate", "trainer_kwargs", "pretrain_arguments",
           "finetune_arguments", "check_trainer_settings"]
