"""How far one SPT checkpoint got: its masked-token loss beside the unigram loss, and attention's proximity.

A budget study (`experiments/budget_study.py`) asks, for each amount of pretraining, whether SPT
left the frequency plateau and whether attention turned local, and then whether fine-tuning
accuracy followed. These are the two measurements per checkpoint, on the same validation inputs:
- the MLM loss on masked validation tokens (masked as in SPT, seeded) and the unigram loss of the
  same tokens (each predicted from its training frequency alone, `token_frequency.bucket_losses`):
  a checkpoint not below the unigram loss has learned nothing from the context;
- the near-k proximity ratio of every layer (`proximity.ProximityStats`, head mean): attention mass
  within |i - j| <= k over that of uniform attention; 1 means no preference for neighbours.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..tasks import Task
from ..training.checkpoints import resolve_model_folder
from .attention_maps import summarize_attention
from .report import load_for_analysis
from .token_frequency import frequency_table, overall_losses


def probe_checkpoint(
    folder: str | Path,
    task: Task,
    mlm_probability: float,
    num_examples: int = 256,
    attention_examples: int = 64,
    near: int = 2,
    seed: int = 0,
) -> dict[str, Any]:
    """MLM and unigram loss on `num_examples` validation inputs, and the near-`near` proximity ratio per layer on
    the first `attention_examples` of them, of the SPT checkpoint in `folder` (a model folder or a Trainer run)."""
    model = load_for_analysis(resolve_model_folder(folder))
    evaluation = task.dataset["validation"]["input_ids"][:num_examples]
    if not evaluation:
        raise ValueError(f"Task {task.name!r} has no validation inputs to probe the checkpoint on.")
    table = frequency_table(model, task.dataset["train"]["input_ids"], evaluation, task.tokenizer, num_buckets=1,
                            mlm_probability=mlm_probability, seed=seed)
    mlm_loss, unigram_loss = overall_losses(table)
    summary = summarize_attention(model, evaluation[:attention_examples], task.tokenizer, near=near)
    ratios = [layer.scores()[f"near{near}_ratio_mean"] for layer in summary.proximity]
    return {"mlm_loss": mlm_loss, "unigram_loss": unigram_loss, "mlm_probability": mlm_probability,
            "masked_predictions": table[0]["predictions"], "near": near, "near_ratio_by_layer": ratios,
            "num_examples": len(evaluation), "attention_examples": min(attention_examples, len(evaluation))}


__all__ = ["probe_checkpoint"]
