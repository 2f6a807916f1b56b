"""Training a phase so that an interrupted run loses at most an epoch: resume from the folder's newest complete
checkpoint, or, when that checkpoint was saved as training ended, finish from it without training again.

`train_resuming` is what every phase calls in place of `Trainer.train`. The end-of-training path reaches into
the Trainer's own loading (`_load_best_model`, `_load_from_checkpoint`): what `Trainer.train` does after its loop,
kept here, beside the folder's checkpoints (`folder.resume_checkpoint`), so that the experiments layer never
touches a Trainer's private methods.
"""

from __future__ import annotations

from pathlib import Path

from transformers import Trainer, TrainerState

from ..training.time_estimate import StepTimeEstimate
from .folder import TRAINER_STATE_NAME, ElapsedTime, resume_checkpoint


def train_resuming(trainer: Trainer, folder: Path) -> ElapsedTime:
    """Train, resuming from the folder's newest complete checkpoint if an earlier run was interrupted;
    returns the phase's clock, which counts the earlier sessions too. A checkpoint written when training had
    ended (its last step, or early stopping's) is not trained from: the run was killed before its record, and
    transformers would train one step past max_steps (or one more epoch) on resuming it (`_end_at`)."""
    checkpoint = resume_checkpoint(folder)
    clock = ElapsedTime.from_checkpoint(checkpoint)
    trainer.add_callback(clock)
    trainer.add_callback(StepTimeEstimate())
    state = TrainerState.load_from_json(str(checkpoint / TRAINER_STATE_NAME)) if checkpoint is not None else None
    if state is not None and _training_ended(state):
        _end_at(trainer, checkpoint, state)
    else:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)
    return clock


def _training_ended(state: TrainerState) -> bool:
    """Whether a checkpoint's state was saved when training ended: at its last step, or with the Trainer told to
    stop."""
    control = (state.stateful_callbacks or {}).get("TrainerControl", {}).get("args", {})
    return 0 < state.max_steps <= state.global_step or bool(control.get("should_training_stop"))


def _end_at(trainer: Trainer, checkpoint: Path, state: TrainerState) -> None:
    """What `Trainer.train` does once its loop ends, from a checkpoint saved at that end (`state`, its trainer
    state): the state, and the best-validation weights (or the checkpoint's), with the closing summary logged as
    `train` logs it."""
    trainer.state = state
    if trainer.args.load_best_model_at_end and trainer.state.best_model_checkpoint is not None:
        trainer.state.best_model_checkpoint = str(checkpoint.parent / Path(trainer.state.best_model_checkpoint).name)
        trainer._load_best_model()
    else:
        trainer._load_from_checkpoint(str(checkpoint))
    trainer.log({"train_runtime": 0.0, "total_flos": trainer.state.total_flos, "resumed_at_end": checkpoint.name})


__all__ = ["train_resuming"]
