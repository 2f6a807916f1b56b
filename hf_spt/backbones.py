"""Model factory for both phases: the SPT encoder, or any transformers architecture.

`--model_type bert` / `--config_name FOLDER_OR_ID` (random weights: `--from_scratch`) and
`--model_name_or_path FOLDER_OR_ID` (pretrained weights) select an architecture from
transformers' Auto classes. A randomly initialised architecture is sized from the task: the
vocabulary of the task's tokenizer, `max_length` positions, its pad id, and the preset's (or the
flags') widths and depths. The run's model config is then a `BackboneClassifierConfig` that holds
the backbone's config and the classification head (pooling, labels, two-tower); the SPT phase
reads its `backbone` part.

SPT objectives: `masked` (MLM; any architecture with a masked-LM head: SPT, BERT, RoBERTa,
DistilBERT, ...) and `causal` (next-token prediction on the task's inputs, Amos et al.'s other
objective; any architecture with a causal-LM head: GPT-2, Llama, ...). Decoder backbones (no
masked-LM head) default to `last_mean` pooling (Balestriero & Huang), as no CLS token exists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    DataCollatorForLanguageModeling,
    PreTrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING, MODEL_FOR_MASKED_LM_MAPPING

from .arguments import ModelArguments
from .backbone_classifier import BackboneClassifierConfig, BackboneForSequenceClassification
from .checkpoints import resolve_model_folder
from .configuration_spt import SptConfig
from .hub import check_model_source
from .modeling_spt import SptForMaskedLM, SptForSequenceClassification
from .tasks import Task

SPT_OBJECTIVES = ("masked", "causal")
DECODER_POOLING = "last_mean"
SIZE_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads")
# The MLP width has no common alias across architectures: BERT/Llama, GPT-2, DistilBERT, OPT names.
INTERMEDIATE_SIZE_FIELDS = ("intermediate_size", "n_inner", "hidden_dim", "ffn_dim")


def uses_spt_model(model_args: ModelArguments) -> bool:
    """True when no other architecture is asked for: the run builds hf_spt's own `SptConfig`."""
    return model_args.model_type in (None, "spt") and not model_args.config_name and not model_args.model_name_or_path


def starting_weights(model_args: ModelArguments) -> str | None:
    """The pretrained weights the run starts from (`--model_name_or_path`), or None for random init."""
    if model_args.model_name_or_path and not model_args.from_scratch:
        return model_args.model_name_or_path
    return None


def is_decoder_only(config: PreTrainedConfig) -> bool:
    """True for architectures without a masked-LM head (GPT-2, Llama...): they read left to right."""
    return type(config) not in MODEL_FOR_MASKED_LM_MAPPING


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
            raise ValueError(f"{config_class.model_type} has no known MLP-width field; drop --intermediate_size.")
        sizes[name] = width
    # Llama-family configs derive these from the head count and width when left None
    for derived in ("num_key_value_heads", "head_dim"):
        if derived in fields and {"hidden_size", "num_attention_heads"} & set(wanted):
            sizes[derived] = None
    return {**sizes, **wanted}


def _check_fits(config: PreTrainedConfig, task: Task, source: str) -> None:
    """Pretrained weights must cover the task's token ids and lengths; say which flag fixes it."""
    if config.vocab_size < len(task.tokenizer):
        raise ValueError(
            f"{source} has {config.vocab_size} token embeddings but task {task.name!r} uses {len(task.tokenizer)} "
            "token ids: pretrained weights need a vocabulary at least that large, or pass --from_scratch."
        )
    positions = getattr(config, "max_position_embeddings", None)
    if positions is not None and positions < task.preset.max_length:
        raise ValueError(
            f"{source} accepts {positions} positions but task {task.name!r} has sequences of "
            f"{task.preset.max_length}: pass --max_length {positions} --truncation, or --from_scratch."
        )


def build_backbone_config(task: Task, model_args: ModelArguments) -> BackboneClassifierConfig:
    """The run's model config for a transformers architecture: the backbone plus the classifier head."""
    if model_args.model_name_or_path and (model_args.model_type or model_args.config_name):
        raise ValueError("--model_name_or_path already names the architecture; drop --model_type/--config_name.")
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
    pooling = model_args.pooling or (DECODER_POOLING if is_decoder_only(backbone) else task.preset.model.get("pooling", "mean"))
    id2label = task.id2label()
    return BackboneClassifierConfig(
        backbone=backbone, pooling=pooling, two_tower=task.is_pair, num_labels=task.preset.num_labels,
        id2label=id2label, label2id={name: i for i, name in id2label.items()},
    )


def _source(init_from: str | Path) -> str:
    """A local checkpoint folder (or Trainer output folder), else a Hub id checked for reachability."""
    if Path(init_from).exists():
        return str(resolve_model_folder(init_from))
    check_model_source(str(init_from))
    return str(init_from)


def pretraining_model(
    config: SptConfig | BackboneClassifierConfig, objective: str, init_from: str | Path | None = None
) -> PreTrainedModel:
    """The SPT-phase model: masked-LM or causal-LM head on the run's architecture, random or from `init_from`."""
    if objective not in SPT_OBJECTIVES:
        raise ValueError(f"Unknown --spt_objective {objective!r}; choose one of {', '.join(SPT_OBJECTIVES)}.")
    if isinstance(config, SptConfig):
        if objective == "causal":
            raise ValueError(
                "--spt_objective causal needs a decoder architecture (e.g. --model_type gpt2 --from_scratch): the "
                "SPT encoder attends both ways, so next-token prediction would see the answer."
            )
        return SptForMaskedLM(config) if init_from is None else SptForMaskedLM.from_pretrained(_source(init_from))
    backbone = config.backbone
    auto, mapping = (AutoModelForCausalLM, MODEL_FOR_CAUSAL_LM_MAPPING) if objective == "causal" else (
        AutoModelForMaskedLM, MODEL_FOR_MASKED_LM_MAPPING)
    if type(backbone) not in mapping:
        other = "masked" if objective == "causal" else "causal"
        raise ValueError(f"{backbone.model_type} has no {objective}-LM head in transformers: use --spt_objective {other}.")
    if init_from is None:
        return auto.from_config(backbone, attn_implementation=backbone._attn_implementation)
    return auto.from_pretrained(_source(init_from), attn_implementation=backbone._attn_implementation)


def classification_model(
    config: SptConfig | BackboneClassifierConfig, init_from: str | Path | None = None
) -> PreTrainedModel:
    """The fine-tuning model: the run's head on a random backbone, or on `init_from`'s (SPT or pretrained) weights."""
    if init_from is None:
        if isinstance(config, SptConfig):
            return SptForSequenceClassification(config)
        return BackboneForSequenceClassification(config)
    source = _source(init_from)
    source_config = AutoConfig.from_pretrained(source)
    heads = dict(num_labels=config.num_labels, id2label=config.id2label, label2id=config.label2id,
                 pooling=config.pooling, two_tower=config.two_tower)
    if isinstance(source_config, SptConfig):
        attention = config._attn_implementation if isinstance(config, SptConfig) else config.backbone._attn_implementation
        return SptForSequenceClassification.from_pretrained(source, attn_implementation=attention, **heads)
    attention = config.backbone._attn_implementation if isinstance(config, BackboneClassifierConfig) else "sdpa"
    model = BackboneForSequenceClassification(BackboneClassifierConfig(backbone=source_config, **heads))
    model.load_backbone(AutoModel.from_pretrained(source, attn_implementation=attention))
    return model


def pretraining_collator(tokenizer: PreTrainedTokenizerBase, objective: str) -> DataCollatorForLanguageModeling | None:
    """Causal SPT's collator (labels = inputs, pads ignored; the model shifts them); None: SptTrainer's MLM default."""
    return DataCollatorForLanguageModeling(tokenizer, mlm=False) if objective == "causal" else None


__all__ = ["SPT_OBJECTIVES", "uses_spt_model", "starting_weights", "is_decoder_only", "build_backbone_config",
           "pretraining_model", "classification_model", "pretraining_collator"]
