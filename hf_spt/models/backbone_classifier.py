"""Sequence classification on any transformers backbone, with hf_spt's pooling.

transformers' own `XForSequenceClassification` heads read the first token (BERT's [CLS]) or the
last non-pad token (GPT-2, Llama); SPT work pools over all real tokens and has no CLS token, and
Balestriero & Huang's head reads the last token concatenated with the mean (`last_mean`). This
wrapper puts the same pooling and classifier as `SptForSequenceClassification` on top of any
`AutoModel` (BERT, RoBERTa, DistilBERT, GPT-2, Llama, ...), so every backbone is compared with
the same head. It saves and loads like any model once `hf_spt` is imported
(`AutoModelForSequenceClassification.from_pretrained(folder)`).
"""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from torch import nn
from transformers import AutoConfig, AutoModel, PreTrainedConfig, PreTrainedModel
from transformers.configuration_utils import SubConfigSpec

from .heads import PooledClassifierMixin, classifier_features
from .configuration_spt import check_pooling


@strict
class BackboneClassifierConfig(PreTrainedConfig):
    r"""
    Configuration of [`BackboneForSequenceClassification`].

    Args:
        backbone: the config of the wrapped `AutoModel` (any architecture), or its dict.
        pooling: `mean`, `max`, `last`, `cls` or `last_mean` over the real tokens.
        two_tower: classify pairs with one shared backbone; the classifier reads [u, v, u*v, u-v].
        classifier_dropout: dropout before the linear classifier.
    """

    model_type = "spt_backbone_classifier"
    sub_configs_defaults = {"backbone": SubConfigSpec(config_class=AutoConfig, model_type="bert")}

    backbone: PreTrainedConfig | dict | None = None
    pooling: str = "mean"
    two_tower: bool = False
    classifier_dropout: float = 0.0

    def validate_architecture(self):
        """Reject an unknown pooling, naming the valid ones."""
        check_pooling(self.pooling)

    @property
    def hidden_size(self) -> int:
        """Width of the backbone's last hidden states (every transformers config maps `hidden_size`)."""
        return self.backbone.hidden_size


class BackboneForSequenceClassification(PooledClassifierMixin, PreTrainedModel):
    """`AutoModel` backbone, pooling over real tokens (`config.pooling`), dropout and a linear classifier."""

    config_class = BackboneClassifierConfig
    config: BackboneClassifierConfig
    base_model_prefix = "backbone"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_attention_backend = True

    def __init__(self, config: BackboneClassifierConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.backbone = AutoModel.from_config(config.backbone)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(classifier_features(config.hidden_size, config.pooling, config.two_tower), config.num_labels)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """The classifier gets transformers' normal init; the backbone keeps its own architecture's init."""
        if module is self.classifier:
            std = getattr(self.config.backbone, "initializer_range", 0.02)
            nn.init.normal_(module.weight, std=std)
            nn.init.zeros_(module.bias)

    def load_backbone(self, backbone: PreTrainedModel) -> None:
        """Copy a (pre)trained backbone's weights in, failing on any missing, unexpected or mis-shaped key."""
        result = self.backbone.load_state_dict(backbone.state_dict(), strict=False)
        if result.missing_keys or result.unexpected_keys:
            raise ValueError(
                f"The backbone weights do not match this classifier's {type(self.backbone).__name__}: "
                f"missing {result.missing_keys}, unexpected {result.unexpected_keys}."
            )


__all__ = ["BackboneClassifierConfig", "BackboneForSequenceClassification"]
