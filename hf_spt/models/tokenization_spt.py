"""Tokenizers for SPT tasks, as `PreTrainedTokenizerFast` objects that save and load.

LRA's text tasks are byte level (one token per UTF-8 byte); ListOps, pixel sequences and
synthetic tasks use a small word-level vocabulary read from a symbol list. Special tokens come
first in both, at fixed ids, so that configs can rely on them: [PAD]=0, [MASK]=1, [CLS]=2, [UNK]=3.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast
from transformers.convert_slow_tokenizer import bytes_to_unicode

SPECIAL_TOKENS = {"pad_token": "[PAD]", "mask_token": "[MASK]", "cls_token": "[CLS]", "unk_token": "[UNK]"}
NUM_SPECIAL_TOKENS = len(SPECIAL_TOKENS)


def _wrap(tokenizer: Tokenizer, add_cls_token: bool, model_max_length: int) -> PreTrainedTokenizerFast:
    if add_cls_token:
        tokenizer.post_processor = processors.TemplateProcessing(
            single="[CLS] $A", pair="[CLS] $A [CLS] $B", special_tokens=[("[CLS]", tokenizer.token_to_id("[CLS]"))]
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, model_max_length=model_max_length, padding_side="right", **SPECIAL_TOKENS
    )


def build_byte_tokenizer(add_cls_token: bool = False, model_max_length: int = 4096) -> PreTrainedTokenizerFast:
    """Byte-level tokenizer: each UTF-8 byte of the text is one token (ids 4..259), as in LRA Text/Retrieval.

    Built as a BPE with no merges over GPT-2's byte-to-unicode alphabet, so it runs in the Rust
    tokenizer and round-trips any text exactly.
    """
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS.values())}
    stand_ins = bytes_to_unicode()  # GPT-2's printable character for each byte, as ByteLevel maps them
    vocab.update({stand_ins[byte]: NUM_SPECIAL_TOKENS + byte for byte in range(256)})
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    return _wrap(tokenizer, add_cls_token, model_max_length)


def build_word_tokenizer(
    symbols: Sequence[str], add_cls_token: bool = False, model_max_length: int = 4096, dropped_characters: str = ""
) -> PreTrainedTokenizerFast:
    """Word-level tokenizer over whitespace-separated `symbols` (ids 4.. in the order given). `dropped_characters`
    are read as spaces (ListOps' parentheses, which its data drop), in the saved tokenizer too."""
    symbols = list(dict.fromkeys(symbols))
    clashes = set(symbols) & set(SPECIAL_TOKENS.values())
    if clashes:
        raise ValueError(f"Symbols {sorted(clashes)} clash with the special tokens {list(SPECIAL_TOKENS.values())}.")
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS.values())}
    vocab.update({symbol: NUM_SPECIAL_TOKENS + i for i, symbol in enumerate(symbols)})
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    if dropped_characters:
        tokenizer.normalizer = normalizers.Sequence([normalizers.Replace(c, " ") for c in dropped_characters])
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    return _wrap(tokenizer, add_cls_token, model_max_length)


__all__ = ["SPECIAL_TOKENS", "NUM_SPECIAL_TOKENS", "build_byte_tokenizer", "build_word_tokenizer"]
