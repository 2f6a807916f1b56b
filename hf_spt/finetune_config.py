"""Training arguments of the fine-tuning phase: sequence classification on the task's labels."""

from __future__ import annotations

from dataclasses import dataclass, field

from transformers import TrainingArguments


@dataclass
class FinetuneTrainingArguments(TrainingArguments):
    """`TrainingArguments` for classification fine-tuning.

    Changed defaults: `eval_strategy="epoch"`, `save_strategy="epoch"`, `logging_strategy="epoch"`,
    `load_best_model_at_end=True` with `metric_for_best_model="accuracy"` (the test score is the
    best-validation model's, not the last epoch's), `save_total_limit=2`, `learning_rate=1e-3`.
    """

    eval_strategy: str = field(default="epoch", metadata={"help": "Evaluate every epoch (changed default)."})
    save_strategy: str = field(default="epoch", metadata={"help": "Checkpoint every epoch (changed default)."})
    logging_strategy: str = field(default="epoch", metadata={"help": "Log every epoch (changed default)."})
    load_best_model_at_end: bool = field(
        default=True, metadata={"help": "Test the best-validation checkpoint, not the last (changed default)."}
    )
    metric_for_best_model: str = field(default="accuracy", metadata={"help": "Best checkpoint by validation accuracy."})
    greater_is_better: bool = field(default=True, metadata={"help": "Higher accuracy is better."})
    save_total_limit: int | None = field(default=2, metadata={"help": "Checkpoints kept (the best is always kept)."})
    learning_rate: float = field(default=1e-3, metadata={"help": "AdamW peak learning rate (Amos et al. grid)."})
    class_weights: list[float] | None = field(
        default=None, metadata={"help": "Per-class loss weights for unbalanced single-label data (None: unweighted)."}
    )


__all__ = ["FinetuneTrainingArguments"]
