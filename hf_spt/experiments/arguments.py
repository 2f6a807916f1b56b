"""Command-line arguments of `run_spt.py`: four `HfArgumentParser` dataclasses, one `--help` group each.

- `DataArguments` ("Data"): the task and its files.
- `ModelArguments` ("Model"): sizes and architecture (`None` = the task's preset).
- `ExperimentArguments` ("Experiment"): which phases and arms run (`--mode`), the recipe, what only
  the pretraining phase reads (`PRETRAIN_SETTINGS`), what only fine-tuning reads (`FINETUNE_SETTINGS`:
  budgets, parts, class weighting, LoRA), the proximity probe.
- `SharedTrainingArguments` ("Both phases"): every flag of transformers' `TrainingArguments`
  (`--bf16`, `--gradient_accumulation_steps`, `--report_to`...), given to both phases, plus
  `--overwrite_output_dir`.

The generic `--learning_rate`, `--num_train_epochs`, `--per_device_train_batch_size` and `--max_steps`
default to `None` here so that a given value can be told from our defaults: given, they set both phases
(a per-phase flag wins for its phase); not given, the phase's own `TrainingArguments` subclass's defaults
hold (`training.arguments`: 25 pretraining epochs, 4 fine-tuning, 1e-3 in both).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from transformers import TrainingArguments

from ..errors import UserInputError
from ..runs.folder import check_output_folder
from ..training.arguments import FinetuneArguments, PretrainArguments
from ..training.metrics import SHIPPED_METRICS
from ..training.parts import parse_parts
from .arms import FINETUNE_METHODS
from .modes import MODES, uses_lora
from .recipes import RECIPES

PHASES = ("pretrain", "finetune")
# generic TrainingArguments field -> the per-phase flag suffix that overrides it for one phase
PHASE_SETTINGS = {"num_train_epochs": "epochs", "learning_rate": "learning_rate",
                  "per_device_train_batch_size": "batch_size", "max_steps": "max_steps"}
PHASE_ARGUMENTS = {"pretrain": PretrainArguments, "finetune": FinetuneArguments}
"""Each phase's `TrainingArguments` subclass, which holds its defaults (the one place they are written)."""


def json_mapping(value: str | dict[str, Any] | None, flag: str) -> dict[str, Any]:
    """A mapping given as JSON text on the command line, or as a mapping in a config file."""
    if value is None or isinstance(value, dict):
        return value or {}
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise UserInputError(f"{flag} must be a JSON object, e.g. '{{\"key\": 1}}'; got {value!r} ({error}).") from None
    if not isinstance(parsed, dict):
        raise UserInputError(f"{flag} must be a JSON object, got {value!r}.")
    return parsed


@dataclass
class DataArguments:
    """The task, its files and lengths, and (cross-task SPT) the task to pretrain on."""

    _argument_group_name = "Data"

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
    """The model: hf_spt's own (sized from the task preset) or any transformers architecture."""

    _argument_group_name = "Model"

    hidden_size: int | None = field(default=None, metadata={"help": "d_model (default: task preset)."})
    num_hidden_layers: int | None = field(default=None, metadata={"help": "Layers (default: task preset)."})
    num_attention_heads: int | None = field(default=None, metadata={"help": "Heads (default: task preset)."})
    intermediate_size: int | None = field(default=None, metadata={"help": "MLP width (default: task preset)."})
    position_embedding_type: str | None = field(
        default=None, metadata={"help": "sinusoidal, learned, rotary, alibi or none (default: sinusoidal; with "
                                "--mode finetune, the checkpoint's)."}
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
    """What the run trains and how each phase differs: the mode (its arms), a recipe, the pretraining
    phase's settings, the fine-tuning phase's (every arm), LoRA's (`peft.LoraConfig`'s, read only with
    `--finetune_method lora` or `--mode lora_comparison`) and the attention-proximity probe. Budgets left
    `None` fall back to the generic flag, then to the phase's `TrainingArguments` subclass's default."""

    _argument_group_name = "Experiment: the mode, each phase's settings, LoRA"

    mode: str = field(
        default="compare",
        metadata={"help": ", ".join(f"{name} ({mode.help})" for name, mode in MODES.items()) + "."},
    )
    recipe: str | None = field(
        default=None, metadata={"help": f"A shipped recipe ({', '.join(RECIPES)}) or a recipe file (.yaml/.json): "
                                        "defaults under the config file and every flag."}
    )
    # the pretraining (SPT) phase (PRETRAIN_SETTINGS)
    pretrain_epochs: float | None = field(
        default=None, metadata={"help": "Pretraining epochs (default: --num_train_epochs if given, else 25)."}
    )
    pretrain_learning_rate: float | None = field(
        default=None, metadata={"help": "Pretraining peak learning rate (default: --learning_rate if given, else 1e-3)."}
    )
    pretrain_batch_size: int | None = field(
        default=None, metadata={"help": "Pretraining batch size per device (default: --per_device_train_batch_size "
                                "if given, else the task preset)."}
    )
    pretrain_max_steps: int | None = field(
        default=None, metadata={"help": "Pretraining steps; above 0 they replace the epochs (default: --max_steps if given)."}
    )
    pretrain_objective: str = field(
        default="masked", metadata={"help": "masked (MLM) or causal (next-token prediction; decoder architectures)."}
    )
    mlm_probability: float | None = field(default=None, metadata={"help": "Masking rate (default: the task preset)."})
    mask_replace_prob: float = field(default=0.8, metadata={"help": "Masked tokens shown as [MASK] (1.0 = pure)."})
    random_replace_prob: float = field(default=0.1, metadata={"help": "Masked tokens shown as a random token."})
    token_weighting: str = field(
        default="none", metadata={"help": "Pretraining loss weights: none, or inverse_frequency (counted on training inputs)."}
    )
    # the fine-tuning phase, every arm (FINETUNE_SETTINGS)
    finetune_epochs: float | None = field(
        default=None, metadata={"help": "Fine-tuning epochs (default: --num_train_epochs if given, else 4)."}
    )
    finetune_learning_rate: float | None = field(
        default=None, metadata={"help": "Fine-tuning peak learning rate (default: --learning_rate if given, else 1e-3)."}
    )
    finetune_batch_size: int | None = field(
        default=None, metadata={"help": "Fine-tuning batch size per device (default: --per_device_train_batch_size "
                                "if given, else the task preset)."}
    )
    finetune_max_steps: int | None = field(
        default=None, metadata={"help": "Fine-tuning steps; above 0 they replace the epochs (default: --max_steps if given)."}
    )
    early_stopping_patience: int | None = field(
        default=None, metadata={"help": "Stop fine-tuning after this many evaluations without a better validation "
                                "accuracy (transformers' EarlyStoppingCallback); the epochs are then a maximum. "
                                "Default: train every epoch."}
    )
    class_weighting: str = field(
        default="none", metadata={"help": "Fine-tuning class weights: none, balanced, or comma-separated numbers w0,w1,..."}
    )
    init_from: str | None = field(
        default=None, metadata={"help": "SPT checkpoint (folder, .safetensors file, sharded index or Hub id) that "
                                "the spt arm starts from (default: OUTPUT_DIR/pretrain)."}
    )
    init_parts: str | None = field(
        default=None, metadata={"help": "Hybrid init: a fresh model takes only these parts of --init_from, e.g. qk, "
                                "attention or qk,mlp (qk, qkv, attention, mlp, embeddings, norms, all). Default: "
                                "the whole SPT model."}
    )
    freeze_parts: str | None = field(
        default=None, metadata={"help": "Parts kept at their initial values while fine-tuning, in every arm, e.g. "
                                "attention (qk, qkv, attention, mlp, embeddings; comma-separated)."}
    )
    # LoRA fine-tuning through peft (FINETUNE_SETTINGS too)
    finetune_method: str = field(
        default="full", metadata={"help": "full (every weight trains) or lora (peft LoRA adapters plus the classifier "
                                 "head; the base weights stay as they were), in every fine-tuning arm. SPT always "
                                 "trains the full model. Needs pip install -e \".[peft]\"."}
    )
    lora_r: int = field(default=8, metadata={"help": "LoRA rank r (peft.LoraConfig.r)."})
    lora_alpha: int = field(default=8, metadata={"help": "LoRA scaling alpha; the update is scaled by alpha/r."})
    lora_dropout: float = field(default=0.0, metadata={"help": "Dropout on the LoRA branch's input."})
    lora_target_modules: str | None = field(
        default=None, metadata={"help": "Comma-separated module names that get adapters, e.g. q_proj,v_proj "
                                "(default: peft's per-architecture default; q_proj,v_proj for the SPT encoder)."}
    )
    log_proximity: bool = field(
        default=False,
        metadata={"help": "Log attention proximity scores per layer and head of a fixed validation probe batch "
        "(to the Trainer's loggers and proximity_log.json in each phase folder); see hf_spt.analysis.callback."},
    )
    proximity_every_n_steps: int | None = field(
        default=None, metadata={"help": "With --log_proximity: log every N steps instead of at each evaluation."}
    )

    def __post_init__(self):
        if self.mode not in MODES:
            raise UserInputError(f"Unknown --mode {self.mode!r}; choose one of {', '.join(MODES)}.")
        if self.finetune_method not in FINETUNE_METHODS:
            raise UserInputError(f"Unknown --finetune_method {self.finetune_method!r}; choose one of "
                                 f"{', '.join(FINETUNE_METHODS)}.")
        if self.freeze_parts is not None and uses_lora(self.mode, self.finetune_method):
            raise UserInputError("--freeze_parts does not combine with LoRA, which already freezes every weight but "
                                 "the adapters and the classifier head.")
        if self.init_parts is not None and self.mode == "scratch":
            raise UserInputError("--init_parts needs SPT weights: use --mode compare or finetune, not scratch.")
        if self.init_from is not None and self.mode == "compare":  # its pretraining phase would run unused
            raise UserInputError("--init_from with --mode compare: the spt arm fine-tunes the pretraining phase this "
                                 "run trains, so --init_from would go unused. Use --mode finetune --init_from CKPT "
                                 "(and --mode scratch for the baseline), or drop --init_from.")
        for parts in (self.init_parts, self.freeze_parts):
            if parts is not None:
                parse_parts(parts)  # an unknown part name fails here, before any training

    def phase_setting(self, training: SharedTrainingArguments, phase: str, setting: str) -> Any:
        """`setting` ("epochs", "learning_rate", "batch_size", "max_steps") of `phase`: the per-phase flag, else the
        generic TrainingArguments flag, else the phase's `TrainingArguments` subclass's default (batch size None:
        the task preset's)."""
        value = getattr(self, f"{phase}_{setting}")
        generic = next(name for name, suffix in PHASE_SETTINGS.items() if suffix == setting)
        if value is None:
            value = getattr(training, generic)
        if value is None and setting != "batch_size":
            value = PHASE_ARGUMENTS[phase].__dataclass_fields__[generic].default
        return value


PRETRAIN_SETTINGS = ("pretrain_epochs", "pretrain_learning_rate", "pretrain_batch_size", "pretrain_max_steps",
                     "pretrain_objective", "mlm_probability", "mask_replace_prob", "random_replace_prob",
                     "token_weighting")
"""The `ExperimentArguments` only the pretraining phase reads."""
FINETUNE_SETTINGS = ("finetune_epochs", "finetune_learning_rate", "finetune_batch_size", "finetune_max_steps",
                     "early_stopping_patience", "class_weighting", "init_from", "init_parts", "freeze_parts",
                     "finetune_method", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")
"""The `ExperimentArguments` only fine-tuning reads (every arm)."""


BEST_MODEL_METRICS = (*SHIPPED_METRICS, "loss")
"""What `--metric_for_best_model` may name: the fine-tuning metrics of every classification task, bare or eval_."""


def _setting(default: Any, help_text: str) -> Any:
    """A field with its `--help` text."""
    return field(default=default, metadata={"help": help_text})


@dataclass
class SharedTrainingArguments(TrainingArguments):
    """transformers' `TrainingArguments`, given to both phases; only the fields below differ from transformers'.

    A carrier, not a Trainer's arguments: each phase builds its own `PretrainArguments` or
    `FinetuneArguments` from these values (`phase_arguments`), and those run transformers'
    validation. Fields left `None` take each phase's own default, so a phase's changed defaults
    (evaluate and save every epoch, keep the best checkpoint...) hold unless a flag is given.
    """

    _argument_group_name = "Both phases (transformers TrainingArguments)"

    output_dir: str | None = _setting("runs/markov", "Where the phase folders, results.json and results.md go.")
    overwrite_output_dir: bool = _setting(
        False, "Delete the folders of the phases this run trains before training (default: a re-run skips finished "
        "phases and resumes interrupted ones).")
    seed: int = _setting(0, "Seed of data generation, init, masking and shuffling.")
    optim: str = _setting("adamw_torch", "Optimizer of both phases.")
    warmup_steps: float = _setting(0.1, "Linear warm-up: steps, or a fraction of all steps (<1).")
    learning_rate: float | None = _setting(
        None, "Peak learning rate of both phases (default: 1e-3; --pretrain_/--finetune_learning_rate win).")
    num_train_epochs: float | None = _setting(
        None, "Epochs of both phases (default: 25 pretraining, 4 fine-tuning; --pretrain_/--finetune_epochs win).")
    per_device_train_batch_size: int | None = _setting(
        None, "Batch size of both phases (default: the task preset; --pretrain_/--finetune_batch_size win).")
    max_steps: int | None = _setting(
        None, "Steps of both phases; above 0 they replace the epochs (--pretrain_/--finetune_max_steps win).")
    per_device_eval_batch_size: int | None = _setting(None, "Evaluation batch size (default: the phase's training batch).")
    hub_strategy: str | None = _setting(None, "With --push_to_hub (default: end, the final model of each phase only).")
    hub_model_id: str | None = _setting(None, "Hub repo prefix: phases go to HUB_MODEL_ID-pretrain, -spt, -scratch.")
    dataloader_pin_memory: bool | None = _setting(None, "Pin data-loader memory (default: only with an accelerator).")
    eval_strategy: str | None = _setting(None, "Default: each phase's own (epoch).")
    save_strategy: str | None = _setting(None, "Default: each phase's own (epoch).")
    logging_strategy: str | None = _setting(None, "Default: each phase's own (epoch).")
    load_best_model_at_end: bool | None = _setting(None, "Default: each phase's own (true: the best-validation checkpoint).")
    metric_for_best_model: str | None = _setting(
        None, "Fine-tuning only: the validation metric that picks the kept checkpoint and drives early stopping, one of "
        f"{', '.join(BEST_MODEL_METRICS)} (default: accuracy). Pretraining always keeps its lowest eval_loss.")
    greater_is_better: bool | None = _setting(None, "Fine-tuning only; default: from --metric_for_best_model.")
    save_total_limit: int | None = _setting(None, "Checkpoints kept per phase (default: each phase's own, 2).")
    prediction_loss_only: bool | None = _setting(None, "Default: each phase's own (true when pretraining).")
    train_sampling_strategy: str | None = field(default=None, metadata={
        "help": "random, sequential, group_by_length or batch_rebalance. Default: per phase, group_by_length when "
        "its training lengths vary (std/mean > 0.1: ListOps, Text, Retrieval, custom data), else random.",
        "choices": ["random", "sequential", "group_by_length", "batch_rebalance"]})
    padding_free: bool = _setting(
        False, "Both phases: pack each batch's rows without padding (flash attention's varlen kernel); needs "
        "--attn_implementation flash_attention_2 on a GPU and an SPT model, else a clear error.")

    def __post_init__(self):
        """No transformers validation here (the phases' arguments run it), only one repair: `HfArgumentParser`
        turns two defaults into their falsy twins (`debug` "" -> None, `include_num_input_tokens_seen`
        "no" -> False); the defaults are restored so the phases receive transformers' own."""
        for spec in fields(self):
            if spec.init and getattr(self, spec.name) in (None, False) and _default(spec) in ("", "no"):
                setattr(self, spec.name, _default(spec))
        if self.output_dir is not None:
            check_output_folder(self.output_dir)

    def given(self) -> dict[str, Any]:
        """The fields set away from this class's defaults (what results.json records), secrets redacted."""
        return redacted({f.name: getattr(self, f.name) for f in fields(self)
                         if f.init and getattr(self, f.name) != _default(f)})

    def phase_kwargs(self, phase: str) -> dict[str, Any]:
        """`TrainingArguments` keyword arguments of `phase`: all fields but our own, but the `None` ones this class
        declares, which stand for each phase's own default, and for pretraining but `FINETUNE_TRAINING_SETTINGS`."""
        phase_own = {name for name in SharedTrainingArguments.__annotations__
                     if SharedTrainingArguments.__dataclass_fields__[name].default is None}
        skipped = OUR_TRAINING_FIELDS + (FINETUNE_TRAINING_SETTINGS if phase == "pretrain" else ())
        return {f.name: getattr(self, f.name) for f in fields(self) if f.init and f.name not in skipped
                and not (f.name in phase_own and getattr(self, f.name) is None)}


OUR_TRAINING_FIELDS = ("overwrite_output_dir",)  # flags of SharedTrainingArguments that transformers lacks
FINETUNE_TRAINING_SETTINGS = ("metric_for_best_model", "greater_is_better")
"""`TrainingArguments` flags only fine-tuning reads: pretraining reports no classification metric."""


def redacted(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` with every `*_token` value replaced by `<NAME>`, as transformers' `TrainingArguments.to_dict`
    does: a run records that a token was given, never the token."""
    return {key: f"<{key.upper()}>" if key.endswith("_token") and value is not None else value
            for key, value in settings.items()}


def _default(spec) -> Any:
    return spec.default_factory() if callable(spec.default_factory) else spec.default


CUSTOM_DATA_FIELDS = ("train_file", "validation_file", "test_file", "text_column", "text_pair_column", "label_column")
"""The `DataArguments` only `--task custom` reads."""
ARGUMENT_GROUPS = (DataArguments, ModelArguments, ExperimentArguments, SharedTrainingArguments)
"""`run_spt.py`'s argument groups, in `--help`'s order: the flags, and the names a settings file may use."""

__all__ = ["redacted", "ARGUMENT_GROUPS", "CUSTOM_DATA_FIELDS", "FINETUNE_METHODS", "PHASES", "PHASE_SETTINGS", "PHASE_ARGUMENTS",
           "PRETRAIN_SETTINGS", "FINETUNE_SETTINGS", "FINETUNE_TRAINING_SETTINGS", "BEST_MODEL_METRICS",
           "DataArguments", "ModelArguments", "ExperimentArguments", "SharedTrainingArguments", "json_mapping"]
