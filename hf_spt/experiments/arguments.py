"""Command-line arguments of `run_spt.py`: four `HfArgumentParser` dataclasses, one `--help` group each, each field
declaring its range, its phase and what it is read with in its metadata (`declarations`).

- `DataArguments` ("Data"): the task and its files.
- `ModelArguments` ("Model"): sizes and architecture (`None` = the task's preset).
- `ExperimentArguments` ("Experiment"): which phases and arms run (`--mode`), the recipe, what only
  the pretraining phase reads (`PRETRAIN_FLAGS`), what only fine-tuning reads (`FINETUNE_FLAGS`:
  budgets, parts, class weighting, LoRA), the proximity probe.
- `SharedTrainingArguments` ("Both phases", `shared_training_arguments.py`): every flag of transformers'
  `TrainingArguments` (`--bf16`, `--gradient_accumulation_steps`, `--report_to`...), given to both phases, plus
  `--overwrite_output_dir`.

The generic `--learning_rate`, `--num_train_epochs`, `--per_device_train_batch_size` and `--max_steps`
default to `None` here so that a given value can be told from our defaults: given, they set both phases
(a per-phase flag wins for its phase); not given, the phase's own `TrainingArguments` subclass's defaults
hold (`training.arguments`, quoted by every help text through `phase_default`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

from ..errors import UserInputError
from ..numerics import PORTABLE_NUMERICS_HELP, portable_mode
from ..training.arguments import FinetuneArguments, PretrainArguments
from ..training.losses import TOKEN_WEIGHTING
from ..training.model_factory import PRETRAIN_OBJECTIVES
from ..training.parts import Parts
from ..value_checks import (DROPOUT, MAX_STEPS, OPEN_PROBABILITY, POSITIVE, POSITIVE_INT, PROBABILITY,
                            check_declared)
from .arms import FINETUNE_METHODS, check_spt_weights_source
from .declarations import DECLARED_KEYS, SettingsParser, declared, json_mapping, redacted
from .modes import MODES, uses_lora
from .recipes import RECIPES
from .shared_training_arguments import (BEST_MODEL_METRICS, FINETUNE_TRAINER_FLAGS, OUR_TRAINING_FIELDS,
                                        TRANSFORMERS_RANGES, SharedTrainingArguments)

PHASES = ("pretrain", "finetune")
# generic TrainingArguments field -> the per-phase flag suffix that overrides it for one phase
PER_PHASE_BUDGETS = {"num_train_epochs": "epochs", "learning_rate": "learning_rate",
                  "per_device_train_batch_size": "batch_size", "max_steps": "max_steps"}


def per_phase_flags(generic: str, phases: tuple[str, ...] = PHASES) -> list[str]:
    """The per-phase flags of the generic budget flag `generic` (`learning_rate` -> `pretrain_learning_rate`,
    `finetune_learning_rate`), which win over it for their phase (`run_spec.phase_value`)."""
    return [f"{phase}_{PER_PHASE_BUDGETS[generic]}" for phase in phases]


def layered(layers: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Merge layers of settings, later layers winning, by the one layering rule of every source of settings (flags
    over a config file over a recipe, a recipe's per-task settings over its common ones, a grid task's `experiment:`
    over the grid's): a generic budget setting also clears the per-phase ones of the layers below it, so that an
    explicit `max_steps` is not undone by a lower layer's `pretrain_max_steps`."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for generic in PER_PHASE_BUDGETS.keys() & layer.keys():
            for name in per_phase_flags(generic):
                merged.pop(name, None)
        merged.update(layer)
    return merged


def unread_budgets(
    given: set[str], settings: Mapping[str, Any], phases: tuple[str, ...] = PHASES, flag: str = "--"
) -> dict[str, str]:
    """The generic budget settings in `given` that no phase reads, with why: `settings` (the layers merged,
    `layered`) sets the per-phase setting of every phase in `phases`. `flag`: how names are written ("--" for
    flags; "" in a grid file, which names settings)."""
    unread = {}
    for generic in PER_PHASE_BUDGETS.keys() & given:
        per_phase = per_phase_flags(generic, phases)
        if all(settings.get(name) is not None for name in per_phase):
            unread[generic] = f"{' and '.join(flag + name for name in per_phase)} set every phase this run trains"
    return unread


PHASE_ARGUMENTS = {"pretrain": PretrainArguments, "finetune": FinetuneArguments}
"""Each phase's `TrainingArguments` subclass, which holds its defaults (the one place they are written)."""


def phase_default(phase: str, name: str) -> Any:
    """The default of field `name` of `phase`'s `TrainingArguments` subclass, as the help texts quote it."""
    return PHASE_ARGUMENTS[phase].__dataclass_fields__[name].default


@dataclass
class DataArguments:
    """The task, its files and lengths, and (cross-task SPT) the task to pretrain on."""

    _argument_group_name = "Data"

    task: str = field(default="markov", metadata={"help": "Task name (--list_tasks prints them)."})
    data_dir: str | None = field(default=None, metadata={"help": "Folder holding the task's files, if it needs any."})
    max_length: int | None = field(
        default=None, metadata={"range": POSITIVE_INT,
                                "help": "Longest sequence (default: the task preset); longer inputs are an error..."}
    )
    truncation: bool = field(default=False, metadata={"help": "...unless --truncation cuts them to max_length."})
    task_options: str | None = field(
        default=None,
        metadata={"help": "Extra keyword arguments of the task builder, as JSON (a mapping in a config file), "
        'e.g. \'{"num_train": 2000, "locality": 0.6}\'.'},
    )
    list_tasks: bool = field(default=False, metadata={"help": "Print the tasks and what each needs on disk, then exit."})
    train_file: str | None = field(default=None, metadata={"task": "custom",
                                                           "help": "--task custom: training data "
                                                                   "(CSV/TSV/JSON/JSONL/Parquet)."})
    validation_file: str | None = field(
        default=None, metadata={"task": "custom",
                                "help": "--task custom: validation data (default: carved from train with --seed)."}
    )
    test_file: str | None = field(default=None, metadata={"task": "custom",
                                                          "help": "--task custom: test data (default: carved from "
                                                                  "train)."})
    text_column: str = field(default="text", metadata={"task": "custom", "help": "--task custom: the text column."})
    text_pair_column: str | None = field(
        default=None, metadata={"task": "custom",
                                "help": "--task custom: a second text column; pairs train a two-tower classifier."}
    )
    label_column: str = field(default="label", metadata={"task": "custom",
                                                         "help": "--task custom: the label column (names or ids)."})
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"range": POSITIVE_INT,
                                "help": "Processes for reading and tokenizing files (datasets.map num_proc)."}
    )
    pretrain_task: str | None = field(
        default=None, metadata={"phase": "pretrain",
                                "help": "Cross-task SPT: pretrain on this task's inputs, fine-tune on --task. Both "
        "need the same vocabulary (e.g. pathfinder -> image: 256 pixel values; text <-> retrieval: bytes)."}
    )
    pretrain_data_dir: str | None = field(default=None, metadata={"phase": "pretrain",
                                                                  "help": "--data_dir of --pretrain_task."})
    pretrain_task_options: str | None = field(
        default=None, metadata={"phase": "pretrain", "help": "--task_options of --pretrain_task (JSON)."}
    )

    def __post_init__(self):
        self.task_options = json_mapping(self.task_options, "--task_options")
        self.pretrain_task_options = json_mapping(self.pretrain_task_options, "--pretrain_task_options")
        check_declared(self)


@dataclass
class ModelArguments:
    """The model: hf_spt's own (sized from the task preset) or any transformers architecture."""

    _argument_group_name = "Model"

    hidden_size: int | None = field(default=None, metadata={"range": POSITIVE_INT,
                                                            "help": "d_model (default: task preset)."})
    num_hidden_layers: int | None = field(default=None, metadata={"range": POSITIVE_INT,
                                                                  "help": "Layers (default: task preset)."})
    num_attention_heads: int | None = field(default=None, metadata={"range": POSITIVE_INT,
                                                                    "help": "Heads (default: task preset)."})
    intermediate_size: int | None = field(default=None, metadata={"range": POSITIVE_INT,
                                                                  "help": "MLP width (default: task preset)."})
    position_embedding_type: str | None = field(
        default=None, metadata={"help": "sinusoidal, learned, rotary, alibi or none (default: sinusoidal; with "
                                "--mode finetune, the checkpoint's)."}
    )
    pooling: str | None = field(default=None, metadata={"help": "mean, max, last, cls or last_mean (default: preset)."})
    hidden_dropout_prob: float = field(default=0.0, metadata={"range": DROPOUT,
                                                              "help": "Residual and embedding dropout."})
    attention_probs_dropout_prob: float = field(
        default=0.0, metadata={"range": DROPOUT, "help": "Attention dropout; above 0 it disables SDPA's flash kernel."}
    )
    attn_implementation: str = field(default="sdpa", metadata={
        "help": "sdpa, eager, torch_varlen (SDPA, and core torch's varlen kernel for --padding_free), "
                "torch_varlen_reference (torch_varlen's path on any device, a slow contract-checking stand-in for "
                "the kernel) or flash_attention_2."})
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

    def __post_init__(self):
        check_declared(self)  # the architecture's own rules: model_config.check_model_settings, before any data


@dataclass
class ExperimentArguments:
    """What the run trains and how each phase differs: the mode (its arms), a recipe, the pretraining
    phase's settings, the fine-tuning phase's (every arm), LoRA's (`peft.LoraConfig`'s, read only with
    `--finetune_method lora` or `--mode lora_comparison`) and the attention-proximity probe. Budgets left
    `None` fall back to the generic flag, then to the phase's `TrainingArguments` subclass's default."""

    _argument_group_name = "Experiment: the mode, each phase's settings, LoRA"

    mode: str = field(
        default="compare",
        metadata={"values": MODES,
                  "help": ", ".join(f"{name} ({mode.help})" for name, mode in MODES.items()) + "."},
    )
    recipe: str | None = field(
        default=None, metadata={"help": f"A shipped recipe ({', '.join(RECIPES)}) or a recipe file (.yaml/.json): "
                                        "defaults under the config file and every flag."}
    )
    # the pretraining (SPT) phase (PRETRAIN_FLAGS)
    pretrain_epochs: float | None = field(
        default=None, metadata={"phase": "pretrain", "range": POSITIVE,
                                "help": "Pretraining epochs (default: --num_train_epochs if given, else "
                                f"{phase_default('pretrain', 'num_train_epochs'):g})."}
    )
    pretrain_learning_rate: float | None = field(
        default=None, metadata={"phase": "pretrain", "range": POSITIVE,
                                "help": "Pretraining peak learning rate (default: --learning_rate if given, else "
                                        f"{phase_default('pretrain', 'learning_rate'):g})."}
    )
    pretrain_batch_size: int | None = field(
        default=None, metadata={"phase": "pretrain", "range": POSITIVE_INT,
                                "help": "Pretraining batch size per device (default: --per_device_train_batch_size "
                                "if given, else the task preset)."}
    )
    pretrain_max_steps: int | None = field(
        default=None, metadata={"phase": "pretrain", "range": MAX_STEPS,
                                "help": "Pretraining steps; above 0 they replace the epochs (default: --max_steps "
                                        "if given)."}
    )
    pretrain_objective: str = field(
        default="masked", metadata={"phase": "pretrain", "values": PRETRAIN_OBJECTIVES,
                                    "help": "masked (MLM) or causal (next-token prediction; decoder architectures)."}
    )
    mlm_probability: float | None = field(default=None, metadata={"phase": "pretrain", "range": OPEN_PROBABILITY,
                                                                  "help": "Masking rate (default: the task preset)."})
    mask_replace_prob: float = field(default=phase_default("pretrain", "mask_replace_prob"), metadata={
        "phase": "pretrain", "range": PROBABILITY, "help": "Masked tokens shown as [MASK] (1.0 = pure)."})
    random_replace_prob: float = field(default=phase_default("pretrain", "random_replace_prob"), metadata={
        "phase": "pretrain", "range": PROBABILITY, "help": "Masked tokens shown as a random token."})
    token_weighting: str = field(
        default="none", metadata={"phase": "pretrain", "values": TOKEN_WEIGHTING,
                                  "help": "Pretraining loss weights: none, or inverse_frequency (counted on "
                                          "training inputs)."}
    )
    # the fine-tuning phase, every arm (FINETUNE_FLAGS)
    finetune_epochs: float | None = field(
        default=None, metadata={"phase": "finetune", "range": POSITIVE,
                                "help": "Fine-tuning epochs (default: --num_train_epochs if given, else "
                                f"{phase_default('finetune', 'num_train_epochs'):g})."}
    )
    finetune_learning_rate: float | None = field(
        default=None, metadata={"phase": "finetune", "range": POSITIVE,
                                "help": "Fine-tuning peak learning rate (default: --learning_rate if given, else "
                                        f"{phase_default('finetune', 'learning_rate'):g})."}
    )
    finetune_batch_size: int | None = field(
        default=None, metadata={"phase": "finetune", "range": POSITIVE_INT,
                                "help": "Fine-tuning batch size per device (default: --per_device_train_batch_size "
                                "if given, else the task preset)."}
    )
    finetune_max_steps: int | None = field(
        default=None, metadata={"phase": "finetune", "range": MAX_STEPS,
                                "help": "Fine-tuning steps; above 0 they replace the epochs (default: --max_steps "
                                        "if given)."}
    )
    early_stopping_patience: int | None = field(
        default=None, metadata={"phase": "finetune", "range": POSITIVE_INT,
                                "help": "Stop fine-tuning after this many evaluations without a better validation "
                                "accuracy (transformers' EarlyStoppingCallback); the epochs are then a maximum. "
                                "Default: train every epoch."}
    )
    class_weighting: str = field(
        default="none", metadata={"phase": "finetune",
                                  "help": "Fine-tuning class weights: none, balanced, or comma-separated numbers "
                                          "w0,w1,..."}
    )
    init_from: str | None = field(
        default=None, metadata={"phase": "finetune",
                                "help": "SPT checkpoint (folder, .safetensors file, sharded index or Hub id) that "
                                "the spt arm starts from (default: OUTPUT_DIR/pretrain)."}
    )
    init_parts: str | None = field(
        default=None, metadata={"phase": "finetune",
                                "help": "Hybrid init: a fresh model takes only these parts of --init_from, e.g. qk, "
                                "attention or qk,mlp (qk, qkv, attention, mlp, embeddings, norms, all). Default: "
                                "the whole SPT model."}
    )
    freeze_parts: str | None = field(
        default=None, metadata={"phase": "finetune",
                                "help": "Parts kept at their initial values while fine-tuning, in every arm, e.g. "
                                "attention (qk, qkv, attention, mlp, embeddings; comma-separated)."}
    )
    # LoRA fine-tuning through peft (FINETUNE_FLAGS too)
    finetune_method: str = field(
        default="full", metadata={"phase": "finetune", "values": FINETUNE_METHODS,
                                  "help": "full (every weight trains) or lora (peft LoRA adapters plus the classifier "
                                 "head; the base weights stay as they were), in every fine-tuning arm. SPT always "
                                 "trains the full model. Needs pip install -e \".[peft]\"."}
    )
    lora_r: int = field(default=8, metadata={"phase": "finetune", "lora": True, "range": POSITIVE_INT,
                                             "help": "LoRA rank r (peft.LoraConfig.r)."})
    lora_alpha: int = field(default=8, metadata={"phase": "finetune", "lora": True, "range": POSITIVE,
                                                 "help": "LoRA scaling alpha; the update is scaled by alpha/r."})
    lora_dropout: float = field(default=0.0, metadata={"phase": "finetune", "lora": True, "range": DROPOUT,
                                                       "help": "Dropout on the LoRA branch's input."})
    lora_target_modules: str | None = field(
        default=None, metadata={"phase": "finetune", "lora": True,
                                "help": "Comma-separated module names that get adapters, e.g. q_proj,v_proj "
                                "(default: peft's per-architecture default; q_proj,v_proj for the SPT encoder)."}
    )
    log_proximity: bool = field(
        default=False,
        metadata={"help": "Log attention proximity scores per layer and head of a fixed validation probe batch "
        "(to the Trainer's loggers and proximity_log.json in each phase folder); see hf_spt.analysis.callback."},
    )
    proximity_every_n_steps: int | None = field(
        default=None, metadata={"needs": "log_proximity", "range": POSITIVE_INT,
                                "help": "With --log_proximity: log every N steps instead of at each evaluation."}
    )
    portable_numerics: bool | str | None = field(default=None, metadata={
        "flag_type": str | None, "nargs": "?", "const": "true", "help": PORTABLE_NUMERICS_HELP})

    def __post_init__(self):
        check_declared(self)
        self.portable_numerics = portable_mode(self.portable_numerics)  # "true", "cross_vendor" or None (native)
        if self.mask_replace_prob + self.random_replace_prob > 1:
            raise UserInputError(f"--mask_replace_prob {self.mask_replace_prob} plus --random_replace_prob "
                                 f"{self.random_replace_prob}: must add up to at most 1.")
        if self.freeze_parts is not None and uses_lora(self.mode, self.finetune_method):
            raise UserInputError("--freeze_parts does not combine with LoRA, which already freezes every weight but "
                                 "the adapters and the classifier head.")
        check_spt_weights_source(self.init_parts, any(arm.pretrain for arm in MODES[self.mode].arms), "--init_parts",
                                 f"no arm of --mode {self.mode} starts from them; use --mode compare or finetune")
        if self.init_from is not None and self.mode == "compare":  # its pretraining phase would run unused
            raise UserInputError("--init_from with --mode compare: the spt arm fine-tunes the pretraining phase this "
                                 "run trains, so --init_from would go unused. Use --mode finetune --init_from CKPT "
                                 "(and --mode scratch for the baseline), or drop --init_from.")
        # parsed once, here (an unknown part name fails before any training); everything after reads the Parts
        self.init_parts = None if self.init_parts is None else Parts(self.init_parts)
        self.freeze_parts = None if self.freeze_parts is None else Parts(self.freeze_parts)


PRETRAIN_FLAGS = declared(ExperimentArguments, "phase", "pretrain")
"""The `ExperimentArguments` only the pretraining phase reads."""
FINETUNE_FLAGS = declared(ExperimentArguments, "phase", "finetune")
"""The `ExperimentArguments` only fine-tuning reads (every arm)."""
LORA_FLAGS = declared(ExperimentArguments, "lora")
"""The `ExperimentArguments` read only by LoRA arms."""


CUSTOM_DATA_FIELDS = declared(DataArguments, "task", "custom")
"""The `DataArguments` only `--task custom` reads."""
PRETRAIN_DATA_FIELDS = declared(DataArguments, "phase", "pretrain")
"""The `DataArguments` only the pretraining phase reads (cross-task SPT)."""
ARGUMENT_GROUPS = (DataArguments, ModelArguments, ExperimentArguments, SharedTrainingArguments)
"""`run_spt.py`'s argument groups, in `--help`'s order: the flags, and the names a settings file may use."""

__all__ = ["DECLARED_KEYS", "SettingsParser", "redacted", "declared", "ARGUMENT_GROUPS", "CUSTOM_DATA_FIELDS",
           "PRETRAIN_DATA_FIELDS", "LORA_FLAGS", "OUR_TRAINING_FIELDS", "TRANSFORMERS_RANGES", "FINETUNE_METHODS", "PHASES", "PER_PHASE_BUDGETS", "per_phase_flags", "layered", "unread_budgets", "PHASE_ARGUMENTS",
           "PRETRAIN_FLAGS", "FINETUNE_FLAGS", "FINETUNE_TRAINER_FLAGS", "BEST_MODEL_METRICS",
           "DataArguments", "ModelArguments", "ExperimentArguments", "SharedTrainingArguments", "json_mapping"]
