"""MLM loss per token, grouped by how often the token occurs in the training inputs.

"The Fair Language Model Paradox" (arXiv 2410.11985): token-level training
with weight decay degrades rare tokens disproportionately, and the average loss hides it.
This module counts token frequencies on the training inputs, groups token types into
frequency buckets (bucket 0 = most frequent) and measures the masked-token loss of each bucket
(`decay_sweep` repeats it for tiny MLMs trained with several weight decays).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..training.collators import DataCollatorForSpt
from ..training.losses import token_id_counts
from ..training.pretrain_trainer import sparse_prediction
from .eval_mode import evaluating
from .plotting import saved_figure


def token_counts(sequences: Sequence[Sequence[int]], vocab_size: int, special_ids: Sequence[int]) -> torch.Tensor:
    """Occurrences (V,) of every token id in `sequences` (`token_id_counts`); special tokens are not counted."""
    counts = token_id_counts(sequences, vocab_size)
    counts[list(special_ids)] = 0
    return counts


def frequency_buckets(counts: torch.Tensor, num_buckets: int) -> torch.Tensor:
    """Bucket (V,) of each token type seen in training: equal numbers of types per bucket, 0 = most frequent.

    Unseen and special tokens get -1. Ties are broken by token id, so the split is deterministic.
    """
    seen = torch.nonzero(counts > 0).flatten()
    if len(seen) < num_buckets:
        raise ValueError(f"Only {len(seen)} token types occur in training; use at most that many buckets.")
    order = seen[torch.argsort(-counts[seen], stable=True)]  # stable: ties stay in id order
    buckets = torch.full_like(counts, -1)
    for bucket, chunk in enumerate(torch.tensor_split(order, num_buckets)):
        buckets[chunk] = bucket
    return buckets


@torch.no_grad()
def per_token_mlm_loss(
    model: PreTrainedModel,
    sequences: Sequence[Sequence[int]],
    tokenizer: PreTrainedTokenizerBase,
    mlm_probability: float = 0.15,
    batch_size: int = 64,
    rounds: int = 1,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed cross-entropy and count of masked predictions (V,) per target token id.

    Tokens are masked as in SPT (`DataCollatorForSpt`, seeded); `rounds` passes over the data
    with fresh masks give each token more masked occurrences.
    """
    collate = DataCollatorForSpt(tokenizer, mlm_probability=mlm_probability, seed=seed)
    vocab = model.config.vocab_size
    loss_sum = torch.zeros(vocab, dtype=torch.float64)
    count = torch.zeros(vocab, dtype=torch.float64)
    with evaluating(model) as device:
        for _ in range(rounds):
            for start in range(0, len(sequences), batch_size):
                batch = collate([{"input_ids": list(ids)} for ids in sequences[start : start + batch_size]])
                labels = batch["labels"]
                with sparse_prediction(model, enabled=True):
                    logits = model(input_ids=batch["input_ids"].to(device),
                                   attention_mask=batch["attention_mask"].to(device),
                                   labels=labels.to(device)).logits  # (N, V) at masked positions, or (B, T, V)
                targets = labels[labels != -100]
                logits = logits[labels.to(device) != -100] if logits.dim() == 3 else logits
                losses = torch.nn.functional.cross_entropy(logits.double().cpu(), targets, reduction="none")
                loss_sum.index_add_(0, targets, losses)
                count.index_add_(0, targets, torch.ones_like(losses))
    return loss_sum, count


def bucket_losses(
    loss_sum: torch.Tensor, count: torch.Tensor, buckets: torch.Tensor, counts: torch.Tensor
) -> list[dict[str, float | int]]:
    """One row per bucket: token types, share of training tokens, masked predictions, mean loss, and the
    unigram loss: the same predictions' mean loss for a context-free predictor that gives every token its
    training frequency (-log share). A model whose loss is not below it has learned nothing from the context.
    Tokens never seen in training but masked in evaluation fall in no bucket."""
    rows = []
    total = float(counts.sum())
    frequency_loss = -torch.log(counts.double().clamp(min=1) / total)  # (V,), finite: unseen tokens are in no bucket
    for bucket in range(int(buckets.max()) + 1):
        members = buckets == bucket
        predictions = float(count[members].sum())
        rows.append({
            "bucket": bucket,
            "token_types": int(members.sum()),
            "train_share": float(counts[members].sum()) / total,
            "predictions": int(predictions),
            "mean_loss": float(loss_sum[members].sum()) / predictions if predictions else float("nan"),
            "unigram_loss": float((count * frequency_loss)[members].sum()) / predictions if predictions else float("nan"),
        })
    return rows


def overall_losses(rows: list[dict[str, float | int]]) -> tuple[float, float]:
    """Mean masked-token loss of the model and of the unigram predictor over all buckets' predictions."""
    predictions = sum(row["predictions"] for row in rows if row["predictions"])
    if not predictions:
        return float("nan"), float("nan")
    return tuple(sum(row[key] * row["predictions"] for row in rows if row["predictions"]) / predictions
                 for key in ("mean_loss", "unigram_loss"))


def frequency_table(
    model: PreTrainedModel,
    train_sequences: Sequence[Sequence[int]],
    eval_sequences: Sequence[Sequence[int]],
    tokenizer: PreTrainedTokenizerBase,
    num_buckets: int = 4,
    mlm_probability: float = 0.15,
    rounds: int = 1,
    seed: int = 0,
) -> list[dict[str, float | int]]:
    """Per-bucket MLM loss of `model` on `eval_sequences`, buckets counted on `train_sequences`."""
    counts = token_counts(train_sequences, model.config.vocab_size, tokenizer.all_special_ids)
    buckets = frequency_buckets(counts, num_buckets)
    loss_sum, count = per_token_mlm_loss(model, eval_sequences, tokenizer, mlm_probability, rounds=rounds, seed=seed)
    return bucket_losses(loss_sum, count, buckets, counts)


def plot_bucket_losses(tables: dict[str, list[dict[str, float | int]]], path: str | Path, title: str) -> Path:
    """Mean MLM loss per frequency bucket, one line per table (model or weight decay)."""
    with saved_figure(path, figsize=(5, 3.5)) as (_, axis):
        for name, rows in tables.items():
            axis.plot([row["bucket"] for row in rows], [row["mean_loss"] for row in rows], marker="o", label=name)
        axis.set_xlabel("frequency bucket (0 = most frequent)")
        axis.set_ylabel("mean masked-token loss")
        axis.set_title(title)
        axis.legend()
    return Path(path)


def bucket_markdown(tables: dict[str, list[dict[str, float | int]]]) -> str:
    """Markdown table: one row per (table, bucket), and an `all` row per table over every bucket."""
    lines = ["| model | bucket | token types | train share | predictions | mean loss | unigram loss |",
             "|---|---|---|---|---|---|---|"]
    for name, rows in tables.items():
        for row in rows:
            lines.append(f"| {name} | {row['bucket']} | {row['token_types']} | {row['train_share']:.3f} "
                         f"| {row['predictions']} | {row['mean_loss']:.4f} | {row['unigram_loss']:.4f} |")
        mean, unigram = overall_losses(rows)
        lines.append(f"| {name} | all | {sum(row['token_types'] for row in rows)} "
                     f"| {sum(row['train_share'] for row in rows):.3f} "
                     f"| {sum(row['predictions'] for row in rows)} | {mean:.4f} | {unigram:.4f} |")
    return "\n".join(lines) + "\n"


__all__ = ["token_counts", "frequency_buckets", "per_token_mlm_loss", "bucket_losses", "overall_losses",
           "frequency_table", "plot_bucket_losses", "bucket_markdown"]
