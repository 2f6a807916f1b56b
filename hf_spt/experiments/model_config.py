"""The run's model config from the task and the model flags: hf_spt's `SptConfig`, or any architecture.

`build_config` sizes an `SptConfig` from the task preset with every explicitly given model flag on
top. `--model_type bert` / `--config_name FOLDER_OR_ID` (random weights: `--from_scratch`) and
`--model_name_or_path FOLDER_OR_ID` (pretrained weights) select an architecture from
transformers' Auto classes instead. A randomly initialised architecture is sized from the task:
the vocabulary of the task's tokenizer, `max_length` positions, its pad id, and the preset's (or
the flags') widths and depths. The run's model config is then a `BackboneClassifierConfig` that
holds the backbone's config and the classification head (pooling, labels, two-tower).
"""

from __future__ import annotations

import copy
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from datasets import DatasetDict
from huggingface_hub.errors import StrictDataclassError
from transformers import AutoConfig, PreTrainedConfig

from ..errors import UserInputError, one_line
from ..models.backbone_classifier import BackboneClassifierConfig
from ..models.configuration_spt import SptConfig
from ..tasks import Task, task_preset
from ..training.checkpoints import check_model_source, resolve_model
from ..training.model_factory import DECODER_POOLING, classification_model, is_decoder_only, pretraining_model
from .run_spec import ModelSpec

SIZE_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads")
# The MLP width has no common alias across architectures: BERT/Llama, GPT-2, DistilBERT, OPT names.
# what a checkpoint loaded whole imposes on the run's model
CHECKPOINT_FIELDS = (*SIZE_FIELDS, "intermediate_size", "vocab_size", "max_position_embeddings",
                     "position_embedding_type")
INTERMEDIATE_SIZE_FIELDS = ("intermediate_size", "n_inner", "hidden_dim", "ffn_dim")


def _task_sizes(task: Task, config_class: type[PreTrainedConfig], model: ModelSpec, preset: bool) -> dict[str, Any]:
    """Config keyword arguments that fit the architecture to the task (vocab, positions, pad, sizes)."""
    tokenizer = task.tokenizer
    sizes = {"vocab_size": len(tokenizer), "max_position_embeddings": task.preset.max_length,
             "pad_token_id": tokenizer.pad_token_id, "bos_token_id": None, "eos_token_id": None}
    wanted = {name: task.preset.model[name] for name in (*SIZE_FIELDS, "intermediate_size")
              if preset and name in task.preset.model}
    wanted.update(model.sizes)
    fields = config_class.__dataclass_fields__
    if "intermediate_size" in wanted:
        width = wanted.pop("intermediate_size")
        name = next((n for n in INTERMEDIATE_SIZE_FIELDS if n in fields), None)
        if name is None:
            raise UserInputError(f"{config_class.model_type} has no known MLP-width field; drop --intermediate_size.")
        sizes[name] = width
    # Llama-family configs derive these from the head count and width when left None
    for derived in ("num_key_value_heads", "head_dim"):
        if derived in fields and {"hidden_size", "num_attention_heads"} & set(wanted):
            sizes[derived] = None
    return {**sizes, **wanted}


def _check_fits(config: PreTrainedConfig, task: Task, source: str) -> None:
    """Pretrained weights must cover the task's token ids and lengths; say which flag fixes it."""
    if config.vocab_size < len(task.tokenizer):
        raise UserInputError(
            f"{source} has {config.vocab_size} token embeddings but task {task.name!r} uses {len(task.tokenizer)} "
            "token ids: pretrained weights need a vocabulary at least that large, or pass --from_scratch."
        )
    positions = getattr(config, "max_position_embeddings", None)
    if positions is not None and positions < task.preset.max_length:
        raise UserInputError(
            f"{source} accepts {positions} positions but task {task.name!r} has sequences of "
            f"{task.preset.max_length}: pass --max_length {positions} --truncation, or --from_scratch."
        )


def build_backbone_config(task: Task, model: ModelSpec) -> BackboneClassifierConfig:
    """The run's model config for a transformers architecture: the backbone plus the classifier head."""
    if model.model_name_or_path and (model.model_type or model.config_name):
        raise UserInputError("--model_name_or_path already names the architecture; drop --model_type/--config_name.")
    source = model.model_name_or_path or model.config_name
    if source:
        check_model_source(source)
        backbone_class = type(AutoConfig.from_pretrained(source))
        if model.weights:
            backbone = AutoConfig.from_pretrained(source)
            _check_fits(backbone, task, source)
        else:  # random weights in the architecture of `source`, fitted to the task; only flags change sizes
            backbone = AutoConfig.from_pretrained(source, **_task_sizes(task, backbone_class, model, preset=False))
    else:
        backbone_class = type(AutoConfig.for_model(model.model_type))
        backbone = AutoConfig.for_model(model.model_type, **_task_sizes(task, backbone_class, model, preset=True))
    backbone._attn_implementation = model.attn_implementation
    pooling = model.pooling
    if pooling is None:
        pooling = DECODER_POOLING if is_decoder_only(backbone) else task.preset.model.get("pooling", "mean")
    id2label = task.id2label()
    return BackboneClassifierConfig(
        backbone=backbone, pooling=pooling, two_tower=task.is_pair, num_labels=task.preset.num_labels,
        id2label=id2label, label2id={name: i for i, name in id2label.items()},
    )


def fit_to_checkpoint(
    config: SptConfig | BackboneClassifierConfig, init_from: str | Path, model: ModelSpec, task: Task
) -> SptConfig | BackboneClassifierConfig:
    """The run's config when the spt arm loads `init_from` whole (`--mode finetune`): the checkpoint's architecture.

    The model that trains has the checkpoint's sizes and position type whatever the flags say, so a
    model flag that contradicts them is an error naming both values (else results.json would record
    the flag), and so is a vocabulary other than the task's (its ids would index other tokens, or past
    the embeddings). Dropout is no part of the architecture: the run's (the flags') is kept, and
    `classification_model` gives it to the loaded model.
    """
    source = AutoConfig.from_pretrained(resolve_model(init_from))
    flags = {**model.sizes, "position_embedding_type": model.position_embedding_type}
    clashes = [f"--{name} {given} (the checkpoint has {getattr(source, name)})"
               for name in (*SIZE_FIELDS, "intermediate_size", "position_embedding_type")
               if (given := flags.get(name)) is not None and getattr(source, name, given) != given]
    if clashes:
        raise UserInputError(f"{init_from} is loaded whole, and its architecture differs from the flags: "
                             f"{'; '.join(clashes)}. Drop these flags (the checkpoint's values are used), or use "
                             "--init_parts to take only some parts into a model built from the flags.")
    if isinstance(source, SptConfig) and source.vocab_size != len(task.tokenizer):
        raise UserInputError(f"{init_from} has a vocabulary of {source.vocab_size} tokens but task {task.name!r} uses "
                             f"{len(task.tokenizer)}: fine-tune it on a task with its vocabulary, or pretrain on this task.")
    _check_fits(source, task, str(init_from))
    fitted = copy.deepcopy(config)
    target = fitted.backbone if isinstance(fitted, BackboneClassifierConfig) else fitted
    for name in CHECKPOINT_FIELDS:
        if hasattr(source, name) and hasattr(target, name):
            setattr(target, name, getattr(source, name))
    return fitted


def build_config(task: Task, model: ModelSpec) -> SptConfig | BackboneClassifierConfig:
    """SptConfig from the task preset, with every explicitly given model setting on top.

    With --model_type/--config_name/--model_name_or_path: that architecture (`build_backbone_config`).
    """
    if not model.is_spt:
        return build_backbone_config(task, model)
    sizes = {**task.preset.model, **model.sizes}
    if model.pooling is not None:
        sizes["pooling"] = model.pooling
    tokenizer = task.tokenizer
    config = SptConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=task.preset.max_length,
        position_embedding_type=model.position_embedding_type or SptConfig.position_embedding_type,
        hidden_dropout_prob=model.hidden_dropout_prob,
        attention_probs_dropout_prob=model.attention_probs_dropout_prob,
        pad_token_id=tokenizer.pad_token_id,
        mask_token_id=tokenizer.mask_token_id,
        cls_token_id=tokenizer.cls_token_id,
        num_labels=task.preset.num_labels,
        id2label=task.id2label(),
        label2id={name: i for i, name in task.id2label().items()},
        two_tower=task.is_pair,
        **sizes,
    )
    config._attn_implementation = model.attn_implementation
    return config


class _StandInTokenizer:
    """What `build_config` reads of a tokenizer, for checking the model flags before the task's data exist."""

    pad_token_id, mask_token_id, cls_token_id = 0, 1, 2

    def __len__(self) -> int:
        return 8


def _stand_in_task(task_name: str, max_length: int | None) -> Task:
    """Task `task_name`'s preset with a stand-in vocabulary and no data: a length of 1 unless `max_length` is given
    (the data set the real one: a builder option such as markov's `length` changes it), and two labels where the
    data say how many. So only what the flags alone decide can fail here."""
    preset = task_preset(task_name)
    preset = replace(preset, max_length=max_length or 1, num_labels=preset.num_labels or 2)
    return Task(task_name, DatasetDict(), _StandInTokenizer(), preset)


def machine_memory_bytes() -> int:
    """The memory a model's weights must fit: the GPU's when there is one, else the machine's."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(0).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_model_settings(model: ModelSpec, task_name: str, max_length: int | None,
                         pretrain_objective: str | None = None) -> None:
    """Build the run's model config, and its models on the meta device (no memory), from the flags and task
    `task_name`'s preset with a stand-in vocabulary, before any data exist: a value the config or transformers
    rejects (`--hidden_size 30 --num_attention_heads 4`, `--pooling foo`, `--attn_implementation foo`,
    `--model_type nosuch`) or a model whose float32 weights alone exceed the machine's memory is a one-line user
    error naming the model flags given. `pretrain_objective`: the pretraining model is built too (its head)."""
    shown = model.given or "the default model"
    try:
        config = build_config(_stand_in_task(task_name, max_length), model)
        with torch.device("meta"):
            models = [classification_model(config)]
            if pretrain_objective is not None:
                models.append(pretraining_model(config, pretrain_objective))
    except UserInputError:
        raise
    except (StrictDataclassError, ValueError, TypeError, KeyError, ImportError, OSError) as error:
        raise UserInputError(f"{shown}: the model cannot be built: {one_line(error)}") from None
    parameters = max(sum(p.numel() for p in model.parameters()) for model in models)
    memory = machine_memory_bytes()
    if 4 * parameters > memory:
        raise UserInputError(f"{shown}: the model has {parameters:.2e} parameters, {4 * parameters / 2**30:.0f} GiB "
                             f"of float32 weights alone, more than this machine's {memory / 2**30:.0f} GiB of memory.")


__all__ = ["build_backbone_config", "fit_to_checkpoint", "build_config",
           "machine_memory_bytes", "check_model_settings"]
