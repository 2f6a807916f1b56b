"""hf_spt: self-pretraining (SPT) of Transformer encoders on a task's own inputs, on the Hugging Face stack.

Importing the package registers `model_type="spt"` with transformers' Auto classes, so
`AutoModelForMaskedLM.from_pretrained(folder)` loads the checkpoints hf_spt writes; it also registers
`BackboneForSequenceClassification` (hf_spt's pooling head on any transformers backbone).
"""

from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification

from .backbone_classifier import BackboneClassifierConfig, BackboneForSequenceClassification
from .configuration_spt import SptConfig
from .modeling_spt import SptForMaskedLM, SptForSequenceClassification, SptModel, SptPreTrainedModel

AutoConfig.register(SptConfig.model_type, SptConfig, exist_ok=True)
AutoModel.register(SptConfig, SptModel, exist_ok=True)
AutoModelForMaskedLM.register(SptConfig, SptForMaskedLM, exist_ok=True)
AutoModelForSequenceClassification.register(SptConfig, SptForSequenceClassification, exist_ok=True)
AutoConfig.register(BackboneClassifierConfig.model_type, BackboneClassifierConfig, exist_ok=True)
AutoModelForSequenceClassification.register(BackboneClassifierConfig, BackboneForSequenceClassification, exist_ok=True)

__version__ = "0.1.0"

__all__ = [
    "SptConfig",
    "SptPreTrainedModel",
    "SptModel",
    "SptForMaskedLM",
    "SptForSequenceClassification",
    "BackboneClassifierConfig",
    "BackboneForSequenceClassification",
]
