"""Padding-free (packed) batches: the rows of a batch laid end to end in one row, no padding.

The layout is transformers' `DataCollatorWithFlattening`: `input_ids` (1, N) and `position_ids`
(1, N) restarting at 0 for every sequence, no `attention_mask`. A sequence is a run of
`position_ids` increasing by one (`find_packed_sequence_indices`, as transformers' causal masks
read it). Each back-end then keeps sequences apart:
- flash attention (`flash_attention_2`/`_3`): the varlen kernel, given `cu_seq_lens_q/k` and
  `max_length_q/k` (`packed_flash_kwargs`, computed once per forward from `position_ids`); no
  attention work across sequences, which is the point of packing;
- SDPA and eager: a block-diagonal mask from the same sequence ids (`packed_sequence_mask_function`
  given to `create_bidirectional_mask`). It computes the same outputs but attends over the whole
  packed row, so on CPU padding with length-grouped batches is faster (docs/performance.md); this
  path exists to check the packed math without a GPU.
Pooling reads each sequence's own tokens (`pool_packed`).
"""

from __future__ import annotations

import torch
from transformers import PreTrainedConfig
from transformers.masking_utils import find_packed_sequence_indices
from transformers.modeling_flash_attention_utils import prepare_fa_kwargs_from_position_ids

from .configuration_spt import check_pooling

def runs_varlen_attention(config: PreTrainedConfig) -> bool:
    """Whether the configured attention back-end is a flash (varlen) kernel, which runs packed rows without padding."""
    return "flash" in (config._attn_implementation or "")


def packed_sequence_ids(position_ids: torch.Tensor | None, attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """(1, N) index of the sequence each token belongs to when the batch is packed; None when it is not.

    Packed means: `position_ids` given, no `attention_mask`, one row holding more than one sequence
    (transformers' flattened layout is one row; more rows with several sequences each are refused).
    """
    if position_ids is None or attention_mask is not None:
        return None
    sequence_ids = find_packed_sequence_indices(position_ids)
    if sequence_ids is not None and position_ids.shape[0] != 1:
        raise ValueError(f"Packed sequences come as one row (1, N), as DataCollatorWithFlattening makes them; got "
                         f"position_ids of shape {tuple(position_ids.shape)}.")
    return sequence_ids


def packed_flash_kwargs(position_ids: torch.Tensor) -> dict:
    """`cu_seq_lens_q/k` and `max_length_q/k` of a packed row for flash attention's varlen kernel, once per forward
    (given only `position_ids`, transformers' flash path would derive them again in every layer)."""
    (cu_q, cu_k), (max_q, max_k) = prepare_fa_kwargs_from_position_ids(position_ids)
    return {"cu_seq_lens_q": cu_q, "cu_seq_lens_k": cu_k, "max_length_q": int(max_q), "max_length_k": int(max_k)}


def pool_packed(hidden_states: torch.Tensor, sequence_ids: torch.Tensor | None, pooling: str) -> torch.Tensor:
    """Pool a packed row `hidden_states` (1, N, D) per sequence of `sequence_ids` (1, N; None: one sequence) -> (S, D).

    The same vectors `heads.pool` gives each sequence padded on its own: mean, max, first (`cls`),
    last and `last_mean` over that sequence's tokens.
    """
    check_pooling(pooling)
    hidden = hidden_states[0]  # (N, D)
    ids = torch.zeros(hidden.shape[0], dtype=torch.long, device=hidden.device) if sequence_ids is None else sequence_ids[0]
    starts = torch.nonzero(torch.diff(ids, prepend=ids[:1] - 1)).squeeze(-1)  # (S,) first token of each sequence
    count = starts.shape[0]
    if pooling == "cls":
        return hidden[starts]
    if pooling == "max":
        init = torch.full((count, hidden.shape[1]), torch.finfo(hidden.dtype).min, dtype=hidden.dtype, device=hidden.device)
        return init.scatter_reduce(0, ids[:, None].expand_as(hidden), hidden, reduce="amax")
    sizes = torch.bincount(ids, minlength=count).to(hidden.dtype)[:, None]
    mean = torch.zeros(count, hidden.shape[1], dtype=hidden.dtype, device=hidden.device).index_add(0, ids, hidden) / sizes
    if pooling == "mean":
        return mean
    ends = torch.cat((starts[1:], starts.new_tensor([hidden.shape[0]]))) - 1
    last = hidden[ends]
    return last if pooling == "last" else torch.cat((last, mean), dim=-1)  # last_mean


__all__ = ["runs_varlen_attention", "packed_sequence_ids", "packed_flash_kwargs", "pool_packed"]
