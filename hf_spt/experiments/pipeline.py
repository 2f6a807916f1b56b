"""The two-phase experiment: self-pretrain, fine-tune, and compare with training from scratch.

Output layout under `output_dir`:
    pretrain/   SPT phase: Trainer checkpoints, and the best-validation MLM model at its root
    spt/        fine-tuned from pretrain/ (arm "spt")
    scratch/    fine-tuned from random init (arm "scratch")
    pretrained_lora/, pretrained_full/   --mode lora_comparison's other arms (see lora_finetuning.py)
    results.json, results.md   every finished arm in the folder (see run_results.py)
Each phase folder records what defines the phase (`phase_definition.json`, written before it
trains, and removed again with all the phase wrote when it fails before its first checkpoint)
and ends with `phase.json` (its metrics). A re-run with the same definitions skips the
finished phases and resumes the others from their last checkpoint, so an interrupted run loses
at most an epoch; a re-run defined otherwise (seed, sizes, data, settings) stops before any phase
trains, listing what changed. `--overwrite_output_dir` deletes the folders of the phases a run
trains before it starts.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from accelerate import PartialState
from transformers import EarlyStoppingCallback, PreTrainedConfig, TrainingArguments, set_seed
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..analysis.callback import ProximityCallback
from ..errors import UserInputError
from ..runs.folder import ElapsedTime, locks_output_dir, read_json, resume_checkpoint, write_json
from ..runs.hub import check_hub_ready
from ..runs.phase_definition import (check_phase_folder, check_phase_folders, finetune_definition, holds_nothing,
                                     pretrain_definition, record_definition)
from ..tasks import Task, load_task
from ..training.finetune_trainer import FinetuneTrainer
from ..training.lora import parameter_counts
from ..training.model_card import SptModelCardData
from ..training.model_factory import classification_model, pretraining_collator, pretraining_model
from ..training.parts import freeze_parts as freeze_model_parts
from ..training.parts import load_partial_weights
from ..training.pretrain_trainer import PretrainTrainer
from ..training.time_estimate import StepTimeEstimate
from .arguments import DataArguments, ExperimentArguments, ModelArguments, SharedTrainingArguments
from .card_provenance import phase_card_data
from .lora_finetuning import adapter_provenance, check_lora_ready, with_adapters
from .model_config import build_config, fit_to_checkpoint, starting_weights
from .modes import MODE_PHASES, PRETRAIN, mode_pretrains
from .phase_arguments import finetune_arguments, pretrain_arguments
from .run_plan import announce_plan
from .run_results import PHASE_RESULT_NAME, listed_arms, results_table, write_results
from .value_ranges import check_value_ranges

LOG_HISTORY_NAME = "log_history.json"  # every phase's Trainer log history, as the Trainer keeps it
SEQUENCE_COLUMNS = ("input_ids", "pair_input_ids")
PROXIMITY_PROBE_SIZE = 32


def fit_lengths(task: Task, max_length: int, truncation: bool) -> Task:
    """Check every sequence fits `max_length`; cut the longer ones only when `truncation` is asked."""
    for split, data in task.dataset.items():
        for column in (c for c in SEQUENCE_COLUMNS if c in data.column_names):
            longest = max(len(ids) for ids in data[column])
            if longest <= max_length:
                continue
            if not truncation:
                raise UserInputError(
                    f"Task {task.name!r}, split {split!r}: {column} has sequences of up to {longest} tokens, "
                    f"longer than max_length={max_length}. Pass --truncation to cut them, or raise --max_length."
                )
            task.dataset[split] = task.dataset[split].map(
                lambda batch, c=column: {c: [ids[:max_length] for ids in batch[c]]},
                batched=True,
                desc=f"truncating {split}/{column} to {max_length}",
            )
            data = task.dataset[split]
    return task


CUSTOM_DATA_FIELDS = ("train_file", "validation_file", "test_file", "text_column", "text_pair_column", "label_column")


def task_options(data_args: DataArguments, task_name: str) -> dict[str, Any]:
    """Builder options: --task_options, the custom-data flags for `custom`, and the preprocessing workers."""
    options = dict(data_args.task_options)
    if task_name == "custom":
        options.update({name: getattr(data_args, name) for name in CUSTOM_DATA_FIELDS})
        if data_args.max_length is not None:  # the length is given, so the files' longest example sets nothing
            options.setdefault("max_implied_length", None)
    if data_args.preprocessing_num_workers is not None:
        options["num_proc"] = data_args.preprocessing_num_workers
    return options


def prepare_task(data_args: DataArguments, seed: int) -> Task:
    """Load the task named in `data_args` and make its sequences fit the model."""
    task = load_task(data_args.task, data_dir=data_args.data_dir, seed=seed, **task_options(data_args, data_args.task))
    max_length = task.preset.max_length if data_args.max_length is None else data_args.max_length
    task.preset = replace(task.preset, max_length=max_length)
    return fit_lengths(task, max_length, data_args.truncation)


def prepare_pretrain_task(data_args: DataArguments, task: Task, seed: int) -> Task:
    """Cross-task SPT: the `--pretrain_task` inputs, fitted to `task`'s length; its vocabulary must be `task`'s."""
    options = dict(data_args.pretrain_task_options)
    if data_args.pretrain_task == "custom":  # fitted to `task`'s length below, so its own longest example sets nothing
        options.setdefault("max_implied_length", None)
    if data_args.preprocessing_num_workers is not None:
        options["num_proc"] = data_args.preprocessing_num_workers
    source = load_task(data_args.pretrain_task, data_dir=data_args.pretrain_data_dir, seed=seed, **options)
    if source.tokenizer.get_vocab() != task.tokenizer.get_vocab():
        raise UserInputError(
            f"--pretrain_task {source.name!r} has a different vocabulary ({len(source.tokenizer)} tokens) from --task "
            f"{task.name!r} ({len(task.tokenizer)} tokens), so its SPT weights cannot serve it. Pair tasks with one "
            "vocabulary: pathfinder/pathx/image (256 pixel values), text/retrieval/custom (bytes)."
        )
    return fit_lengths(source, task.preset.max_length, data_args.truncation)


def _attach_probes(trainer, task: Task, exp: ExperimentArguments) -> None:
    """With --log_proximity, log proximity scores of the first validation inputs during training."""
    if exp.log_proximity:
        probe = task.dataset["validation"]["input_ids"][:PROXIMITY_PROBE_SIZE]
        ProximityCallback.attach(trainer, probe, every_n_steps=exp.proximity_every_n_steps)


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


def _train(trainer, folder: Path) -> ElapsedTime:
    """Train, resuming from the folder's newest complete checkpoint if an earlier run was interrupted;
    returns the phase's clock, which counts the earlier sessions too."""
    checkpoint = resume_checkpoint(folder)
    clock = ElapsedTime.from_checkpoint(checkpoint)
    trainer.add_callback(clock)
    trainer.add_callback(StepTimeEstimate())
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)
    return clock


def _finish(trainer, folder: Path, result: dict[str, Any], card: SptModelCardData | None = None) -> dict[str, Any]:
    if card is not None:  # the card gets the phase's metrics; with --push_to_hub, save_model pushes it too
        trainer.model_card_data = replace(card, metrics={k: v for k, v in result.items() if isinstance(v, float)})
    trainer.save_model(str(folder))
    if trainer.is_world_process_zero():
        write_json(folder / LOG_HISTORY_NAME, trainer.state.log_history)
        if card is not None:
            trainer.create_model_card()
        write_json(folder / PHASE_RESULT_NAME, result)
    return result


@dataclass(frozen=True)
class PlannedPhase:
    """One phase, built once: its folder, Trainer arguments, definition, and what it trains (`arm` None: SPT)."""

    folder: Path
    task: Task
    config: PreTrainedConfig
    args: TrainingArguments
    definition: dict[str, Any]
    init_from: str | Path | None = None
    arm: str | None = None
    init_parts: str | None = None
    freeze_parts: str | None = None
    method: str = "full"


def pretrain_phase(task: Task, config: PreTrainedConfig, exp: ExperimentArguments, training: SharedTrainingArguments,
                   folder: Path, init_from: str | Path | None = None) -> PlannedPhase:
    """The SPT phase: MLM (or next-token prediction) on `task`'s training inputs, from random init or `init_from`."""
    args = pretrain_arguments(task, exp, training, folder)
    return PlannedPhase(folder, task, config, args,
                        pretrain_definition(task, config, exp.pretrain_objective, args, init_from), init_from)


def finetune_phase(
    task: Task, config: PreTrainedConfig, exp: ExperimentArguments, training: SharedTrainingArguments, folder: Path,
    arm: str, init_from: str | Path | None = None, init_parts: str | None = None, freeze_parts: str | None = None,
    epochs: float | None = None, method: str | None = None, source_definition: dict[str, Any] | None = None,
) -> PlannedPhase:
    """A fine-tuning arm: a classifier from `init_from`'s SPT or pretrained weights, or from scratch.

    `init_parts` ("qk", "attention,mlp"...): hybrid init, a fresh model given only those parts of
    `init_from`. `freeze_parts`: parts kept at their initial values. `epochs` overrides the
    fine-tuning epochs (the compute-matched scratch arm). `method`: "full" or "lora" (default:
    `exp.finetune_method`); with LoRA only adapters and the head train (`lora_finetuning.with_adapters`).
    `source_definition`: the definition of the phase `init_from` holds, when this run has yet to train it.
    """
    if init_parts is not None and init_from is None:
        raise UserInputError(f"init_parts={init_parts!r} needs init_from (the SPT checkpoint to take them from).")
    method = method or exp.finetune_method
    args = finetune_arguments(task, exp, training, folder, config.num_labels, epochs)
    definition = finetune_definition(task, config, arm, args, init_from, init_parts, freeze_parts,
                                     source_definition=source_definition, settings=finetune_settings(exp, method))
    return PlannedPhase(folder, task, config, args, definition, init_from, arm, init_parts, freeze_parts, method)


def pretrain(task: Task, config: PreTrainedConfig, exp: ExperimentArguments, training: SharedTrainingArguments,
             folder: Path, init_from: str | Path | None = None) -> dict[str, Any]:
    """Run the SPT phase (`pretrain_phase`); keeps the best-validation model in `folder`."""
    return run_phase(pretrain_phase(task, config, exp, training, folder, init_from), exp, training)


def finetune(task: Task, config: PreTrainedConfig, exp: ExperimentArguments, training: SharedTrainingArguments,
             folder: Path, arm: str, **options: Any) -> dict[str, Any]:
    """Run a fine-tuning arm (`finetune_phase`, with its `options`) and test its best checkpoint."""
    return run_phase(finetune_phase(task, config, exp, training, folder, arm, **options), exp, training)


def run_phase(phase: PlannedPhase, exp: ExperimentArguments, training: SharedTrainingArguments,
              checked: bool = False) -> dict[str, Any]:
    """Train `phase`, or return its result when it is finished; `checked`: its folder was checked already (else
    a folder holding a phase defined otherwise raises `PhaseDefinitionMismatch` here)."""
    if not checked:
        check_phase_folder(phase.folder, phase.definition)
    if (done := _finished(phase.folder)) is not None:
        return done
    return (_run_pretrain if phase.arm is None else _run_finetune)(phase, exp, training)


def _run_pretrain(phase: PlannedPhase, exp: ExperimentArguments, training: SharedTrainingArguments) -> dict[str, Any]:
    task, args, folder = phase.task, phase.args, phase.folder
    with _recorded(folder, phase.definition):
        set_seed(training.seed)
        model = pretraining_model(phase.config, exp.pretrain_objective, phase.init_from)
        trainer = PretrainTrainer(
            model, args, task.dataset["train"], task.dataset["validation"], processing_class=task.tokenizer,
            data_collator=pretraining_collator(task.tokenizer, exp.pretrain_objective),
        )
        _attach_probes(trainer, task, exp)
        clock = _train(trainer, folder)
    metrics = trainer.evaluate()
    card = phase_card_data(task, model.config, exp, "pretrain", args, phase.init_from,
                           pretrain_epochs=trainer.state.epoch, extra_training={"token_weighting": exp.token_weighting})
    return _finish(trainer, folder, {"phase": "pretrain", "eval_loss": metrics["eval_loss"],
                                     "epochs": trainer.state.epoch, "steps": trainer.state.global_step,
                                     "seconds": clock.seconds(), "train_sampling_strategy": args.train_sampling_strategy,
                                     "pretraining_data": card.pretraining_data}, card)


def _run_finetune(phase: PlannedPhase, exp: ExperimentArguments, training: SharedTrainingArguments) -> dict[str, Any]:
    task, args, folder, init_from, init_parts = phase.task, phase.args, phase.folder, phase.init_from, phase.init_parts
    with _recorded(folder, phase.definition):
        set_seed(training.seed)
        loaded = None  # hybrid init: the keys taken from init_from, by part and layer
        if init_parts is None:
            model = classification_model(phase.config, init_from)
        else:
            model = classification_model(phase.config)
            loaded = load_partial_weights(model, init_from, init_parts).loaded_by_part(init_parts)
        if phase.freeze_parts is not None:
            freeze_model_parts(model, phase.freeze_parts)
        if phase.method == "lora":
            model = with_adapters(model, exp, folder)
        trainer = FinetuneTrainer(
            model, args, task.dataset["train"], task.dataset["validation"], processing_class=task.tokenizer
        )
        if exp.early_stopping_patience is not None:  # its counter is saved in checkpoints, so a resumed run keeps it
            trainer.add_callback(EarlyStoppingCallback(early_stopping_patience=exp.early_stopping_patience))
        _attach_probes(trainer, task, exp)
        clock = _train(trainer, folder)
    validation = trainer.evaluate()
    test = trainer.evaluate(task.dataset["test"], metric_key_prefix="test")
    result = {"arm": phase.arm, "init_from": str(init_from) if init_from else None, "init_parts": init_parts,
              "freeze_parts": phase.freeze_parts, "finetune_method": phase.method, **parameter_counts(model),
              "seconds": clock.seconds(), "steps": trainer.state.global_step, "epochs": trainer.state.epoch,
              "train_sampling_strategy": args.train_sampling_strategy, **({"loaded": loaded} if loaded else {})}
    result.update({k: v for k, v in {**validation, **test}.items() if k.endswith(("accuracy", "f1", "loss", "mse"))})
    source_phase = _finished(Path(init_from)) if init_from is not None and Path(init_from).is_dir() else None
    card = phase_card_data(task, model.config, exp, phase.arm, args, init_from,
                           pretrain_epochs=(source_phase or {}).get("epochs"),
                           extra_training={"class_weighting": exp.class_weighting}, init_parts=init_parts,
                           freeze_parts=phase.freeze_parts,
                           pretraining_data=(source_phase or {}).get("pretraining_data"),
                           loaded=loaded, adapter=adapter_provenance(model, folder) if phase.method == "lora" else None)
    return _finish(trainer, folder, result, card)


def clear_phase_folders(output_dir: Path, mode: str) -> None:
    """`--overwrite_output_dir`: delete the folders of the phases `mode` trains (never another phase's)."""
    if PartialState().is_main_process:
        for spec in MODE_PHASES[mode]:
            shutil.rmtree(output_dir / spec.folder, ignore_errors=True)
    PartialState().wait_for_everyone()


def finetune_settings(exp: ExperimentArguments, method: str) -> dict[str, Any]:
    """What defines a fine-tuning arm besides its Trainer arguments: the method (with LoRA's settings) and
    early stopping."""
    settings: dict[str, Any] = {"finetune_method": method, "early_stopping_patience": exp.early_stopping_patience}
    if method == "lora":
        settings["lora"] = {"r": exp.lora_r, "alpha": exp.lora_alpha, "dropout": exp.lora_dropout,
                            "target_modules": exp.lora_target_modules}
    return settings


def plan_run(
    task: Task, source: Task, config: PreTrainedConfig, model_args: ModelArguments, exp: ExperimentArguments,
    training: SharedTrainingArguments,
) -> list[PlannedPhase]:
    """The phases of `exp.mode` (`modes.MODE_PHASES`), in order, each built once (transformers validates the
    arguments): the pretraining phase on `source`, the arms on `task`, each from the start weights and with the
    config its `PhaseSpec` names."""
    output_dir, start_weights = Path(training.output_dir), starting_weights(model_args)
    starts = {"random": None, "model": start_weights, "pretraining": exp.init_from or output_dir / PRETRAIN.folder}
    phases, pretrained = [], None  # pretrained: this run's pretraining definition, the start of its spt arm
    for spec in MODE_PHASES[exp.mode]:
        folder, init_from = output_dir / spec.folder, starts[spec.start]
        if spec.kind == "pretrain":
            phases.append(pretrain_phase(source, config, exp, training, folder, init_from))
            pretrained = phases[-1].definition
            continue
        init_parts = exp.init_parts if spec.takes_parts else None
        if spec.config == "from_scratch":
            if start_weights is None:
                raise UserInputError(f"--mode {exp.mode} compares a pretrained model with its architecture trained "
                                     "from scratch: give the pretrained weights with --model_name_or_path (without "
                                     "--from_scratch).")
            arm_config = build_config(task, replace(model_args, from_scratch=True))
        elif spec.config == "checkpoint" and init_parts is None and not mode_pretrains(exp.mode):
            # loaded whole: its architecture (contradicting flags are errors)
            arm_config = fit_to_checkpoint(config, init_from, model_args, task)
        else:
            arm_config = config
        phases.append(finetune_phase(task, arm_config, exp, training, folder, spec.folder, init_from, init_parts,
                                     exp.freeze_parts, method=spec.method,
                                     source_definition=pretrained if spec.start == "pretraining" else None))
    return phases


@locks_output_dir(lambda data_args, model_args, exp, training: training.output_dir)
def run_experiment(
    data_args: DataArguments, model_args: ModelArguments, exp: ExperimentArguments, training: SharedTrainingArguments
) -> dict[str, Any]:
    """Plan the phases `exp.mode` asks for (`plan_run`), check every phase folder before any phase trains (a
    re-run defined otherwise stops here), run them, and return (and write, on the main process) the results."""
    check_value_ranges(data_args, model_args, exp, training)
    output_dir = Path(training.output_dir)
    if training.push_to_hub:
        check_hub_ready(training.hub_model_id)  # fail now, not after training
    check_lora_ready(exp)
    task = prepare_task(data_args, training.seed)
    config = build_config(task, model_args)
    other_source = mode_pretrains(exp.mode) and data_args.pretrain_task
    source = prepare_pretrain_task(data_args, task, training.seed) if other_source else task
    phases = plan_run(task, source, config, model_args, exp, training)  # a wrong request fails before any deletion
    if training.overwrite_output_dir:
        clear_phase_folders(output_dir, exp.mode)
    check_phase_folders((phase.folder, phase.definition) for phase in phases)
    state = PartialState()
    state.wait_for_everyone()  # no rank writes into a folder another rank is judging
    announce_plan([phase.folder.name for phase in phases if not (phase.folder / PHASE_RESULT_NAME).is_file()],
                  task, source, phases[-1].config, exp, training)
    results = [run_phase(phase, exp, training, checked=True) for phase in phases]
    state.wait_for_everyone()
    pretrain_result = next((result for phase, result in zip(phases, results) if phase.arm is None), None)
    arms = [result for phase, result in zip(phases, results) if phase.arm is not None]
    arms = listed_arms(output_dir, arms, task, training.seed, pretrain_result)  # and the other finished arms on disk
    # the model as trained (its saved config), never as the flags asked for it
    trained = read_json(phases[-1].folder / "config.json")
    extra = {"mode": exp.mode, "seed": training.seed, "world_size": state.num_processes, "model": trained,
             "experiment": asdict(exp), "training": training.given(), "data": asdict(data_args)}
    if pretrain_result is not None:
        extra["pretrain"] = pretrain_result
    if state.is_main_process:
        write_results(output_dir, task.name, arms, extra)
    return {"task": task.name, "arms": arms, **extra}


__all__ = ["prepare_task", "prepare_pretrain_task", "task_options", "fit_lengths", "pretrain", "finetune", "run_experiment",
           "results_table", "write_results"]
