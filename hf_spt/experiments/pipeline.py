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
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from accelerate import PartialState
from transformers import PreTrainedConfig

from ..errors import UserInputError
from ..runs.folder import PHASE_RESULT_NAME, locks_output_dir, read_json
from ..runs.hub import check_hub_ready
from ..runs.phase_definition import check_phase_folders
from ..tasks import Task, load_task, task_preset
from ..tasks.registry import check_task_options
from ..value_checks import check_declared
from .arguments import (CUSTOM_DATA_FIELDS, TRANSFORMERS_RANGES, DataArguments, ExperimentArguments, ModelArguments,
                        SharedTrainingArguments)
from .lora_finetuning import check_lora_ready
from .model_config import build_config, check_model_settings, starting_weights
from .modes import MODES, PRETRAIN_FOLDER
from .phase_arguments import check_trainer_settings
from .phases import PlannedPhase, arm_phase, pretrain_phase, run_phase
from .run_plan import announce_plan
from .run_results import listed_arms, write_results

SEQUENCE_COLUMNS = ("input_ids", "pair_input_ids")


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


def task_options(data_args: DataArguments, task_name: str) -> dict[str, Any]:
    """Builder options: --task_options, the custom-data flags for `custom`, and the preprocessing workers."""
    options = dict(data_args.task_options)
    if task_name == "custom":  # a flag left at its default keeps --task_options' value (a grid's task gives files so)
        for name in CUSTOM_DATA_FIELDS:
            value = getattr(data_args, name)
            if value == DataArguments.__dataclass_fields__[name].default and name in options:
                continue
            if name in options and options[name] != value:
                raise UserInputError(f"--{name} {value!r} and --task_options' {name} {options[name]!r} disagree: give "
                                     "one of them.")
            options[name] = value
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


def check_run_settings(
    data_args: DataArguments, model_args: ModelArguments, exp: ExperimentArguments, training: SharedTrainingArguments,
    phases: tuple[str, ...] | None = None, trainer_arguments: bool = True,
) -> None:
    """Everything the settings of a run must satisfy, checked before any data is built (and by every `--dry_run`):
    each group's declared ranges and choices (again: a program may have changed a value since it built the group),
    the task options against their builder's declaration, the model config and its models built on the meta
    device from the flags (`model_config.check_model_settings`), and (`trainer_arguments`) the Trainer arguments
    and reporters of the `phases` that train (default: `exp.mode`'s) as transformers builds them
    (`check_trainer_settings`). Building Trainer arguments sets up the process's distributed state, so a grid,
    whose runner sets that state up itself, checks them once it has (`suites.grid.check_trainer_settings_of`)."""
    for group in (data_args, model_args, exp):
        check_declared(group)
    check_declared(training, TRANSFORMERS_RANGES)
    mode = MODES[exp.mode]
    if phases is None:
        phases = ("pretrain",) * mode.pretrains + ("finetune",) * bool(mode.arms)
    check_task_options(data_args.task, task_options(data_args, data_args.task))
    if "pretrain" in phases and data_args.pretrain_task:
        check_task_options(data_args.pretrain_task, data_args.pretrain_task_options)
    check_model_settings(model_args, data_args.task, data_args.max_length,
                         exp.pretrain_objective if "pretrain" in phases else None)
    if trainer_arguments:
        check_trainer_settings(exp, training, task_preset(data_args.task).batch_size, Path(training.output_dir),
                               phases)


def clear_phase_folders(folders: list[Path]) -> None:
    """`--overwrite_output_dir`: delete the folders of the phases this run trains (never another phase's)."""
    if PartialState().is_main_process:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    PartialState().wait_for_everyone()


def plan_run(
    task: Task, source: Task, config: PreTrainedConfig, model_args: ModelArguments, exp: ExperimentArguments,
    training: SharedTrainingArguments,
) -> list[PlannedPhase]:
    """The phases of `exp.mode` (`modes.MODES`), in order, each built once (transformers validates the arguments):
    the pretraining phase on `source` (from the model's weights, random without them), then the mode's arms on
    `task` (`arms.arm_phase`), its pretraining arms from `--init_from` or this run's pretraining, with `--init_parts`,
    and every arm with `--freeze_parts`."""
    mode, output_dir = MODES[exp.mode], Path(training.output_dir)
    phases, pretrained = [], None  # pretrained: this run's pretraining definition, the start of its spt arm
    if mode.pretrains:
        phases.append(pretrain_phase(source, config, exp, training, output_dir / PRETRAIN_FOLDER,
                                     starting_weights(model_args)))
        pretrained = phases[-1].definition
    checkpoint = exp.init_from or output_dir / PRETRAIN_FOLDER
    for arm in mode.arms:
        arm = replace(arm, init_parts=exp.init_parts if arm.pretrain else None, freeze_parts=exp.freeze_parts)
        phases.append(arm_phase(arm, task, config, model_args, exp, training, output_dir / arm.name,
                                checkpoint if arm.pretrain else None, pretrained if arm.pretrain else None,
                                loads_checkpoint_whole=not mode.pretrains))
    return phases


def plan_experiment(
    data_args: DataArguments, model_args: ModelArguments, exp: ExperimentArguments, training: SharedTrainingArguments
) -> tuple[Task, list[PlannedPhase]]:
    """Check the settings, build the task and plan every phase of the run (`plan_run`), training nothing."""
    check_run_settings(data_args, model_args, exp, training)
    if training.push_to_hub:
        check_hub_ready(training.hub_model_id)  # fail now, not after training
    check_lora_ready(exp)
    task = prepare_task(data_args, training.seed)
    config = build_config(task, model_args)
    other_source = MODES[exp.mode].pretrains and data_args.pretrain_task
    source = prepare_pretrain_task(data_args, task, training.seed) if other_source else task
    return task, plan_run(task, source, config, model_args, exp, training)


@locks_output_dir(lambda data_args, model_args, exp, training: training.output_dir)
def run_experiment(
    data_args: DataArguments, model_args: ModelArguments, exp: ExperimentArguments, training: SharedTrainingArguments
) -> dict[str, Any]:
    """Plan the phases `exp.mode` asks for (`plan_run`), check every phase folder before any phase trains (a
    re-run defined otherwise stops here), run them, and return (and write, on the main process) the results."""
    task, phases = plan_experiment(data_args, model_args, exp, training)  # a wrong request fails before deletion
    output_dir = Path(training.output_dir)
    if training.overwrite_output_dir:
        clear_phase_folders([phase.folder for phase in phases])
    check_phase_folders((phase.folder, phase.definition) for phase in phases)
    state = PartialState()
    state.wait_for_everyone()  # no rank writes into a folder another rank is judging
    announce_plan([phase for phase in phases if not (phase.folder / PHASE_RESULT_NAME).is_file()], task)
    results = [run_phase(phase, checked=True) for phase in phases]
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


__all__ = ["prepare_task", "prepare_pretrain_task", "task_options", "fit_lengths", "check_run_settings", "plan_run",
           "clear_phase_folders", "run_experiment"]
