"""When a phase may train padding-free (`padding_free=True`): packed rows on a flash attention kernel.

Packing pays only where attention is computed per sequence: flash attention's varlen kernel on a
GPU. Elsewhere the model still computes packed rows correctly (a block-diagonal mask), but
attends over the whole packed row, which costs more than padding length-grouped batches
(docs/performance.md), so the flag is refused there with a message saying what it needs.
"""

from __future__ import annotations

from transformers import PreTrainedModel, TrainingArguments

from ..errors import UserInputError
from ..models.configuration_spt import SptConfig
from ..models.packing import runs_varlen_attention


def check_padding_free(model: PreTrainedModel, args: TrainingArguments) -> None:
    """Raise a UserInputError unless `model` can train packed rows fast under `args`: an SPT model, a flash
    attention back-end, a CUDA device."""
    problems = []
    if model.config.model_type != SptConfig.model_type:
        problems.append(f"an SPT model (this one is {model.config.model_type!r})")
    if not runs_varlen_attention(model.config):
        problems.append(f"--attn_implementation flash_attention_2 (this model uses {model.config._attn_implementation!r})")
    if args.device.type != "cuda":
        problems.append(f"a CUDA GPU (this run is on {args.device.type})")
    if problems:
        raise UserInputError("--padding_free packs rows for flash attention's varlen kernel; it needs " + ", ".join(problems)
                             + ". Without it, batches are padded, grouped by length when lengths vary "
                             "(--train_sampling_strategy).")


__all__ = ["check_padding_free"]
