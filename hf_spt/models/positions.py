"""Position encodings of the SPT encoder.

The SPT papers study fixed additive sinusoids (Vaswani et al., 2017): self-pretraining turns
them into a relative-distance kernel through W_Q and W_K. Rotary (Su et al., 2021) and ALiBi
(Press et al., 2022) build a proximity bias in by design and are here to compare against.
"""

from __future__ import annotations

import math

import torch


def sinusoidal_table(num_positions: int, dim: int) -> torch.Tensor:
    """Fixed sinusoid table `P` of shape (num_positions, dim).

    P[p, 2i] = sin(p / 10000^(2i/dim)) and P[p, 2i+1] = cos(p / 10000^(2i/dim)), the layout of
    "Attention Is All You Need" (and DistilBERT's `sinusoidal_pos_embds`).
    """
    position = torch.arange(num_positions, dtype=torch.float64).unsqueeze(1)  # (P, 1)
    inv_freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float64) * (-math.log(10000.0) / dim))  # (dim/2,)
    table = torch.zeros(num_positions, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq)
    return table.float()


def rotary_inverse_frequencies(head_dim: int, theta: float) -> torch.Tensor:
    """Inverse frequencies of rotary embeddings, one per pair of head channels: (head_dim/2,)."""
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))


def rotary_cos_sin(position_ids: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotation angles for `position_ids` (B, T): each (B, 1, T, head_dim)."""
    angles = position_ids[..., None].float() * inv_freq.to(position_ids.device)  # (B, T, hd/2)
    angles = torch.cat((angles, angles), dim=-1)  # (B, T, hd)
    return angles.cos().to(dtype)[:, None], angles.sin().to(dtype)[:, None]


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate queries or keys (B, H, T, hd) by the angles of their positions."""
    return x * cos + _rotate_half(x) * sin


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """Per-head ALiBi slopes: the geometric sequence 2^(-8/n), 2^(-16/n), ... of Press et al.

    For a head count that is not a power of two, the paper's recipe interleaves the slopes of
    the next power of two.
    """

    def power_of_two_slopes(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(num_heads).is_integer():
        return torch.tensor(power_of_two_slopes(num_heads))
    closest = 2 ** math.floor(math.log2(num_heads))
    extra = power_of_two_slopes(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(power_of_two_slopes(closest) + extra)


def alibi_bias(slopes: torch.Tensor, length: int, dtype: torch.dtype) -> torch.Tensor:
    """Additive attention bias -slope_h * |i - j| of shape (1, H, T, T) for a bidirectional encoder."""
    position = torch.arange(length, device=slopes.device)
    distance = (position[None, :] - position[:, None]).abs()  # (T, T)
    return (-slopes[:, None, None] * distance[None]).to(dtype)[None]


__all__ = [
    "sinusoidal_table",
    "rotary_inverse_frequencies",
    "rotary_cos_sin",
    "apply_rotary",
    "alibi_slopes",
    "alibi_bias",
]
