"""Model factory for both phases: the SPT encoder, or any transformers architecture.

The run's model config is an `SptConfig` or a `BackboneClassifierConfig` (a transformers backbone
plus the classification head: pooling, labels, two-tower); the pretraining phase reads its
`backbone` part. Models start from random weights or from a checkpoint (`init_from`).

SPT objectives: `masked` (MLM; any architecture with a masked-LM head: SPT, BERT, RoBERTa,
DistilBERT, ...) and `causal` (next-token prediction on the task's inputs, Amos et al.'s other
objective; any architecture with a causal-LM head: GPT-2, Llama, ...). Decoder backbones (no
masked-LM head) default to `last_mean` pooling (Balestriero & Huang), as no CLS token exists.
"""

from __future__ import annotations

from pathlib import Path

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

from ..errors import UserInputError
from ..models.backbone_classifier import BackboneClassifierConfig, BackboneForSequenceClassification
from .checkpoints import resolve_model
from ..models.configuration_spt import SptConfig
from .hub_kernels import WITHOUT_HUB_KERNELS, set_hub_kernels
from ..models.modeling_spt import SptForMaskedLM, SptForSequenceClassification

PRETRAIN_OBJECTIVES = ("masked", "causal")
# training settings of an SPT model, not its architecture: a run's own when it loads a checkpoint
DROPOUT_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout")
DECODER_POOLING = "last_mean"


def is_decoder_only(config: PreTrainedConfig) -> bool:
    """True for architectures without a masked-LM head (GPT-2, Llama...): they read left to right."""
    return type(config) not in MODEL_FOR_MASKED_LM_MAPPING


def pretraining_model(
    config: SptConfig | BackboneClassifierConfig, objective: str, init_from: str | Path | None = None,
    use_hub_kernels: bool = False,
) -> PreTrainedModel:
    """The SPT-phase model: masked-LM or causal-LM head on the run's architecture, random or from `init_from`; with
    transformers' Hub kernels only when `use_hub_kernels` (`training.hub_kernels`)."""
    return set_hub_kernels(_pretraining_model(config, objective, init_from), use_hub_kernels)


def _pretraining_model(
    config: SptConfig | BackboneClassifierConfig, objective: str, init_from: str | Path | None
) -> PreTrainedModel:
    if objective not in PRETRAIN_OBJECTIVES:
        raise UserInputError(f"Unknown --pretrain_objective {objective!r}; choose one of {', '.join(PRETRAIN_OBJECTIVES)}.")
    if isinstance(config, SptConfig):
        if objective == "causal":
            raise UserInputError(
                "--pretrain_objective causal needs a decoder architecture (e.g. --model_type gpt2 --from_scratch): the "
                "SPT encoder attends both ways, so next-token prediction would see the answer."
            )
        if init_from is None:
            return SptForMaskedLM(config)
        return SptForMaskedLM.from_pretrained(resolve_model(init_from), **WITHOUT_HUB_KERNELS)
    backbone = config.backbone
    auto, mapping = (AutoModelForCausalLM, MODEL_FOR_CAUSAL_LM_MAPPING) if objective == "causal" else (
        AutoModelForMaskedLM, MODEL_FOR_MASKED_LM_MAPPING)
    if type(backbone) not in mapping:
        other = "masked" if objective == "causal" else "causal"
        raise UserInputError(f"{backbone.model_type} has no {objective}-LM head in transformers: use --pretrain_objective {other}.")
    if init_from is None:
        return auto.from_config(backbone, attn_implementation=backbone._attn_implementation)
    return auto.from_pretrained(resolve_model(init_from), attn_implementation=backbone._attn_implementation,
                                **WITHOUT_HUB_KERNELS)


def classification_model(
    config: SptConfig | BackboneClassifierConfig, init_from: str | Path | None = None, use_hub_kernels: bool = False
) -> PreTrainedModel:
    """The fine-tuning model: the run's head on a random backbone, or on `init_from`'s (SPT or pretrained) weights;
    an SPT checkpoint loaded into an SPT run trains with the run's dropout (`DROPOUT_FIELDS`); with transformers'
    Hub kernels only when `use_hub_kernels` (`training.hub_kernels`)."""
    return set_hub_kernels(_classification_model(config, init_from), use_hub_kernels)


def _classification_model(config: SptConfig | BackboneClassifierConfig, init_from: str | Path | None) -> PreTrainedModel:
    if init_from is None:
        if isinstance(config, SptConfig):
            return SptForSequenceClassification(config)
        return BackboneForSequenceClassification(config)
    source = resolve_model(init_from)
    source_config = AutoConfig.from_pretrained(source)
    heads = dict(num_labels=config.num_labels, id2label=config.id2label, label2id=config.label2id,
                 pooling=config.pooling, two_tower=config.two_tower)
    if isinstance(source_config, SptConfig):
        if isinstance(config, SptConfig):  # the run's dropout, not the checkpoint's: set before the modules are built
            heads.update({name: getattr(config, name) for name in DROPOUT_FIELDS})
        attention = config._attn_implementation if isinstance(config, SptConfig) else config.backbone._attn_implementation
        return SptForSequenceClassification.from_pretrained(source, attn_implementation=attention, **heads,
                                                            **WITHOUT_HUB_KERNELS)
    attention = config.backbone._attn_implementation if isinstance(config, BackboneClassifierConfig) else "sdpa"
    model = BackboneForSequenceClassification(BackboneClassifierConfig(backbone=source_config, **heads))
    model.load_backbone(AutoModel.from_pretrained(source, attn_implementation=attention, **WITHOUT_HUB_KERNELS))
    return model


def pretraining_collator(tokenizer: PreTrainedTokenizerBase, objective: str) -> DataCollatorForLanguageModeling | None:
    """Causal SPT's collator (labels = inputs, pads ignored; the model shifts them); None: PretrainTrainer's MLM default."""
    return DataCollatorForLanguageModeling(tokenizer, mlm=False) if objective == "causal" else None


__all__ = ["PRETRAIN_OBJECTIVES", "DROPOUT_FIELDS", "DECODER_POOLING", "is_decoder_only", "pretraining_model", "classification_model",
           "pretraining_collator"]
