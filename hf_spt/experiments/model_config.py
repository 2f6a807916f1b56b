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
from pathlib import Path
from typing import Any

from transformers import AutoConfig, PreTrainedConfig

from ..errors import UserInputError
from ..models.backbone_classifier import BackboneClassifierConfig
from ..models.configuration_spt import SptConfig
from ..tasks import Task
from ..training.checkpoints import check_model_source, resolve_model
from ..training.model_factory import DECODER_POOLING, is_decoder_only
from .arguments import ModelArguments

SIZE_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads")
# The MLP width has no common alias across architectures: BERT/Llama, GPT-2, DistilBERT, OPT names.
# what a checkpoint loaded whole imposes on the run's model
CHECKPOINT_FIELDS = (*SIZE_FIELDS, "intermediate_size", "vocab_size", "max_position_embeddings",
                     "position_embedding_type")
INTERMEDIATE_SIZE_FIELDS = ("intermediate_size", "n_inner", "hidden_dim", "ffn_dim")


def uses_spt_model(model_args: ModelArguments) -> bool:
    """True when no other architecture is asked for: the run builds hf_spt's own `SptConfig`."""
    return model_args.model_type in (None, "spt") and not model_args.config_name and not model_args.model_name_or_path


def starting_weights(model_args: ModelArguments) -> str | None:
    """The pretrained weights the run starts from (`--model_name_or_path`), or None for random init."""
    if model_args.model_name_or_path and not model_args.from_scratch:
        return model_args.model_name_or_path
    return None


def _task_sizes(task: Task, config_class: type[PreTrainedConfig], model_args: ModelArguments, preset: bool) -> dict[str, Any]:
    """Config keyword arguments that fit the architecture to the task (vocab, positions, pad, sizes)."""
    tokenizer = task.tokenizer
    sizes = {"vocab_size": len(tokenizer), "max_position_embeddings": task.preset.max_length,
             "pad_token_id": tokenizer.pad_token_id, "bos_token_id": None, "eos_token_id": None}
    wanted = {name: task.preset.model[name] for name in (*SIZE_FIELDS, "intermediate_size")
              if preset and name in task.preset.model}
    wanted.update({name: getattr(model_args, name) for name in (*SIZE_FIELDS, "intermediate_size")
                   if getattr(model_args, name) is not None})
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


def build_backbone_config(task: Task, model_args: ModelArguments) -> BackboneClassifierConfig:
    """The run's model config for a transformers architecture: the backbone plus the classifier head."""
    if model_args.model_name_or_path and (model_args.model_type or model_args.config_name):
        raise UserInputError("--model_name_or_path already names the architecture; drop --model_type/--config_name.")
    source = model_args.model_name_or_path or model_args.config_name
    if source:
        check_model_source(source)
        backbone_class = type(AutoConfig.from_pretrained(source))
        if starting_weights(model_args):
            backbone = AutoConfig.from_pretrained(source)
            _check_fits(backbone, task, source)
        else:  # random weights in the architecture of `source`, fitted to the task; only flags change sizes
            backbone = AutoConfig.from_pretrained(source, **_task_sizes(task, backbone_class, model_args, preset=False))
    else:
        backbone_class = type(AutoConfig.for_model(model_args.model_type))
        backbone = AutoConfig.for_model(model_args.model_type, **_task_sizes(task, backbone_class, model_args, preset=True))
    backbone._attn_implementation = model_args.attn_implementation
    pooling = model_args.pooling
    if pooling is None:
        pooling = DECODER_POOLING if is_decoder_only(backbone) else task.preset.model.get("pooling", "mean")
    id2label = task.id2label()
    return BackboneClassifierConfig(
        backbone=backbone, pooling=pooling, two_tower=task.is_pair, num_labels=task.preset.num_labels,
        id2label=id2label, label2id={name: i for i, name in id2label.items()},
    )


def fit_to_checkpoint(
    config: SptConfig | BackboneClassifierConfig, init_from: str | Path, model_args: ModelArguments, task: Task
) -> SptConfig | BackboneClassifierConfig:
    """The run's config when the spt arm loads `init_from` whole (`--mode finetune`): the checkpoint's architecture.

    The model that trains has the checkpoint's sizes and position type whatever the flags say, so a
    model flag that contradicts them is an error naming both values (else results.json would record
    the flag), and so is a vocabulary other than the task's (its ids would index other tokens, or past
    the embeddings). Dropout is no part of the architecture: the run's (the flags') is kept, and
    `classification_model` gives it to the loaded model.
    """
    source = AutoConfig.from_pretrained(resolve_model(init_from))
    clashes = [f"--{name} {given} (the checkpoint has {getattr(source, name)})"
               for name in (*SIZE_FIELDS, "intermediate_size", "position_embedding_type")
               if (given := getattr(model_args, name)) is not None and getattr(source, name, given) != given]
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


def build_config(task: Task, model_args: ModelArguments) -> SptConfig | BackboneClassifierConfig:
    """SptConfig from the task preset, with every explicitly given model argument on top.

    With --model_type/--config_name/--model_name_or_path: that architecture (see `backbones`).
    """
    if not uses_spt_model(model_args):
        return build_backbone_config(task, model_args)
    sizes = dict(task.preset.model)
    for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "pooling"):
        if getattr(model_args, name) is not None:
            sizes[name] = getattr(model_args, name)
    tokenizer = task.tokenizer
    config = SptConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=task.preset.max_length,
        position_embedding_type=model_args.position_embedding_type or SptConfig.position_embedding_type,
        hidden_dropout_prob=model_args.hidden_dropout_prob,
        attention_probs_dropout_prob=model_args.attention_probs_dropout_prob,
        pad_token_id=tokenizer.pad_token_id,
        mask_token_id=tokenizer.mask_token_id,
        cls_token_id=tokenizer.cls_token_id,
        num_labels=task.preset.num_labels,
        id2label=task.id2label(),
        label2id={name: i for i, name in task.id2label().items()},
        two_tower=task.is_pair,
        **sizes,
    )
    config._attn_implementation = model_args.attn_implementation
    return config


__all__ = ["uses_spt_model", "starting_weights", "build_backbone_config", "fit_to_checkpoint", "build_config"]
