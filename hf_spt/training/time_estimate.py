"""The expected time of a training phase, printed once its first steps are measured.

A run states its steps before it trains (`experiments.step_plan`); how long they take shows only
once some have run. `StepTimeEstimate` prints, once per session (a resumed phase measures its own
steps), the measured seconds per optimizer step and the time the remaining steps would take at
that rate: after `min_steps` steps, or earlier when `min_seconds` have passed (a step of minutes
should not wait for ten of them). Evaluations and checkpoints that fell within the measured steps
count in the rate; later ones are not foreseen.
"""

from __future__ import annotations

import time
from pathlib import Path

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments


def duration_text(seconds: float) -> str:
    """`seconds` in words: "45 s", "12 min", "3 h 20 min"."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


class StepTimeEstimate(TrainerCallback):
    """Prints (main process) `<phase>: N steps took X s/step; the remaining M steps take about T.` once a session."""

    def __init__(self, min_steps: int = 10, min_seconds: float = 60.0):
        self.min_steps = min_steps
        self.min_seconds = min_seconds
        self.start: float | None = None
        self.first_step = 0
        self.reported = False

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs):
        self.start, self.first_step, self.reported = time.perf_counter(), state.global_step, False

    def estimate(self, args: TrainingArguments, state: TrainerState) -> str | None:
        """The message once enough steps are measured, else None."""
        done = state.global_step - self.first_step
        elapsed = time.perf_counter() - self.start
        remaining = state.max_steps - state.global_step
        if done < 1 or remaining < 1 or (done < self.min_steps and elapsed < self.min_seconds):
            return None
        rate = elapsed / done
        return (f"{Path(args.output_dir).name}: {done} steps took {rate:.3g} s/step; the remaining {remaining:,} of "
                f"{state.max_steps:,} steps take about {duration_text(rate * remaining)}.")

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs):
        if self.reported or self.start is None:
            return
        message = self.estimate(args, state)
        if message is not None:
            self.reported = True
            if state.is_world_process_zero:
                print(message, flush=True)


__all__ = ["StepTimeEstimate", "duration_text"]
