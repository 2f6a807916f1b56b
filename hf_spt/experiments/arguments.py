"""Command-line arguments of `run_spt.py`, as `HfArgumentParser` dataclasses.

Three groups: the task (`DataArguments`), the model (`ModelArguments`, `None` = the task's
preset) and the experiment (`ExperimentArguments`: which phases, their budgets, and the
Trainer options both phases share). A JSON or YAML file (`--config_file`) sets defaults that
command-line flags override.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..training.parts import parse_parts

MODES = ("compare", "spt", "finetune", "scratch")


def json_mapping(value: str | dict[str, Any] | None, flag: str) -> dict[str, Any]:
    """A mapping given as JSON text on the command line, or as a mapping in a config file."""
    if value is None or isinstance(value, dict):
        return value or {}
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise ValueError(f"{flag} must be a JSON object, e.g. '{{\"key\": 1}}'; got {value!r} ({error}).") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"{flag} must be a JSON object, got {value!r}.")
    return parsed


@dataclass
class DataArguments:
    task: str = field(default="markov", metadata={"help": "Task name (--list_tasks prints them)."})
    data_dir: str | None = field(default=None, metadata={"help": "Folder holding the task's files, if it needs any."})
    max_length: int | None = field(
        default=None, metadata={"help": "Longest sequence (default: the task preset); longer inputs are an error..."}
    )
    truncation: bool = field(default=False, metadata={"help": "...unless --truncation cuts them to max_length."})
    task_options: str | None = field(
        default=None,
        metadata={"help": "Extra keyword arguments of the task builder, as JSON (a mapping in a config file), "
        'e.g. \'{"num_train": 2000, "locality": 0.6}\'.'},
    )
    list_tasks: bool = field(default=False, metadata={"help": "Print the tasks and what each needs on disk, then exit."})
    train_file: str | None = field(default=None, metadata={"help": "--task custom: training data (CSV/TSV/JSON/JSONL/Parquet)."})
    validation_file: str | None = field(
        default=None, metadata={"help": "--task custom: validation data (default: carved from train with --seed)."}
    )
    test_file: str | None = field(default=None, metadata={"help": "--task custom: test data (default: carved from train)."})
    text_column: str = field(default="text", metadata={"help": "--task custom: the text column."})
    text_pair_column: str | None = field(
        default=None, metadata={"help": "--task custom: a second text column; pairs train a two-tower classifier."}
    )
    label_column: str = field(default="label", metadata={"help": "--task custom: the label column (names or ids)."})
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "Processes for reading and tokenizing files (datasets.map num_proc)."}
    )
    pretrain_task: str | None = field(
        default=None, metadata={"help": "Cross-task SPT: pretrain on this task's inputs, fine-tune on --task. Both "
        "need the same vocabulary (e.g. pathfinder -> image: 256 pixel values; text <-> retrieval: bytes)."}
    )
    pretrain_data_dir: str | None = field(default=None, metadata={"help": "--data_dir of --pretrain_task."})
    pretrain_task_options: str | None = field(
        default=None, metadata={"help": "--task_options of --pretrain_task (JSON)."}
    )

    def __post_init__(self):
        self.task_options = json_mapping(self.task_options, "--task_options")
        self.pretrain_task_options = json_mapping(self.pretrain_task_options, "--pretrain_task_options")


@dataclass
class ModelArguments:
    hidden_size: int | None = field(default=None, metadata={"help": "d_model (default: task preset)."})
    num_hidden_layers: int | None = field(
        default=None, metadata={"help": "Layers (default: task preset).", "aliases": ["--num_layers"]}
    )
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
    model_type: str | None = field(
        default=None, metadata={"help": "Any transformers architecture (bert, roberta, distilbert, gpt2, llama...) "
                                "built with random weights sized from the task (default: spt)."}
    )
    config_name: str | None = field(
        default=None, metadata={"help": "Folder or Hub id of a config: its architecture, random weights, task vocabulary."}
    )
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "Folder or Hub id of pretrained weights to start both phases from."}
    )
    from_scratch: bool = field(
        default=False, metadata={"help": "Random weights: with --model_name_or_path, keep its architecture only."}
    )


@dataclass
class ExperimentArguments:
    output_dir: str = field(default="runs/markov", metadata={"help": "Where checkpoints, models and results go."})
    mode: str = field(
        default="compare",
        metadata={"help": "compare (SPT then fine-tune, and scratch), spt (pretrain only), finetune (from "
        "--init_from, default OUTPUT_DIR/pretrain), scratch (fine-tune from random init only)."},
    )
    init_from: str | None = field(
        default=None, metadata={"help": "SPT checkpoint (folder, .safetensors file, sharded index or Hub id) that "
                                "--mode finetune starts from."}
    )
    init_parts: str | None = field(
        default=None, metadata={"help": "Hybrid init: a fresh model takes only these parts of --init_from, e.g. qk, "
                                "attention or qk,mlp (qk, qkv, attention, mlp, embeddings, norms, all). Default: "
                                "the whole SPT model."}
    )
    freeze: str | None = field(
        default=None, metadata={"help": "Parts kept at their initial values while fine-tuning, e.g. attention "
                                "in every fine-tuning arm (qk, qkv, attention, mlp, embeddings; comma-separated)."}
    )
    seed: int = field(default=0, metadata={"help": "Seed of data generation, init, masking and shuffling."})
    spt_epochs: float = field(
        default=25, metadata={"help": "SPT (pretraining) epochs.", "aliases": ["--pretrain_epochs"]}
    )
    spt_learning_rate: float = field(default=1e-3, metadata={"help": "SPT peak learning rate."})
    spt_batch_size: int | None = field(default=None, metadata={"help": "SPT batch size per device (default: preset)."})
    mlm_probability: float | None = field(default=None, metadata={"help": "SPT masking rate (default: preset)."})
    mask_replace_prob: float = field(default=0.8, metadata={"help": "Masked tokens shown as [MASK] (1.0 = pure)."})
    random_replace_prob: float = field(default=0.1, metadata={"help": "Masked tokens shown as a random token."})
    finetune_epochs: float = field(default=4, metadata={"help": "Fine-tuning epochs (every arm)."})
    finetune_learning_rate: float = field(default=1e-3, metadata={"help": "Fine-tuning peak learning rate."})
    finetune_batch_size: int | None = field(default=None, metadata={"help": "Fine-tuning batch size (default: preset)."})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay, both phases."})
    warmup_steps: float = field(default=0.1, metadata={"help": "Linear warm-up: steps, or a fraction of all steps (<1)."})
    lr_scheduler_type: str = field(default="linear", metadata={"help": "Learning-rate schedule, both phases."})
    spt_objective: str = field(
        default="masked", metadata={"help": "masked (MLM) or causal (next-token prediction; decoder architectures)."}
    )
    recipe: str | None = field(
        default=None, metadata={"help": "balestriero_huang or amos_lra: published settings under every explicit flag."}
    )
    optim: str = field(default="adamw_torch", metadata={"help": "Optimizer of both phases (TrainingArguments.optim)."})
    spt_max_steps: int = field(default=-1, metadata={"help": "SPT steps; above 0 it replaces --spt_epochs."})
    finetune_max_steps: int = field(default=-1, metadata={"help": "Fine-tuning steps; above 0 it replaces --finetune_epochs."})
    class_weights: str = field(
        default="none", metadata={"help": "Fine-tuning class weights: none, balanced, or comma-separated numbers."}
    )
    token_weighting: str = field(
        default="none", metadata={"help": "SPT loss weights: none, or inverse_frequency (counted on training inputs)."}
    )
    push_to_hub: bool = field(
        default=False, metadata={"help": "Push each phase's final model, tokenizer, config and card to the Hub."}
    )
    hub_model_id: str | None = field(
        default=None, metadata={"help": "Hub repo prefix: phases go to HUB_MODEL_ID-pretrain, -spt, -scratch."}
    )
    log_proximity: bool = field(
        default=False,
        metadata={"help": "Log attention proximity scores per layer and head of a fixed validation probe batch "
        "(to the Trainer's loggers and proximity_log.json in each phase folder); see hf_spt.analysis.callback."},
    )
    proximity_every_n_steps: int | None = field(
        default=None, metadata={"help": "With --log_proximity: log every N steps instead of at each evaluation."}
    )
    trainer_options: str | None = field(
        default=None,
        metadata={"help": "Further TrainingArguments for both phases (JSON), e.g. "
        '\'{"bf16": true, "gradient_checkpointing": true, "report_to": "tensorboard"}\'.'},
    )

    def __post_init__(self):
        self.trainer_options = json_mapping(self.trainer_options, "--trainer_options")
        if self.mode not in MODES:
            raise ValueError(f"Unknown --mode {self.mode!r}; choose one of {', '.join(MODES)}.")
        if self.init_parts is not None and self.mode == "scratch":
            raise ValueError("--init_parts needs SPT weights: use --mode compare or finetune, not scratch.")
        for parts in (self.init_parts, self.freeze):
            if parts is not None:
                parse_parts(parts)  # an unknown part name fails here, before any training


__all__ = ["MODES", "DataArguments", "ModelArguments", "ExperimentArguments"]
