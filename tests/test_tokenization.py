"""Byte-level and word-level tokenizers: ids, round trips, save/load."""

import hashlib
import json

from transformers import AutoTokenizer

from hf_spt.models.tokenization_spt import NUM_SPECIAL_TOKENS, build_byte_tokenizer, build_word_tokenizer


def test_byte_tokenizer_maps_each_byte_to_its_value_plus_specials():
    tokenizer = build_byte_tokenizer()
    text = "héllo, wörld!\n\t"
    ids = tokenizer(text)["input_ids"]
    assert ids == [b + NUM_SPECIAL_TOKENS for b in text.encode("utf-8")]
    assert tokenizer.decode(ids) == text
    assert len(tokenizer) == 256 + NUM_SPECIAL_TOKENS
    assert (tokenizer.pad_token_id, tokenizer.mask_token_id, tokenizer.cls_token_id, tokenizer.unk_token_id) == (0, 1, 2, 3)


def test_byte_tokenizer_saves_and_loads(tmp_path):
    tokenizer = build_byte_tokenizer(add_cls_token=True)
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = "Long Range Arena ✓"
    assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert loaded(text)["input_ids"][0] == tokenizer.cls_token_id
    assert loaded.decode(loaded(text)["input_ids"], skip_special_tokens=True) == text


def test_word_tokenizer_from_symbols(tmp_path):
    tokenizer = build_word_tokenizer(["[MAX", "]", "1", "2"])
    ids = tokenizer("[MAX 1 2 ] 7")["input_ids"]
    assert ids == [4, 6, 7, 5, tokenizer.unk_token_id]
    tokenizer.save_pretrained(tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path)("[MAX 1 2 ] 7")["input_ids"] == ids


def test_word_tokenizer_rejects_symbols_that_clash_with_specials():
    import pytest

    with pytest.raises(ValueError, match="clash"):
        build_word_tokenizer(["a", "[MASK]"])


BYTE_VOCAB_SHA256 = "b4d382a9746bc3c9f3ff9238ea799a360e7ac8bde8a66d16383108f4bfdb765f"
"""sha256 of the byte tokenizer's vocabulary (token, id) in id order, as the hand-written byte table built it."""


def test_every_byte_keeps_its_id():
    """The 256 byte stand-ins keep their ids (4 + byte value) and every valid UTF-8 byte encodes to 4 + b."""
    tokenizer = build_byte_tokenizer()
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    assert hashlib.sha256(json.dumps(vocab).encode()).hexdigest() == BYTE_VOCAB_SHA256
    text = "".join(chr(c) for c in range(1, 0x800)) + "\U0001F600\uFFFD"  # 1-, 2-, 3- and 4-byte characters
    assert tokenizer(text)["input_ids"] == [b + NUM_SPECIAL_TOKENS for b in text.encode("utf-8")]
