"""hf_spt: self-pretraining (SPT) of Transformer encoders on a task's own inputs, on the Hugging Face stack.

The package is built in layers that never import upward:
`models` (config, encoder, heads, tokenizers) -> `training` (arguments and trainers of both
phases, collators, losses, parts, cards) -> `tasks` (data) and `analysis` -> `runs` (phase definitions,
the run folder, resuming, Hub checks) and `reports` (tables, figures, paired statistics of finished
results) -> `experiments` (command-line arguments, recipes, a run's settings resolved once, the
two-phase pipeline; `experiments.suites`: the ablation grid, LRA suite and budget study).

The public API is importable from here. Importing the package registers `model_type="spt"` with
transformers' Auto classes, so `AutoModelForMaskedLM.from_pretrained(folder)` loads the
checkpoints hf_spt writes; it also registers `BackboneForSequenceClassification` (hf_spt's
pooling head on any transformers backbone).

`portable_numerics()`, called right after `import hf_spt` and before any torch operation, pins this process's CPU
numerics to one level (AVX2) so that its numbers reproduce on any Intel x86 CPU (on an AMD CPU, on CPUs of its
model; `portable_numerics("cross_vendor")` on both vendors: `hf_spt.numerics`).
"""

from .models import (
    BackboneClassifierConfig,
    BackboneForSequenceClassification,
    SptConfig,
    SptForMaskedLM,
    SptForSequenceClassification,
    SptModel,
    SptPreTrainedModel,
    build_byte_tokenizer,
    build_word_tokenizer,
)
from .numerics import portable_numerics
from .tasks import Task, TaskPreset, list_tasks, load_task
from .training import (
    DataCollatorForClassification,
    DataCollatorForSpt,
    FinetuneArguments,
    FinetuneTrainer,
    LoadReport,
    PretrainArguments,
    PretrainTrainer,
    freeze_parts,
    get_partial_state_dict,
    load_partial_weights,
    save_partial_state_dict,
)

__version__ = "0.1.0"

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
    "Task",
    "TaskPreset",
    "load_task",
    "list_tasks",
    "portable_numerics",
]
