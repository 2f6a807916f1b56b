"""Sequence pooling for classification: token states (B, T, D) to one vector per sequence.

Every pooling reads real tokens only (`attention_mask == 1`), so extra padding never changes
the pooled vector. SPT work uses mean, max or last-token pooling and no CLS token (Amos et al.);
`last_mean` is the head of Balestriero & Huang.
"""

from __future__ import annotations

import torch

from .configuration_spt import POOLING_TYPES


def pooled_size(hidden_size: int, pooling: str) -> int:
    """Width of the pooled vector for a given pooling."""
    return 2 * hidden_size if pooling == "last_mean" else hidden_size


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """Index of the last real token of each row (B,), for left or right padding."""
    length = attention_mask.shape[-1]
    positions = torch.arange(length, device=attention_mask.device)
    return (positions * attention_mask.long()).argmax(dim=-1)


def pool(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, pooling: str) -> torch.Tensor:
    """Pool `hidden_states` (B, T, D) over the real tokens of `attention_mask` (B, T)."""
    if pooling not in POOLING_TYPES:
        raise ValueError(f"Unknown pooling {pooling!r}; choose one of {', '.join(POOLING_TYPES)}.")
    if attention_mask is None:
        attention_mask = torch.ones(hidden_states.shape[:2], dtype=torch.long, device=hidden_states.device)
    mask = attention_mask.to(hidden_states.dtype).unsqueeze(-1)  # (B, T, 1)
    if pooling == "cls":
        return hidden_states[:, 0]
    if pooling == "max":
        return hidden_states.masked_fill(mask == 0, torch.finfo(hidden_states.dtype).min).amax(dim=1)
    mean = (hidden_states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
    if pooling == "mean":
        return mean
    last = hidden_states[torch.arange(hidden_states.shape[0], device=hidden_states.device), last_token_index(attention_mask)]
    if pooling == "last":
        return last
    return torch.cat((last, mean), dim=-1)  # last_mean


__all__ = ["pool", "pooled_size", "last_token_index"]
