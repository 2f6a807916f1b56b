"""Layer 1, models: configuration, the SPT encoder and its heads, positions, tokenizers.

Depends on transformers only. Importing it registers `model_type="spt"` (and hf_spt's
any-backbone classifier) with transformers' Auto classes, and registers the classes for the Auto
API's remote code (`register_for_auto_class`): `save_pretrained`/`push_to_hub` then write
`auto_map` and copy the model's code into the folder, so that
`AutoModelFor...from_pretrained(folder, trust_remote_code=True)` loads it where hf_spt is not installed.
An SPT folder maps every SPT head whichever saved it (`SptPreTrainedModel.save_pretrained`).
"""

from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification

from .backbone_classifier import BackboneClassifierConfig, BackboneForSequenceClassification
from .configuration_spt import SptConfig
from .modeling_spt import AUTO_CLASSES, SptForMaskedLM, SptForSequenceClassification, SptModel, SptPreTrainedModel
from .tokenization_spt import build_byte_tokenizer, build_word_tokenizer

AutoConfig.register(SptConfig.model_type, SptConfig, exist_ok=True)
AutoModel.register(SptConfig, SptModel, exist_ok=True)
AutoModelForMaskedLM.register(SptConfig, SptForMaskedLM, exist_ok=True)
AutoModelForSequenceClassification.register(SptConfig, SptForSequenceClassification, exist_ok=True)
AutoConfig.register(BackboneClassifierConfig.model_type, BackboneClassifierConfig, exist_ok=True)
AutoModelForSequenceClassification.register(BackboneClassifierConfig, BackboneForSequenceClassification, exist_ok=True)

SptConfig.register_for_auto_class()
for auto_name, model_class in AUTO_CLASSES.items():
    model_class.register_for_auto_class(auto_name)
BackboneClassifierConfig.register_for_auto_class()
BackboneForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")

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
