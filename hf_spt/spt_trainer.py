"""Trainer of the self-pretraining phase: MLM on the task's own inputs, labels dropped."""

from __future__ import annotations

from datasets import Dataset, concatenate_datasets
from transformers import PreTrainedModel, PreTrainedTokenizerBase, Trainer

from .collator import DataCollatorForSpt
from .spt_config import SptTrainingArguments

def inputs_only(dataset: Dataset) -> Dataset:
    """The inputs SPT reads: `input_ids` only, labels never. For pair tasks both documents are rows."""
    inputs = dataset.select_columns(["input_ids"])
    if "pair_input_ids" in dataset.column_names:
        pairs = dataset.select_columns(["pair_input_ids"]).rename_column("pair_input_ids", "input_ids")
        inputs = concatenate_datasets([inputs, pairs])
    return inputs


class SptTrainer(Trainer):
    """`Trainer` for masked-token self-pretraining.

    Drops label columns from the datasets and builds a `DataCollatorForSpt` from the arguments'
    masking options unless a collator is given.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        args: SptTrainingArguments,
        train_dataset: Dataset,
        eval_dataset: Dataset | None = None,
        processing_class: PreTrainedTokenizerBase | None = None,
        data_collator=None,
        **kwargs,
    ):
        if processing_class is None and data_collator is None:
            raise ValueError("SptTrainer needs the tokenizer (processing_class) to know [MASK] and the special tokens.")
        with args.main_process_first(desc="dropping labels for SPT"):
            train_dataset = inputs_only(train_dataset)
            eval_dataset = inputs_only(eval_dataset) if eval_dataset is not None else None
        if data_collator is None:
            data_collator = DataCollatorForSpt(
                processing_class,
                mlm_probability=args.mlm_probability,
                mask_replace_prob=args.mask_replace_prob,
                random_replace_prob=args.random_replace_prob,
            )
        super().__init__(
            model=model,
            args=args,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=processing_class,
            data_collator=data_collator,
            **kwargs,
        )


__all__ = ["SptTrainer", "inputs_only"]
