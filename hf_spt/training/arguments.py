"""Training arguments of both phases, as `TrainingArguments` subclasses (trl's `*Config` pattern).

`PretrainArguments`: the self-pretraining phase (masked-token reconstruction on the task's own
inputs). `FinetuneArguments`: the fine-tuning phase (sequence classification on its labels).
Each states its changed defaults outright, the device defaults included (`DeviceDefaults`), so the
trainers used as a library behave as a `run_spt.py` run does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import TrainingArguments

from ..errors import UserInputError

GPU_PAD_MULTIPLE = 8
"""Batch widths on an accelerator: a multiple of 8 keeps tensor-core and fused attention kernels on aligned shapes
(LRA's lengths vary: 99 widths in 100 ListOps batches, 77% of them not a multiple of 8)."""


def accelerator_available(args: TrainingArguments) -> bool:
    """Whether the Trainer will run on an accelerator (a GPU, MPS...), which pinned memory speeds up."""
    return not args.use_cpu and torch.accelerator.is_available()


def use_hub_kernels_field() -> Any:
    """The `use_hub_kernels` field of both phases (`training.hub_kernels`: what loading does without it)."""
    return field(
        default=False,
        metadata={"help": "Let transformers swap layers (GELU, ...) for kernels from the Hub (`kernels` package) in "
                  "every arm; off: every model keeps its own layers, loaded or built, and nothing is fetched."},
    )


def pad_to_multiple_of_field() -> Any:
    """The `pad_to_multiple_of` field of both phases."""
    return field(
        default=None,
        metadata={"help": "Pad a padded batch's width up to a multiple of this (8 or 64: shapes GPU kernels prefer, "
                  "fewer distinct widths), never past the model's positions; equal rows keep theirs; the same tokens "
                  "are masked whatever the multiple. None: 8 on an accelerator, the longest row's width on a CPU "
                  "(`DeviceDefaults`; 1 keeps the longest row's everywhere). Larger than the positions: an error."},
    )


def padding_free_field() -> Any:
    """The `padding_free` field of both phases."""
    return field(
        default=False,
        metadata={"help": "Pack each batch's rows end to end without padding, for a varlen attention kernel: an SPT "
                  "model on torch_varlen (core torch's kernel, chosen for sdpa models; CUDA with bf16/fp16, else a "
                  "block-diagonal SDPA fallback that the run names) or flash_attention_2 on a GPU."},
    )


class DeviceDefaults:
    """Mixin of both phases' arguments: the defaults that depend on the device, resolved before transformers
    validates the rest. On an accelerator, data loaders pin memory (`dataloader_pin_memory` None), batches are
    copied without blocking the host (`accelerator_config` None: Accelerate's `non_blocking`) and padded widths are
    a multiple of `GPU_PAD_MULTIPLE` (`pad_to_multiple_of` None, without `padding_free`); on a CPU-only machine none of them (PyTorch
    would warn at every evaluation, and wider batches only cost time). `bf16` without an accelerator asks for
    `use_cpu` (transformers then autocasts on the CPU); `fp16` without one is an error, as it would do nothing, and
    so is a `pad_to_multiple_of` given with `padding_free` (packed rows are never padded: the value would be
    recorded in the phase's definition, and the same run without it refused as another). A value given wins."""

    def __post_init__(self):
        if self.padding_free and self.pad_to_multiple_of is not None:
            raise UserInputError(f"--pad_to_multiple_of {self.pad_to_multiple_of} is not read with --padding_free, "
                                 "which lays a batch's rows end to end and never pads them: drop one of the two.")
        on_cpu = not accelerator_available(self)
        if self.fp16 and on_cpu:
            raise UserInputError("--fp16 needs a GPU; on this CPU-only machine it would be recorded and do nothing. "
                                 "Use --bf16 (linear layers in bfloat16, attention in float32: docs/performance.md) "
                                 "or neither.")
        if self.bf16 and on_cpu:
            self.use_cpu = True
        if self.dataloader_pin_memory is None:
            self.dataloader_pin_memory = not on_cpu
        if self.pad_to_multiple_of is None and not on_cpu and not self.padding_free:
            self.pad_to_multiple_of = GPU_PAD_MULTIPLE  # packed rows are never padded: nothing to default
        if self.accelerator_config is None and not on_cpu:
            self.accelerator_config = {"non_blocking": True}
        super().__post_init__()


def nan_inf_filter_field() -> Any:
    """The `logging_nan_inf_filter` field of both phases: off, as in a `run_spt.py` run (transformers' True checks
    every micro-step's loss for NaN/inf, which stops the host for the device each step on a GPU)."""
    return field(default=False, metadata={"help": "Skip NaN/inf losses in the logged training loss (changed default: "
                                          "off, as checking costs a host sync every step on a GPU; the loss trained "
                                          "on is the same either way)."})


def pin_memory_field() -> Any:
    """The `dataloader_pin_memory` field of both phases (`DeviceDefaults`)."""
    return field(default=None, metadata={"help": "Pin data-loader memory (None: only with an accelerator)."})


class SecretFreePickle:
    """Mixin: a pickled copy (the Trainer's `training_args.bin` in every checkpoint and saved model) holds
    `<HUB_TOKEN>` where the object holds the token, as transformers' `to_dict` does for JSON; the object in memory
    keeps it for pushing."""

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        for key, value in state.items():
            if key.endswith("_token") and value is not None:
                state[key] = f"<{key.upper()}>"
        return state


@dataclass
class PretrainArguments(DeviceDefaults, SecretFreePickle, TrainingArguments):
    """`TrainingArguments` for the pretraining (SPT) phase, plus the masking options.

    Changed defaults (so the best-validation checkpoint is what fine-tuning starts from, as in
    Amos et al.): `eval_strategy="epoch"`, `save_strategy="epoch"`, `load_best_model_at_end=True`,
    `metric_for_best_model="eval_loss"`, `save_total_limit=2`, `prediction_loss_only=True`
    (MLM logits of variable size are never gathered), `learning_rate=1e-3`, `num_train_epochs=25`,
    `logging_strategy="epoch"`, `logging_nan_inf_filter=False`.
    """

    mlm_probability: float = field(
        default=0.15,
        metadata={"help": "Probability of masking each real token (Amos et al.: 0.5 visual, 0.15 text, 0.1 ListOps)."},
    )
    mask_replace_prob: float = field(
        default=0.8, metadata={"help": "Share of masked tokens replaced by [MASK] (1.0 for pure [MASK] masking)."}
    )
    random_replace_prob: float = field(
        default=0.1, metadata={"help": "Share of masked tokens replaced by a random real token (never a special one)."}
    )
    flush_denormal: bool = field(
        default=True,
        metadata={"help": "On CPU, flush denormal floats to zero while training (torch.set_flush_denormal, a "
                  "process-wide setting): softmax gradients over a large vocabulary are mostly denormal when "
                  "logits are peaked, and denormals make CPU matmuls several times slower. No effect on GPU."},
    )
    eval_strategy: str = field(default="epoch", metadata={"help": "Evaluate the MLM loss every epoch (changed default)."})
    save_strategy: str = field(default="epoch", metadata={"help": "Checkpoint every epoch (changed default)."})
    logging_strategy: str = field(default="epoch", metadata={"help": "Log every epoch (changed default)."})
    load_best_model_at_end: bool = field(
        default=True, metadata={"help": "Keep the best-validation checkpoint, not the last (changed default)."}
    )
    metric_for_best_model: str = field(default="eval_loss", metadata={"help": "Best checkpoint by MLM loss."})
    save_total_limit: int | None = field(default=2, metadata={"help": "Checkpoints kept (the best is always kept)."})
    prediction_loss_only: bool = field(default=True, metadata={"help": "Evaluation computes the loss only."})
    learning_rate: float = field(default=1e-3, metadata={"help": "AdamW peak learning rate (Amos et al. grid)."})
    num_train_epochs: float = field(default=25.0, metadata={"help": "Pretraining epochs (changed default)."})
    token_weighting: str = field(
        default="none",
        metadata={"help": "none, or inverse_frequency: weight each token id's loss by 1/its count in the training inputs."},
    )
    padding_free: bool = padding_free_field()
    use_hub_kernels: bool = use_hub_kernels_field()
    pad_to_multiple_of: int | None = pad_to_multiple_of_field()
    dataloader_pin_memory: bool | None = pin_memory_field()
    logging_nan_inf_filter: bool = nan_inf_filter_field()


@dataclass
class FinetuneArguments(DeviceDefaults, SecretFreePickle, TrainingArguments):
    """`TrainingArguments` for classification fine-tuning.

    Changed defaults: `eval_strategy="epoch"`, `save_strategy="epoch"`, `logging_strategy="epoch"`,
    `load_best_model_at_end=True` with `metric_for_best_model="accuracy"` (the test score is the
    best-validation model's, not the last epoch's), `save_total_limit=2`, `learning_rate=1e-3`,
    `num_train_epochs=4`, `logging_nan_inf_filter=False`.
    """

    eval_strategy: str = field(default="epoch", metadata={"help": "Evaluate every epoch (changed default)."})
    save_strategy: str = field(default="epoch", metadata={"help": "Checkpoint every epoch (changed default)."})
    logging_strategy: str = field(default="epoch", metadata={"help": "Log every epoch (changed default)."})
    load_best_model_at_end: bool = field(
        default=True, metadata={"help": "Test the best-validation checkpoint, not the last (changed default)."}
    )
    metric_for_best_model: str = field(default="accuracy", metadata={"help": "Best checkpoint by validation accuracy."})
    greater_is_better: bool = field(default=True, metadata={"help": "Higher accuracy is better."})
    save_total_limit: int | None = field(default=2, metadata={"help": "Checkpoints kept (the best is always kept)."})
    learning_rate: float = field(default=1e-3, metadata={"help": "AdamW peak learning rate (Amos et al. grid)."})
    num_train_epochs: float = field(default=4.0, metadata={"help": "Fine-tuning epochs (changed default)."})
    class_weights: list[float] | None = field(
        default=None, metadata={"help": "Per-class loss weights for unbalanced single-label data (None: unweighted)."}
    )
    padding_free: bool = padding_free_field()
    use_hub_kernels: bool = use_hub_kernels_field()
    pad_to_multiple_of: int | None = pad_to_multiple_of_field()
    dataloader_pin_memory: bool | None = pin_memory_field()
    logging_nan_inf_filter: bool = nan_inf_filter_field()


__all__ = ["GPU_PAD_MULTIPLE", "accelerator_available", "DeviceDefaults", "pin_memory_field", "use_hub_kernels_field", "nan_inf_filter_field", "pad_to_multiple_of_field", "padding_free_field", "SecretFreePickle", "PretrainArguments", "FinetuneArguments"]
