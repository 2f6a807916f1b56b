"""Where a fine-tuned model's attention looks: the near-k proximity ratio of every layer and its proximity profile.

Coser et al.'s mechanism says SPT's gain is a proximity bias its W_Q/W_K learn, which fine-tuning keeps; a study of
the mechanism (issue 65) asks it of every arm after fine-tuning, not only of the SPT checkpoint
(`checkpoint_probe`): did SPT's attention stay local, did a hybrid init's, did scratch's ever become so, and does
any of it happen where the sequence order has no locality (a permuted twin)? Measured on validation inputs, as the
checkpoint probe does (`attention_maps.summarize_attention`): per layer the head-mean near-k ratio (attention mass
within |i - j| <= k over that of uniform attention: 1 is no preference for neighbours) and the head-mean attention
A[i, i + d] for every signed distance d within `window`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..tasks import Task
from ..training.checkpoints import resolve_model_folder
from .attention_maps import summarize_attention
from .report import load_for_analysis


def probe_attention(folder: str | Path, task: Task, num_examples: int = 64, near: int = 2,
                    window: int = 20) -> dict[str, Any]:
    """The near-`near` ratio per layer and each layer's head-mean profile over |d| <= `window` of the model in
    `folder` (a fine-tuned classifier or an SPT checkpoint), on the first `num_examples` validation inputs."""
    model = load_for_analysis(resolve_model_folder(folder))
    inputs = task.dataset["validation"]["input_ids"][:num_examples]
    if not inputs:
        raise ValueError(f"Task {task.name!r} has no validation inputs to probe attention on.")
    summary = summarize_attention(model, inputs, task.tokenizer, near=near)
    profiles = []
    for layer in summary.proximity:
        distances, values = layer.profile()
        keep = [index for index, distance in enumerate(distances) if abs(distance) <= window]
        profiles.append([float(values.mean(0)[index]) for index in keep])
    return {"near": near, "near_ratio_by_layer": [layer.scores()[f"near{near}_ratio_mean"] for layer in summary.proximity],
            "distances": [distances[index] for index in keep], "profile_by_layer": profiles,
            "num_examples": len(inputs)}


__all__ = ["probe_attention"]
