"""Layer 1, models: configuration, the SPT encoder and its heads, positions, tokenizers.

Depends on transformers only. Importing it registers `model_type="spt"` (and hf_spt's
any-backbone classifier) with transformers' Auto classes.
"""

from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification

from .backbone_classifier import BackboneClassifierConfig, BackboneForSequenceClassification
from .configuration_spt import SptConfig
from .modeling_spt import SptForMaskedLM, SptForSequenceClassification, SptModel, SptPreTrainedModel
from .tokenization_spt import build_byte_tokenizer, build_word_tokenizer

AutoConfig.register(SptConfig.model_type, SptConfig, exist_ok=True)
AutoModel.register(SptConfig, SptModel, exist_ok=True)
AutoModelForMaskedLM.register(SptConfig, SptForMaskedLM, exist_ok=True)
AutoModelForSequenceClassification.register(SptConfig, SptForSequenceClassification, exist_ok=True)
AutoConfig.register(BackboneClassifierConfig.model_type, BackboneClassifierConfig, exist_ok=True)
AutoModelForSequenceClassification.register(BackboneClassifierConfig, BackboneForSequenceClassification, exist_ok=True)

__all__ = [
    "SptConfig",
    "SptPreTrainedModel",
    "SptModel",
    "SptForMaskedLM",
    "SptForSequenceClassification",
    "BackboneClassifierConfig",
    "BackboneForSequenceClassification",
    "build_byte_tokenizer",
    "build_word_tokenizer",
]
