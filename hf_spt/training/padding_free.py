"""When a phase may train padding-free (`padding_free=True`), and which attention path its packed rows take.

Packed rows need an attention back-end that keeps their sequences apart: `torch_varlen` (core torch's
variable-length flash kernel, `hf_spt.models.varlen_attention`; no extra package) or a flash attention package's
(`flash_attention_2`/`_3`, CUDA only). `torch_varlen` runs its kernel on CUDA in float16/bfloat16; elsewhere (a CPU,
float32, ALiBi, attention dropout, a head size the kernel does not take) it attends over each whole packed row with
a block-diagonal mask: the same numbers, more work than padding length-grouped batches (docs/performance.md). On a
CPU that fallback is allowed (and tested against padding); on an accelerator it is refused before training: its
dense N x N mask over all N tokens of a packed batch (ListOps: N of 32-64k, 1-4 GB; with ALiBi a float (1, H, N, N)
bias, 34 GB at N = 32k) runs out of memory or runs tens of times slower. A model on SDPA, the default, is switched
to `torch_varlen`, which is SDPA for everything but packed rows. The trainers log which path a run takes
(`padding_free_path`), and leave `seq_idx` out of the batches where the kernel runs (`runs_a_kernel`).
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel, TrainingArguments
from transformers.utils import logging

from ..errors import UserInputError
from ..models.configuration_spt import SptConfig
from ..models.packing import runs_varlen_attention
from ..models.varlen_attention import TORCH_VARLEN, VARLEN_IMPLEMENTATIONS, varlen_path

logger = logging.get_logger(__name__)


def training_dtype(args: TrainingArguments) -> torch.dtype:
    """The dtype attention computes in under `args`: bfloat16 or float16 with --bf16/--fp16 (autocast), else float32."""
    return torch.bfloat16 if args.bf16 else torch.float16 if args.fp16 else torch.float32


def padding_free_path(model: PreTrainedModel, args: TrainingArguments) -> str:
    """The attention path packed training rows take: "flash attention (NAME)", "varlen kernel" (its stand-in's:
    "varlen kernel (a stand-in: ...)") or "block-diagonal SDPA (why)"."""
    if runs_varlen_attention(model.config):
        return f"flash attention ({model.config._attn_implementation})"
    return varlen_path(args.device, training_dtype(args), model.config, training=True)


def runs_a_kernel(path: str) -> bool:
    """Whether a `padding_free_path` is a varlen kernel's (flash attention or `torch_varlen`'s), not the fallback."""
    return not path.startswith("block-diagonal")


def check_padding_free(model: PreTrainedModel, args: TrainingArguments) -> str:
    """Raise a UserInputError unless `model` can train packed rows under `args` (an SPT model; `torch_varlen`, or a
    flash back-end on a CUDA GPU; on an accelerator, a path that runs the kernel); else log and return the attention
    path they take (`padding_free_path`). An SPT model on "sdpa" is switched to `torch_varlen` (the same SDPA, plus
    the varlen kernel for packed rows)."""
    problems = []
    attention = model.config._attn_implementation
    if model.config.model_type != SptConfig.model_type:
        backbone = getattr(model.config, "backbone", None)  # hf_spt's classifier on another architecture: name that
        problems.append(f"an SPT model (this one is {getattr(backbone, 'model_type', model.config.model_type)!r})")
    elif attention == "sdpa":
        model.set_attn_implementation(TORCH_VARLEN)
        attention = TORCH_VARLEN
    if attention not in VARLEN_IMPLEMENTATIONS and not runs_varlen_attention(model.config):
        problems.append(f"attn_implementation {TORCH_VARLEN!r} (core torch's varlen kernel) or a flash attention "
                        f"back-end (this model uses {attention!r})")
    elif runs_varlen_attention(model.config) and args.device.type != "cuda":
        problems.append(f"a CUDA GPU for {attention} (this run is on {args.device.type}; {TORCH_VARLEN!r} runs anywhere)")
    if problems:
        raise UserInputError("--padding_free packs rows for a varlen attention kernel; it needs " + ", ".join(problems)
                             + ". Without it, batches are padded, grouped by length when lengths vary "
                             "(--train_sampling_strategy).")
    path = padding_free_path(model, args)
    if not runs_a_kernel(path) and args.device.type != "cpu":
        raise UserInputError(
            f"--padding_free on {args.device.type} would attend through a {path}: a dense N x N mask over all N "
            "tokens of each packed batch (out of memory, or tens of times slower, at LRA's sizes). Train where the "
            "kernel runs (--bf16 or --fp16, no ALiBi, no attention dropout, a head size a multiple of 8), or leave "
            "out --padding_free: padded batches, grouped by length (--train_sampling_strategy group_by_length).")
    if not runs_a_kernel(path):
        logger.warning(f"padding_free: packed rows attend through a {path}: the same numbers as the kernel, with more "
                       "work than padded, length-grouped batches.")
    else:
        logger.info(f"padding_free: packed rows attend through the {path}.")
    return path


__all__ = ["training_dtype", "padding_free_path", "runs_a_kernel", "check_padding_free"]
