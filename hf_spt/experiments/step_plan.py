"""A run's plan, stated before it trains: optimizer steps per phase, and whether the model is sized for a GPU.

Steps are counted as the Trainer counts them (`phase_steps`): batches per epoch over every process, divided by
the gradient accumulation steps (rounded up), times the epochs, or `max_steps` when given, read off each built
phase's Trainer arguments (`phases.PlannedPhase`). The pretraining phase of a pair task reads both sequences of
every row. Each phase prints its expected time itself once its first steps
are measured (`training.time_estimate.StepTimeEstimate`).

On a CPU, a model sized for a GPU takes minutes per step (the ListOps preset: about two). The rule: the training
compute of one optimizer step, Kaplan et al. (2020)'s count of 6 x (parameters + layers x length x hidden size)
FLOPs per token, times the tokens of a step (batch x accumulation x `max_length`), above `GPU_SIZED_FLOPS` (10^12:
about ten seconds a step at the 100 GFLOP/s a few CPU cores sustain). Such a run on a CPU gets a warning naming
the small settings.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from accelerate import PartialState
from transformers import PreTrainedConfig

from ..tasks import Task
from ..training.model_factory import classification_model
from ..training.arguments import accelerator_available
from .phases import PlannedPhase
from .run_spec import PhaseSpec

GPU_SIZED_FLOPS = 1e12
"""Training FLOPs of one optimizer step above which a CPU run is warned (see the module docstring)."""
SMALL_SETTINGS = (
    "For a CPU: `run_scripts/run_lra.py --scale mini` (the LRA tasks sized for a 2-core CPU), or smaller model "
    "flags (e.g. --num_hidden_layers 2 --hidden_size 64 --num_attention_heads 4 --intermediate_size 128), "
    "less or shorter data (--task_options, see --list_tasks; --max_length with --truncation), --max_steps."
)


def phase_steps(rows: int, batch: int, epochs: float, max_steps: int | None, accumulation: int) -> tuple[int, int]:
    """(optimizer steps per epoch, total steps) of one phase as the Trainer counts them: one process, every batch
    kept; `max_steps` above 0 replaces the epochs. For several processes, pass the batch of all of them."""
    per_epoch = max(math.ceil(math.ceil(rows / batch) / accumulation), 1)
    return per_epoch, max_steps if max_steps and max_steps > 0 else math.ceil(epochs * per_epoch)


def spt_step_budget(train_rows: int, is_pair: bool, preset_batch: int, pretrain: PhaseSpec,
                    finetune: PhaseSpec) -> dict[str, int]:
    """The SPT arm's optimizer steps: its pretraining (a pair task pretrains on both sequences of every row) and
    its fine-tuning budget; with `finetune_steps_per_epoch`, to turn the sum into the compute-matched arm's epochs."""
    def steps(spec: PhaseSpec, rows: int) -> tuple[int, int]:
        return phase_steps(rows, spec.batch_size or preset_batch, spec.epochs, spec.max_steps,
                           spec.trainer["gradient_accumulation_steps"])

    _, pretrain_steps = steps(pretrain, train_rows * (2 if is_pair else 1))
    per_epoch, finetune_steps = steps(finetune, train_rows)
    return {"pretrain": pretrain_steps, "finetune": finetune_steps, "finetune_steps_per_epoch": per_epoch}


@dataclass(frozen=True)
class PhasePlan:
    """One phase's budget: its training rows, batch per process, and optimizer steps."""

    name: str
    rows: int
    batch: int
    steps_per_epoch: int
    steps: int
    epochs: float | None  # None when max_steps sets the steps
    early_stopping: bool = False  # the steps are a maximum


def plan_phases(phases: Sequence[PlannedPhase], world_size: int = 1) -> list[PhasePlan]:
    """The plan of built phases, read off their Trainer arguments and data (a pretraining phase of a pair task
    reads both sequences of every row)."""
    plans = []
    for phase in phases:
        args, pretraining = phase.args, phase.arm is None
        rows = len(phase.task.dataset["train"]) * (2 if pretraining and phase.task.is_pair else 1)
        batch = args.per_device_train_batch_size
        per_epoch, steps = phase_steps(rows, batch * world_size, args.num_train_epochs, args.max_steps,
                                       args.gradient_accumulation_steps)
        plans.append(PhasePlan(phase.folder.name, rows, batch, per_epoch, steps,
                               None if args.max_steps > 0 else args.num_train_epochs,
                               not pretraining and phase.spec.early_stopping_patience is not None))
    return plans


def step_flops(config: PreTrainedConfig, rows: int, length: int) -> tuple[float, int]:
    """(training FLOPs of `rows` rows of `length` tokens, the model's parameters): 6 x (parameters + layers x length
    x hidden size) per token (Kaplan et al. 2020); the parameters are counted on a model built on the meta device."""
    with torch.device("meta"):
        parameters = classification_model(config).num_parameters()
    text = getattr(config, "backbone", config).get_text_config()
    attention = getattr(text, "num_hidden_layers", 0) * length * getattr(text, "hidden_size", 0)
    return 6.0 * (parameters + attention) * rows * length, parameters


def plan_text(task: Task, plans: list[PhasePlan], world_size: int, device: str) -> str:
    """The plan as printed: one line per phase."""
    lines = [f"Plan ({task.name}, {world_size} process{'es' if world_size > 1 else ''} on {device}):"]
    for plan in plans:
        budget = (f"{plan.steps_per_epoch:,} steps/epoch x {plan.epochs:g} epochs = {plan.steps:,} optimizer steps"
                  if plan.epochs is not None else f"--max_steps: {plan.steps:,} optimizer steps")
        cut = " at most (early stopping)" if plan.early_stopping else ""
        lines.append(f"  {plan.name}: {plan.rows:,} training rows, batch {plan.batch} per process: {budget}{cut}")
    lines.append("  Each phase prints its expected time after its first steps.")
    return "\n".join(lines)


def announce_plan(phases: Sequence[PlannedPhase], task: Task) -> None:
    """Print the plan of the built `phases` left to train on the main process (its task: `task`); on a CPU, warn
    (stderr) when an optimizer step costs more than `GPU_SIZED_FLOPS`, pointing to the small settings."""
    state = PartialState()
    if not phases or not state.is_main_process:
        return
    plans = plan_phases(phases, state.num_processes)
    args = phases[-1].args
    on_accelerator = accelerator_available(args)
    device = "an accelerator" if on_accelerator else "the CPU"
    print(plan_text(task, plans, state.num_processes, device), flush=True)
    if on_accelerator:
        return
    batch = max(plan.batch for plan in plans) * args.gradient_accumulation_steps
    flops, parameters = step_flops(phases[-1].config, batch, task.preset.max_length)
    if flops > GPU_SIZED_FLOPS:
        print(f"warning: a GPU-sized run on a CPU: {parameters:,} parameters on rows of up to "
              f"{task.preset.max_length:,} tokens, {batch} rows a step, about {flops:.1e} FLOPs per optimizer step "
              f"(over {GPU_SIZED_FLOPS:.0e}: tens of seconds to minutes a step on a CPU). {SMALL_SETTINGS}",
              file=sys.stderr, flush=True)


__all__ = ["GPU_SIZED_FLOPS", "PhasePlan", "phase_steps", "spt_step_budget", "plan_phases", "step_flops", "plan_text",
           "announce_plan"]
