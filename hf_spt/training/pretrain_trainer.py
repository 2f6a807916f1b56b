"""Trainer of the self-pretraining phase: MLM on the task's own inputs, labels dropped."""

from __future__ import annotations

import torch
from datasets import Dataset, concatenate_datasets
from transformers import PreTrainedModel, PreTrainedTokenizerBase, Trainer

from ..errors import UserInputError
from .collators import DataCollatorForSpt, fixed_masking
from .losses import TOKEN_WEIGHTING, inverse_frequency_token_weights, weighted_token_loss
from .model_card import ModelCardMixin
from .arguments import PretrainArguments

def inputs_only(dataset: Dataset) -> Dataset:
    """The inputs SPT reads: `input_ids` only, labels never. For pair tasks both documents are rows."""
    inputs = dataset.select_columns(["input_ids"])
    if "pair_input_ids" in dataset.column_names:
        pairs = dataset.select_columns(["pair_input_ids"]).rename_column("pair_input_ids", "input_ids")
        inputs = concatenate_datasets([inputs, pairs])
    return inputs


class PretrainTrainer(ModelCardMixin, Trainer):
    """`Trainer` for masked-token self-pretraining.

    Drops label columns from the datasets and builds a `DataCollatorForSpt` from the arguments'
    masking options unless a collator is given. With that collator the validation set is masked
    once (`fixed_masking`, seeded by `args.seed`), so every evaluation, resumed runs' included,
    scores the same masked tokens and the best checkpoint is chosen on a fixed target. On CPU it flushes denormals to zero
    (`args.flush_denormal`; README, Performance).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        args: PretrainArguments,
        train_dataset: Dataset,
        eval_dataset: Dataset | None = None,
        processing_class: PreTrainedTokenizerBase | None = None,
        data_collator=None,
        **kwargs,
    ):
        if processing_class is None and data_collator is None:
            raise ValueError("PretrainTrainer needs the tokenizer (processing_class) to know [MASK] and the special tokens.")
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
        if eval_dataset is not None and isinstance(data_collator, DataCollatorForSpt):
            with args.main_process_first(desc="fixed validation masks"):
                eval_dataset = fixed_masking(eval_dataset, data_collator, args.seed)
        if args.flush_denormal and args.device.type == "cpu":
            torch.set_flush_denormal(True)
        super().__init__(
            model=model,
            args=args,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=processing_class,
            data_collator=data_collator,
            **kwargs,
        )
        self.token_weights = self._token_weights(args, train_dataset, processing_class, model)

    @staticmethod
    def _token_weights(args, train_dataset: Dataset, tokenizer, model) -> torch.Tensor | None:
        if args.token_weighting not in TOKEN_WEIGHTING:
            raise UserInputError(f"Unknown token_weighting {args.token_weighting!r}; choose one of {', '.join(TOKEN_WEIGHTING)}.")
        if args.token_weighting == "none":
            return None
        return inverse_frequency_token_weights(train_dataset["input_ids"], model.config.get_text_config().vocab_size)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """The model's LM loss, or with `token_weighting` its token-weighted mean (from the same forward pass)."""
        labels = inputs.get("labels")
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch)
        if self.token_weights is not None and labels is not None:
            causal = not getattr(self.data_collator, "mlm", True)
            loss = weighted_token_loss(outputs["logits"], labels, self.token_weights, shift=causal)
            self.loss_is_scaled_for_ga = False  # a per-batch weighted mean: the Trainer divides it for accumulation
        return (loss, outputs) if return_outputs else loss


__all__ = ["PretrainTrainer", "inputs_only"]
