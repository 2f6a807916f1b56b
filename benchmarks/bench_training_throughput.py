"""Training throughput and peak memory of hf_spt against transformers' BERT, same size, same run.

For each preset, SptForMaskedLM and BertForMaskedLM (and, with --heads mlm,cls, the
sequence-classification models) of equal size, dropout 0 and attention implementation get the
same batch; forward + backward steps are timed in alternation, `--repetitions` times, and the
medians compared (ratio = hf_spt / BERT: above 1 hf_spt is faster). Peak memory is the extra
memory of one step in a fresh process (method: `benchmarks/benchmarking.py`). The achieved FLOP/s
(formula: `benchmarks/benchmarking.py`) is printed as a share of a large fp32 matmul measured in
the same run: the machine's practical limit.

Usage:
    python benchmarks/bench_training_throughput.py --quick                       # < 2 min
    python benchmarks/bench_training_throughput.py --presets pathfinder,text --output runs/bench/throughput.json
    python benchmarks/bench_training_throughput.py --vocab 32000 --length 512    # word level, 15% masked
    python benchmarks/bench_training_throughput.py --presets text --torch_compile --bf16
"""

from __future__ import annotations

import argparse
from functools import partial

import torch

from benchmarking import (
    PRESETS,
    build_model,
    format_table,
    make_batch,
    matmul_flops_per_second,
    median,
    peak_step_bytes,
    resolve_preset,
    time_alternating,
    training_flops,
    training_step,
    write_json,
)


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", help=f"Comma-separated presets: {', '.join(PRESETS)}, tiny (default: "
                        "pathfinder,text,image,markov; 'word' when --vocab or --length is given).")
    parser.add_argument("--vocab", type=int, help="Vocabulary size; with --length and no --presets: the 'word' sizes.")
    parser.add_argument("--length", type=int, help="Sequence length override.")
    parser.add_argument("--batch_size", type=int, help="Batch size override (default: the preset's CPU batch).")
    parser.add_argument("--pad_fraction", type=float, default=0.0,
                        help="Every second row ends in this share of padding (default 0: no padding, no mask).")
    parser.add_argument("--heads", default="mlm", help="mlm, cls or mlm,cls: which model heads to compare.")
    parser.add_argument("--attn_implementation", default="sdpa", help="sdpa or eager (both models).")
    parser.add_argument("--repetitions", type=int, default=5, help="Timed steps per model (median reported).")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads for timing and memory.")
    parser.add_argument("--no_memory", action="store_true", help="Skip the peak-memory subprocesses.")
    parser.add_argument("--no_flush_denormal", dest="flush_denormal", action="store_false",
                        help="Keep denormal floats. By default both models run with torch.set_flush_denormal(True), "
                        "as PretrainTrainer sets on CPU: denormals (softmax gradients of a large vocabulary with peaked "
                        "logits) make CPU matmuls several times slower.")
    parser.add_argument("--torch_compile", action="store_true", help="Also time torch.compile'd models.")
    parser.add_argument("--bf16", action="store_true", help="Also time bf16 autocast.")
    parser.add_argument("--matmul_size", type=int, default=2048, help="Side of the fp32 matmul giving the machine peak.")
    parser.add_argument("--quick", action="store_true",
                        help="Small and fast (< 2 min): presets pathfinder,word (unless --presets) at batch 1, "
                        "length 512 and 256, 3 repetitions.")
    parser.add_argument("--output", help="Write the results as JSON here.")
    args = parser.parse_args(argv)
    if args.presets is None:
        default = "pathfinder,word" if args.quick else "pathfinder,text,image,markov"
        args.presets = "word" if (args.vocab or args.length) else default
    if args.quick:
        args.repetitions = min(args.repetitions, 3)
    return args


def variants(args: argparse.Namespace) -> list[tuple[str, torch.dtype | None, bool]]:
    """(label, autocast dtype, compiled) combinations to time."""
    chosen = [("fp32", None, False)]
    if args.bf16:
        chosen.append(("bf16", torch.bfloat16, False))
    if args.torch_compile:
        chosen.append(("fp32+compile", None, True))
    return chosen


def bench_preset(args: argparse.Namespace, name: str, head: str, peak: float) -> list[dict]:
    overrides = dict(vocab_size=args.vocab, length=args.length, batch_size=args.batch_size)
    if args.quick:
        overrides["batch_size"] = overrides["batch_size"] or 1
        overrides["length"] = overrides["length"] or (256 if name in ("word", "text") else 512)
    preset = resolve_preset(name, **overrides)
    kinds = (f"spt_{head}", f"bert_{head}")
    models = {kind: build_model(kind, preset, args.attn_implementation) for kind in kinds}
    batch = make_batch(kinds[0], preset, pad_fraction=args.pad_fraction)
    num_masked = int((batch["labels"] != -100).sum()) if head == "mlm" else None
    rows = []
    for label, dtype, compiled in variants(args):
        runners = {kind: torch.compile(model) if compiled else model for kind, model in models.items()}
        steps = {kind: partial(training_step, runner, batch, dtype) for kind, runner in runners.items()}
        seconds = time_alternating(steps, args.repetitions, warmup=2 if compiled else 1)
        tokens = preset.batch_size * preset.length
        result = {"preset": preset.name, "head": head, "variant": label, "length": preset.length,
                  "batch_size": preset.batch_size, "vocab_size": preset.vocab_size}
        for kind in kinds:
            median_seconds = median(seconds[kind])
            flops = training_flops(kind, preset, num_masked)
            result[f"{kind}_tokens_per_s"] = tokens / median_seconds
            result[f"{kind}_seconds"] = seconds[kind]
            result[f"{kind}_matmul_share"] = flops / median_seconds / peak
        if label == "fp32" and not args.no_memory:
            for kind in kinds:
                result[f"{kind}_peak_mib"] = peak_step_bytes(
                kind, preset, args.attn_implementation, args.threads, args.pad_fraction) / 2**20
        rows.append(result)
        print(f"{preset.name} {head} {label}: hf_spt/BERT speed "
              f"{result[kinds[0] + '_tokens_per_s'] / result[kinds[1] + '_tokens_per_s']:.3f}", flush=True)
    return rows


def main(args: argparse.Namespace) -> dict:
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(args.flush_denormal)
    peak = matmul_flops_per_second(args.matmul_size)
    results = []
    for name in args.presets.split(","):
        for head in args.heads.split(","):
            results.extend(bench_preset(args, name.strip(), head.strip(), peak))
    table = []
    for r in results:
        spt, bert = f"spt_{r['head']}", f"bert_{r['head']}"
        memory = (r[f"{spt}_peak_mib"], r[f"{bert}_peak_mib"], r[f"{spt}_peak_mib"] / r[f"{bert}_peak_mib"]) \
            if f"{spt}_peak_mib" in r else ("-", "-", "-")
        r["speed_ratio"] = r[f"{spt}_tokens_per_s"] / r[f"{bert}_tokens_per_s"]
        table.append([r["preset"], r["head"], r["variant"], f"{r['batch_size']}x{r['length']}", r["vocab_size"],
                      r[f"{spt}_tokens_per_s"], r[f"{bert}_tokens_per_s"], r["speed_ratio"], *memory,
                      f"{100 * r[f'{spt}_matmul_share']:.1f}%", f"{100 * r[f'{bert}_matmul_share']:.1f}%"])
    print(f"threads {args.threads}, flush denormals {args.flush_denormal}, attention {args.attn_implementation}, padding {args.pad_fraction:.0%} of every "
          f"second row, fp32 matmul peak {peak / 1e9:.1f} GFLOP/s, "
          f"median of {args.repetitions} alternating steps")
    print(format_table(["preset", "head", "variant", "BxT", "vocab", "hf_spt tok/s", "BERT tok/s", "speed hf_spt/BERT",
                        "hf_spt MiB", "BERT MiB", "memory hf_spt/BERT", "hf_spt % of matmul", "BERT % of matmul"], table))
    payload = {"benchmark": "training_throughput", "matmul_flops_per_s": peak, "args": vars(args), "results": results}
    write_json(args.output, payload)
    return payload


if __name__ == "__main__":
    main(parse_arguments())
