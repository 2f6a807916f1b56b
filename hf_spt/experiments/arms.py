"""What an arm is, for every entry point: one fine-tuning configuration, as data, and the phase it plans.

`run_spt.py`'s `--mode`s are named tuples of arms (`modes.MODES`), and a grid file's `arms:` (the ablation grid,
the LRA suite, the budget studies) are lists of them; `phases.arm_phase` turns either into the phase to train.
Fields:

    name             the arm's folder and its label in the tables
    pretrain         start from an SPT checkpoint (implied by init_parts, pretrain_task and, without
                     compute_matched, pretrain_epochs)
    init_parts       hybrid init: a fresh model given only these parts of the checkpoint ("qk", "attention"...)
    pretrain_task    grid: the task key to pretrain on (cross-task SPT; default: the cell's task)
    pretrain_epochs  grid: the SPT budget it starts from, or (compute_matched) whose steps it is given
    freeze_parts     parts kept at their initial values ("attention")
    num_layers       grid: depth (default: model.num_hidden_layers or the task preset)
    compute_matched  grid: fine-tune for as many optimizer steps as the SPT arm's pretraining and fine-tuning
                     budgets together (scratch with SPT's budget)
    early_stopping   false: train the whole budget, the experiment's `early_stopping_patience` left out (a
                     compute-matched control that uses all of SPT's compute; the test still scores its
                     best-validation checkpoint, as every arm's)
    model            grid: model settings over the task's, for scratch arms only (a locality control:
                     {position_embedding_type: alibi})
    start            without pretrain: "model" (the model's weights, `model_name_or_path`'s; random without
                     it) or "random" (fresh weights of `model_name_or_path`'s architecture)
    method           "full" or "lora" (None: the run's `finetune_method`)
    tasks            grid: the task keys the arm runs on (None: every task), e.g. the few controls a
                     permuted twin of a configuration needs beside its SPT arm

In `run_spt.py` the pretraining arms take `--init_parts` and every arm `--freeze_parts`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import UserInputError
from ..training.parts import Parts

FINETUNE_METHODS = ("full", "lora")


@dataclass
class Arm:
    """One fine-tuning configuration (the module docstring lists the fields)."""

    name: str
    pretrain: bool = False
    init_parts: str | None = None
    pretrain_task: str | None = None
    pretrain_epochs: float | None = None
    freeze_parts: str | None = None
    num_layers: int | None = None
    compute_matched: bool = False
    model: dict[str, Any] = field(default_factory=dict)
    start: Literal["model", "random"] = "model"
    method: str | None = None
    early_stopping: bool = True
    tasks: list[str] | None = None

    def runs_on(self, task_key: str) -> bool:
        """Whether the arm has a cell for `task_key` (`tasks`)."""
        return self.tasks is None or task_key in self.tasks

    def __post_init__(self):
        implied = (self.init_parts, self.pretrain_task) + (() if self.compute_matched else (self.pretrain_epochs,))
        self.pretrain = self.pretrain or any(v is not None for v in implied)
        self.init_parts = None if self.init_parts is None else Parts(self.init_parts)
        self.freeze_parts = None if self.freeze_parts is None else Parts(self.freeze_parts)
        for name in ("pretrain_epochs", "num_layers"):
            if (value := getattr(self, name)) is not None and value <= 0:
                raise UserInputError(f"Arm {self.name!r}: {name} must be above 0, got {value}.")
        if self.compute_matched and self.pretrain:
            raise UserInputError(f"Arm {self.name!r}: compute_matched is a scratch control; it cannot also pretrain.")
        if self.model and self.pretrain:  # an SPT checkpoint is shared by arms: its model is the task's
            raise UserInputError(f"Arm {self.name!r}: model settings ({sorted(self.model)}) apply to scratch arms; "
                                 "give a pretrained variant a task key of its own with those model settings.")
        if "num_hidden_layers" in self.model:
            raise UserInputError(f"Arm {self.name!r}: set the depth with num_layers, not model.num_hidden_layers.")
        if self.start not in ("model", "random") or self.start == "random" and self.pretrain:
            raise UserInputError(f"Arm {self.name!r}: start is 'model' (the model's weights, random without "
                                 "model_name_or_path) or 'random' (fresh weights of its architecture), and only for an "
                                 f"arm that does not pretrain; got start={self.start!r}.")
        if self.tasks is not None and not self.tasks:
            raise UserInputError(f"Arm {self.name!r}: tasks lists the task keys it runs on; leave it out to run on "
                                 "every task, not [].")
        if self.method not in (None, *FINETUNE_METHODS):
            raise UserInputError(f"Arm {self.name!r}: method is one of {', '.join(FINETUNE_METHODS)}, got {self.method!r}.")


def check_spt_weights_source(init_parts: str | None, has_source: bool, where: str, fix: str) -> None:
    """Hybrid init takes `init_parts` of SPT weights: where nothing provides them (`has_source` false), the one
    error that says so, naming `where` the parts came from and `fix`."""
    if init_parts is not None and not has_source:
        raise UserInputError(f"{where} {init_parts!r} needs SPT weights to take the parts from: {fix}.")


__all__ = ["FINETUNE_METHODS", "Arm", "check_spt_weights_source"]
