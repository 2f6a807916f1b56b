"""Trainer of the self-pretraining phase: MLM on the task's own inputs, labels dropped."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pyarrow.compute as pc
import torch
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase, Trainer

from ..errors import UserInputError
from .collators import DataCollatorForSpt, check_pad_multiple, fixed_masking, model_max_width
from .length_grouping import LengthGroupedSamplingMixin
from .losses import TOKEN_WEIGHTING, inverse_frequency_token_weights, label_weight_total, weighted_token_loss
from .arguments import PretrainArguments
from .dataset_columns import inputs_only
from .model_card import ModelCardMixin
from .padding_free import check_padding_free, runs_a_kernel


def has_sparse_prediction(model: PreTrainedModel) -> bool:
    """Whether `model` is an SPT masked LM, whose `config.sparse_prediction` projects only the masked positions
    (and which then reads the collator's `masked_positions`); other architectures have no such switch."""
    return hasattr(model.config, "sparse_prediction")


@contextlib.contextmanager
def sparse_prediction(model: PreTrainedModel, enabled: bool) -> Iterator[None]:
    """Within the block, an SPT masked LM (`has_sparse_prediction`) projects only the masked positions.

    Other architectures have no such switch and are left as they are.
    """
    config = model.config
    if not enabled or not has_sparse_prediction(model):
        yield
        return
    before, config.sparse_prediction = config.sparse_prediction, True
    try:
        yield
    finally:
        config.sparse_prediction = before


MASKING_RANGE = "the task presets mask 0.1 to 0.5 of the tokens (BERT: 0.15)"


def check_masking(collator: DataCollatorForSpt, train_dataset: Dataset, batch_size: int,
                  eval_dataset: Dataset | None = None) -> None:
    """Refuse a masking rate that leaves the batches without masked tokens: under one expected per training batch
    (the loss would read nothing: 0, no gradient), or none in the fixed validation masking (`eval_loss` NaN)."""
    mean_length = pc.mean(pc.list_value_length(train_dataset.with_format("arrow")["input_ids"])).as_py()
    if mean_length is None:  # no training rows: the Trainer says so itself
        return
    per_batch = collator.mlm_probability * batch_size * mean_length
    masked = None
    if eval_dataset is not None and "labels" in eval_dataset.column_names:
        labels = pc.list_flatten(eval_dataset.with_format("arrow")["labels"])
        masked = pc.sum(pc.not_equal(labels, -100)).as_py() or 0
    if per_batch < 1 or masked == 0:
        validation = "" if masked is None else f", and the fixed validation masking holds {masked} masked tokens"
        raise UserInputError(
            f"--mlm_probability {collator.mlm_probability:g} masks next to nothing: about {per_batch:.2g} masked "
            f"tokens per training batch of {batch_size} rows{validation}, so SPT would train on no token (loss 0, no "
            f"gradient) and score none (eval_loss NaN). Give a rate that masks several tokens a batch: {MASKING_RANGE}."
        )


def reaches_model_whole(args: PretrainArguments) -> bool:
    """Whether each collated batch reaches the model as it was built: flat `masked_positions` index the whole batch,
    so they are wrong on a slice of it (`DataParallel` over several GPUs of one process, Accelerate's
    `split_batches` or `dispatch_batches`)."""
    config = args.accelerator_config
    return args.n_gpu <= 1 and not config.split_batches and not config.dispatch_batches


class PretrainTrainer(LengthGroupedSamplingMixin, ModelCardMixin, Trainer):
    """`Trainer` for masked-token self-pretraining.

    Drops label columns from the datasets and builds a `DataCollatorForSpt` from the arguments'
    masking options unless a collator is given. With that collator the validation set is masked
    once (`fixed_masking`, seeded by `args.seed`), so every evaluation, resumed runs' included,
    scores the same masked tokens and the best checkpoint is chosen on a fixed target. On CPU it
    flushes denormals to zero (`args.flush_denormal`; docs/performance.md). Length-grouped batches
    and evaluation order: `LengthGroupedSamplingMixin`; `args.padding_free`: packed batches
    (`check_padding_free` says when). Its own collator gives SPT models `masked_positions` (where batches reach
    the model whole, `reaches_model_whole`) and, on an accelerator, leaves out the attention mask of a batch none
    of whose rows is padded: the masked-token gather never syncs the host, and a padded batch's mask reaches
    attention with no device check. Its padded widths stop at the model's positions (`max_width`), and a
    `pad_to_multiple_of` larger than them is refused (`check_pad_multiple`).
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
        kernel_path = False
        if args.padding_free:
            kernel_path = runs_a_kernel(check_padding_free(model, args))
            if data_collator is not None:
                raise UserInputError("padding_free builds its own masked-token collator: pass no data_collator "
                                     "(causal pretraining has no padding-free path).")
        if data_collator is None:
            max_width = model_max_width(model)
            check_pad_multiple(args.pad_to_multiple_of, max_width)
            data_collator = DataCollatorForSpt(
                processing_class,
                mlm_probability=args.mlm_probability,
                mask_replace_prob=args.mask_replace_prob,
                random_replace_prob=args.random_replace_prob,
                padding_free=args.padding_free,
                pad_to_multiple_of=args.pad_to_multiple_of,
                return_masked_positions=reaches_model_whole(args) and has_sparse_prediction(model),
                omit_full_attention_mask=args.device.type != "cpu",
                max_width=max_width,
                return_seq_idx=not kernel_path,  # the kernel never reads it: not copied to the device
            )
        if isinstance(data_collator, DataCollatorForSpt) and data_collator.mlm:
            if eval_dataset is not None:
                with args.main_process_first(desc="fixed validation masks"):
                    eval_dataset = fixed_masking(eval_dataset, data_collator, args.seed)
            check_masking(data_collator, train_dataset, args.per_device_train_batch_size, eval_dataset)
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

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        """The step's batches; with `token_weighting`, their total label weight replaces the label count
        `num_items_in_batch`, so the weighted loss is right under gradient accumulation."""
        batch_samples, num_items_in_batch = super().get_batch_samples(epoch_iterator, num_batches, device)
        if self.token_weights is not None and num_items_in_batch is not None:
            labels = (batch["labels"] for batch in batch_samples)
            num_items_in_batch = label_weight_total(labels, self.token_weights, shift=self._causal).to(device)
        return batch_samples, num_items_in_batch

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """The model's LM loss, or with `token_weighting` its token-weighted mean (from the same forward pass).

        Training steps of the SPT encoder compute logits at the masked positions only
        (`sparse_prediction`, at the collator's `masked_positions` when the batch has them); evaluation gets the
        standard (B, T, V) logits, and other models never see `masked_positions`.
        """
        labels, positions = inputs.get("labels"), inputs.pop("masked_positions", None)
        unwrapped = self.accelerator.unwrap_model(model)
        if positions is not None and model.training and has_sparse_prediction(unwrapped):
            inputs["masked_positions"] = positions  # the sparse rows, found by the collator: no device sync
            if self.token_weights is not None and labels is not None:  # the weighted loss reads the same rows
                labels = labels.reshape(-1).index_select(0, positions)
        with sparse_prediction(unwrapped, enabled=model.training):
            loss, outputs = super().compute_loss(model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch)
        if self.token_weights is not None and labels is not None:
            loss = weighted_token_loss(outputs["logits"], labels, self.token_weights, self._causal, num_items_in_batch)
            # divided by the step's total weight when the Trainer counted it, else a per-batch mean it divides itself
            self.loss_is_scaled_for_ga = num_items_in_batch is not None
        return (loss, outputs) if return_outputs else loss

    @property
    def _causal(self) -> bool:
        """Whether the collator builds causal-LM labels (the model shifts them)."""
        return not getattr(self.data_collator, "mlm", True)


__all__ = ["PretrainTrainer", "check_masking", "has_sparse_prediction", "reaches_model_whole", "sparse_prediction"]
