"""Each phase's Trainer arguments, from its resolved settings (`run_spec.PhaseSpec`) and its task.

The shared `TrainingArguments` flags reach both phases unchanged, with the phase's budget resolved once
(`run_spec.phase_value`). What the task decides is filled in here: the batch size when no flag sets it (the
preset's), the masking rate when none is given, the training sampler when `--train_sampling_strategy` is not given
(`default_sampling_strategy`: length-grouped batches when lengths vary), the class weights counted on the training
labels. Each phase writes to its own folder and, with `--push_to_hub`, to its own Hub repo. The device defaults
(pinned memory, non-blocking copies, the width multiple) are the phase arguments' own (`training.arguments.
DeviceDefaults`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from transformers.integrations import get_reporting_integration_callbacks

from ..errors import UserInputError, one_line
from ..tasks import Task
from ..training.arguments import FinetuneArguments, PretrainArguments
from ..training.dataset_columns import inputs_only
from ..training.hub_kernels import check_hub_kernels_available
from ..training.length_grouping import default_sampling_strategy
from ..training.losses import class_weights_from_spec
from .arguments import PHASE_ARGUMENTS
from .run_spec import PhaseSpec


def trainer_kwargs(spec: PhaseSpec, folder: Path, preset_batch: int, epochs: float | None = None,
                   sampling: str = "random") -> dict[str, Any]:
    """`TrainingArguments` keyword arguments of the phase `spec` resolves, writing to `folder`.

    `preset_batch`: the task preset's batch size, used when no flag sets one; `epochs` overrides
    the phase's epochs (the compute-matched scratch arm of the ablation grid); `sampling`: the
    training sampler when `--train_sampling_strategy` is not given.
    """
    shared = spec.trainer
    batch = preset_batch if spec.batch_size is None else spec.batch_size
    eval_batch = shared.get("per_device_eval_batch_size")
    return {
        **shared,
        "output_dir": str(folder),
        "num_train_epochs": epochs if epochs is not None else spec.epochs,
        "learning_rate": spec.learning_rate,
        "per_device_train_batch_size": batch,
        "per_device_eval_batch_size": batch if eval_batch is None else eval_batch,
        "max_steps": spec.max_steps,
        "train_sampling_strategy": shared.get("train_sampling_strategy") or sampling,
        # with --push_to_hub: the phase's final model only (hub_strategy "end"), to HUB_MODEL_ID-<phase folder>
        "hub_model_id": f"{shared.get('hub_model_id')}-{folder.name}" if shared.get("push_to_hub") else None,
        "hub_strategy": shared.get("hub_strategy") or "end",
    }


def masking_rate(spec: PhaseSpec, task: Task) -> float:
    """`--mlm_probability` as given (validated elsewhere), the task preset's only when it is not given."""
    return task.preset.mlm_probability if spec.mlm_probability is None else spec.mlm_probability


def pretrain_arguments(task: Task, spec: PhaseSpec, folder: Path) -> PretrainArguments:
    """The pretraining phase's arguments: the shared flags, its budget and its masking options."""
    return PretrainArguments(
        mlm_probability=masking_rate(spec, task),
        mask_replace_prob=spec.mask_replace_prob,
        random_replace_prob=spec.random_replace_prob,
        token_weighting=spec.token_weighting,
        **trainer_kwargs(spec, folder, task.preset.batch_size,
                         sampling=default_sampling_strategy(inputs_only(task.dataset["train"]))),
    )


def finetune_arguments(task: Task, spec: PhaseSpec, folder: Path, num_labels: int,
                       epochs: float | None = None) -> FinetuneArguments:
    """A fine-tuning arm's arguments: the shared flags, its budget, and class weights counted on the training labels."""
    return FinetuneArguments(
        class_weights=class_weights_from_spec(spec.class_weighting, task.dataset["train"]["labels"], num_labels),
        **trainer_kwargs(spec, folder, task.preset.batch_size, epochs,
                         sampling=default_sampling_strategy(task.dataset["train"])),
    )


def check_trainer_settings(specs: Iterable[PhaseSpec], preset_batch: int, output_dir: Path) -> None:
    """Build the Trainer arguments of each phase in `specs` as the phase will (the task preset's batch size
    `preset_batch`), and the reporting integrations `--report_to` names, before any data: a value transformers
    refuses (an optimizer or scheduler it lacks, an evaluation strategy the best-checkpoint rule cannot use, a
    reporter that is unknown or not installed, `--use_hub_kernels` without the `kernels` package) is a one-line user
    error naming the phase and the value."""
    specs = list(specs)
    if any(spec.trainer.get("use_hub_kernels") for spec in specs):
        check_hub_kernels_available()
    for spec in specs:
        try:
            args = PHASE_ARGUMENTS[spec.phase](**trainer_kwargs(spec, output_dir / spec.phase, preset_batch))
        except UserInputError:
            raise
        except ValueError as error:
            raise UserInputError(f"The {spec.phase} phase's Trainer arguments: transformers refuses them: "
                                 f"{one_line(error)}") from None
        try:
            for integration in get_reporting_integration_callbacks(args.report_to):
                integration()  # an integration whose package is missing raises here, as it would in the Trainer
        except (ValueError, RuntimeError, ImportError) as error:
            raise UserInputError(f"--report_to {' '.join(args.report_to)}: {one_line(error)}") from None


__all__ = ["masking_rate", "trainer_kwargs", "pretrain_arguments", "finetune_arguments", "check_trainer_settings"]
