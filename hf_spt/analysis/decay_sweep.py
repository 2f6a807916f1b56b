"""The Fair-LM weight-decay sweep of the analysis report: tiny MLMs trained per weight decay, then
their MLM loss by token frequency.

"The Fair Language Model Paradox" (arXiv 2410.11985): weight decay degrades rare tokens more than
frequent ones. Unlike the probes of `token_frequency`, which only measure given models, the sweep
trains models, so it lives with the report that asks for it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence

import torch
from datasets import Dataset
from transformers import PreTrainedTokenizerBase

from ..models.configuration_spt import SptConfig
from ..models.modeling_spt import SptForMaskedLM
from ..training.arguments import PretrainArguments
from ..training.pretrain_trainer import PretrainTrainer
from .token_frequency import frequency_table


def weight_decay_sweep(
    config: SptConfig,
    train_dataset: Dataset,
    eval_dataset: Dataset,
    tokenizer: PreTrainedTokenizerBase,
    weight_decays: Sequence[float],
    epochs: float = 1.0,
    learning_rate: float = 1e-3,
    batch_size: int = 32,
    num_buckets: int = 4,
    mlm_probability: float = 0.15,
    seed: int = 0,
) -> dict[str, list[dict[str, float | int]]]:
    """Train one tiny MLM per weight decay (same seed and data) and tabulate its per-bucket losses."""
    tables = {}
    for decay in weight_decays:
        torch.manual_seed(seed)
        model = SptForMaskedLM(config)
        with tempfile.TemporaryDirectory() as folder:
            args = PretrainArguments(
                output_dir=folder, num_train_epochs=epochs, learning_rate=learning_rate, weight_decay=decay,
                per_device_train_batch_size=batch_size, mlm_probability=mlm_probability, seed=seed,
                eval_strategy="no", save_strategy="no", load_best_model_at_end=False, logging_strategy="no",
                report_to="none", disable_tqdm=True,
            )
            PretrainTrainer(model, args, train_dataset, processing_class=tokenizer).train()
        tables[f"weight_decay={decay:g}"] = frequency_table(
            model, train_dataset["input_ids"], eval_dataset["input_ids"], tokenizer, num_buckets, mlm_probability,
            seed=seed,
        )
    return tables


__all__ = ["weight_decay_sweep"]
