"""`torch_varlen`: packed rows on core torch's variable-length flash attention, no `flash-attn` package.

torch (2.10 and later) ships `torch.nn.attention.varlen.varlen_attn`: flash attention over sequences laid end to
end, (N, H, hd), kept apart by cumulative lengths (`cu_seq_q`/`cu_seq_k`). It runs on CUDA in float16/bfloat16,
with autograd and `torch.compile`, and has no dropout and no additive bias. No transformers attention back-end
calls it, so hf_spt registers one the transformers way: `torch_varlen_attention_forward` under the name
`TORCH_VARLEN` in `AttentionInterface` (and SDPA's mask builder under the same name in
`ALL_MASK_ATTENTION_FUNCTIONS`), selected with `attn_implementation="torch_varlen"` like any other back-end.

A packed batch's forward reads `cu_seq_lens_q/k` and `max_length_q/k` (`packing.PACKED_KEYS`, from the collator)
and calls the kernel where it runs (`varlen_kernel_runs`). Where it cannot (a CPU, float32 without autocast,
ALiBi's bias, attention dropout while training), the model gives the same back-end a block-diagonal mask instead
and it runs SDPA: the same numbers, over the whole packed row (`varlen_path` names the path a run takes). A
padded batch (an attention mask, no offsets) runs SDPA as `attn_implementation="sdpa"` would.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AttentionInterface, PreTrainedConfig
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

TORCH_VARLEN = "torch_varlen"
HALF_PRECISION = (torch.float16, torch.bfloat16)


def varlen_kernel(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu_seq_q: torch.Tensor,
                  cu_seq_k: torch.Tensor, max_q: int, max_k: int, scale: float) -> torch.Tensor:
    """Core torch's `varlen_attn` on (N, H, hd) tensors -> (N, H, hd); a name of this module so tests can stand a
    per-sequence reference in for it on a CPU, where torch has no kernel."""
    from torch.nn.attention.varlen import varlen_attn

    return varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, scale=scale)


def kernel_available() -> bool:
    """Whether this torch has `torch.nn.attention.varlen` (torch 2.10 and later)."""
    try:
        import torch.nn.attention.varlen  # noqa: F401
    except ImportError:
        return False
    return True


def compute_dtype(hidden_states: torch.Tensor) -> torch.dtype:
    """The dtype attention's projections produce from `hidden_states`: autocast's, where it is on for their device."""
    device = hidden_states.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return hidden_states.dtype


def varlen_path(device: torch.device | str, dtype: torch.dtype, config: PreTrainedConfig, training: bool) -> str:
    """How `torch_varlen` attends a packed batch: "varlen kernel", or "block-diagonal SDPA (REASON)" where the
    kernel cannot run: not on CUDA, `dtype` not half precision, ALiBi's bias, attention dropout while training,
    or a torch without the kernel."""
    reasons = []
    if torch.device(device).type != "cuda":
        reasons.append(f"{torch.device(device).type}, not CUDA")
    if dtype not in HALF_PRECISION:
        reasons.append(f"{str(dtype).removeprefix('torch.')}: the kernel takes float16/bfloat16 (--bf16)")
    if getattr(config, "position_embedding_type", None) == "alibi":
        reasons.append("ALiBi's distance bias")
    if training and getattr(config, "attention_probs_dropout_prob", 0.0) > 0:
        reasons.append("attention dropout")
    if not kernel_available():
        reasons.append(f"torch {torch.__version__} has no torch.nn.attention.varlen")
    return "varlen kernel" if not reasons else f"block-diagonal SDPA ({'; '.join(reasons)})"


def varlen_kernel_runs(hidden_states: torch.Tensor, config: PreTrainedConfig, training: bool) -> bool:
    """Whether a packed forward of `hidden_states` under `config` runs the kernel (`varlen_path`)."""
    return varlen_path(hidden_states.device, compute_dtype(hidden_states), config, training) == "varlen kernel"


def torch_varlen_attention_forward(
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
    """Attention of a packed row (1, H, N, hd) on `varlen_kernel` when the offsets are given and no mask is;
    SDPA otherwise (a padded batch's mask, or the block-diagonal mask of the fallback). Returns (1, N, H, hd)."""
    if cu_seq_lens_q is None or attention_mask is not None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    if dropout:
        raise ValueError("torch_varlen's kernel has no attention dropout: the model gives it a mask (SDPA) instead.")
    packed = [tensor[0].transpose(0, 1) for tensor in (query, key, value)]  # (N, H, hd) each
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    output = varlen_kernel(*packed, cu_seq_lens_q, cu_seq_lens_k, max_length_q, max_length_k, scale)
    return output[None], None  # (1, N, H, hd)


AttentionInterface.register(TORCH_VARLEN, torch_varlen_attention_forward)
ALL_MASK_ATTENTION_FUNCTIONS.register(TORCH_VARLEN, sdpa_mask)  # padded batches and the fallback: SDPA's masks

__all__ = ["TORCH_VARLEN", "varlen_kernel", "kernel_available", "varlen_path", "varlen_kernel_runs",
           "torch_varlen_attention_forward"]
