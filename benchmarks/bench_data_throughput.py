"""Data-side throughput: byte-level tokenizing with `datasets.map`, and the collator's share of a step.

1. Tokenizing: `--num_texts` synthetic reviews of IMDB's size (25,000 train reviews, about 1,300
   characters on average, log-normally spread from tens to over 10,000 characters) go through
   hf_spt's byte tokenizer in a batched `datasets.map`, truncated to `--max_length`.
   Reported: texts/s and tokens/s.
2. Collating: `DataCollatorForSpt` (hf_spt) and transformers' `DataCollatorForLanguageModeling`
   build MLM batches of `--batch_size` tokenized reviews (alternating, medians); their time is
   compared with one SptForMaskedLM training step (forward + backward) on a batch of that shape:
   share = collate / (collate + step). Above a few percent, the collator would be worth moving
   to dataloader workers (`dataloader_num_workers`).

Usage:
    python benchmarks/bench_data_throughput.py --quick      # < 1 min
    python benchmarks/bench_data_throughput.py --output runs/bench/data.json
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import numpy as np
import torch
from datasets import Dataset
from transformers import DataCollatorForLanguageModeling

from benchmarking import (
    build_model,
    format_table,
    median,
    resolve_preset,
    time_alternating,
    training_step,
    write_json,
)
from hf_spt.training.collators import DataCollatorForSpt
from hf_spt.models.tokenization_spt import build_byte_tokenizer

WORDS = "the movie film was a great bad plot acting story one of and it is not but this I very".split()


def synthetic_reviews(num_texts: int, seed: int = 0) -> list[str]:
    """IMDB-sized English-like texts: word salad with log-normal lengths (median ~1,000 characters)."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(mean=6.9, sigma=0.7, size=num_texts), 50, 13000).astype(int)
    words = rng.choice(WORDS, size=int(lengths.sum() // 4) + num_texts)
    texts, start = [], 0
    for length in lengths:
        count = max(1, length // 4)  # about 4 characters per word with its space
        texts.append(" ".join(words[start : start + count]))
        start += count
    return texts


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num_texts", type=int, default=25000, help="Reviews to tokenize (IMDB train: 25,000).")
    parser.add_argument("--max_length", type=int, default=4096, help="Truncation length (LRA Text: 4096).")
    parser.add_argument("--batch_size", type=int, default=8, help="Reviews per collated batch.")
    parser.add_argument("--preset", default="text", help="Model sizes of the training step the collator is compared with.")
    parser.add_argument("--repetitions", type=int, default=5, help="Timed collations / steps (median reported).")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads.")
    parser.add_argument("--quick", action="store_true", help="2,000 texts, max_length 1024, pathfinder-size step.")
    parser.add_argument("--output", help="Write the results as JSON here.")
    args = parser.parse_args(argv)
    if args.quick:
        args.num_texts, args.max_length, args.preset, args.repetitions = 2000, 1024, "pathfinder", 3
    return args


def main(args: argparse.Namespace) -> dict:
    torch.set_num_threads(args.threads)
    tokenizer = build_byte_tokenizer(model_max_length=args.max_length)
    dataset = Dataset.from_dict({"text": synthetic_reviews(args.num_texts)})
    start = time.perf_counter()
    tokenized = dataset.map(
        lambda batch: tokenizer(batch["text"], truncation=True, max_length=args.max_length),
        batched=True, remove_columns=["text"], desc="byte-level tokenizing",
    )
    tokenize_seconds = time.perf_counter() - start
    num_tokens = sum(len(ids) for ids in tokenized["input_ids"])

    longest_first = sorted(range(len(tokenized)), key=lambda i: -len(tokenized[i]["input_ids"]))
    features = [{"input_ids": tokenized[i]["input_ids"]} for i in longest_first[: args.batch_size]]
    collators = {
        "hf_spt": DataCollatorForSpt(tokenizer, mlm_probability=0.15),
        "transformers": DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15),
    }
    batches = {}
    collate_seconds = time_alternating(
        {name: partial(lambda c, n: batches.__setitem__(n, c(features)), c, name) for name, c in collators.items()},
        args.repetitions,
    )
    shape = tuple(batches["hf_spt"]["input_ids"].shape)
    preset = resolve_preset(args.preset, batch_size=shape[0], length=shape[1], vocab_size=len(tokenizer))
    model = build_model("spt_mlm", preset)
    step_seconds = time_alternating({"step": partial(training_step, model, batches["hf_spt"])}, args.repetitions)
    step = median(step_seconds["step"])
    collate = {name: median(seconds) for name, seconds in collate_seconds.items()}
    share = {name: seconds / (seconds + step) for name, seconds in collate.items()}

    print(f"tokenizing {args.num_texts} texts ({num_tokens} byte tokens): {args.num_texts / tokenize_seconds:.0f} texts/s, "
          f"{num_tokens / tokenize_seconds / 1e6:.2f} M tokens/s")
    print(f"collating {shape[0]}x{shape[1]} vs one {args.preset}-size training step ({step * 1000:.0f} ms):")
    print(format_table(["collator", "ms per batch", "share of step", "speed vs transformers"],
                       [[name, collate[name] * 1000, f"{100 * share[name]:.2f}%", collate["transformers"] / collate[name]]
                        for name in collators]))
    payload = {"benchmark": "data_throughput", "args": vars(args), "tokenize_seconds": tokenize_seconds,
               "num_tokens": num_tokens, "texts_per_s": args.num_texts / tokenize_seconds,
               "tokens_per_s": num_tokens / tokenize_seconds, "batch_shape": shape, "step_seconds": step,
               "collate_seconds": collate, "collate_share": share}
    write_json(args.output, payload)
    return payload


if __name__ == "__main__":
    main(parse_arguments())
