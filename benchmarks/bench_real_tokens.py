"""Real tokens per second on variable-length data: hf_spt's data path against BERT's default one.

Fixed-length benchmarks hide what padding costs. Here both models train on the same rows, whose
lengths follow a real distribution, for one epoch of each phase:
- hf_spt: `SptForMaskedLM` / `SptForSequenceClassification` with what the tasks do by default:
  batches grouped by length when the lengths vary (`default_sampling_strategy`, true for both
  distributions here; transformers' `LengthGroupedSampler` over `grouping_lengths`, as the
  Trainers' `train_sampling_strategy="group_by_length"`) and padded to their longest row;
- BERT: `BertForMaskedLM` / `BertForSequenceClassification` of the same size with transformers'
  default data path: random batches (`RandomSampler`) padded to their longest row
  (`DataCollatorForLanguageModeling` / `DataCollatorWithPadding`).
Steps (forward + backward) alternate between the two, and the figure is real (non-pad) tokens
processed per second of step time; the ratio hf_spt / BERT is what to quote, since the machine
is shared. Also printed: the share of padded positions, the share of attention work (sum of
T^2 per row) spent on real tokens, and the extra peak memory of one step at each path's largest
batch (fresh process, method in `benchmarking.py`).

Length distributions: `listops` (generated ListOps trees, 500-2000 tokens, LRA's generator
settings) and `imdb` (IMDB-like review lengths: log-normal bytes, median 970, cut at 4096).

Usage:
    python benchmarks/bench_real_tokens.py                       # both distributions, both phases
    python benchmarks/bench_real_tokens.py --distributions listops --rows 256 --no_memory
"""

from __future__ import annotations

import argparse
import random
from dataclasses import replace

import numpy as np
import torch
from datasets import Dataset
from torch.utils.data import DataLoader, RandomSampler
from transformers import DataCollatorForLanguageModeling, DataCollatorWithPadding
from transformers.trainer_pt_utils import LengthGroupedSampler

from benchmarking import BenchPreset, build_model, format_table, peak_step_bytes, time_alternating, write_json
from hf_spt import DataCollatorForClassification, DataCollatorForSpt, build_word_tokenizer
from hf_spt.training.length_grouping import default_sampling_strategy, grouping_lengths
from hf_spt.tasks.listops_generator import generate_listops_example

DISTRIBUTIONS = ("listops", "imdb")
IMDB_MEDIAN_BYTES, IMDB_SIGMA, IMDB_CUT = 970, 0.75, 4096


def sample_lengths(distribution: str, rows: int, seed: int) -> list[int]:
    """Sequence lengths (tokens) of `rows` examples drawn from `distribution`."""
    if distribution == "listops":
        rng = random.Random(seed)
        # LRA's generator; the task drops parentheses, one token per remaining symbol
        return [len(source.replace("(", "").replace(")", "").split()) for source, _ in
                (generate_listops_example(rng) for _ in range(rows))]
    if distribution == "imdb":
        lengths = np.random.default_rng(seed).lognormal(np.log(IMDB_MEDIAN_BYTES), IMDB_SIGMA, rows)
        return np.clip(lengths.astype(int), 10, IMDB_CUT).tolist()
    raise ValueError(f"Unknown distribution {distribution!r}; choose from {', '.join(DISTRIBUTIONS)}.")


def make_rows(lengths: list[int], vocab_size: int, seed: int) -> Dataset:
    """Random token ids (above the 4 special ids) of the given lengths, with binary labels."""
    rng = np.random.default_rng(seed)
    return Dataset.from_dict({
        "input_ids": [rng.integers(4, vocab_size, length).tolist() for length in lengths],
        "labels": rng.integers(0, 2, len(lengths)).tolist(),
    })


def batches(rows: Dataset, phase: str, hf_spt: bool, batch_size: int, tokenizer, mlm_probability: float, seed: int):
    """One epoch of padded batches, by hf_spt's default path (the tasks' sampler rule, hf_spt collators) or BERT's
    (random, transformers' collators)."""
    generator = torch.Generator().manual_seed(seed)
    sampler = RandomSampler(rows, generator=generator)
    if hf_spt:
        if default_sampling_strategy(rows) == "group_by_length":
            sampler = LengthGroupedSampler(batch_size, lengths=grouping_lengths(rows), generator=generator)
        collator = (DataCollatorForSpt(tokenizer, mlm_probability=mlm_probability) if phase == "mlm"
                    else DataCollatorForClassification(tokenizer))
    else:
        collator = (DataCollatorForLanguageModeling(tokenizer, mlm_probability=mlm_probability) if phase == "mlm"
                    else DataCollatorWithPadding(tokenizer))
    columns = ["input_ids"] if phase == "mlm" else ["input_ids", "labels"]
    loader = DataLoader(rows.select_columns(columns), batch_size=batch_size, sampler=sampler, collate_fn=collator)
    return list(loader)


def padding_figures(batch_list: list[dict[str, torch.Tensor]]) -> dict[str, float]:
    """Real-token count, padded share of positions, and share of attention work (T^2) on real tokens."""
    real = sum(int(b["attention_mask"].sum()) for b in batch_list)
    positions = sum(b["attention_mask"].numel() for b in batch_list)
    real_square = sum(int((b["attention_mask"].sum(dim=1) ** 2).sum()) for b in batch_list)
    padded_square = sum(b["attention_mask"].shape[0] * b["attention_mask"].shape[1] ** 2 for b in batch_list)
    return {"real_tokens": real, "padding_share": 1 - real / positions, "attention_on_real": real_square / padded_square,
            "largest_batch": max(tuple(b["attention_mask"].shape) for b in batch_list)}


def run_phase(args: argparse.Namespace, distribution: str, phase: str, rows: Dataset, tokenizer) -> dict:
    """Time one epoch of `phase` ("mlm" or "cls") on both paths; return figures and the ratio."""
    longest = max(len(ids) for ids in rows["input_ids"])
    preset = BenchPreset(distribution, longest, len(tokenizer), args.hidden_size, args.num_layers, args.num_heads,
                         4 * args.hidden_size, args.mlm_probability, args.batch_size)
    models = {"hf_spt": build_model(f"spt_{phase}", preset), "bert": build_model(f"bert_{phase}", preset)}
    paths = {"hf_spt": batches(rows, phase, True, args.batch_size, tokenizer, args.mlm_probability, args.seed),
             "bert": batches(rows, phase, False, args.batch_size, tokenizer, args.mlm_probability, args.seed)}
    seconds = {name: 0.0 for name in models}
    for index in range(len(paths["hf_spt"])):  # both paths have the same number of batches
        steps = {name: (lambda n=name: _step(models[n], paths[n][index])) for name in models}
        timed = time_alternating(steps, repetitions=1, warmup=1 if index == 0 else 0)
        for name in models:
            seconds[name] += timed[name][0]
    result = {"distribution": distribution, "phase": phase}
    for name in models:
        figures = padding_figures(paths[name])
        result[name] = {**figures, "seconds": seconds[name], "real_tokens_per_s": figures["real_tokens"] / seconds[name]}
        if not args.no_memory:
            batch, length = figures["largest_batch"]
            kind = ("spt_" if name == "hf_spt" else "bert_") + phase
            result[name]["peak_step_mib"] = peak_step_bytes(kind, replace(preset, batch_size=batch, length=length),
                                                            threads=args.threads) / 2**20
    result["speed_ratio"] = result["hf_spt"]["real_tokens_per_s"] / result["bert"]["real_tokens_per_s"]
    return result


def _step(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> None:
    model.zero_grad(set_to_none=True)
    model(**batch).loss.backward()


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--distributions", default=",".join(DISTRIBUTIONS), help="listops, imdb (comma-separated).")
    parser.add_argument("--phases", default="mlm,cls", help="mlm (SPT), cls (fine-tuning), or both.")
    parser.add_argument("--rows", type=int, default=320, help="Examples per distribution (one epoch is timed).")
    parser.add_argument("--batch_size", type=int, default=8, help="Batch size of both paths.")
    parser.add_argument("--hidden_size", type=int, default=128, help="Model width (FFN 4x).")
    parser.add_argument("--num_layers", type=int, default=2, help="Layers.")
    parser.add_argument("--num_heads", type=int, default=4, help="Attention heads.")
    parser.add_argument("--mlm_probability", type=float, default=0.15, help="Masking rate of the MLM phase.")
    parser.add_argument("--max_length", type=int, help="Cut every length to this (a quick smoke run; default: no cut).")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of lengths, ids, samplers and masking.")
    parser.add_argument("--no_memory", action="store_true", help="Skip the peak-memory subprocesses.")
    parser.add_argument("--output", help="Also write the figures as JSON.")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_arguments(argv)
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # as PretrainTrainer does on CPU, for both models
    tokenizer = build_word_tokenizer([f"t{i}" for i in range(60)])
    results = []
    for distribution in args.distributions.split(","):
        lengths = [min(length, args.max_length or length) for length in sample_lengths(distribution, args.rows, args.seed)]
        rows = make_rows(lengths, len(tokenizer), args.seed)
        for phase in args.phases.split(","):
            results.append(run_phase(args, distribution, phase, rows, tokenizer))
            r = results[-1]
            print(f"{distribution} {phase}: hf_spt/BERT real tokens/s {r['speed_ratio']:.2f}", flush=True)
    rows_out = [[r["distribution"], r["phase"], f"{r['speed_ratio']:.2f}", f"{r['hf_spt']['padding_share']:.2f}",
                 f"{r['bert']['padding_share']:.2f}", f"{r['hf_spt']['attention_on_real']:.2f}",
                 f"{r['bert']['attention_on_real']:.2f}",
                 *(f"{r[name].get('peak_step_mib', float('nan')):.0f}" for name in ("hf_spt", "bert"))]
                for r in results]
    print(format_table(["lengths", "phase", "real tok/s hf_spt/BERT", "pad share hf_spt", "pad share BERT",
                        "attention on real hf_spt", "attention on real BERT", "peak MiB hf_spt", "peak MiB BERT"],
                       rows_out))
    if args.output:
        write_json(args.output, {"arguments": vars(args), "results": results})
    return results


if __name__ == "__main__":
    main()
