"""The default task: binary classification of Markov chains that differ only in local structure.

Each class is a Markov chain over `num_symbols` symbols: with probability `locality` the next
symbol is the current one plus the class's step (mod `num_symbols`), otherwise it is drawn
uniformly. Both transition matrices are doubly stochastic, so every symbol has the same
frequency (1/num_symbols) in both classes: a bag of tokens is at chance, and only neighbouring
tokens carry the label. This is the minimal setting in which Coser et al. isolate the SPT
mechanism (length-100 sequences, a 1-layer model).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import numpy as np
from datasets import Dataset, DatasetDict

from ..models.tokenization_spt import build_word_tokenizer
from ..value_checks import AT_LEAST_TWO, POSITIVE_INT, PROBABILITY
from .registry import Task, TaskPreset, register_task


def generate_markov_sequences(
    num_sequences: int,
    length: int,
    num_symbols: int,
    steps: tuple[int, ...],
    locality: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Symbol sequences (N, length) in [0, num_symbols) and their class labels (N,), balanced."""
    labels = np.arange(num_sequences) % len(steps)
    rng.shuffle(labels)
    step = np.asarray(steps)[labels][:, None]  # (N, 1)
    follows = rng.random((num_sequences, length)) < locality
    fresh = rng.integers(0, num_symbols, (num_sequences, length))
    sequences = np.empty((num_sequences, length), dtype=np.int64)
    sequences[:, 0] = fresh[:, 0]
    for position in range(1, length):
        stepped = (sequences[:, position - 1] + step[:, 0]) % num_symbols
        sequences[:, position] = np.where(follows[:, position], stepped, fresh[:, position])
    return sequences, labels


PRESET = TaskPreset(
    max_length=100,
    num_labels=2,
    mlm_probability=0.15,
    batch_size=32,
    model=dict(num_hidden_layers=1, hidden_size=64, num_attention_heads=4, intermediate_size=128, pooling="mean"),
)


@register_task(
    "markov",
    description="Synthetic default: Markov chains whose classes differ only in neighbour transitions "
    "(bag of tokens at chance), length 100, 2 classes.",
    needs="nothing (generated, seeded)",
    preset=PRESET,
)
def load_markov(
    data_dir: str | None = None,
    seed: int = 0,
    num_train: Annotated[int, POSITIVE_INT] = 4000,
    num_validation: Annotated[int, POSITIVE_INT] = 500,
    num_test: Annotated[int, POSITIVE_INT] = 1000,
    length: Annotated[int, POSITIVE_INT] = 100,
    num_symbols: Annotated[int, AT_LEAST_TWO] = 32,
    steps: tuple[int, ...] = (1, 3),
    locality: Annotated[float, PROBABILITY] = 0.8,
) -> Task:
    """Generate the task; `seed` fixes the data. `data_dir` is unused (nothing on disk)."""
    rng = np.random.default_rng(seed)
    symbols = [f"s{i}" for i in range(num_symbols)]
    tokenizer = build_word_tokenizer(symbols, model_max_length=length)
    first_symbol_id = tokenizer.convert_tokens_to_ids(symbols[0])
    splits = {}
    for split, size in (("train", num_train), ("validation", num_validation), ("test", num_test)):
        sequences, labels = generate_markov_sequences(size, length, num_symbols, tuple(steps), locality, rng)
        splits[split] = Dataset.from_dict({"input_ids": (sequences + first_symbol_id).tolist(), "labels": labels.tolist()})
    preset = replace(PRESET, max_length=length, num_labels=len(steps))
    label_names = [f"step_{s}" for s in steps]
    return Task("markov", DatasetDict(splits), tokenizer, preset, label_names)
