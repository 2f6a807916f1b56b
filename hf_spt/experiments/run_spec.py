"""A run's settings, resolved once from the command-line groups into typed values: the one door from flags to plan.

`resolve_run` reads the four argument groups (`arguments.py`: data, model, experiment, both phases' Trainer
flags) and returns a frozen `RunSpec`; nothing below it reads a group again. Every entry point comes through it:
`run_spt.py` (`pipeline.run_experiment`), and each unit of a grid, the LRA suite and the budget studies
(`suites.grid`, which builds the groups from a grid file's settings as the parser would from flags).

- `TaskRequest`: the task to build (name, folder, builder options with the custom-data flags merged, length).
- `ModelSpec`: the model flags that size and choose the architecture (`model_config.build_config` reads it).
- `PhaseSpec`: one phase's settings, "pretrain" or "finetune": its Trainer keyword arguments (the shared
  `TrainingArguments` flags), its budget with the per-phase rule applied once (a per-phase flag, else the generic
  flag, else the phase's `TrainingArguments` subclass's default: `phase_value`), and what the phase reads besides
  (masking, weighting, early stopping, LoRA, the proximity probe). What only the task decides (the preset's batch
  size and masking rate, the sampler its lengths choose, class weights counted on its labels) is left to planning
  (`phase_arguments`).

The flow, flags to Trainers: `command_line.parse_arguments` (flags over a config file over a recipe) -> the four
groups -> `resolve_run` -> `RunSpec` -> `pipeline.plan_run` / `suites.grid_runner.plan_grid` -> `phases.
PlannedPhase`s (a phase's `TrainingArguments`, model config, task and definition) -> `phases.run_phase` -> the
phase's Trainer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..errors import UserInputError
from ..training.parts import Parts
from ..value_checks import check_declared
from .arguments import (CUSTOM_DATA_FIELDS, PER_PHASE_BUDGETS, PHASES, TRANSFORMERS_RANGES,
                        DataArguments, ExperimentArguments, ModelArguments, SharedTrainingArguments, phase_default)

SIZE_FLAGS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")


@dataclass(frozen=True)
class TaskRequest:
    """A task to build: registered name, data folder, builder options, and the length its sequences must fit
    (None: the task preset's; `truncation`: cut longer ones instead of refusing them)."""

    name: str
    data_dir: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    max_length: int | None = None
    truncation: bool = False


@dataclass(frozen=True)
class ModelSpec:
    """The model a run asks for: sizes over the task preset's (`sizes`: the size flags given), position type,
    dropout, attention back-end, and the architecture (`model_type`, `config_name`, `model_name_or_path` with
    `from_scratch`). `given`: the model flags set away from their defaults, as typed, for error messages."""

    sizes: dict[str, int] = field(default_factory=dict)
    pooling: str | None = None
    position_embedding_type: str | None = None
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    attn_implementation: str = "sdpa"
    model_type: str | None = None
    config_name: str | None = None
    model_name_or_path: str | None = None
    from_scratch: bool = False
    given: str = ""

    @property
    def is_spt(self) -> bool:
        """True when no other architecture is asked for: the run builds hf_spt's own `SptConfig`."""
        return self.model_type in (None, "spt") and not self.config_name and not self.model_name_or_path

    @property
    def weights(self) -> str | None:
        """The pretrained weights the run starts from (`--model_name_or_path`), or None for random init."""
        return self.model_name_or_path if self.model_name_or_path and not self.from_scratch else None


@dataclass(frozen=True)
class PhaseSpec:
    """One phase's settings (see the module docstring); `trainer`: the shared Trainer keyword arguments."""

    phase: str
    trainer: dict[str, Any]
    epochs: float
    learning_rate: float
    batch_size: int | None  # None: the task preset's
    max_steps: int | None
    objective: str  # the SPT objective of the pretraining, or of the one behind a fine-tuning arm's weights
    mlm_probability: float | None  # None: the task preset's
    mask_replace_prob: float
    random_replace_prob: float
    token_weighting: str
    class_weighting: str
    early_stopping_patience: int | None
    finetune_method: str
    lora: dict[str, Any]  # r, alpha, dropout and target modules, read by LoRA arms only
    log_proximity: bool
    proximity_every_n_steps: int | None
    portable_numerics: str | None = None  # the CPU numerics mode pinned (`hf_spt.numerics`; None: native): defines the phase


@dataclass(frozen=True)
class RunSpec:
    """A run's settings, resolved: the mode, seed and output folder, the task (and cross-task SPT's source), the
    model, each phase's settings, where the spt arm starts and which parts it takes or freezes, and `recorded`:
    the settings as given, which results.json keeps."""

    mode: str
    seed: int
    output_dir: Path
    task: TaskRequest
    pretrain_task: TaskRequest | None
    model: ModelSpec
    pretrain: PhaseSpec
    finetune: PhaseSpec
    init_from: str | None = None
    init_parts: Parts | None = None
    freeze_parts: Parts | None = None
    push_to_hub: bool = False
    hub_model_id: str | None = None
    overwrite_output_dir: bool = False
    recorded: dict[str, Any] = field(default_factory=dict)

    def phase(self, name: str) -> PhaseSpec:
        """The `PhaseSpec` of phase `name` ("pretrain" or "finetune")."""
        return {"pretrain": self.pretrain, "finetune": self.finetune}[name]


def phase_value(per_phase: Any, generic: Any, phase: str, generic_name: str) -> Any:
    """The per-phase rule, the one place it is written: a budget of `phase` is its per-phase flag's value
    (`per_phase`), else the generic `TrainingArguments` flag's (`generic`, named `generic_name`), else the phase's
    `TrainingArguments` subclass's default (batch size None: the task preset's)."""
    if per_phase is not None:
        return per_phase
    if generic is None and generic_name != "per_device_train_batch_size":
        return phase_default(phase, generic_name)
    return generic


def task_requests(data_args: DataArguments) -> tuple[TaskRequest, TaskRequest | None]:
    """The task the data flags ask for (builder options: `--task_options`, the custom-data flags for `custom`, the
    preprocessing workers) and, for cross-task SPT, the task to pretrain on (None without `--pretrain_task`)."""
    options = dict(data_args.task_options)
    if data_args.task == "custom":  # a flag at its default keeps --task_options' value (a grid's task gives files so)
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
    source_options = dict(data_args.pretrain_task_options)
    if data_args.pretrain_task == "custom":  # fitted to the task's length, so its own longest example sets nothing
        source_options.setdefault("max_implied_length", None)
    if data_args.preprocessing_num_workers is not None:
        options["num_proc"] = source_options["num_proc"] = data_args.preprocessing_num_workers
    source = None if data_args.pretrain_task is None else TaskRequest(
        data_args.pretrain_task, data_args.pretrain_data_dir, source_options, None, data_args.truncation)
    return TaskRequest(data_args.task, data_args.data_dir, options, data_args.max_length, data_args.truncation), source


def resolve_run(data_args: DataArguments, model_args: ModelArguments, exp: ExperimentArguments,
                training: SharedTrainingArguments) -> RunSpec:
    """The `RunSpec` of the four groups, each group's declared ranges and choices checked again first (a program
    may have changed a value since it built the group)."""
    for group in (data_args, model_args, exp):
        check_declared(group)
    check_declared(training, TRANSFORMERS_RANGES)
    task, source = task_requests(data_args)
    defaults = {spec.name: spec.default for spec in fields(ModelArguments)}
    model = ModelSpec(
        sizes={name: getattr(model_args, name) for name in SIZE_FLAGS if getattr(model_args, name) is not None},
        pooling=model_args.pooling, position_embedding_type=model_args.position_embedding_type,
        hidden_dropout_prob=model_args.hidden_dropout_prob,
        attention_probs_dropout_prob=model_args.attention_probs_dropout_prob,
        attn_implementation=model_args.attn_implementation, model_type=model_args.model_type,
        config_name=model_args.config_name, model_name_or_path=model_args.model_name_or_path,
        from_scratch=model_args.from_scratch,
        given=" ".join(f"--{name} {value!r}" if isinstance(value, str) else f"--{name} {value}"
                       for name, value in vars(model_args).items()
                       if value not in (None, False) and value != defaults[name]))
    lora = {"r": exp.lora_r, "alpha": exp.lora_alpha, "dropout": exp.lora_dropout,
            "target_modules": exp.lora_target_modules}
    phases = {}
    for phase in PHASES:
        budget = {suffix: phase_value(getattr(exp, f"{phase}_{suffix}"), getattr(training, generic), phase, generic)
                  for generic, suffix in PER_PHASE_BUDGETS.items()}
        phases[phase] = PhaseSpec(
            phase=phase, trainer=training.phase_kwargs(phase), **budget, objective=exp.pretrain_objective,
            mlm_probability=exp.mlm_probability, mask_replace_prob=exp.mask_replace_prob,
            random_replace_prob=exp.random_replace_prob, token_weighting=exp.token_weighting,
            class_weighting=exp.class_weighting, early_stopping_patience=exp.early_stopping_patience,
            finetune_method=exp.finetune_method, lora=lora, log_proximity=exp.log_proximity,
            proximity_every_n_steps=exp.proximity_every_n_steps, portable_numerics=exp.portable_numerics)
    return RunSpec(
        mode=exp.mode, seed=training.seed, output_dir=Path(training.output_dir),
        task=task, pretrain_task=source, model=model, pretrain=phases["pretrain"], finetune=phases["finetune"],
        init_from=exp.init_from, init_parts=exp.init_parts, freeze_parts=exp.freeze_parts,
        push_to_hub=training.push_to_hub, hub_model_id=training.hub_model_id,
        overwrite_output_dir=training.overwrite_output_dir,
        recorded={"experiment": asdict(exp), "training": training.given(), "data": asdict(data_args)})


__all__ = ["SIZE_FLAGS", "TaskRequest", "ModelSpec", "PhaseSpec", "RunSpec", "phase_value", "task_requests",
           "resolve_run"]
