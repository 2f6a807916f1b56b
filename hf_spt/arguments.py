"""Command-line arguments of `run_spt.py`, as `HfArgumentParser` dataclasses.

Three groups: the task (`DataArguments`), the model (`ModelArguments`, `None` = the task's
preset) and the experiment (`ExperimentArguments`: which phases, their budgets, and the
Trainer options both phases share). A JSON or YAML file (`--config_file`) sets defaults that
command-line flags override.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MODES = ("compare", "spt", "finetune", "scratch")


@dataclass
class DataArguments:
    task: str = field(default="markov", metadata={"help": "Task name (--list_tasks prints them)."})
    data_dir: str | None = field(default=None, metadata={"help": "Folder holding the task's files, if it needs any."})
    max_length: int | None = field(
        default=None, metadata={"help": "Longest sequence (default: the task preset); longer inputs are an error..."}
    )
    truncation: bool = field(default=False, metadata={"help": "...unless --truncation cuts them to max_length."})
    task_options: dict[str, Any] | None = field(
        default=None, metadata={"help": "Extra keyword arguments of the task builder (JSON), e.g. sizes of a generator."}
    )
    list_tasks: bool = field(default=False, metadata={"help": "Print the tasks and what each needs on disk, then exit."})


@dataclass
class ModelArguments:
    hidden_size: int | None = field(default=None, metadata={"help": "d_model (default: task preset)."})
    num_hidden_layers: int | None = field(default=None, metadata={"help": "Layers (default: task preset)."})
    num_attention_heads: int | None = field(default=None, metadata={"help": "Heads (default: task preset)."})
    intermediate_size: int | None = field(default=None, metadata={"help": "MLP width (default: task preset)."})
    position_embedding_type: str = field(
        default="sinusoidal", metadata={"help": "sinusoidal, learned, rotary, alibi or none."}
    )
    pooling: str | None = field(default=None, metadata={"help": "mean, max, last, cls or last_mean (default: preset)."})
    hidden_dropout_prob: float = field(default=0.0, metadata={"help": "Residual and embedding dropout."})
    attention_probs_dropout_prob: float = field(
        default=0.0, metadata={"help": "Attention dropout; above 0 it disables SDPA's flash kernel."}
    )
    attn_implementation: str = field(default="sdpa", metadata={"help": "sdpa, eager or flash_attention_2."})


@dataclass
class ExperimentArguments:
    output_dir: str = field(default="runs/markov", metadata={"help": "Where checkpoints, models and results go."})
    mode: str = field(
        default="compare",
        metadata={"help": "compare (SPT then fine-tune, and scratch), spt (pretrain only), finetune (from "
        "--init_from, default OUTPUT_DIR/pretrain), scratch (fine-tune from random init only)."},
    )
    init_from: str | None = field(
        default=None, metadata={"help": "SPT checkpoint folder that --mode finetune starts from."}
    )
    seed: int = field(default=0, metadata={"help": "Seed of data generation, init, masking and shuffling."})
    spt_epochs: float = field(default=30, metadata={"help": "SPT (pretraining) epochs."})
    spt_learning_rate: float = field(default=1e-3, metadata={"help": "SPT peak learning rate."})
    spt_batch_size: int | None = field(default=None, metadata={"help": "SPT batch size per device (default: preset)."})
    mlm_probability: float | None = field(default=None, metadata={"help": "SPT masking rate (default: preset)."})
    mask_replace_prob: float = field(default=0.8, metadata={"help": "Masked tokens shown as [MASK] (1.0 = pure)."})
    random_replace_prob: float = field(default=0.1, metadata={"help": "Masked tokens shown as a random token."})
    finetune_epochs: float = field(default=15, metadata={"help": "Fine-tuning epochs (every arm)."})
    finetune_learning_rate: float = field(default=1e-3, metadata={"help": "Fine-tuning peak learning rate."})
    finetune_batch_size: int | None = field(default=None, metadata={"help": "Fine-tuning batch size (default: preset)."})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay, both phases."})
    warmup_steps: float = field(default=0.1, metadata={"help": "Linear warm-up: steps, or a fraction of all steps (<1)."})
    lr_scheduler_type: str = field(default="linear", metadata={"help": "Learning-rate schedule, both phases."})
    log_proximity: bool = field(
        default=False,
        metadata={"help": "Log attention proximity scores per layer and head of a fixed validation probe batch "
        "(to the Trainer's loggers and proximity_log.json in each phase folder); see hf_spt.analysis.callback."},
    )
    proximity_every_n_steps: int | None = field(
        default=None, metadata={"help": "With --log_proximity: log every N steps instead of at each evaluation."}
    )
    trainer_options: dict[str, Any] | None = field(
        default=None,
        metadata={"help": "Further TrainingArguments for both phases (JSON), e.g. "
        '\'{"bf16": true, "gradient_checkpointing": true, "report_to": "tensorboard"}\'.'},
    )

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"Unknown --mode {self.mode!r}; choose one of {', '.join(MODES)}.")


__all__ = ["MODES", "DataArguments", "ModelArguments", "ExperimentArguments"]
