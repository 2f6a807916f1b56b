"""Attention maps of a model over a data set, per layer and head, and their proximity statistics.

One eager forward pass per batch (`output_attentions=True` makes the SPT encoder use eager
attention and return probabilities) feeds both the mean attention map and the
`ProximityStats` of every layer, so a data set is read once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..training.collators import DataCollatorForClassification
from .eval_mode import evaluating
from .plotting import saved_figure
from .proximity import ProximityStats


def padded_batches(
    sequences: Sequence[Sequence[int]], tokenizer: PreTrainedTokenizerBase, batch_size: int
) -> Iterator[dict[str, torch.Tensor]]:
    """`input_ids` and `attention_mask` batches (right-padded) of the given token id lists."""
    collate = DataCollatorForClassification(tokenizer)
    for start in range(0, len(sequences), batch_size):
        yield collate([{"input_ids": list(ids)} for ids in sequences[start : start + batch_size]])


@dataclass
class AttentionSummary:
    """Mean attention map (L, H, T, T) over real (query, key) pairs, and proximity stats per layer."""

    mean_maps: torch.Tensor
    proximity: list[ProximityStats]


@torch.no_grad()
def summarize_attention(
    model: PreTrainedModel,
    sequences: Sequence[Sequence[int]],
    tokenizer: PreTrainedTokenizerBase,
    batch_size: int = 32,
    near: int = 2,
) -> AttentionSummary:
    """Run the encoder of `model` (any SPT head, or the bare `SptModel`) over `sequences`."""
    if len(sequences) == 0:
        raise ValueError("No sequences to analyse: pass at least one.")
    encoder = model.base_model
    length = max(len(ids) for ids in sequences)
    map_sum = map_count = None
    stats: list[ProximityStats] = []
    with evaluating(encoder) as device:
        for batch in padded_batches(sequences, tokenizer, batch_size):
            mask = batch["attention_mask"]
            outputs = encoder(input_ids=batch["input_ids"].to(device), attention_mask=mask.to(device),
                              output_attentions=True)
            probs = torch.stack([a.detach().double().cpu() for a in outputs.attentions])  # (L, B, H, t, t)
            t = probs.shape[-1]
            pairs = (mask[:, :, None] * mask[:, None, :]).double()  # (B, t, t) real (query, key) pairs
            if map_sum is None:
                num_layers, _, heads = probs.shape[:3]
                map_sum = torch.zeros(num_layers, heads, length, length, dtype=torch.float64)
                map_count = torch.zeros(length, length, dtype=torch.float64)
                stats = [ProximityStats(max_distance=length - 1, near=near) for _ in range(num_layers)]
            map_sum[..., :t, :t] += (probs * pairs[None, :, None]).sum(1)
            map_count[:t, :t] += pairs.sum(0)
            for layer, layer_probs in zip(stats, probs):
                layer.update(layer_probs, mask)
    return AttentionSummary(map_sum / map_count.clamp(min=1), stats)


def plot_attention_maps(mean_maps: torch.Tensor, folder: str | Path, name: str) -> list[Path]:
    """One PNG per layer (`{name}_attention_layer{l}.png`), one heatmap panel per head."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    num_layers, heads = mean_maps.shape[:2]
    for layer in range(num_layers):
        path = folder / f"{name}_attention_layer{layer}.png"
        with saved_figure(path, ncols=heads, figsize=(3 * heads, 3.2), squeeze=False) as (figure, axes):
            for head, axis in enumerate(axes[0]):
                image = axis.imshow(mean_maps[layer, head].numpy(), cmap="viridis", interpolation="nearest")
                axis.set_title(f"head {head}")
                axis.set_xlabel("key j")
                axis.set_ylabel("query i")
                figure.colorbar(image, ax=axis, fraction=0.046)
            figure.suptitle(f"{name}: mean attention, layer {layer}")
        paths.append(path)
    return paths


def plot_proximity_profiles(
    profiles: dict[str, tuple[list[int], torch.Tensor]], path: str | Path, title: str, window: int = 20
) -> Path:
    """Head-mean attention A[i, i + d] against d = j - i for several models side by side."""
    with saved_figure(path, figsize=(6, 3.5)) as (_, axis):
        for name, (distances, values) in profiles.items():
            keep = [k for k, d in enumerate(distances) if abs(d) <= window]
            axis.plot([distances[k] for k in keep], values.mean(0)[keep].numpy(), marker=".", label=name)
        axis.set_xlabel("signed distance j - i")
        axis.set_ylabel("mean attention A[i, i + d] (head mean)")
        axis.set_title(title)
        axis.legend()
    return Path(path)


__all__ = ["padded_batches", "AttentionSummary", "summarize_attention", "plot_attention_maps", "plot_proximity_profiles"]
