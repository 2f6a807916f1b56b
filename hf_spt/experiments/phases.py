"""One phase of a run, built once and run as built: SPT (`pretrain_phase`) or a fine-tuning arm (`finetune_phase`;
`arm_phase` for an `arms.Arm`, the same for a mode's arm and a grid's).

A `PlannedPhase` holds everything that defines the phase, resolved once when it is planned: its folder, task, model
config, Trainer arguments, its definition (`runs.phase_definition`: what a re-run must match) and its resolved
settings (`run_spec.PhaseSpec`), never a command-line group, so nothing after planning reads a flag again. Every
entry point plans its phases here (`pipeline.plan_run` for `run_spt.py`'s modes, `suites.grid_runner.plan_grid` for
the grid, the LRA suite and the budget studies), checks every folder once, then calls `run_phase`, which trains the
phase or returns its result when it is finished. A phase records its definition before it trains; one that fails
before its first checkpoint removes what it wrote, and an interrupted one resumes from its newest checkpoint
(`runs.resume`).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from accelerate import PartialState
from transformers import EarlyStoppingCallback, PreTrainedConfig, TrainingArguments, set_seed
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..analysis.callback import ProximityCallback
from ..atomic_files import write_json
from ..errors import UserInputError
from ..numerics import MODE_LABELS, portable_numerics
from ..runs.folder import PHASE_RESULT_NAME, read_json
from ..runs.phase_definition import (check_phase_folder, finetune_definition, holds_nothing, pretrain_definition,
                                     record_definition)
from ..runs.provenance import run_provenance
from ..runs.resume import train_resuming
from ..tasks import Task
from ..training.finetune_trainer import FinetuneTrainer
from ..training.lora import parameter_counts
from ..training.lora_adapters import adapter_provenance, with_adapters
from ..training.model_card import SptModelCardData
from ..training.model_factory import classification_model, pretraining_collator, pretraining_model
from ..training.parts import freeze_parts as freeze_model_parts
from ..training.parts import load_partial_weights
from ..training.phase_card import phase_card_data
from ..training.pretrain_trainer import PretrainTrainer
from .arms import Arm, check_spt_weights_source
from .model_config import build_config, fit_to_checkpoint
from .numerics_entry import refuse_accelerator
from .phase_arguments import finetune_arguments, masking_rate, pretrain_arguments
from .run_spec import ModelSpec, PhaseSpec

LOG_HISTORY_NAME = "log_history.json"  # every phase's Trainer log history, as the Trainer keeps it
PROXIMITY_PROBE_SIZE = 32


@dataclass(frozen=True)
class PlannedPhase:
    """One phase, built once: its folder, task, model config, Trainer arguments, definition, resolved settings
    (`spec`: what it reads besides its Trainer arguments) and what it trains (`arm` None: SPT). `run_phase` runs it
    as built."""

    folder: Path
    task: Task
    config: PreTrainedConfig
    args: TrainingArguments
    definition: dict[str, Any]
    spec: PhaseSpec
    init_from: str | Path | None = None
    arm: str | None = None
    init_parts: str | None = None
    freeze_parts: str | None = None
    method: str = "full"

    @property
    def masking_rate(self) -> float:
        """The SPT masking rate, as the model card states it (the flag's, else the task preset's)."""
        return masking_rate(self.spec, self.task)


def pretrain_phase(task: Task, config: PreTrainedConfig, spec: PhaseSpec, folder: Path,
                   init_from: str | Path | None = None) -> PlannedPhase:
    """The SPT phase: MLM (or next-token prediction) on `task`'s training inputs, from random init or `init_from`."""
    args = pretrain_arguments(task, spec, folder)
    return PlannedPhase(folder, task, config, args,
                        pretrain_definition(task, config, spec.objective, args, init_from, phase_numerics(spec)), spec,
                        init_from)


def finetune_phase(
    task: Task, config: PreTrainedConfig, spec: PhaseSpec, folder: Path, arm: str, init_from: str | Path | None = None,
    init_parts: str | None = None, freeze_parts: str | None = None, epochs: float | None = None,
    method: str | None = None, source_definition: dict[str, Any] | None = None,
) -> PlannedPhase:
    """A fine-tuning arm: a classifier from `init_from`'s SPT or pretrained weights, or from scratch.

    `init_parts` ("qk", "attention,mlp"...): hybrid init, a fresh model given only those parts of
    `init_from`. `freeze_parts`: parts kept at their initial values. `epochs` overrides the
    fine-tuning epochs (the compute-matched scratch arm). `method`: "full" or "lora" (default:
    the spec's `finetune_method`); with LoRA only adapters and the head train (`training.lora_adapters.with_adapters`).
    `source_definition`: the definition of the phase `init_from` holds, when this run has yet to train it.
    """
    check_spt_weights_source(init_parts, init_from is not None, "init_parts", "pass init_from, the SPT checkpoint")
    method = method or spec.finetune_method
    args = finetune_arguments(task, spec, folder, config.num_labels, epochs)
    definition = finetune_definition(task, config, arm, args, init_from, init_parts, freeze_parts,
                                     source_definition=source_definition, settings=finetune_settings(spec, method),
                                     numerics=phase_numerics(spec))
    return PlannedPhase(folder, task, config, args, definition, spec, init_from, arm, init_parts, freeze_parts, method)


def arm_phase(arm: Arm, task: Task, config: PreTrainedConfig, model: ModelSpec, spec: PhaseSpec, folder: Path,
              checkpoint: str | Path | None = None, source_definition: dict[str, Any] | None = None,
              epochs: float | None = None, loads_checkpoint_whole: bool = False) -> PlannedPhase:
    """The fine-tuning phase of `arm` in `folder`: from `checkpoint` (the SPT checkpoint of a pretraining arm, whose
    definition is `source_definition` while it is not trained yet), from the model's weights (start "model") or
    from fresh weights of its architecture (start "random"). `loads_checkpoint_whole`: the run does not train the
    checkpoint, so an arm that loads all of it takes its architecture (flags that contradict it are errors).
    `epochs` overrides the fine-tuning epochs (compute-matched arms)."""
    init_from = checkpoint if arm.pretrain else model.weights if arm.start == "model" else None
    if arm.start == "random":
        if model.weights is None:
            raise UserInputError(f"Arm {arm.name!r} trains a pretrained model's architecture from fresh weights: give "
                                 "the pretrained model with --model_name_or_path (without --from_scratch).")
        config = build_config(task, replace(model, from_scratch=True))
    elif arm.pretrain and arm.init_parts is None and loads_checkpoint_whole:
        config = fit_to_checkpoint(config, init_from, model, task)
    return finetune_phase(task, config, spec, folder, arm.name, init_from, arm.init_parts, arm.freeze_parts,
                          epochs, arm.method, source_definition)


def phase_numerics(spec: PhaseSpec) -> str | None:
    """The CPU numerics a phase is defined with, from its settings alone (not the shell's variables, which the
    phase's record reports): "portable AVX2" or the cross-vendor mode's label (`numerics.MODE_LABELS`), else None
    (native)."""
    return MODE_LABELS.get(spec.portable_numerics)


def run_phase(phase: PlannedPhase, checked: bool = False) -> dict[str, Any]:
    """Train `phase`, or return its result when it is finished; `checked`: its folder was checked already (else
    a folder holding a phase defined otherwise raises `PhaseDefinitionMismatch` here).

    A finished arm's result names the start this run gives it (`init_from`), not the path it recorded: the
    definitions matched, so it is the same start, and in a run folder copied or moved elsewhere the path recorded
    names the old folder."""
    if not checked:
        check_phase_folder(phase.folder, phase.definition)
    if (done := _finished(phase.folder)) is not None:
        return done if phase.arm is None else {**done, "init_from": str(phase.init_from) if phase.init_from else None}
    if phase.spec.portable_numerics:  # a library run, or a unit's process: pinned here if its command did not
        refuse_accelerator(phase.args.use_cpu)
        portable_numerics(phase.spec.portable_numerics)
    return (_run_pretrain if phase.arm is None else _run_finetune)(phase)


def _run_pretrain(phase: PlannedPhase) -> dict[str, Any]:
    task, args, folder, spec = phase.task, phase.args, phase.folder, phase.spec
    with _recorded(folder, phase.definition):
        set_seed(args.seed)
        model = pretraining_model(phase.config, spec.objective, phase.init_from, args.use_hub_kernels)
        trainer = PretrainTrainer(
            model, args, task.dataset["train"], task.dataset["validation"], processing_class=task.tokenizer,
            data_collator=pretraining_collator(task.tokenizer, spec.objective),
        )
        _attach_probes(trainer, task, spec)
        clock = train_resuming(trainer, folder)
    metrics = trainer.evaluate()
    card = phase_card_data(task.name, len(task.dataset["train"]), model.config, spec.objective, phase.masking_rate,
                           "pretrain", args, phase.init_from, pretrain_epochs=trainer.state.epoch,
                           extra_training={"token_weighting": spec.token_weighting})
    return _finish(trainer, folder, {"phase": "pretrain", "eval_loss": metrics["eval_loss"],
                                     "epochs": trainer.state.epoch, "steps": trainer.state.global_step,
                                     "seconds": clock.seconds(), "train_sampling_strategy": args.train_sampling_strategy,
                                     "pretraining_data": card.pretraining_data,
                                     **({"data_notes": task.data_notes} if task.data_notes else {})}, card)


def _run_finetune(phase: PlannedPhase) -> dict[str, Any]:
    task, args, folder, init_from, init_parts = phase.task, phase.args, phase.folder, phase.init_from, phase.init_parts
    spec = phase.spec
    with _recorded(folder, phase.definition):
        set_seed(args.seed)
        loaded = None  # hybrid init: the keys taken from init_from, by part and layer
        if init_parts is None:
            model = classification_model(phase.config, init_from, args.use_hub_kernels)
        else:
            model = classification_model(phase.config, use_hub_kernels=args.use_hub_kernels)
            loaded = load_partial_weights(model, init_from, init_parts).loaded_by_part(init_parts)
        if phase.freeze_parts is not None:
            freeze_model_parts(model, phase.freeze_parts)
        if phase.method == "lora":
            model = with_adapters(model, spec.lora, folder)
        trainer = FinetuneTrainer(
            model, args, task.dataset["train"], task.dataset["validation"], processing_class=task.tokenizer
        )
        if spec.early_stopping_patience is not None:  # its counter is saved in checkpoints: a resumed run keeps it
            trainer.add_callback(EarlyStoppingCallback(early_stopping_patience=spec.early_stopping_patience))
        _attach_probes(trainer, task, spec)
        clock = train_resuming(trainer, folder)
    # Training has ended: early stopping judges no more evaluations (on the test metrics it would warn that
    # eval_accuracy is missing and early stopping is disabled, which reads as if it had been off all along).
    trainer.remove_callback(EarlyStoppingCallback)
    validation = trainer.evaluate()
    test = trainer.evaluate(task.dataset["test"], metric_key_prefix="test")
    result = {"arm": phase.arm, "init_from": str(init_from) if init_from else None, "init_parts": init_parts,
              "freeze_parts": phase.freeze_parts, "finetune_method": phase.method, **parameter_counts(model),
              "seconds": clock.seconds(), "steps": trainer.state.global_step, "epochs": trainer.state.epoch,
              "train_sampling_strategy": args.train_sampling_strategy, **({"loaded": loaded} if loaded else {}),
              **({"data_notes": task.data_notes} if task.data_notes else {})}
    result.update({k: v for k, v in {**validation, **test}.items() if k.endswith(("accuracy", "f1", "loss", "mse"))})
    source_phase = _finished(Path(init_from)) if init_from is not None and Path(init_from).is_dir() else None
    card = phase_card_data(task.name, len(task.dataset["train"]), model.config, spec.objective, phase.masking_rate,
                           phase.arm, args, init_from, pretrain_epochs=(source_phase or {}).get("epochs"),
                           extra_training={"class_weighting": spec.class_weighting}, init_parts=init_parts,
                           freeze_parts=phase.freeze_parts,
                           pretraining_data=(source_phase or {}).get("pretraining_data"),
                           loaded=loaded, adapter=adapter_provenance(model, folder) if phase.method == "lora" else None)
    return _finish(trainer, folder, result, card)


def finetune_settings(spec: PhaseSpec, method: str) -> dict[str, Any]:
    """What defines a fine-tuning arm besides its Trainer arguments: the method (with LoRA's settings) and
    early stopping."""
    settings: dict[str, Any] = {"finetune_method": method, "early_stopping_patience": spec.early_stopping_patience}
    if method == "lora":
        settings["lora"] = dict(spec.lora)
    return settings


def _attach_probes(trainer, task: Task, spec: PhaseSpec) -> None:
    """With --log_proximity, log proximity scores of the first validation inputs during training."""
    if spec.log_proximity:
        probe = task.dataset["validation"]["input_ids"][:PROXIMITY_PROBE_SIZE]
        ProximityCallback.attach(trainer, probe, every_n_steps=spec.proximity_every_n_steps)


def _finished(folder: Path) -> dict[str, Any] | None:
    """The phase's result; None when it has none yet or an unreadable one (then the phase runs again)."""
    return read_json(folder / PHASE_RESULT_NAME)


@contextmanager
def _recorded(folder: Path, definition: dict[str, Any]) -> Iterator[None]:
    """Around building and training a phase's model: its definition recorded first, so a killed run leaves a
    folder a re-run can judge. A failure before the phase's first checkpoint, in a folder that held nothing,
    removes what the phase wrote (its definition, a LoRA base): a check that fails there (weights that do not
    load, LoRA targets that do not fit) leaves nothing that would refuse the corrected re-run."""
    fresh = holds_nothing(folder)
    state = PartialState()
    state.wait_for_everyone()  # every rank has judged the folder before the main one writes into it
    if state.is_main_process:
        record_definition(folder, definition)
    try:
        yield
    except BaseException:
        if fresh and state.is_main_process and not any(folder.glob(f"{PREFIX_CHECKPOINT_DIR}-*")):
            shutil.rmtree(folder, ignore_errors=True)
        raise


def _finish(trainer, folder: Path, result: dict[str, Any], card: SptModelCardData | None = None) -> dict[str, Any]:
    result = {**result, **run_provenance()}  # every phase.json, so every row built from one, says what code made it
    if card is not None:  # the card gets the phase's metrics; with --push_to_hub, save_model pushes it too
        trainer.model_card_data = replace(card, metrics={k: v for k, v in result.items() if isinstance(v, float)})
    trainer.save_model(str(folder))
    if trainer.is_world_process_zero():
        write_json(folder / LOG_HISTORY_NAME, trainer.state.log_history)
        if card is not None:
            trainer.create_model_card()
        write_json(folder / PHASE_RESULT_NAME, result)
    return result


__all__ = ["LOG_HISTORY_NAME", "PlannedPhase", "pretrain_phase", "finetune_phase", "arm_phase", "finetune_settings",
           "phase_numerics", "run_phase"]
