"""Layer 2, training: the arguments of both phases (their defaults, the device defaults included) and their
trainers, collators, losses, parts (partial loading and freezing), LoRA adapters, model cards. Depends on the
models layer only. Importing it registers SPT's default LoRA targets with peft where peft is installed (`lora`)."""

from .arguments import FinetuneArguments, PretrainArguments
from .collators import DataCollatorForClassification, DataCollatorForSpt
from .finetune_trainer import FinetuneTrainer
from .lora import register_peft_defaults  # noqa: F401  (its import registers SPT with peft's default targets)
from .parts import LoadReport, freeze_parts, get_partial_state_dict, load_partial_weights, save_partial_state_dict
from .pretrain_trainer import PretrainTrainer

__all__ = [
    "PretrainArguments",
    "PretrainTrainer",
    "FinetuneArguments",
    "FinetuneTrainer",
    "DataCollatorForSpt",
    "DataCollatorForClassification",
    "LoadReport",
    "load_partial_weights",
    "get_partial_state_dict",
    "save_partial_state_dict",
    "freeze_parts",
]
