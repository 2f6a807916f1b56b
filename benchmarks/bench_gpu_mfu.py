"""GPU throughput and model FLOP utilisation (MFU) of the LRA Text preset in bf16, against BERT.

On a CUDA device: SptForMaskedLM and BertForMaskedLM at the Text preset (6 layers, d 512,
8 heads, FFN 2048, length 4096, 15% masked) train under bf16 autocast with SDPA (flash kernel);
forward + backward steps alternate, medians are reported. MFU = counted FLOPs per second
(formula in `benchmarks/benchmarking.py`) / peak, for two peaks: a large bf16 matmul measured in
the same run, and the device's datasheet dense bf16 peak if given (`--peak_tflops`, e.g. 989
for H100/H200 SXM). Peak memory is `torch.cuda.max_memory_allocated` over one step.

Eager and compiled models read the same batch: no attention mask, as the trainers' collators give an
unpadded batch on a GPU (`benchmarking.make_batch`). The JSON is rewritten after the eager rows and again
after the compiled ones, so a run stopped while compiling keeps the eager figures.

Without a CUDA device it prints what it needs and exits with status 2. `--dry_run` runs the same code on the
CPU at toy sizes (the tiny preset, a small matmul, `torch.compile` with dynamo's "eager" back-end, which
traces without generating code): the script's plumbing, for `gpu_self_check.py --dry_run`; its figures mean
nothing.

Usage:
    python benchmarks/bench_gpu_mfu.py --output runs/bench/gpu_mfu.json
    python benchmarks/bench_gpu_mfu.py --batch_size 16 --peak_tflops 989 --torch_compile
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

import torch

from benchmarking import (
    build_model,
    format_table,
    make_batch,
    matmul_flops_per_second,
    median,
    resolve_preset,
    synchronize,
    time_alternating,
    training_flops,
    training_step,
    write_json,
)

KINDS = ("spt_mlm", "bert_mlm")


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="text", help="Model sizes (default: LRA Text, 4096 tokens).")
    parser.add_argument("--batch_size", type=int, default=8, help="Sequences per step.")
    parser.add_argument("--repetitions", type=int, default=10, help="Timed steps per model (median reported).")
    parser.add_argument("--peak_tflops", type=float, help="Datasheet dense bf16 TFLOP/s of the device, for a second MFU.")
    parser.add_argument("--torch_compile", action="store_true", help="Also time torch.compile'd models.")
    parser.add_argument("--output", help="Write the results as JSON here.")
    parser.add_argument("--dry_run", action="store_true",
                        help="CPU, toy sizes, compiling without code generation: the plumbing only.")
    return parser.parse_args(argv)


def main(args: argparse.Namespace) -> dict:
    if not torch.cuda.is_available() and not args.dry_run:
        print("bench_gpu_mfu.py needs a CUDA device: a CUDA build of torch (this one: "
              f"{torch.__version__}) and a visible GPU (CUDA_VISIBLE_DEVICES). Nothing measured.")
        sys.exit(2)
    device, matmul_size, compile_backend = ("cpu", 256, "eager") if args.dry_run else ("cuda", 8192, "inductor")
    preset = resolve_preset("tiny" if args.dry_run else args.preset, batch_size=args.batch_size)
    matmul_peak = matmul_flops_per_second(matmul_size, repetitions=10, device=device, dtype=torch.bfloat16)
    models = {kind: build_model(kind, preset).to(device) for kind in KINDS}
    batch = make_batch("spt_mlm", preset, device=device)
    num_masked = int((batch["labels"] != -100).sum())
    device_name = torch.cuda.get_device_name() if device == "cuda" else "cpu (dry run)"
    payload = {"benchmark": "gpu_mfu", "device": device_name, "matmul_flops_per_s": matmul_peak, "args": vars(args),
               "attention_mask": "attention_mask" in batch, "results": []}
    results = payload["results"]
    for compiled in (False, True) if args.torch_compile else (False,):
        runners = {kind: torch.compile(model, backend=compile_backend) if compiled else model
                   for kind, model in models.items()}
        steps = {kind: partial(training_step, runner, batch, torch.bfloat16) for kind, runner in runners.items()}
        seconds = time_alternating(steps, args.repetitions, warmup=3, device=device)
        for kind in KINDS:
            if device == "cuda":
                torch.cuda.reset_peak_memory_stats()
            steps[kind]()
            synchronize(device)
            step = median(seconds[kind])
            achieved = training_flops(kind, preset, num_masked) / step
            results.append({
                "model": kind, "compiled": compiled, "tokens_per_s": preset.batch_size * preset.length / step,
                "tflops": achieved / 1e12, "mfu_matmul": achieved / matmul_peak,
                "mfu_datasheet": achieved / (args.peak_tflops * 1e12) if args.peak_tflops else None,
                "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None,
                "seconds": seconds[kind],
            })
        write_json(args.output, payload)  # the eager rows survive a compile that fails or runs out of time
    print(f"{device_name}: bf16 matmul {matmul_peak / 1e12:.0f} TFLOP/s; preset {preset.name}, "
          f"{preset.batch_size}x{preset.length}, bf16 autocast, sdpa")
    rows = [[r["model"], r["compiled"], r["tokens_per_s"], r["tflops"], f"{100 * r['mfu_matmul']:.1f}%",
             f"{100 * r['mfu_datasheet']:.1f}%" if r["mfu_datasheet"] else "-", r["peak_gib"]] for r in results]
    print(format_table(["model", "compiled", "tokens/s", "TFLOP/s", "MFU (matmul)", "MFU (datasheet)", "peak GiB"], rows))
    for compiled in sorted({r["compiled"] for r in results}):
        spt, bert = [next(r for r in results if r["model"] == k and r["compiled"] == compiled) for k in KINDS]
        memory = f"{spt['peak_gib'] / bert['peak_gib']:.2f}" if device == "cuda" else "-"
        print(f"compiled={compiled}: speed hf_spt/BERT {spt['tokens_per_s'] / bert['tokens_per_s']:.2f}, "
              f"memory hf_spt/BERT {memory}")
    return payload


if __name__ == "__main__":
    main(parse_arguments())
