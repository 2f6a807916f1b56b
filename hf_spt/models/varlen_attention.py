"""`torch_varlen`: packed rows on core torch's variable-length flash attention, no `flash-attn` package.

torch ships `torch.nn.attention.varlen.varlen_attn`: flash attention over sequences laid end to end, (N, H, hd),
kept apart by cumulative lengths (`cu_seq_q`/`cu_seq_k`). It runs on CUDA in float16/bfloat16, with autograd and
`torch.compile`, and has no dropout and no additive bias. hf_spt passes it `scale=`, which its first release (torch
2.10) does not take: `kernel_unavailable` reads the installed signature, and a torch without the argument takes the
fallback below, with that reason named. No transformers attention back-end
calls it, so hf_spt registers one the transformers way: `torch_varlen_attention_forward` under the name
`TORCH_VARLEN` in `AttentionInterface` (and SDPA's mask builder under the same name in
`ALL_MASK_ATTENTION_FUNCTIONS`), selected with `attn_implementation="torch_varlen"` like any other back-end.

A packed batch's forward reads `cu_seq_lens_q/k` and `max_length_q/k` (`packing.PACKED_KEYS`, from the collator)
and calls the kernel where it runs (`varlen_kernel_runs`). Where it cannot (a CPU, float32 without autocast,
ALiBi's bias, attention dropout while training, a head size flash attention does not take), the model gives the
same back-end a block-diagonal mask instead and it runs SDPA: the same numbers, over the whole packed row
(`varlen_path` names the path a run takes; the trainers refuse it on an accelerator, `training.padding_free`). A
padded batch (an attention mask, no offsets) runs SDPA as `attn_implementation="sdpa"` would.

The kernel's argument contract (`kernel_argument_problems`): query, key and value in one half-precision dtype,
each a contiguous (N, H, hd) tensor with hd a multiple of 8 (at most 256), int32 offsets of S + 1 entries from 0
to N, and the longest sequence as a host int (a device tensor would stop the host to read it). The forward casts
rotary's float32 queries and keys to autocast's dtype, as transformers' flash integration does, and
`varlen_kernel` checks the metadata before every call (no device read); `reference_varlen_kernel`, a per-sequence SDPA, checks the values
too and stands in for the kernel where none runs (tests, `gpu_self_check.py --dry_run`).

`REFERENCE_VARLEN` ("torch_varlen_reference") is that stand-in as a back-end of its own, registered the same way:
`torch_varlen` with `reference_varlen_kernel` as its kernel, which "runs" on any device, so a CPU run takes a GPU's
path (offsets and no mask for packed rows, autocast's half precision into attention) with every call's arguments
checked against the kernel's contract. It is as slow as a per-sequence SDPA: a check, not a speed-up. A caller that
wants its own kernel registers `functools.partial(packed_attention, kernel)` under the name.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import torch
from torch import nn
from transformers import AttentionInterface, PreTrainedConfig
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

TORCH_VARLEN = "torch_varlen"
REFERENCE_VARLEN = "torch_varlen_reference"
VARLEN_IMPLEMENTATIONS = (TORCH_VARLEN, REFERENCE_VARLEN)
"""The back-ends that attend packed rows through `packed_attention` (module docstring)."""
HALF_PRECISION = (torch.float16, torch.bfloat16)


def dtype_name(dtype: torch.dtype) -> str:
    """"bfloat16" for torch.bfloat16."""
    return str(dtype).removeprefix("torch.")


MAX_HEAD_SIZE = 256
"""The largest head size torch's flash kernel takes; a head size must also be a multiple of 8."""


def varlen_kernel(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu_seq_q: torch.Tensor,
                  cu_seq_k: torch.Tensor, max_q: int, max_k: int, scale: float) -> torch.Tensor:
    """Core torch's `varlen_attn` on (N, H, hd) tensors -> (N, H, hd), after checking the arguments' metadata
    against its contract (`kernel_argument_problems`: a ValueError naming the break, not a CUDA error); a name of
    this module so tests can stand a per-sequence reference in for it on a CPU, where torch has no kernel."""
    from torch.nn.attention.varlen import varlen_attn

    if problems := kernel_argument_problems(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k):
        raise ValueError("torch_varlen: varlen_attn cannot take these arguments: " + "; ".join(problems))
    return varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, scale=scale)


@functools.lru_cache(maxsize=4)
def _takes_scale(function: Callable) -> bool:
    return "scale" in inspect.signature(function).parameters


@torch.compiler.assume_constant_result  # one answer per process: dynamo need not trace the signature
def kernel_unavailable() -> str | None:
    """Why this torch cannot run `varlen_kernel` (no `torch.nn.attention.varlen`, or a `varlen_attn` without the
    `scale` argument hf_spt passes: torch 2.10's), or None where it can."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return f"torch {torch.__version__} has no torch.nn.attention.varlen"
    if not _takes_scale(varlen_attn):
        return f"torch {torch.__version__}'s varlen_attn takes no scale= argument (a later torch does)"
    return None


def kernel_available() -> bool:
    """Whether this torch has a `varlen_attn` hf_spt can call (`kernel_unavailable`)."""
    return kernel_unavailable() is None


def head_size_problem(head_size: int) -> str | None:
    """Why flash attention cannot take heads of `head_size` channels (a multiple of 8, at most 256), or None."""
    if head_size % 8 or head_size > MAX_HEAD_SIZE:
        return f"head size {head_size}: the kernel takes a multiple of 8 up to {MAX_HEAD_SIZE}"
    return None


def kernel_argument_problems(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu_seq_q: torch.Tensor,
                             cu_seq_k: torch.Tensor, max_q: object, max_k: object,
                             read_values: bool = False, half_precision: bool = True) -> list[str]:
    """What in these arguments breaks `varlen_attn`'s contract (module docstring), from their metadata alone: no
    device read. `read_values` (a stand-in kernel, on a CPU) also checks the offsets' values: from 0, non-decreasing,
    ending at N, the longest sequence equal to `max_q`/`max_k`. `half_precision` False lets float32 through, with one
    dtype still (a float32 stand-in, checking plumbing against padding at float32's precision)."""
    problems = []
    dtypes = {tensor.dtype for tensor in (query, key, value)}
    allowed = HALF_PRECISION if half_precision else (*HALF_PRECISION, torch.float32)
    if len(dtypes) != 1 or not dtypes <= set(allowed):
        problems.append(f"query, key and value must share one of {'/'.join(dtype_name(d) for d in allowed)}, got "
                        f"{', '.join(dtype_name(tensor.dtype) for tensor in (query, key, value))}")
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if tensor.dim() != 3 or tensor.shape != query.shape:
            problems.append(f"{name} must be (N, H, hd) like query {tuple(query.shape)}, got {tuple(tensor.shape)}")
        elif not tensor.is_contiguous():
            problems.append(f"{name} {tuple(tensor.shape)} is not contiguous")
    if query.dim() == 3 and (problem := head_size_problem(query.shape[-1])):
        problems.append(problem)
    for name, offsets, longest in (("cu_seq_q", cu_seq_q, max_q), ("cu_seq_k", cu_seq_k, max_k)):
        if offsets.dtype != torch.int32 or offsets.dim() != 1 or offsets.shape[0] < 2:
            problems.append(f"{name} must be int32 (S + 1,), got {dtype_name(offsets.dtype)} "
                            f"{tuple(offsets.shape)}")
        if isinstance(longest, torch.Tensor) or not isinstance(longest, (int, torch.SymInt)):
            problems.append(f"{name}'s longest sequence must be a host int, got {type(longest).__name__}")
        if read_values and not problems:
            bounds = offsets.tolist()
            if bounds[0] != 0 or bounds[-1] != query.shape[0] or any(b < a for a, b in zip(bounds, bounds[1:])):
                problems.append(f"{name} must rise from 0 to N = {query.shape[0]}, got {bounds}")
            elif max(b - a for a, b in zip(bounds, bounds[1:])) != longest:
                problems.append(f"{name}'s longest sequence is {max(b - a for a, b in zip(bounds, bounds[1:]))}, "
                                f"not {longest}")
    return problems


def reference_varlen_kernel(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu_seq_q: torch.Tensor,
                            cu_seq_k: torch.Tensor, max_q: int, max_k: int, scale: float,
                            half_precision: bool = True) -> torch.Tensor:
    """What `varlen_kernel` computes, as a per-sequence SDPA that runs anywhere, after checking every argument
    against the kernel's contract (`kernel_argument_problems`, values read; `half_precision` as there): a stand-in
    for the kernel where none runs. Raises ValueError naming what breaks the contract."""
    if problems := kernel_argument_problems(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, read_values=True,
                                            half_precision=half_precision):
        raise ValueError("varlen_attn's arguments break its contract: " + "; ".join(problems))
    sizes = torch.diff(cu_seq_q.long())
    ids = torch.repeat_interleave(torch.arange(sizes.shape[0], device=sizes.device), sizes, output_size=query.shape[0])
    mask = ids[:, None] == ids[None, :]  # (N, N), from the offsets alone
    output = nn.functional.scaled_dot_product_attention(
        query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), attn_mask=mask, scale=scale)
    return output.transpose(0, 1).contiguous()


def compute_dtype(hidden_states: torch.Tensor) -> torch.dtype:
    """The dtype attention's projections produce from `hidden_states`: autocast's, where it is on for their device."""
    device = hidden_states.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return hidden_states.dtype


def varlen_path(device: torch.device | str, dtype: torch.dtype, config: PreTrainedConfig, training: bool) -> str:
    """How `torch_varlen` attends a packed batch: "varlen kernel" (`REFERENCE_VARLEN`: "varlen kernel (a stand-in:
    reference_varlen_kernel)"), or "block-diagonal SDPA (REASON)" where the kernel cannot run: not on CUDA (the
    stand-in runs anywhere), `dtype` not half precision, ALiBi's bias, attention dropout while training, a head
    size the kernel does not take (`head_size_problem`) or a torch without a usable kernel (`kernel_unavailable`)."""
    reasons = []
    stand_in = config._attn_implementation == REFERENCE_VARLEN
    if torch.device(device).type != "cuda" and not stand_in:
        reasons.append(f"{torch.device(device).type}, not CUDA")
    if dtype not in HALF_PRECISION:
        reasons.append(f"{dtype_name(dtype)}: the kernel takes float16/bfloat16 (--bf16)")
    if getattr(config, "position_embedding_type", None) == "alibi":
        reasons.append("ALiBi's distance bias")
    if training and getattr(config, "attention_probs_dropout_prob", 0.0) > 0:
        reasons.append("attention dropout")
    if head_problem := head_size_problem(config.hidden_size // config.num_attention_heads):
        reasons.append(head_problem)
    if not stand_in and (unavailable := kernel_unavailable()):
        reasons.append(unavailable)
    if reasons:
        return f"block-diagonal SDPA ({'; '.join(reasons)})"
    return "varlen kernel (a stand-in: reference_varlen_kernel)" if stand_in else "varlen kernel"


def varlen_kernel_runs(hidden_states: torch.Tensor, config: PreTrainedConfig, training: bool) -> bool:
    """Whether a packed forward of `hidden_states` under `config` runs the kernel (`varlen_path`)."""
    return varlen_path(hidden_states.device, compute_dtype(hidden_states), config, training).startswith("varlen")


def packed_attention(
    kernel: Callable[..., torch.Tensor],
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    cu_seq_lens_q: torch.Tensor | None = None,
    cu_seq_lens_k: torch.Tensor | None = None,
    max_length_q: int | None = None,
    max_length_k: int | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Attention of a packed row (1, H, N, hd) on `kernel` (`varlen_kernel`'s arguments) when the offsets are given
    and no mask is; SDPA otherwise (a padded batch's mask, or the block-diagonal mask of the fallback). Returns
    (1, N, H, hd).

    The kernel has no autocast rule: under autocast, rotary's float32 queries and keys (rotated by float32 cos/sin)
    meet float16/bfloat16 values, so all three are cast to autocast's dtype first, as transformers' flash
    integration does."""
    if cu_seq_lens_q is None or attention_mask is not None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    if dropout:
        raise ValueError("torch_varlen's kernel has no attention dropout: the model gives it a mask (SDPA) instead.")
    if cu_seq_lens_k is None:  # self-attention: the keys' sequences are the queries'
        cu_seq_lens_k, max_length_k = cu_seq_lens_q, max_length_q
    device = query.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else value.dtype
    packed = [tensor[0].transpose(0, 1).to(dtype).contiguous() for tensor in (query, key, value)]  # (N, H, hd) each
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    output = kernel(*packed, cu_seq_lens_q, cu_seq_lens_k, max_length_q, max_length_k, scale)
    return output[None], None  # (1, N, H, hd)


def torch_varlen_attention_forward(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                   attention_mask: torch.Tensor | None, **kwargs) -> tuple[torch.Tensor, None]:
    """`TORCH_VARLEN`: `packed_attention` on torch's kernel, `varlen_kernel`."""
    return packed_attention(varlen_kernel, module, query, key, value, attention_mask, **kwargs)


def reference_varlen_attention_forward(module: nn.Module, query: torch.Tensor, key: torch.Tensor,
                                       value: torch.Tensor, attention_mask: torch.Tensor | None,
                                       **kwargs) -> tuple[torch.Tensor, None]:
    """`REFERENCE_VARLEN`: `packed_attention` on `reference_varlen_kernel` (module docstring)."""
    return packed_attention(reference_varlen_kernel, module, query, key, value, attention_mask, **kwargs)


AttentionInterface.register(TORCH_VARLEN, torch_varlen_attention_forward)
AttentionInterface.register(REFERENCE_VARLEN, reference_varlen_attention_forward)
ALL_MASK_ATTENTION_FUNCTIONS.register(TORCH_VARLEN, sdpa_mask)  # padded batches and the fallback: SDPA's masks
ALL_MASK_ATTENTION_FUNCTIONS.register(REFERENCE_VARLEN, sdpa_mask)

__all__ = ["TORCH_VARLEN", "REFERENCE_VARLEN", "VARLEN_IMPLEMENTATIONS", "MAX_HEAD_SIZE", "varlen_kernel",
           "kernel_unavailable", "kernel_available", "head_size_problem", "kernel_argument_problems",
           "reference_varlen_kernel", "varlen_path", "varlen_kernel_runs", "packed_attention",
           "torch_varlen_attention_forward", "reference_varlen_attention_forward"]
