"""Self-attention of the SPT encoder and the attention mask each back-end reads.

Attention goes through transformers' `ALL_ATTENTION_FUNCTIONS` (SDPA by default, eager for
`output_attentions=True`). Masks come from `transformers.masking_utils.create_bidirectional_mask`,
as in BERT and ModernBERT: no Python branch on the mask's values, so `torch.export` and
`torch.compile(fullgraph=True)` trace it, while an eager unpadded batch still gets no mask at all
and SDPA keeps its fused kernel. On an accelerator a padded batch's mask reaches SDPA as given, broadcast over
queries (`key_padding_mask`): no device check, no (B, 1, T, T) mask. `torch_varlen` (`varlen_attention`) runs
packed rows on core torch's variable-length flash kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext

import torch
from torch import nn
from transformers import PreTrainedConfig
from transformers.masking_utils import create_bidirectional_mask, packed_sequence_mask_function
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .positions import alibi_bias, apply_rotary
from .varlen_attention import REFERENCE_VARLEN, VARLEN_IMPLEMENTATIONS


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention written out, returning the probabilities (B, H, T, T) too.

    `attention_mask` is additive (float) or boolean (True = attend), as SDPA takes it.
    """
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling  # (B, H, T, T)
    if attention_mask is not None and attention_mask.dtype == torch.bool:  # SDPA's mask, for output_attentions
        scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
    elif attention_mask is not None:
        scores = scores + attention_mask
    # softmax in float32 at least (bf16/fp16 inputs), and in float64 for float64 inputs (analysis probes)
    probs = nn.functional.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32))
    probs = probs.to(query.dtype)
    probs = nn.functional.dropout(probs, p=dropout, training=module.training)
    output = torch.matmul(probs, value).transpose(1, 2).contiguous()  # (B, T, H, hd)
    return output, probs


ALIBI_NEEDS_A_MASK = "alibi positions need attn_implementation='sdpa' or 'eager', not flash attention."
"""ALiBi's distance bias is an additive mask, which flash kernels do not take."""
KEY_MASK_BACKENDS = ("sdpa", "eager", *VARLEN_IMPLEMENTATIONS)
"""The back-ends that read a boolean mask broadcast over queries, (B, 1, 1, T), as SDPA does."""


def key_padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """A padding mask (B, T) as SDPA and eager attention take it, (B, 1, 1, T) boolean (True = attend), broadcast
    over heads and queries: nothing of size T x T is built."""
    return attention_mask[:, None, None, :].bool()


def attention_bias(
    config: PreTrainedConfig, attention_mask: torch.Tensor | None, embeds: torch.Tensor, alibi: torch.Tensor | None,
    sequence_ids: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """The mask the configured attention back-end expects, plus ALiBi's distance bias when `alibi` slopes are given.

    Padding on a CPU: transformers' bidirectional mask (None when nothing is padded, outside tracing;
    boolean (B, 1, T, T) for SDPA, additive float for eager, the 2D mask for flash attention).
    Padding on an accelerator, for SDPA, eager and `torch_varlen`: `key_padding_mask`, as given. transformers
    would first check the mask on the device (`mask.all()`, to drop an all-ones mask and keep SDPA's unmasked
    kernel), which stops the host every forward; the trainers' collators leave out an all-ones mask there
    (`omit_full_attention_mask`), so a mask that reaches the model is a padded batch's. CPU runs keep
    transformers' path and compute exactly as before.
    A packed row (`sequence_ids`, see `packing`): block-diagonal for SDPA, eager and `torch_varlen`'s fallback.
    ALiBi (`alibi`: per-head slopes) turns it into an additive float bias (B or 1, H, T, T).
    """
    if (sequence_ids is None and attention_mask is not None and attention_mask.ndim == 2
            and embeds.device.type != "cpu" and config._attn_implementation in KEY_MASK_BACKENDS):
        mask = key_padding_mask(attention_mask)
    else:
        packed = None if sequence_ids is None else packed_sequence_mask_function(sequence_ids)
        mask = create_bidirectional_mask(config=config, inputs_embeds=embeds, attention_mask=attention_mask,
                                         and_mask_function=packed)
    if alibi is None:
        return mask
    if config._attn_implementation.startswith("flash"):
        raise ValueError(ALIBI_NEEDS_A_MASK)
    bias = alibi_bias(alibi, embeds.shape[1], embeds.dtype)  # (1, H, T, T)
    if mask is None:
        return bias
    if mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=embeds.dtype, device=embeds.device).masked_fill(
            ~mask, torch.finfo(embeds.dtype).min
        )
    return bias + mask


def attends_in_float32(query: torch.Tensor, implementation: str) -> bool:
    """Whether attention computes in float32 under autocast: --bf16 on a CPU, where the projections run in bfloat16
    and attention in float32 (CPU kernels are slower in bf16: docs/performance.md). On a GPU autocast's dtype
    reaches attention (`torch_varlen`'s kernel takes nothing else), and on `REFERENCE_VARLEN`, which stands in for
    that kernel on a CPU."""
    return query.device.type == "cpu" and torch.is_autocast_enabled("cpu") and implementation != REFERENCE_VARLEN


class SptAttention(nn.Module):
    """Multi-head self-attention with projections `q_proj`, `k_proj`, `v_proj`, `o_proj`."""

    def __init__(self, config: PreTrainedConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.scaling = self.head_dim**-0.5
        self.is_causal = False
        self.q_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.k_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.v_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.o_proj = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        output_attentions: bool = False,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        batch, length, _ = hidden_states.shape
        shape = (batch, length, self.num_heads, self.head_dim)
        query = self.q_proj(hidden_states).view(shape).transpose(1, 2)  # (B, H, T, hd)
        key = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        value = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        if rotary is not None:
            query, key = apply_rotary(query, *rotary), apply_rotary(key, *rotary)

        implementation = "eager" if output_attentions else self.config._attn_implementation
        attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)
        cpu_autocast = attends_in_float32(query, implementation)
        if cpu_autocast:
            query, key, value = query.float(), key.float(), value.float()
        with torch.autocast("cpu", enabled=False) if cpu_autocast else nullcontext():
            output, probs = attention_interface(
                self,
                query,
                key,
                value,
                attention_mask,
                dropout=self.config.attention_probs_dropout_prob if self.training else 0.0,
                scaling=self.scaling,
                **kwargs,
            )
        output = self.o_proj(output.reshape(batch, length, -1))
        return output, probs


__all__ = ["ALIBI_NEEDS_A_MASK", "KEY_MASK_BACKENDS", "eager_attention_forward", "key_padding_mask", "attention_bias",
           "attends_in_float32", "SptAttention"]
