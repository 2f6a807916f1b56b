"""How peak training memory grows with sequence length, hf_spt against transformers' BERT.

For each length, the extra peak memory of one MLM training step (forward + backward, batch 1;
activations, gradients and temporaries, not the weights; method in `benchmarks/benchmarking.py`)
is measured in a fresh process for SptForMaskedLM and BertForMaskedLM of the preset's size.
Growth from the shortest to each longer length is reported as
    (memory(T) / memory(T_min)) / (T / T_min)
i.e. how much faster than length memory grows: 1.0 is linear, quadratic attention would give
T / T_min. The goal for hf_spt is <= 1.3 (flash attention keeps no T x T matrix).

Usage:
    python benchmarks/bench_memory_growth.py --quick               # < 2 min
    python benchmarks/bench_memory_growth.py --preset text --lengths 512,1024,2048,4096 --output runs/bench/memory.json
"""

from __future__ import annotations

import argparse

import torch

from benchmarking import PRESETS, format_table, peak_step_bytes, resolve_preset, write_json

KINDS = ("spt_mlm", "bert_mlm")


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="text", help=f"Model sizes: {', '.join(PRESETS)}, tiny.")
    parser.add_argument("--lengths", default="512,1024,2048,4096", help="Comma-separated sequence lengths.")
    parser.add_argument("--attn_implementation", default="sdpa", help="sdpa or eager (both models).")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the measuring processes.")
    parser.add_argument("--quick", action="store_true", help="Pathfinder sizes, lengths 512,2048 (< 2 min).")
    parser.add_argument("--output", help="Write the results as JSON here.")
    args = parser.parse_args(argv)
    if args.quick:
        args.preset, args.lengths = "pathfinder", "512,2048"
    return args


def main(args: argparse.Namespace) -> dict:
    torch.set_num_threads(args.threads)
    lengths = sorted(int(length) for length in args.lengths.split(","))
    memory = {kind: {} for kind in KINDS}
    for length in lengths:
        preset = resolve_preset(args.preset, length=length, batch_size=1)
        for kind in KINDS:
            memory[kind][length] = peak_step_bytes(kind, preset, args.attn_implementation, args.threads) / 2**20
    shortest = lengths[0]
    growth = {kind: {t: (memory[kind][t] / memory[kind][shortest]) / (t / shortest) for t in lengths} for kind in KINDS}
    rows = [[t, memory["spt_mlm"][t], memory["bert_mlm"][t], memory["spt_mlm"][t] / memory["bert_mlm"][t],
             growth["spt_mlm"][t], growth["bert_mlm"][t]] for t in lengths]
    print(f"preset {args.preset}, batch 1, attention {args.attn_implementation}; growth = memory ratio / length ratio "
          f"from T={shortest}")
    print(format_table(["T", "hf_spt MiB", "BERT MiB", "memory hf_spt/BERT", "hf_spt growth", "BERT growth"], rows))
    longest = lengths[-1]
    for start in lengths[1:-1]:
        pair = {kind: growth[kind][longest] / growth[kind][start] for kind in KINDS}
        print(f"growth {start} -> {longest}: hf_spt {pair['spt_mlm']:.3f}, BERT {pair['bert_mlm']:.3f}")
    payload = {"benchmark": "memory_growth", "args": vars(args), "peak_mib": memory, "growth": growth}
    write_json(args.output, payload)
    return payload


if __name__ == "__main__":
    main(parse_arguments())
