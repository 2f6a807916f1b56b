"""The two-phase experiment: self-pretrain, fine-tune, and compare with training from scratch.

Output layout under `output_dir`:
    pretrain/   SPT phase: Trainer checkpoints, and the best-validation MLM model at its root
    spt/        fine-tuned from pretrain/ (arm "spt")
    scratch/    fine-tuned from random init (arm "scratch")
    pretrained_lora/, pretrained_full/   --mode lora_comparison's other arms (see training/lora_adapters.py)
    results.json, results.md   every finished arm in the folder (see results_files.py)
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
from dataclasses import replace
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
from ..training.lora import require_peft
from .arguments import DataArguments, ExperimentArguments, ModelArguments, SharedTrainingArguments
from .model_config import build_config, check_model_settings
from .modes import MODES, PRETRAIN_FOLDER, uses_lora
from .phase_arguments import check_trainer_settings
from .phases import PlannedPhase, arm_phase, pretrain_phase, run_phase
from .step_plan import announce_plan
from .results_files import listed_arms, write_results
from .run_spec import RunSpec, TaskRequest, resolve_run

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


def prepare_task(request: TaskRequest, seed: int) -> Task:
    """Build the task `request` names and make its sequences fit the model."""
    task = load_task(request.name, data_dir=request.data_dir, seed=seed, **request.options)
    max_length = task.preset.max_length if request.max_length is None else request.max_length
    task.preset = replace(task.preset, max_length=max_length)
    return fit_lengths(task, max_length, request.truncation)


def prepare_pretrain_task(request: TaskRequest, task: Task, seed: int) -> Task:
    """Cross-task SPT: the `--pretrain_task` inputs, fitted to `task`'s length; its vocabulary must be `task`'s."""
    source = load_task(request.name, data_dir=request.data_dir, seed=seed, **request.options)
    if source.tokenizer.get_vocab() != task.tokenizer.get_vocab():
        raise UserInputError(
            f"--pretrain_task {source.name!r} has a different vocabulary ({len(source.tokenizer)} tokens) from --task "
            f"{task.name!r} ({len(task.tokenizer)} tokens), so its SPT weights cannot serve it. Pair tasks with one "
            "vocabulary: pathfinder/pathx/image (256 pixel values), text/retrieval/custom (bytes)."
        )
    return fit_lengths(source, task.preset.max_length, request.truncation)


def check_run(run: RunSpec, phases: tuple[str, ...] | None = None, trainer_arguments: bool = True) -> None:
    """Everything the settings of a run must satisfy, checked before any data is built (and by every `--dry_run`):
    the task options against their builder's declaration, the model config and its models built on the meta
    device from the flags (`model_config.check_model_settings`), and (`trainer_arguments`) the Trainer arguments
    and reporters of the `phases` that train (default: the mode's) as transformers builds them
    (`check_trainer_settings`). Building Trainer arguments sets up the process's distributed state, so a grid,
    whose runner sets that state up itself, checks them once it has (`suites.grid.check_trainer_settings_of`).
    Each group's declared ranges were checked when the run was resolved (`run_spec.resolve_run`)."""
    phases = MODES[run.mode].phases if phases is None else phases
    check_task_options(run.task.name, run.task.options)
    if "pretrain" in phases and run.pretrain_task is not None:
        check_task_options(run.pretrain_task.name, run.pretrain_task.options)
    check_model_settings(run.model, run.task.name, run.task.max_length,
                         run.pretrain.objective if "pretrain" in phases else None)
    if trainer_arguments:
        check_trainer_settings([run.phase(phase) for phase in phases], task_preset(run.task.name).batch_size,
                               run.output_dir)


def clear_phase_folders(folders: list[Path]) -> None:
    """`--overwrite_output_dir`: delete the folders of the phases this run trains (never another phase's)."""
    if PartialState().is_main_process:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    PartialState().wait_for_everyone()


def plan_run(task: Task, source: Task, config: PreTrainedConfig, run: RunSpec) -> list[PlannedPhase]:
    """The phases of the run's mode (`modes.MODES`), in order, each built once (transformers validates the
    arguments): the pretraining phase on `source` (from the model's weights, random without them), then the mode's
    arms on `task` (`phases.arm_phase`), its pretraining arms from `--init_from` or this run's pretraining, with
    `--init_parts`, and every arm with `--freeze_parts`."""
    mode = MODES[run.mode]
    phases, pretrained = [], None  # pretrained: this run's pretraining definition, the start of its spt arm
    if mode.pretrains:
        phases.append(pretrain_phase(source, config, run.pretrain, run.output_dir / PRETRAIN_FOLDER,
                                     run.model.weights))
        pretrained = phases[-1].definition
    checkpoint = run.init_from or run.output_dir / PRETRAIN_FOLDER
    for arm in mode.arms:
        arm = replace(arm, init_parts=run.init_parts if arm.pretrain else None, freeze_parts=run.freeze_parts)
        phases.append(arm_phase(arm, task, config, run.model, run.finetune, run.output_dir / arm.name,
                                checkpoint if arm.pretrain else None, pretrained if arm.pretrain else None,
                                loads_checkpoint_whole=not mode.pretrains))
    return phases


def plan_experiment(run: RunSpec) -> tuple[Task, list[PlannedPhase]]:
    """Check the run, build its task and plan every phase (`plan_run`), training nothing: (the task, the phases)."""
    check_run(run)
    if run.push_to_hub:
        check_hub_ready(run.hub_model_id)  # fail now, not after training
    if uses_lora(run.mode, run.finetune.finetune_method):
        require_peft()
    task = prepare_task(run.task, run.seed)
    config = build_config(task, run.model)
    other_source = MODES[run.mode].pretrains and run.pretrain_task is not None
    source = prepare_pretrain_task(run.pretrain_task, task, run.seed) if other_source else task
    return task, plan_run(task, source, config, run)


@locks_output_dir(lambda run: run.output_dir)
def run_planned(run: RunSpec) -> dict[str, Any]:
    """Plan the phases of `run` (`plan_experiment`), check every phase folder before any phase trains (a re-run
    defined otherwise stops here), run them, and return (and write, on the main process) the results."""
    task, phases = plan_experiment(run)  # a wrong request fails before any deletion
    if run.overwrite_output_dir:
        clear_phase_folders([phase.folder for phase in phases])
    check_phase_folders((phase.folder, phase.definition) for phase in phases)
    state = PartialState()
    state.wait_for_everyone()  # no rank writes into a folder another rank is judging
    announce_plan([phase for phase in phases if not (phase.folder / PHASE_RESULT_NAME).is_file()], task)
    results = [run_phase(phase, checked=True) for phase in phases]
    state.wait_for_everyone()
    pretrain_result = next((result for phase, result in zip(phases, results) if phase.arm is None), None)
    arms = [result for phase, result in zip(phases, results) if phase.arm is not None]
    arms = listed_arms(run.output_dir, arms, task, run.seed, pretrain_result)  # and the other finished arms on disk
    # the model as trained (its saved config), never as the flags asked for it
    trained = read_json(phases[-1].folder / "config.json")
    extra = {"mode": run.mode, "seed": run.seed, "world_size": state.num_processes, "model": trained,
             **run.recorded}
    if pretrain_result is not None:
        extra["pretrain"] = pretrain_result
    if state.is_main_process:
        write_results(run.output_dir, task.name, arms, extra)
    return {"task": task.name, "arms": arms, **extra}


def run_experiment(data_args: DataArguments, model_args: ModelArguments, exp: ExperimentArguments,
                   training: SharedTrainingArguments) -> dict[str, Any]:
    """`run_spt.py`'s run from its four argument groups: resolved once (`run_spec.resolve_run`), then run
    (`run_planned`)."""
    return run_planned(resolve_run(data_args, model_args, exp, training))


__all__ = ["prepare_task", "prepare_pretrain_task", "fit_lengths", "check_run", "plan_run",
           "clear_phase_folders", "plan_experiment", "run_planned", "run_experiment"]
