"""Padding-free (packed) batches: the rows of a batch laid end to end in one row, no padding.

The layout is transformers' `DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True)`:
`input_ids` (1, N), `position_ids` (1, N) restarting at 0 for every sequence, no `attention_mask`, and the
sequence boundaries computed on the host by the collator: `cu_seq_lens_q` (S + 1,) int32 cumulative lengths,
`max_length_q` (a Python int) and `seq_idx` (1, N), the sequence of each token (`PACKED_KEYS`). hf_spt's collators
leave out the `_k` twins (an encoder's keys are its queries: one tensor would reach the device twice) and, where
the kernel runs, `seq_idx` (the kernel never reads it; pooling derives it on the device). The model reads them as
given: no offset, length or sequence index
is recomputed on the device, so a packed step waits for the device nowhere. Rows with `position_ids` alone (the
flattening collator without those keys) still work: the layout is then derived from `position_ids`
(`find_packed_sequence_indices`), at the cost of a host read per forward.

Each attention back-end keeps sequences apart (`packed_layout`, then `modeling_spt.SptModel`):
- a varlen kernel (`varlen_attention`'s `torch_varlen`: core torch's variable-length flash attention, or
  `flash_attention_2`/`_3`): given the cumulative lengths, it attends within each sequence only, which is the
  point of packing;
- otherwise (SDPA, eager, or `torch_varlen` where its kernel cannot run: CPU, float32, ALiBi's bias, attention
  dropout) a block-diagonal mask from the sequence index. It computes the same outputs but attends over the whole
  packed row, so it costs more than padding length-grouped batches (docs/performance.md); it is the reference
  the kernel is tested against on a CPU.
Pooling reads each sequence's own tokens (`pool_packed`), from the cumulative lengths when given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedConfig
from transformers.masking_utils import find_packed_sequence_indices
from transformers.modeling_flash_attention_utils import prepare_fa_kwargs_from_position_ids

from .configuration_spt import check_pooling

PACKED_KEYS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k", "seq_idx")
"""The keys of a packed batch besides `input_ids` and `position_ids` (transformers' names); a two-tower task's
second document carries them with the prefix `pair_`."""


def runs_varlen_attention(config: PreTrainedConfig) -> bool:
    """Whether the configured attention back-end is a flash (varlen) kernel, which runs packed rows without padding
    wherever it runs at all (`torch_varlen` decides per forward: `varlen_attention.varlen_kernel_runs`)."""
    return "flash" in (config._attn_implementation or "")


@dataclass(frozen=True)
class PackedLayout:
    """Where the sequences of a packed row (1, N) start and end.

    `seq_idx` (1, N): each token's sequence as the collator gave it, or None (`sequence_ids` then derives it on the
    device from the cumulative lengths, only where it is read: the block-diagonal mask and pooling, never on the
    kernel's path); `cu_seq_lens` (S + 1,) int32: cumulative lengths, or None when only `position_ids` were given
    and the varlen kernels' offsets are derived from them on demand; `max_length`: the longest sequence, a Python int.
    """

    seq_idx: torch.Tensor | None
    cu_seq_lens: torch.Tensor | None
    max_length: int
    position_ids: torch.Tensor

    @property
    def sequence_ids(self) -> torch.Tensor:
        """Each token's sequence (1, N): the collator's, or repeated from the cumulative lengths' sizes, with the
        output size N from the row's shape (no device read)."""
        if self.seq_idx is not None:
            return self.seq_idx
        bounds = self.cu_seq_lens.to(self.position_ids.device)
        sizes = torch.diff(bounds.long())
        ids = torch.arange(sizes.shape[0], device=bounds.device)
        return torch.repeat_interleave(ids, sizes, output_size=self.position_ids.shape[1])[None]

    def kernel_kwargs(self) -> dict[str, Any]:
        """`cu_seq_lens_q/k` and `max_length_q/k` for a varlen kernel, once per forward (given only `position_ids`,
        transformers' flash path would derive them again in every layer)."""
        if self.cu_seq_lens is None:
            (cu_q, cu_k), (max_q, max_k) = prepare_fa_kwargs_from_position_ids(self.position_ids)
            return {"cu_seq_lens_q": cu_q, "cu_seq_lens_k": cu_k, "max_length_q": int(max_q), "max_length_k": int(max_k)}
        return {"cu_seq_lens_q": self.cu_seq_lens, "cu_seq_lens_k": self.cu_seq_lens,
                "max_length_q": self.max_length, "max_length_k": self.max_length}


def packed_layout(position_ids: torch.Tensor | None, attention_mask: torch.Tensor | None,
                  given: dict[str, Any]) -> PackedLayout | None:
    """The layout of a packed batch, None for a padded one.

    Packed means: `position_ids` given, no `attention_mask`, one row. With the collator's `PACKED_KEYS` in `given`
    (`cu_seq_lens_q` and `max_length_q` at least: `seq_idx` is left out where the kernel runs, and the keys' `_k`
    twins, the same numbers in self-attention, are not read) the layout is read from them, on the host's numbers;
    without them it is derived from `position_ids`, and a row
    holding one sequence is not packed (transformers' flattened layout is one row; more rows with several sequences
    each are refused).
    """
    if position_ids is None or attention_mask is not None:
        return None
    if given.get("cu_seq_lens_q") is not None:
        if position_ids.shape[0] != 1:
            raise ValueError(f"Packed sequences come as one row (1, N), as DataCollatorWithFlattening makes them; got "
                             f"position_ids of shape {tuple(position_ids.shape)}.")
        return PackedLayout(given.get("seq_idx"), given["cu_seq_lens_q"], int(given["max_length_q"]), position_ids)
    sequence_ids = find_packed_sequence_indices(position_ids)
    if sequence_ids is None:
        return None
    if position_ids.shape[0] != 1:
        raise ValueError(f"Packed sequences come as one row (1, N), as DataCollatorWithFlattening makes them; got "
                         f"position_ids of shape {tuple(position_ids.shape)}.")
    return PackedLayout(sequence_ids, None, int(position_ids.max()) + 1, position_ids)


def pool_packed(hidden_states: torch.Tensor, layout: PackedLayout | None, pooling: str) -> torch.Tensor:
    """Pool a packed row `hidden_states` (1, N, D) per sequence of `layout` (None: one sequence) -> (S, D).

    The same vectors `heads.pool` gives each sequence padded on its own: mean, max, first (`cls`),
    last and `last_mean` over that sequence's tokens. With the collator's cumulative lengths the sequences'
    starts, ends and sizes are read from them (S is their shape: no data-dependent operator); without, they are
    found in the sequence index.
    """
    check_pooling(pooling)
    hidden = hidden_states[0]  # (N, D)
    if layout is None:
        ids = torch.zeros(hidden.shape[0], dtype=torch.long, device=hidden.device)
    else:
        ids = layout.sequence_ids[0]
    if layout is not None and layout.cu_seq_lens is not None:
        bounds = layout.cu_seq_lens.to(device=hidden.device, dtype=torch.long)
        starts, ends = bounds[:-1], bounds[1:] - 1  # (S,) first and last token of each sequence
    else:
        starts = torch.nonzero(torch.diff(ids, prepend=ids[:1] - 1)).squeeze(-1)
        ends = torch.cat((starts[1:], starts.new_tensor([hidden.shape[0]]))) - 1
    count = starts.shape[0]
    if pooling == "cls":
        return hidden[starts]
    if pooling == "max":
        init = torch.full((count, hidden.shape[1]), torch.finfo(hidden.dtype).min, dtype=hidden.dtype, device=hidden.device)
        return init.scatter_reduce(0, ids[:, None].expand_as(hidden), hidden, reduce="amax")
    sizes = (ends - starts + 1).to(hidden.dtype)[:, None]
    mean = torch.zeros(count, hidden.shape[1], dtype=hidden.dtype, device=hidden.device).index_add(0, ids, hidden) / sizes
    if pooling == "mean":
        return mean
    last = hidden[ends]
    return last if pooling == "last" else torch.cat((last, mean), dim=-1)  # last_mean


def packed_inputs(kwargs: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The `PACKED_KEYS` a model's `**kwargs` hold for one document (`prefix` "pair_": the second of a pair), named
    without the prefix, removed from `kwargs` so they reach neither the loss nor the other document."""
    return {key: kwargs.pop(prefix + key) for key in PACKED_KEYS if prefix + key in kwargs}


__all__ = ["PACKED_KEYS", "PackedLayout", "runs_varlen_attention", "packed_layout", "pool_packed", "packed_inputs"]
