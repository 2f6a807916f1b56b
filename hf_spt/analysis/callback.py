"""A Trainer callback that logs proximity scores of a fixed probe batch while training runs.

It shows attention becoming local during SPT (or not, during supervised training from
scratch). At the start of training, and then every `every_n_steps` steps or at every
evaluation, it runs the probe batch through the model with eager attention and logs, per layer
and head, the attention mass within |i - j| <= `near` and the expected |i - j|, both as ratios
to uniform attention (1 = no preference for neighbours). The scores go through `trainer.log`,
hence to every logger the Trainer reports to (TensorBoard, W&B, `state.log_history`), and to a
JSON file in the output folder in any case.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from ..atomic_files import write_json
from .attention_maps import padded_batches
from .eval_mode import evaluating
from .proximity import proximity_scores

PROXIMITY_LOG_NAME = "proximity_log.json"


class ProximityCallback(TrainerCallback):
    """Logs proximity scores of `probe_sequences` (token id lists, unmasked) for the `trainer` it is bound to.

    Use `ProximityCallback.attach(trainer, probe_sequences)`; it needs the trainer to log
    through `trainer.log`. `every_n_steps=None` logs at each evaluation instead of every N steps.
    """

    def __init__(
        self, trainer: Trainer, probe_sequences: Sequence[Sequence[int]], near: int = 2, every_n_steps: int | None = None
    ):
        if len(probe_sequences) == 0:
            raise ValueError("ProximityCallback needs at least one probe sequence.")
        if trainer.processing_class is None:
            raise ValueError("ProximityCallback pads the probe batch with the trainer's tokenizer: pass processing_class.")
        self.trainer = trainer
        self.batch = next(padded_batches(probe_sequences, trainer.processing_class, len(probe_sequences)))
        self.near = near
        self.every_n_steps = every_n_steps
        self.records: list[dict] = []

    @classmethod
    def attach(cls, trainer: Trainer, probe_sequences: Sequence[Sequence[int]], **kwargs) -> ProximityCallback:
        """Build the callback for `trainer` and add it to the trainer's callbacks."""
        callback = cls(trainer, probe_sequences, **kwargs)
        trainer.add_callback(callback)
        return callback

    @torch.no_grad()
    def measure(self, model: torch.nn.Module) -> dict[str, float]:
        """Flat `proximity/layer{l}/...` scores of the probe batch (per head and head mean)."""
        with evaluating(model.base_model) as device:
            outputs = model.base_model(**{k: v.to(device) for k, v in self.batch.items()}, output_attentions=True)
        flat = {}
        for layer, scores in enumerate(proximity_scores(outputs.attentions, self.batch["attention_mask"], self.near)):
            prefix = f"proximity/layer{layer}"
            flat[f"{prefix}/near{self.near}_ratio"] = scores[f"near{self.near}_ratio_mean"]
            flat[f"{prefix}/mean_distance_ratio"] = scores["mean_distance_ratio_mean"]
            for head, (ratio, distance) in enumerate(zip(scores[f"near{self.near}_ratio"], scores["mean_distance_ratio"])):
                flat[f"{prefix}/head{head}/near{self.near}_ratio"] = ratio
                flat[f"{prefix}/head{head}/mean_distance_ratio"] = distance
        return flat

    def _record(self, args: TrainingArguments, state: TrainerState, model: torch.nn.Module) -> None:
        scores = self.measure(model)
        self.trainer.log(dict(scores))
        if state.is_world_process_zero:
            self.records.append({"step": state.global_step, "epoch": state.epoch, **scores})
            write_json(Path(args.output_dir) / PROXIMITY_LOG_NAME, self.records)

    def on_train_begin(self, args, state: TrainerState, control: TrainerControl, model=None, **kwargs):
        self._record(args, state, model)

    def on_step_end(self, args, state: TrainerState, control: TrainerControl, model=None, **kwargs):
        if self.every_n_steps and state.global_step % self.every_n_steps == 0:
            self._record(args, state, model)

    def on_evaluate(self, args, state: TrainerState, control: TrainerControl, model=None, **kwargs):
        if not self.every_n_steps:
            self._record(args, state, model)


__all__ = ["PROXIMITY_LOG_NAME", "ProximityCallback"]
