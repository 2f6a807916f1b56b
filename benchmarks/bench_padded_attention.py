"""Padded against unpadded batches of the same width: what padding costs the attention path.

A batch whose rows all fill its width reaches attention with no mask (transformers drops an all-ones
mask), so SDPA may use its fused kernel without one. A padded batch, which is every real ListOps or
Text batch, reaches it with the (B, 1, T, T) boolean mask `create_bidirectional_mask` builds, and
the back-end picks its kernel from that. This script times one training step (forward + backward)
of the same SPT model on both, at the same B x T, and names the attention operator each ran (read
from `torch.profiler`), so the docs can say which path padded batches take and what it costs.

The padded batch has every second row one token short (`benchmarking.make_batch`: next to nothing padded,
but a mask needed), so both batches do the same work apart from the mask: the ratio padded / unpadded is the
mask's cost.
`--pad_fraction` pads every second row more, as a random (not length-grouped) batch would.
Both are timed in alternation in one process (`time_alternating`); quote the ratio, not the seconds.

Usage:
    python benchmarks/bench_padded_attention.py                         # ListOps model, 8 x 1024, CPU
    python benchmarks/bench_padded_attention.py --device cuda --batch_size 32 --length 2000 --bf16
"""

from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarking import (BenchPreset, build_model, format_table, make_batch, median, time_alternating, training_step,
                          write_json)

LISTOPS = BenchPreset("listops", 2000, 24, 512, 6, 8, 2048, 0.1, 32)
"""ListOps with SPT (Amos et al.): 6 layers, d 512, 8 heads, FFN 2048, masking 10%, batch 32, up to 2,000 tokens."""


def attention_operators(model: torch.nn.Module, batch: dict[str, torch.Tensor], dtype: torch.dtype | None) -> list[str]:
    """The scaled-dot-product-attention operators one training step ran (their aten names)."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if batch["input_ids"].is_cuda else [])
    with profile(activities=activities) as profiler:
        training_step(model, batch, dtype)
    names = {event.key for event in profiler.key_averages()}
    return sorted(name for name in names if "attention" in name and name.startswith("aten::_"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=None, help="Default: ListOps's 6.")
    parser.add_argument("--pad_fraction", type=float, default=0.5,
                        help="The share of padding in every second row of the 'random batch' case.")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bf16", action="store_true", help="Autocast to bfloat16 (on a GPU).")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None, help="Also write the results here.")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    preset = BenchPreset(LISTOPS.name, args.length, LISTOPS.vocab_size, LISTOPS.hidden_size,
                         args.layers or LISTOPS.num_layers, LISTOPS.num_heads, LISTOPS.intermediate_size,
                         LISTOPS.mlm_probability, args.batch_size)
    dtype = torch.bfloat16 if args.bf16 else None
    model = build_model("spt_mlm", preset).to(args.device)
    batches = {  # make_batch pads every second row by the fraction given
        "unpadded": make_batch("spt_mlm", preset, device=args.device),
        "padded (every 2nd row 1 token short)": make_batch("spt_mlm", preset, device=args.device,
                                                            pad_fraction=1 / preset.length),
        f"random batch (every 2nd row {args.pad_fraction:.0%} pad)": make_batch(
            "spt_mlm", preset, device=args.device, pad_fraction=args.pad_fraction),
    }
    seconds = time_alternating({name: (lambda b=batch: training_step(model, b, dtype)) for name, batch in batches.items()},
                               args.repetitions, device=args.device)
    reference = median(seconds["unpadded"])
    rows, results = [], {}
    for name, batch in batches.items():
        operators = attention_operators(model, batch, dtype)
        step = median(seconds[name])
        real_tokens = int(batch["attention_mask"].sum())
        rows.append([name, f"{step * 1e3:.0f}", f"{step / reference:.2f}", f"{real_tokens / step:.3g}", ", ".join(operators)])
        results[name] = {"seconds": seconds[name], "ratio_to_unpadded": step / reference, "real_tokens": real_tokens,
                         "attention_operators": operators}
    print(f"SPT masked LM, ListOps sizes, {preset.num_layers} layers, batch {preset.batch_size} x {preset.length}, "
          f"{args.device}{' bf16' if args.bf16 else ''}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(format_table(["batch", "ms / step (median)", "ratio to unpadded", "real tokens / s", "attention operator"], rows))
    write_json(args.json, {"preset": vars(preset), "device": args.device, "bf16": args.bf16,
                           "torch": torch.__version__, "results": results})


if __name__ == "__main__":
    main()
