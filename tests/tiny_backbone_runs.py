"""Tiny pipeline settings shared by the backbone, card and hub tests: about a second per run."""

from __future__ import annotations

import torch

from hf_spt.experiments.arguments import DataArguments, ExperimentArguments, ModelArguments, SharedTrainingArguments
from hf_spt.experiments.run_spec import RunSpec, resolve_run

TINY_TASK = {"num_train": 48, "num_validation": 16, "num_test": 16, "length": 16, "num_symbols": 16}
QUIET = {"report_to": "none", "disable_tqdm": True, "use_cpu": True}

torch.set_num_threads(1)


def tiny_arguments(
    output_dir, **model
) -> tuple[DataArguments, ModelArguments, ExperimentArguments, SharedTrainingArguments]:
    """Markov task of 48 sequences of 16 tokens, a 16-wide 1-layer model, one epoch per phase."""
    sizes = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    experiment = {k: model.pop(k) for k in list(model) if k in ExperimentArguments.__dataclass_fields__}
    training = {k: model.pop(k) for k in list(model) if k in SharedTrainingArguments.__dataclass_fields__}
    return (
        DataArguments(task_options=dict(TINY_TASK)),
        ModelArguments(**{**sizes, **model}),
        ExperimentArguments(pretrain_epochs=1, finetune_epochs=1, **experiment),
        SharedTrainingArguments(output_dir=str(output_dir), **QUIET, **training),
    )


def tiny_run(output_dir, **model) -> RunSpec:
    """`tiny_arguments`' groups resolved into the run they ask for (`run_spec.resolve_run`)."""
    return resolve_run(*tiny_arguments(output_dir, **model))
