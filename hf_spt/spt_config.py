"""Training arguments of the self-pretraining (SPT) phase: masked-token reconstruction."""

from __future__ import annotations

from dataclasses import dataclass, field

from transformers import TrainingArguments


@dataclass
class SptTrainingArguments(TrainingArguments):
    """`TrainingArguments` for SPT, plus the masking options.

    Changed defaults (so the best-validation checkpoint is what fine-tuning starts from, as in
    Amos et al.): `eval_strategy="epoch"`, `save_strategy="epoch"`, `load_best_model_at_end=True`,
    `metric_for_best_model="eval_loss"`, `save_total_limit=2`, `prediction_loss_only=True`
    (MLM logits of variable size are never gathered), `learning_rate=1e-3`, `logging_strategy="epoch"`.
    """

    mlm_probability: float = field(
        default=0.15,
        metadata={"help": "Probability of masking each real token (Amos et al.: 0.5 visual, 0.15 text, 0.1 ListOps)."},
    )
    mask_replace_prob: float = field(
        default=0.8, metadata={"help": "Share of masked tokens replaced by [MASK] (1.0 for pure [MASK] masking)."}
    )
    random_replace_prob: float = field(
        default=0.1, metadata={"help": "Share of masked tokens replaced by a random real token (never a special one)."}
    )
    flush_denormal: bool = field(
        default=True,
        metadata={"help": "On CPU, flush denormal floats to zero while training (torch.set_flush_denormal, a "
                  "process-wide setting): softmax gradients over a large vocabulary are mostly denormal when "
                  "logits are peaked, and denormals make CPU matmuls several times slower. No effect on GPU."},
    )
    eval_strategy: str = field(default="epoch", metadata={"help": "Evaluate the MLM loss every epoch (changed default)."})
    save_strategy: str = field(default="epoch", metadata={"help": "Checkpoint every epoch (changed default)."})
    logging_strategy: str = field(default="epoch", metadata={"help": "Log every epoch (changed default)."})
    load_best_model_at_end: bool = field(
        default=True, metadata={"help": "Keep the best-validation checkpoint, not the last (changed default)."}
    )
    metric_for_best_model: str = field(default="eval_loss", metadata={"help": "Best checkpoint by MLM loss."})
    save_total_limit: int | None = field(default=2, metadata={"help": "Checkpoints kept (the best is always kept)."})
    prediction_loss_only: bool = field(default=True, metadata={"help": "Evaluation computes the loss only."})
    learning_rate: float = field(default=1e-3, metadata={"help": "AdamW peak learning rate (Amos et al. grid)."})
    token_weighting: str = field(
        default="none",
        metadata={"help": "none, or inverse_frequency: weight each token id's loss by 1/its count in the training inputs."},
    )


__all__ = ["SptTrainingArguments"]
