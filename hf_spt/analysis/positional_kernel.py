"""The positional kernel P W_Q W_K^T P^T of each attention head, and how relative it is.

Coser et al. (arXiv 2605.21070): with additive absolute positions, self-pretraining learns W_Q and
W_K that turn the positional part of the attention logits into a function of the relative
distance i - j. For head h of a layer the kernel here is

    K_h[i, j] = scaling * (P[i] * g) W_Q,h^T  ·  (P[j] * g) W_K,h^T

with P the model's additive position table (`spt.embeddings.position_table()`), g the
elementwise scale (LayerNorm weight) of the layer's pre-attention LayerNorm, and `scaling`
= head_dim ** -0.5 as in the forward pass. Choices, kept the same everywhere:
- g is applied because the logits read LN(x), and a trained g re-weights which channels of P
  reach W_Q and W_K; LayerNorm's centring and division by the norm are left out, since they
  depend on the token added to P (sinusoid rows all have norm sqrt(D/2), so the division is
  close to a constant for them).
- The LayerNorm shift and the q/k biases are left out: they add terms that depend on one
  position only (a row or a column offset), not on pairs (i, j), and the paper's object is the
  bilinear positional term.
- Only the layer that reads P directly (layer 0 by default) is meaningful: deeper layers see
  positions mixed with attention outputs in the residual stream.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import PreTrainedModel

from .plotting import saved_figure


def positional_kernel(model: PreTrainedModel, length: int | None = None, layer: int = 0) -> torch.Tensor:
    """Kernels (H, length, length) of layer `layer` over the first `length` positions (float64)."""
    encoder = model.base_model
    config = encoder.config
    table = encoder.embeddings.position_table()
    if table is None:
        raise ValueError(
            f"position_embedding_type={config.position_embedding_type!r} has no additive position table, so there "
            "is no P W_Q W_K^T P^T kernel: rotary and alibi put positions into the logits by design, 'none' has "
            "none. Analyse a model with sinusoidal or learned positions."
        )
    if not 0 <= layer < config.num_hidden_layers:
        raise ValueError(f"layer={layer} out of range: the model has {config.num_hidden_layers} layers.")
    length = length or table.shape[0]
    if length > table.shape[0]:
        raise ValueError(f"length={length} exceeds the position table ({table.shape[0]} positions).")
    block = encoder.layers[layer]
    positions = table[:length].detach().double() * block.attention_norm.weight.detach().double()  # (T, D)
    heads = config.num_attention_heads
    head_dim = config.hidden_size // heads
    queries = (positions @ block.attention.q_proj.weight.detach().double().T).view(length, heads, head_dim)
    keys = (positions @ block.attention.k_proj.weight.detach().double().T).view(length, heads, head_dim)
    return torch.einsum("ihd,jhd->hij", queries, keys) * head_dim**-0.5


def diagonal_means(kernel: torch.Tensor) -> tuple[list[int], torch.Tensor]:
    """Mean of each diagonal of square kernels (..., T, T) as a function of i - j: (-(T-1) .. T-1), (..., 2T-1)."""
    length = kernel.shape[-1]
    offsets = list(range(-(length - 1), length))
    # diagonal(offset=o) holds K[i, i + o], i.e. i - j = -o
    means = torch.stack([kernel.diagonal(offset=-d, dim1=-2, dim2=-1).mean(-1) for d in offsets], dim=-1)
    return offsets, means


def relative_share(kernel: torch.Tensor) -> torch.Tensor:
    """Share of each kernel's variance explained by a function of i - j alone, per leading index.

    1 - (variance left after subtracting each diagonal's mean) / (total variance): 1 for a
    Toeplitz kernel, about (2T - 1) / T^2 for an unstructured one.
    """
    length = kernel.shape[-1]
    index = torch.arange(length)
    difference = index[:, None] - index[None, :] + length - 1  # (T, T): i - j shifted to 0..2T-2
    _, means = diagonal_means(kernel)
    fitted = means[..., difference]  # (..., T, T)
    centred = kernel - kernel.mean((-2, -1), keepdim=True)
    total = centred.pow(2).sum((-2, -1))
    residual = (kernel - fitted).pow(2).sum((-2, -1))
    return 1 - residual / total


def plot_kernels(kernel: torch.Tensor, path: str | Path, name: str) -> Path:
    """Each head's kernel as a matrix (top row) and as a function of i - j (bottom row)."""
    heads = kernel.shape[0]
    offsets, means = diagonal_means(kernel)
    shares = relative_share(kernel)
    with saved_figure(path, nrows=2, ncols=heads, figsize=(3 * heads, 6), squeeze=False) as (figure, axes):
        for head in range(heads):
            image = axes[0, head].imshow(kernel[head].numpy(), cmap="RdBu_r", interpolation="nearest")
            axes[0, head].set_title(f"head {head}: {100 * shares[head]:.0f}% relative")
            axes[0, head].set_xlabel("key position j")
            axes[0, head].set_ylabel("query position i")
            figure.colorbar(image, ax=axes[0, head], fraction=0.046)
            axes[1, head].plot(offsets, means[head].numpy())
            axes[1, head].set_xlabel("i - j")
            axes[1, head].set_ylabel("diagonal mean")
        figure.suptitle(f"{name}: positional kernel P W_Q W_K^T P^T")
    return Path(path)


__all__ = ["positional_kernel", "diagonal_means", "relative_share", "plot_kernels"]
