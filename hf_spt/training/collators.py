"""Batch collators for the two phases.

`DataCollatorForSpt` is transformers' MLM collator with three changes: rows are padded in numpy
(`pad_rows`: a 32-row ListOps batch of up to 2,000 tokens in about a millisecond, where the
tokenizer's `pad` on Python lists took about ten), special tokens are found with one vectorised
`isin` (not a Python loop per row, which dominates step time at 4K tokens), and the BERT-style
random replacements draw only real tokens, never [PAD]/[MASK]/[CLS]/[UNK]. Tokens are masked
over the longest row's width, and only then is a padded batch widened to `pad_to_multiple_of`
(`padded_width`: a batch of equal rows keeps its width and needs no mask), so the masks a seed
draws do not depend on that setting.
Rows that already carry `labels` (a validation set masked once by `fixed_masking`) are only
padded, so evaluation reads the same masks every time, across resumes too, while training
masking stays random. A class label a row still carries (`label`, `labels` or `label_ids`
holding one value, as a classification data set in a plain `Trainer` passes it) is dropped
(`without_class_labels`), as `PretrainTrainer` drops the label columns of its data sets.
`DataCollatorForClassification` pads `input_ids` (and `pair_input_ids` of two-tower tasks) the
same way. Both give the tokenizer's `pad` results, value for value (tests/test_collator.py).

With `padding_free=True` both lay a batch's rows end to end in one row instead, as transformers'
`DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True)` does: `input_ids` (1, N),
`position_ids` restarting at 0 per row, no `attention_mask`, and the sequences' offsets computed here on the host
(`flatten`; the model's packed path, `hf_spt.models.packing`, for `torch_varlen` or flash attention).
Masking draws per token, so packing masks each sequence as padding would.

A padded width never passes `max_width`, the model's positions, whatever `pad_to_multiple_of` says
(`padded_width`; `check_pad_multiple` refuses a multiple larger than the positions).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from transformers import DataCollatorForLanguageModeling, PreTrainedTokenizerBase
from transformers.utils import logging

from ..errors import UserInputError

logger = logging.get_logger(__name__)
CLASS_LABEL_KEYS = ("label", "labels", "label_ids")  # the names transformers' Trainer passes labels under


PADDED_KEYS = frozenset({"input_ids", "attention_mask", "labels"})
"""The row keys `pad_rows` collates; rows with others (`special_tokens_mask`, ...) go through transformers' path."""


def pad_rows(rows: list[Any], pad_value: int, width: int | None = None, multiple: int | None = None,
             max_width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """`rows` (lists or arrays of ints) right-padded with `pad_value` to `width` (default: the longest row's, widened
    to `multiple` but not past `max_width` when the rows differ in length, `padded_width`), as int64 (B, T), and
    their attention mask (1 on each row's own tokens). Built in numpy: one array, one copy per row."""
    lengths = np.fromiter((len(row) for row in rows), dtype=np.int64, count=len(rows))
    if width is None:
        longest = int(lengths.max(initial=0))
        width = padded_width(longest, multiple, padded=int(lengths.min(initial=longest)) < longest, max_width=max_width)
    padded = np.full((len(rows), width), pad_value, dtype=np.int64)
    for index, row in enumerate(rows):
        padded[index, : lengths[index]] = row
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
    return torch.from_numpy(padded), torch.from_numpy(mask)


def padded_width(width: int, multiple: int | None, padded: bool, max_width: int | None = None) -> int:
    """A batch's width: its longest row's `width`, rounded up to a multiple of `multiple` when the batch is `padded`
    (some row shorter: it reaches attention with a mask anyway, which aligned shapes serve best on a GPU), but
    never past `max_width`, the model's positions (ListOps' 1,999 tokens at a multiple of 64 become 2,000, its
    positions, not 2,048), nor under `width`. A batch of equal rows keeps its width, so it reaches attention with no
    mask at all (SDPA's flash kernel on a GPU)."""
    if not (multiple and padded):
        return width
    rounded = -(-width // multiple) * multiple
    return rounded if max_width is None else max(width, min(rounded, max_width))


def model_max_width(model: Any) -> int | None:
    """The widest batch `model` reads: its (or its wrapped backbone's) `max_position_embeddings`, None where its
    config has none (rotary or relative models without a limit)."""
    config = getattr(model.config, "backbone", None) or model.config.get_text_config()
    return getattr(config, "max_position_embeddings", None)


def check_pad_multiple(multiple: int | None, max_width: int | None) -> None:
    """Refuse a `pad_to_multiple_of` that no batch can be padded to: one larger than the model's positions
    `max_width` (every width is capped there, so the multiple would never be met)."""
    if multiple and max_width is not None and multiple > max_width:
        raise UserInputError(f"--pad_to_multiple_of {multiple} is larger than the model's {max_width} positions "
                             f"(max_position_embeddings), so no batch can be padded to it: give a value up to "
                             f"{max_width} (8 or 64 on a GPU), or none.")


def widen(tensor: torch.Tensor, width: int, value: int) -> torch.Tensor:
    """A (B, T) tensor padded on the right with `value` to (B, width)."""
    return torch.nn.functional.pad(tensor, (0, width - tensor.shape[1]), value=value)


def without_attention_mask(batch: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`batch` without its `{prefix}attention_mask`, for a batch none of whose rows is padded: the model then reads
    all tokens, as with an all-ones mask, but transformers need not check the mask on the device (`mask.all()`, a
    host sync every forward, before it drops an all-ones mask to keep SDPA's unmasked flash kernel)."""
    return {key: value for key, value in batch.items() if key != f"{prefix}attention_mask"}


def without_class_labels(rows: list[Any]) -> list[Any]:
    """`rows` without their class labels: the `CLASS_LABEL_KEYS` holding one value per row (a class id or name).

    Masked-token training reads the inputs only; its targets are the masked tokens. Per-token `labels`
    (a row masked beforehand, `fixed_masking`) stay. Rows that are not mappings are returned as they are.
    """
    if not (rows and isinstance(rows[0], Mapping)):
        return rows
    dropped = [key for key in CLASS_LABEL_KEYS if key in rows[0] and np.ndim(rows[0][key]) == 0]
    if not dropped:
        return rows
    logger.warning_once(f"DataCollatorForSpt drops the class labels {dropped} of its rows: masked-token training "
                        "reads the inputs only (remove the column to silence this).")
    return [{key: value for key, value in row.items() if key not in dropped} for row in rows]


@dataclass
class DataCollatorForSpt(DataCollatorForLanguageModeling):
    """Masked-token collator: masks each real token independently with `mlm_probability`.

    Of the masked tokens, `mask_replace_prob` become [MASK], `random_replace_prob` a random real
    token, the rest stay unchanged (BERT's 80/10/10 by default; 1.0/0.0 for pure [MASK]).
    Labels are -100 everywhere except at masked positions, so the loss reads only those.

    `omit_full_attention_mask` leaves the attention mask out of a batch whose rows all fill its width (see
    `without_attention_mask`). `max_width` (the model's positions) caps the width `pad_to_multiple_of` widens a
    padded batch to (`padded_width`). `return_masked_positions` adds `masked_positions`, the flat indices of the
    labelled tokens, computed here on the host: `SptForMaskedLM`'s sparse prediction then gathers those rows on
    the accelerator with a size known in advance, where selecting them with `labels != -100` stops the host until
    the device has counted them, every step. `PretrainTrainer` turns both on where they apply (positions for SPT
    models whose batches reach the model whole: no `DataParallel`, no `split_batches`; masks on an accelerator).
    """

    def __post_init__(self):
        super().__post_init__()
        special_ids = sorted(set(self.tokenizer.all_special_ids))
        self._special_ids = torch.tensor(special_ids, dtype=torch.long)
        all_ids = torch.arange(len(self.tokenizer))
        self._replacement_ids = all_ids[~torch.isin(all_ids, self._special_ids)]

    padding_free: bool = False
    return_masked_positions: bool = False
    omit_full_attention_mask: bool = False
    max_width: int | None = None
    return_seq_idx: bool = True

    def torch_call(self, examples: list[Any]) -> dict[str, Any]:
        """Mask and pad the rows; rows masked beforehand (with `labels`) are padded only (labels with -100).
        With `padding_free`, mask and pack them (`flatten`; `return_seq_idx` False leaves out `seq_idx`, which
        the varlen kernel does not read). Class labels are dropped (`without_class_labels`).
        With `omit_full_attention_mask`, an unpadded batch has no `attention_mask`; with `return_masked_positions`,
        the batch also holds `masked_positions` (`masked_positions`)."""
        batch = self._masked_batch(without_class_labels(examples))
        if self.omit_full_attention_mask and "attention_mask" in batch and bool(batch["attention_mask"].all()):
            batch = without_attention_mask(batch)
        if self.return_masked_positions:
            batch["masked_positions"] = masked_positions(batch["labels"])
        return batch

    def _masked_batch(self, examples: list[Any]) -> dict[str, Any]:
        if self.padding_free:
            batch = flatten(examples, seq_idx=self.return_seq_idx)
            if "labels" in examples[0]:
                batch["labels"] = torch.cat([torch.as_tensor(row["labels"], dtype=torch.long) for row in examples])[None]
            else:
                batch["input_ids"], batch["labels"] = self.torch_mask_tokens(batch["input_ids"])
            return batch
        if not (self.mlm and self.seed is None and examples and isinstance(examples[0], Mapping)
                and set(examples[0]) <= PADDED_KEYS):  # a seeded collator: transformers' per-process generators
            return capped(super().torch_call(examples), self.max_width)
        input_ids, attention_mask = pad_rows([row["input_ids"] for row in examples], self.tokenizer.pad_token_id)
        if "labels" in examples[0]:  # masked beforehand: pad only
            labels = pad_rows([row["labels"] for row in examples], -100, input_ids.shape[1])[0]
        else:
            input_ids, labels = self.torch_mask_tokens(input_ids)
        width = padded_width(input_ids.shape[1], self.pad_to_multiple_of, padded=not bool(attention_mask.all()),
                             max_width=self.max_width)
        return {"input_ids": widen(input_ids, width, self.tokenizer.pad_token_id),
                "attention_mask": widen(attention_mask, width, 0), "labels": widen(labels, width, -100)}

    def torch_mask_tokens(self, inputs: torch.Tensor, special_tokens_mask: Any = None, offset_mapping: Any = None):
        labels = inputs.clone()
        if special_tokens_mask is None:
            special_tokens_mask = torch.isin(inputs, self._special_ids)
        probability = torch.full(labels.shape, self.mlm_probability).masked_fill_(special_tokens_mask.bool(), 0.0)
        masked = torch.bernoulli(probability, generator=self.generator).bool()
        labels[~masked] = -100
        draw = torch.rand(labels.shape, generator=self.generator)
        to_mask_token = masked & (draw < self.mask_replace_prob)
        to_random = masked & (draw >= self.mask_replace_prob) & (draw < self.mask_replace_prob + self.random_replace_prob)
        inputs[to_mask_token] = self.tokenizer.mask_token_id
        choice = torch.randint(len(self._replacement_ids), (int(to_random.sum()),), generator=self.generator)
        inputs[to_random] = self._replacement_ids[choice]
        return inputs, labels


def capped(batch: dict[str, Any], max_width: int | None) -> dict[str, Any]:
    """A batch that transformers padded (to `pad_to_multiple_of`, uncapped) cut back to `max_width` columns, where
    the columns past it hold padding only; a longer row is left whole for the model to refuse."""
    mask = batch.get("attention_mask")
    if max_width is None or mask is None or mask.shape[1] <= max_width or bool(mask[:, max_width:].any()):
        return batch
    return {key: value[:, :max_width] if key in PADDED_KEYS else value for key, value in batch.items()}


def masked_positions(labels: torch.Tensor) -> torch.Tensor:
    """The flat indices (N,) into `labels.reshape(-1)` of its labelled tokens (not -100), in row-major order: the
    rows `labels != -100` selects, found on the host, where counting them costs no device synchronisation."""
    return torch.nonzero(labels.reshape(-1) != -100).squeeze(1)


def flatten(features: list[dict[str, Any]], prefix: str = "", seq_idx: bool = True) -> dict[str, Any]:
    """The rows' `{prefix}input_ids` end to end, (1, N), with `{prefix}position_ids` restarting at 0 per row and the
    layout the model reads (`hf_spt.models.packing.PACKED_KEYS`, prefixed): `cu_seq_lens_q` (S + 1,) int32, the
    cumulative lengths; `max_length_q`, the longest row (an int); with `seq_idx`, `seq_idx` (1, N), each token's row
    (the block-diagonal fallback's mask reads it; the kernel does not, and the model derives it on the device where
    pooling needs it). No `_k` twins: an encoder's keys are its queries, and the same tensor given twice would be
    copied to the device twice. Computed in numpy on the host, so no offset is recomputed on the device."""
    rows = [np.asarray(feature[f"{prefix}input_ids"], dtype=np.int64) for feature in features]
    lengths = np.fromiter((len(row) for row in rows), dtype=np.int64, count=len(rows))
    starts = np.cumsum(lengths) - lengths
    total = int(lengths.sum())
    bounds = torch.from_numpy(np.concatenate(([0], np.cumsum(lengths))).astype(np.int32))
    longest = int(lengths.max(initial=0))
    layout = {
        "input_ids": torch.from_numpy(np.concatenate(rows) if rows else np.zeros(0, np.int64))[None],
        "position_ids": torch.from_numpy(np.arange(total) - np.repeat(starts, lengths))[None],
        "cu_seq_lens_q": bounds, "max_length_q": longest,
    }
    if seq_idx:
        layout["seq_idx"] = torch.from_numpy(np.repeat(np.arange(len(rows)), lengths))[None]
    return {prefix + key: value for key, value in layout.items()}


def fixed_masking(dataset: Dataset, collator: DataCollatorForSpt, seed: int) -> Dataset:
    """`dataset` (an `input_ids` column) masked once as `collator` would, seeded by `seed` and the row
    index: `input_ids` as the model sees them and `labels`. The same call always gives the same masks."""
    fingerprint = (f"{dataset._fingerprint}-spt-masks-{seed}-{collator.mlm_probability}-{collator.mask_replace_prob}-"
                   f"{collator.random_replace_prob}")

    masker = replace(collator, seed=None)

    def mask(batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        masker.generator = torch.Generator().manual_seed(seed * 1_000_003 + indices[0])
        rows = [masker.torch_mask_tokens(torch.tensor(ids, dtype=torch.long)) for ids in batch["input_ids"]]
        return {"input_ids": [ids.tolist() for ids, _ in rows], "labels": [labels.tolist() for _, labels in rows]}

    return dataset.map(mask, batched=True, with_indices=True, new_fingerprint=fingerprint,
                       desc="fixed validation masks")


@dataclass
class DataCollatorForClassification:
    """Pads `input_ids` (and `pair_input_ids`) on the right (`pad_rows`, to `pad_to_multiple_of`) and stacks `labels`.

    Each id column is padded on its own (a pair gets its own length and `pair_attention_mask`);
    labels are long for class ids, float for regression values and multi-label rows. With
    `padding_free`, each id column is packed instead (`flatten`: `position_ids`, `pair_position_ids`;
    `return_seq_idx` False leaves out `seq_idx`, which the varlen kernel does not read).
    `omit_full_attention_mask` leaves out the mask of a column none of whose rows is padded
    (`without_attention_mask`); `max_width` (the model's positions) caps the padded width.
    """

    tokenizer: PreTrainedTokenizerBase
    pad_to_multiple_of: int | None = None
    padding_free: bool = False
    omit_full_attention_mask: bool = False
    max_width: int | None = None
    return_seq_idx: bool = True

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = {}
        for prefix in ("", "pair_"):
            if f"{prefix}input_ids" in features[0] and self.padding_free:
                batch.update(flatten(features, prefix, seq_idx=self.return_seq_idx))
            elif f"{prefix}input_ids" in features[0]:
                batch[f"{prefix}input_ids"], batch[f"{prefix}attention_mask"] = pad_rows(
                    [feature[f"{prefix}input_ids"] for feature in features], self.tokenizer.pad_token_id,
                    multiple=self.pad_to_multiple_of, max_width=self.max_width)
                if self.omit_full_attention_mask and bool(batch[f"{prefix}attention_mask"].all()):
                    batch = without_attention_mask(batch, prefix)
        if "labels" in features[0]:
            labels = [feature["labels"] for feature in features]
            dtype = torch.float if isinstance(labels[0], (float, list)) else torch.long
            batch["labels"] = torch.tensor(labels, dtype=dtype)
        return batch


__all__ = ["PADDED_KEYS", "pad_rows", "padded_width", "check_pad_multiple", "model_max_width", "capped", "widen",
           "CLASS_LABEL_KEYS", "DataCollatorForSpt", "DataCollatorForClassification", "fixed_masking", "flatten",
           "masked_positions", "without_attention_mask", "without_class_labels"]
