"""What `--portable_numerics` costs: an SPT training step with the CPU numerics pinned to AVX2, and in the
cross-vendor mode (MKL's COMPATIBLE branch too), against the CPU's own.

The numerics are fixed when torch initialises (`hf_spt.numerics`), so each measurement is a fresh process: native
(the pinning variables removed from its environment) or pinned to a mode (`numerics.portable_environment`, then the
check and deterministic algorithms, as a portable run has them). Both time the same step, an SPT MLM forward, backward
and AdamW update on the same batch, at two sizes of the digits recipe (2 layers, d 64, 4 heads, MLP 128, 50%
masking, batch 32): digits16 (256 pixel tokens) and 784 tokens (a 28x28 picture). Processes of the three kinds
take turns, `--rounds` each, and each ratio is of the medians over all their steps, measured in this one run (the
machine is shared: only the ratios mean anything).

Usage:
    python benchmarks/bench_portable_numerics.py                      # one thread, 2 rounds
    python benchmarks/bench_portable_numerics.py --threads 2 --rounds 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from benchmarking import BenchPreset, build_model, format_table, make_batch, median, write_json

from hf_spt import numerics

CONFIGS = {"digits16": BenchPreset("digits16", 256, 36, 64, 2, 4, 128, 0.5, 32),
           "784 tokens": BenchPreset("784", 784, 36, 64, 2, 4, 128, 0.5, 32)}


def time_steps(preset: BenchPreset, steps: int, warmup: int) -> list[float]:
    """Seconds of each of `steps` training steps (after `warmup`) of an SPT MLM model of `preset`."""
    import torch

    torch.manual_seed(0)
    model = build_model("spt_mlm", preset)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = make_batch("spt_mlm", preset)
    seconds = []
    for step in range(warmup + steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        model(**batch).loss.backward()
        optimizer.step()
        if step >= warmup:
            seconds.append(time.perf_counter() - start)
    return seconds


KINDS = {"native": None, "portable AVX2": "true", "cross-vendor": numerics.CROSS_VENDOR}
"""Each numerics measured, and the `portable_numerics` mode that pins it (None: native)."""


def child(spec: dict) -> None:
    """One measuring process: pinned to the spec's mode (its environment is pinned already) or native; prints
    JSON."""
    import torch

    torch.set_num_threads(spec["threads"])
    if spec["mode"] is not None:
        numerics.portable_numerics(spec["mode"])
    seconds = time_steps(BenchPreset(**spec["preset"]), spec["steps"], spec["warmup"])
    print(json.dumps({"seconds": seconds, "capability": torch.backends.cpu.get_cpu_capability(),
                      "mkl_branch": numerics.mkl_branch()}))


def measure(preset: BenchPreset, mode: str | None, args: argparse.Namespace) -> dict:
    """`child` in a fresh process with native numerics or those of `mode`."""
    unpinned = {k: v for k, v in os.environ.items()
                if k not in (*numerics.PORTABLE_ENVIRONMENT, numerics.OVERRIDDEN_ENV)}
    env = {**(unpinned if mode is None else numerics.portable_environment(unpinned, mode)),
           "OMP_NUM_THREADS": str(args.threads)}
    spec = {"preset": asdict(preset), "mode": mode, "threads": args.threads, "steps": args.steps,
            "warmup": args.warmup}
    completed = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env, capture_output=True,
                               text=True, check=True, cwd=Path(__file__).parent)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each measuring process.")
    parser.add_argument("--rounds", type=int, default=2, help="Processes of each kind per configuration, rotating.")
    parser.add_argument("--steps", type=int, default=5, help="Timed steps per process.")
    parser.add_argument("--warmup", type=int, default=2, help="Untimed steps first.")
    parser.add_argument("--json", help="Also write the figures here.")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return {}
    figures = {}
    for name, preset in CONFIGS.items():
        seconds: dict[str, list[float]] = {kind: [] for kind in KINDS}
        shown: dict[str, str] = {}
        for round_ in range(args.rounds):  # the order turns every round
            order = list(KINDS)[round_ % len(KINDS):] + list(KINDS)[:round_ % len(KINDS)]
            for kind in order:
                measured = measure(preset, KINDS[kind], args)
                seconds[kind] += measured["seconds"]
                shown[kind] = f"{measured['capability']}, MKL {measured['mkl_branch']}"
        medians = {kind: median(seconds[kind]) for kind in KINDS}
        figures[name] = {"tokens": preset.length, **{f"{kind}_s": medians[kind] for kind in KINDS},
                         **{f"{kind}_kernels": shown[kind] for kind in KINDS},
                         "portable_ratio": medians["portable AVX2"] / medians["native"],
                         "cross_vendor_ratio": medians["cross-vendor"] / medians["native"],
                         "cross_vendor_over_portable": medians["cross-vendor"] / medians["portable AVX2"]}
    print(format_table(["configuration", "tokens", *(f"{kind} s (kernels)" for kind in KINDS), "AVX2 / native",
                        "cross-vendor / native", "cross-vendor / AVX2"],
                       [[name, f["tokens"], *(f"{f[f'{kind}_s']:.3f} ({f[f'{kind}_kernels']})" for kind in KINDS),
                         f["portable_ratio"], f["cross_vendor_ratio"], f["cross_vendor_over_portable"]]
                        for name, f in figures.items()]))
    write_json(args.json, {"threads": args.threads, "rounds": args.rounds, "steps": args.steps, "figures": figures})
    return figures


if __name__ == "__main__":
    main()
