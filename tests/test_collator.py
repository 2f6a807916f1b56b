"""SPT masking and classification padding."""

import math
from dataclasses import replace

import pytest
import torch
from conftest import tiny_config
from datasets import Dataset
from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

from hf_spt.models.modeling_spt import SptForMaskedLM
from hf_spt.errors import UserInputError
from hf_spt.training.collators import (DataCollatorForClassification, DataCollatorForSpt, check_pad_multiple,
                                       padded_width)
from hf_spt.models.tokenization_spt import build_word_tokenizer

SYMBOLS = [f"s{i}" for i in range(20)]


def _features(tokenizer, rows=64, length=50):
    generator = torch.Generator().manual_seed(0)
    return [
        {"input_ids": [tokenizer.cls_token_id] + torch.randint(4, 24, (length - 3 * (i % 5),), generator=generator).tolist()}
        for i in range(rows)
    ]


def test_masking_rate_labels_and_special_tokens():
    tokenizer = build_word_tokenizer(SYMBOLS)
    collator = DataCollatorForSpt(tokenizer, mlm_probability=0.5, seed=0)
    original = _features(tokenizer)
    batch = collator([dict(f) for f in original])
    inputs, labels = batch["input_ids"], batch["labels"]
    special = torch.isin(torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(f["input_ids"]) for f in original], batch_first=True), torch.tensor([0, 1, 2, 3]))
    masked = labels != -100
    assert not (masked & special).any(), "special tokens (CLS, padding) are never masked"
    rate = masked.sum() / (~special).sum()
    assert 0.45 < rate < 0.55
    shown_as_mask = inputs == tokenizer.mask_token_id
    assert (shown_as_mask <= masked).all()
    assert 0.75 < shown_as_mask.sum() / masked.sum() < 0.85
    replaced = masked & ~shown_as_mask
    assert not torch.isin(inputs[replaced], torch.tensor([0, 1, 2, 3])).any(), "random tokens are never special"


def test_pure_mask_mode_shows_every_masked_token_as_mask():
    tokenizer = build_word_tokenizer(SYMBOLS)
    collator = DataCollatorForSpt(tokenizer, mlm_probability=0.3, mask_replace_prob=1.0, random_replace_prob=0.0, seed=1)
    batch = collator(_features(tokenizer))
    masked = batch["labels"] != -100
    assert (batch["input_ids"][masked] == tokenizer.mask_token_id).all()


def test_classification_collator_pads_sequences_and_pairs():
    tokenizer = build_word_tokenizer(SYMBOLS)
    collator = DataCollatorForClassification(tokenizer)
    batch = collator([
        {"input_ids": [4, 5, 6], "pair_input_ids": [7], "labels": 1},
        {"input_ids": [4], "pair_input_ids": [7, 8, 9, 10], "labels": 0},
    ])
    assert batch["input_ids"].tolist() == [[4, 5, 6], [4, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["pair_input_ids"].shape == (2, 4) and batch["pair_attention_mask"][0].tolist() == [1, 0, 0, 0]
    assert batch["labels"].tolist() == [1, 0] and batch["labels"].dtype == torch.long


def test_classification_collator_outputs_are_unchanged():
    """Same tensors (values and dtypes) as the hand-written padding gave: ids, masks, pairs, multiple-of, labels."""
    tokenizer = build_word_tokenizer(SYMBOLS)
    features = [
        {"input_ids": [2, 4, 5, 6, 7, 8], "pair_input_ids": [2, 9], "labels": 3},
        {"input_ids": [2, 4], "pair_input_ids": [2, 9, 10, 11, 12], "labels": 0},
        {"input_ids": [2, 23, 22], "pair_input_ids": [2], "labels": 1},
    ]
    batch = DataCollatorForClassification(tokenizer, pad_to_multiple_of=4)(features)
    assert set(batch) == {"input_ids", "attention_mask", "pair_input_ids", "pair_attention_mask", "labels"}
    assert all(tensor.dtype == torch.long for tensor in batch.values())
    assert batch["input_ids"].tolist() == [[2, 4, 5, 6, 7, 8, 0, 0], [2, 4, 0, 0, 0, 0, 0, 0], [2, 23, 22, 0, 0, 0, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1] * 6 + [0] * 2, [1] * 2 + [0] * 6, [1] * 3 + [0] * 5]
    assert batch["pair_input_ids"].tolist() == [[2, 9, 0, 0, 0, 0, 0, 0], [2, 9, 10, 11, 12, 0, 0, 0], [2, 0, 0, 0, 0, 0, 0, 0]]
    assert batch["pair_attention_mask"].sum(1).tolist() == [2, 5, 1]
    assert batch["labels"].tolist() == [3, 0, 1]
    regression = DataCollatorForClassification(tokenizer)([{"input_ids": [4], "labels": 0.5}, {"input_ids": [5, 6], "labels": 2.0}])
    assert regression["labels"].dtype == torch.float and regression["labels"].tolist() == [0.5, 2.0]
    multi = DataCollatorForClassification(tokenizer)([{"input_ids": [4], "labels": [0, 1]}, {"input_ids": [5], "labels": [1, 1]}])
    assert multi["labels"].dtype == torch.float and multi["input_ids"].tolist() == [[4], [5]]



def test_labels_inputs_and_replacement_shares_match_the_settings():
    """65k real tokens, seeded: masked positions carry the original id as label (-100 elsewhere), unmasked
    inputs are unchanged, and of the masked ones 60% show [MASK], 30% a random real token, 10% themselves."""
    tokenizer = build_word_tokenizer(SYMBOLS)  # real tokens: ids 4..23
    generator = torch.Generator().manual_seed(7)
    original = torch.cat([torch.full((512, 1), tokenizer.cls_token_id), torch.randint(4, 24, (512, 128),
                                                                                      generator=generator)], dim=1)
    collator = DataCollatorForSpt(tokenizer, mlm_probability=0.3, mask_replace_prob=0.6, random_replace_prob=0.3,
                                  seed=0)
    batch = collator([{"input_ids": row.tolist()} for row in original])
    inputs, labels = batch["input_ids"], batch["labels"]
    masked = labels != -100
    assert torch.equal(labels[masked], original[masked]) and (labels[~masked] == -100).all()
    assert torch.equal(inputs[~masked], original[~masked]), "unmasked tokens are never changed"
    assert not masked[:, 0].any(), "[CLS] is never masked"
    real = original[:, 1:].numel()
    assert abs(masked.sum() / real - 0.3) < 0.01
    shown = inputs[masked]
    as_mask = (shown == tokenizer.mask_token_id).float().mean()
    kept = (shown == original[masked]).float().mean()
    other = 1 - as_mask - kept
    # a random replacement equals the original token with probability 1/20
    assert abs(as_mask - 0.6) < 0.015 and abs(other - 0.3 * 19 / 20) < 0.015 and abs(kept - (0.1 + 0.3 / 20)) < 0.015
    replaced = shown[(shown != tokenizer.mask_token_id) & (shown != original[masked])]
    counts = torch.bincount(replaced, minlength=24)
    assert counts[:4].sum() == 0 and (counts[4:] > 0.7 * counts[4:].float().mean()).all(), "uniform over real tokens"


@pytest.mark.parametrize("key", ["labels", "label"])
def test_a_plain_trainer_pretrains_on_rows_that_still_carry_a_class_label(tmp_path, key):
    tokenizer = build_word_tokenizer(SYMBOLS)
    rows = [{**row, key: i % 3} for i, row in enumerate(_features(tokenizer, rows=8, length=12))]
    model = SptForMaskedLM(tiny_config(vocab_size=len(tokenizer), max_position_embeddings=16))
    args = TrainingArguments(str(tmp_path), max_steps=2, per_device_train_batch_size=4, report_to="none", use_cpu=True,
                             save_strategy="no")
    collator = DataCollatorForSpt(tokenizer, seed=0)
    trainer = Trainer(model, args, train_dataset=Dataset.from_list(rows), data_collator=collator)
    assert math.isfinite(trainer.train().training_loss)  # before: TypeError: len() of a 0-d tensor
    for padding_free in (False, True):
        batch = replace(collator, padding_free=padding_free)(rows[:4])
        assert key not in batch or batch[key].shape == batch["input_ids"].shape  # per-token MLM targets only


def _listops_like_rows(tokenizer, rows=32, seed=0):
    """Rows of 500-2,000 tokens, as a ListOps batch at the release's lengths."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(500, 2000, (rows,), generator=generator).tolist()
    return [{"input_ids": torch.randint(4, 24, (n,), generator=generator).tolist()} for n in lengths]


def test_numpy_padding_gives_the_tokenizers_batches_value_for_value():
    """The numpy path (`pad_rows`) against transformers' own (`tokenizer.pad` inside the MLM collator): the same ids,
    masks and labels under the same global seed, so CPU runs are bit-identical to the earlier collator's."""
    tokenizer = build_word_tokenizer(SYMBOLS)
    rows = _listops_like_rows(tokenizer)
    collator = DataCollatorForSpt(tokenizer, mlm_probability=0.1)
    torch.manual_seed(3)
    ours = collator(rows)
    torch.manual_seed(3)
    reference = DataCollatorForLanguageModeling.torch_call(collator, rows)
    assert set(ours) == set(reference)
    for key in reference:
        assert ours[key].dtype == reference[key].dtype and torch.equal(ours[key], reference[key]), key
    fixed = [{"input_ids": row["input_ids"], "labels": [-100] * (len(row["input_ids"]) - 1) + [5]} for row in rows]
    padded = collator(fixed)
    assert padded["labels"].shape == padded["input_ids"].shape and (padded["labels"] == 5).sum() == len(rows)
    classification = DataCollatorForClassification(tokenizer)([{**row, "labels": 1} for row in rows])
    expected = tokenizer.pad({"input_ids": [row["input_ids"] for row in rows]}, return_tensors="pt")
    assert torch.equal(classification["input_ids"], expected["input_ids"])
    assert torch.equal(classification["attention_mask"], expected["attention_mask"])


def test_a_multiple_of_8_widens_the_batch_but_masks_the_same_tokens():
    """`pad_to_multiple_of` (8 on an accelerator by default) widens every id tensor with padding only: the real
    tokens, their masks and labels are those of the unwidened batch under the same seed."""
    tokenizer = build_word_tokenizer(SYMBOLS)
    rows = _listops_like_rows(tokenizer, seed=1)
    torch.manual_seed(5)
    plain = DataCollatorForSpt(tokenizer, mlm_probability=0.1)(rows)
    torch.manual_seed(5)
    widened = DataCollatorForSpt(tokenizer, mlm_probability=0.1, pad_to_multiple_of=8)(rows)
    width = plain["input_ids"].shape[1]
    assert widened["input_ids"].shape[1] % 8 == 0 and width <= widened["input_ids"].shape[1] < width + 8
    for key, pad in (("input_ids", tokenizer.pad_token_id), ("attention_mask", 0), ("labels", -100)):
        assert torch.equal(widened[key][:, :width], plain[key])
        assert (widened[key][:, width:] == pad).all()
    pairs = DataCollatorForClassification(tokenizer, pad_to_multiple_of=8)(
        [{"input_ids": row["input_ids"], "pair_input_ids": row["input_ids"][:7 - index % 2], "labels": 0}
         for index, row in enumerate(rows)])
    assert pairs["input_ids"].shape[1] % 8 == 0 and pairs["pair_input_ids"].shape == (len(rows), 8)


def test_a_batch_of_equal_rows_keeps_its_width_and_needs_no_mask():
    """Only a padded batch is widened to the multiple: rows of one length (Markov's 100 tokens) keep their width,
    so the model gets an all-ones mask, which transformers drops (SDPA's flash kernel on a GPU keeps working)."""
    tokenizer = build_word_tokenizer(SYMBOLS)
    rows = [{"input_ids": list(range(4, 24)) * 5} for _ in range(4)]  # 100 tokens each
    for collator in (DataCollatorForSpt(tokenizer, pad_to_multiple_of=8),
                     DataCollatorForClassification(tokenizer, pad_to_multiple_of=8)):
        batch = collator([{**row, "labels": 0} for row in rows] if isinstance(collator, DataCollatorForClassification)
                         else rows)
        assert batch["input_ids"].shape == (4, 100) and bool(batch["attention_mask"].all())


def test_padded_widths_stop_at_the_models_positions():
    """A multiple never widens a batch past the model's positions (`max_width`): ListOps' 1,999 tokens at a multiple
    of 64 become its 2,000 positions, not 2,048; rows of 23 tokens at a multiple of 8 stay 23 wide in a 23-position
    model. A multiple no batch can reach is refused up front."""
    assert padded_width(1999, 64, padded=True, max_width=2000) == 2000
    assert padded_width(1900, 64, padded=True, max_width=2000) == 1920
    assert padded_width(23, 8, padded=True, max_width=23) == 23 and padded_width(23, 8, padded=True) == 24
    assert padded_width(30, 8, padded=True, max_width=23) == 30  # too long for the model: left for it to refuse
    tokenizer = build_word_tokenizer(SYMBOLS)
    rows = [{"input_ids": list(range(4, 4 + n))} for n in (23, 11, 17)]
    for collator in (DataCollatorForSpt(tokenizer, pad_to_multiple_of=8, max_width=23),
                     DataCollatorForSpt(tokenizer, pad_to_multiple_of=8, max_width=23, seed=0),  # transformers' padding
                     DataCollatorForClassification(tokenizer, pad_to_multiple_of=8, max_width=23)):
        batch = collator([{**row, "labels": 0} for row in rows] if isinstance(collator, DataCollatorForClassification)
                         else rows)
        assert batch["input_ids"].shape == (3, 23) and batch["attention_mask"].sum() == 23 + 11 + 17
    with pytest.raises(UserInputError, match="--pad_to_multiple_of 4096 is larger than the model's 23 positions"):
        check_pad_multiple(4096, 23)
    check_pad_multiple(23, 23)
    check_pad_multiple(4096, None)
