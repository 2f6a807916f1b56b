"""Padded against unpadded batches of the same width: what padding costs the attention path.

A batch whose rows all fill its width reaches attention with no mask (transformers drops an all-ones
mask), so SDPA may use its fused kernel without one. A padded batch, which is every real ListOps or
Text batch, reaches it with a boolean mask: on a CPU the (B, 1, T, T) one `create_bidirectional_mask` builds, on
an accelerator the padding mask broadcast over queries, (B, 1, 1, T) (`attention_spt.key_padding_mask`), and
the back-end picks its kernel from that. This script times one training step (forward + backward)
of the same SPT model on both, at the same B x T, and names the attention operator each ran (read
from `torch.profiler`), so the docs can say which path padded batches take and what it costs.

The padded batch has every second row one token short (`benchmarking.make_batch`, which pads at least one token: next to nothing padded,
but a mask needed), so both batches do the same work apart from the mask: the ratio padded / unpadded is the
mask's cost.
`--pad_fraction` pads every second row more, as a random (not length-grouped) batch would.
Both are timed in alternation in one process (`time_alternating`); quote the ratio, not the seconds.

`--width_steps N` also measures what a width costs the first time it is seen: under each SDPA back-end of
`WIDTH_BACKENDS` (on a GPU cuDNN and memory-efficient forced, and the default choice), N synchronised steps on
padded batches each of a width never run before, against N on one width run before. cuDNN builds an execution
plan per shape, so a length-grouped run whose widths keep changing pays for that plan at every new width. The
new widths lie on both sides of the seen one (multiples of 8 apart, as `--pad_to_multiple_of 8` makes them), so
both sets do the same work on average. A back-end that cannot run the padded batch is reported with its error.

The JSON (`--json`) names the cuDNN version and is rewritten after each part, so a run stopped midway keeps
what it measured.

Usage:
    python benchmarks/bench_padded_attention.py                         # ListOps model, 8 x 1024, CPU
    python benchmarks/bench_padded_attention.py --device cuda --batch_size 32 --length 2000 --bf16 --width_steps 20
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import replace

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from benchmarking import (BenchPreset, build_model, format_table, make_batch, median, synchronize, time_alternating,
                          training_step, write_json)

LISTOPS = BenchPreset("listops", 2000, 24, 512, 6, 8, 2048, 0.1, 32)
"""ListOps with SPT (Amos et al.): 6 layers, d 512, 8 heads, FFN 2048, masking 10%, batch 32, up to 2,000 tokens."""
# the SDPA back-ends whose cost per new width is measured, per device type (None: the back-end SDPA picks itself;
# a CPU has neither cuDNN nor the memory-efficient kernel, so `gpu_self_check.py --dry_run` forces its own two)
WIDTH_BACKENDS = {"cuda": {"cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                           "default": None},
                  "cpu": {"flash": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH, "default": None}}
WIDTH_MULTIPLE = 8  # `--pad_to_multiple_of`'s default on an accelerator: the widths a length-grouped run meets


def attention_operators(model: torch.nn.Module, batch: dict[str, torch.Tensor], dtype: torch.dtype | None) -> list[str]:
    """The scaled-dot-product-attention operators one training step ran (their aten names)."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if batch["input_ids"].is_cuda else [])
    with profile(activities=activities) as profiler:
        training_step(model, batch, dtype)
    names = {event.key for event in profiler.key_averages()}
    return sorted(name for name in names if "attention" in name and name.startswith("aten::_"))


def fresh_widths(center: int, count: int, parts: int) -> list[list[int]]:
    """`parts` disjoint lists of `count` widths, none equal to `center`, multiples of `WIDTH_MULTIPLE` apart from it
    on alternate sides (+1, -1, +2, -2... multiples, dealt in turn), so each list averages about `center`."""
    offsets = [sign * k for k in range(1, count * parts // 2 + 2) for sign in (1, -1)][: count * parts]
    return [[center + WIDTH_MULTIPLE * offset for offset in offsets[part::parts]] for part in range(parts)]


def width_costs(model: torch.nn.Module, preset: BenchPreset, steps: int, device: str,
                dtype: torch.dtype | None) -> Iterator[tuple[str, dict]]:
    """For each back-end of `WIDTH_BACKENDS` in turn, its name and: seconds of `steps` synchronised training steps on
    padded batches of new widths and of one seen width (`center`, run once before), their medians and the difference
    (the cost of a new width), or the back-end's error. The widths stay within the model's positions."""
    backends = WIDTH_BACKENDS[torch.device(device).type]
    reach = WIDTH_MULTIPLE * -(-steps * len(backends) // 2)  # the farthest new width from the seen one
    center = preset.length - reach
    if center - reach < WIDTH_MULTIPLE:
        raise ValueError(f"--length {preset.length} leaves no room for {steps} new widths per back-end.")

    def timed(width: int) -> float:
        batch = make_batch("spt_mlm", replace(preset, length=width), device=device, pad_fraction=1 / width)
        synchronize(device)
        start = time.perf_counter()
        training_step(model, batch, dtype)
        synchronize(device)
        return time.perf_counter() - start

    for (name, backend), widths in zip(backends.items(), fresh_widths(center, steps, len(backends))):
        try:
            with sdpa_kernel(backend) if backend is not None else nullcontext():
                timed(center)  # the seen width: run once before it is timed
                seen = [timed(center) for _ in range(steps)]
                new = [timed(width) for width in widths]
        except RuntimeError as error:  # no kernel of this back-end takes the padded batch here
            yield name, {"error": str(error).strip().splitlines()[0]}
            continue
        yield name, {"seen_width": center, "new_widths": widths, "seen_seconds": seen, "new_seconds": new,
                     "seen_median": median(seen), "new_median": median(new),
                     "new_width_cost_seconds": median(new) - median(seen)}


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
    parser.add_argument("--width_steps", type=int, default=0,
                        help="Steps on new and on seen widths per SDPA back-end (0: leave the per-width cost out).")
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
    payload = {"preset": vars(preset), "device": args.device, "bf16": args.bf16, "torch": torch.__version__,
               "cudnn": torch.backends.cudnn.version(), "results": results}
    for name, batch in batches.items():
        operators = attention_operators(model, batch, dtype)
        step = median(seconds[name])
        real_tokens = int(batch["attention_mask"].sum()) if "attention_mask" in batch else batch["input_ids"].numel()
        rows.append([name, f"{step * 1e3:.0f}", f"{step / reference:.2f}", f"{real_tokens / step:.3g}", ", ".join(operators)])
        results[name] = {"seconds": seconds[name], "ratio_to_unpadded": step / reference, "real_tokens": real_tokens,
                         "attention_operators": operators, "attention_mask": "attention_mask" in batch}
    print(f"SPT masked LM, ListOps sizes, {preset.num_layers} layers, batch {preset.batch_size} x {preset.length}, "
          f"{args.device}{' bf16' if args.bf16 else ''}, torch {torch.__version__}, cuDNN {payload['cudnn']}, "
          f"{torch.get_num_threads()} threads")
    print(format_table(["batch", "ms / step (median)", "ratio to unpadded", "real tokens / s", "attention operator"], rows))
    write_json(args.json, payload)
    if args.width_steps:
        payload["width_costs"] = {}
        for name, cost in width_costs(model, preset, args.width_steps, args.device, dtype):
            payload["width_costs"][name] = cost
            write_json(args.json, payload)
        print(format_table(["SDPA back-end", "seen width (ms, median)", "new widths (ms, median)", "cost of a new width (ms)"],
                           [[name, *(f"{1e3 * cost[key]:.1f}" for key in ("seen_median", "new_median",
                                                                          "new_width_cost_seconds"))]
                            if "error" not in cost else [name, cost["error"], "-", "-"]
                            for name, cost in payload["width_costs"].items()]))


if __name__ == "__main__":
    main()
