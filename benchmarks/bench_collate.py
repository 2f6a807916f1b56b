"""Collating a ListOps batch at the release's lengths: hf_spt's numpy padding against the tokenizer's `pad`.

Batches of `--batch_size` generated ListOps trees (the `listops` task: LRA's generator settings, 500-2000
tokens) are collated by hf_spt's two collators (`DataCollatorForSpt`: pad, mask; `DataCollatorForClassification`:
pad) and, as the reference in the same run, by the path they replaced: transformers' `DataCollatorForLanguageModeling`
with hf_spt's masking (`tokenizer.pad` on Python lists, then the same `torch_mask_tokens`) and `tokenizer.pad` alone.
Timings alternate (medians); quote the ratios. The widths of the collated batches are printed too: with
`pad_to_multiple_of=8` (the default on an accelerator) every one is a multiple of 8.

Usage:
    python benchmarks/bench_collate.py                  # 32 rows, 20 batches
    python benchmarks/bench_collate.py --batch_size 32 --repetitions 50 --json runs/bench/collate.json
"""

from __future__ import annotations

import argparse

import torch
from transformers import DataCollatorForLanguageModeling

from benchmarking import format_table, median, time_alternating, write_json
from hf_spt.tasks import load_task
from hf_spt.training.collators import DataCollatorForClassification, DataCollatorForSpt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch_size", type=int, default=32, help="Rows per batch (ListOps with SPT: 32).")
    parser.add_argument("--batches", type=int, default=8, help="Different batches, collated in turn.")
    parser.add_argument("--repetitions", type=int, default=20)
    parser.add_argument("--json", default=None, help="Also write the results here.")
    args = parser.parse_args()
    torch.set_num_threads(1)
    task = load_task("listops", seed=0, num_train=args.batch_size * args.batches, num_validation=8, num_test=8)
    rows = [{"input_ids": ids} for ids in task.dataset["train"]["input_ids"]]
    batches = [rows[i:i + args.batch_size] for i in range(0, len(rows), args.batch_size)]
    tokenizer = task.tokenizer
    spt = DataCollatorForSpt(tokenizer, mlm_probability=0.1, pad_to_multiple_of=8)
    classification = DataCollatorForClassification(tokenizer, pad_to_multiple_of=8)
    reference = DataCollatorForSpt(tokenizer, mlm_probability=0.1, pad_to_multiple_of=8)
    counter = {"index": 0}

    def each_batch(collate):
        def step():
            collate(batches[counter["index"] % len(batches)])
            counter["index"] += 1
        return step

    steps = {
        "hf_spt DataCollatorForSpt (numpy pad, mask)": each_batch(spt),
        "reference: tokenizer.pad, then the same masking": each_batch(
            lambda batch: DataCollatorForLanguageModeling.torch_call(reference, batch)),
        "hf_spt DataCollatorForClassification (numpy pad)": each_batch(
            lambda batch: classification([{**row, "labels": 0} for row in batch])),
        "reference: tokenizer.pad alone": each_batch(
            lambda batch: tokenizer.pad({"input_ids": [row["input_ids"] for row in batch]}, return_tensors="pt")),
    }
    seconds = time_alternating(steps, args.repetitions * len(batches))
    widths = [spt(batch)["input_ids"].shape[1] for batch in batches]
    lengths = [len(row["input_ids"]) for row in rows]
    names = list(steps)
    table = [[name, f"{median(seconds[name]) * 1e3:.2f}"] for name in names]
    print(f"{args.batch_size} ListOps rows a batch, lengths {min(lengths)}-{max(lengths)}, widths {sorted(set(widths))} "
          f"(all multiples of 8: {all(width % 8 == 0 for width in widths)}), torch {torch.__version__}, 1 thread")
    print(format_table(["collator", "ms / batch (median)"], table))
    print(f"ratio masked-LM reference / hf_spt: {median(seconds[names[1]]) / median(seconds[names[0]]):.1f}; "
          f"padding reference / hf_spt: {median(seconds[names[3]]) / median(seconds[names[2]]):.1f}")
    write_json(args.json, {"batch_size": args.batch_size, "widths": widths,
                           "milliseconds": {name: [1e3 * s for s in seconds[name]] for name in names}})


if __name__ == "__main__":
    main()
