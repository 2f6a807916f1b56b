"""What `--portable_numerics` costs: an SPT training step with the CPU numerics pinned to AVX2 against the CPU's own.

The numerics are fixed when torch initialises (`hf_spt.numerics`), so each measurement is a fresh process: native
(the pinning variables removed from its environment) or portable (`numerics.portable_environment`, then the check
and deterministic algorithms, as a portable run has them). Both time the same step, an SPT MLM forward, backward
and AdamW update on the same batch, at two sizes of the digits recipe (2 layers, d 64, 4 heads, MLP 128, 50%
masking, batch 32): digits16 (256 pixel tokens) and 784 tokens (a 28x28 picture). Processes of the two kinds
alternate, `--rounds` each, and the ratio portable / native is of the medians over all their steps, measured in
this one run (the machine is shared: only the ratio means anything).

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


def child(spec: dict) -> None:
    """One measuring process: portable numerics checked (its environment is pinned) or native; prints JSON."""
    import torch

    torch.set_num_threads(spec["threads"])
    if spec["portable"]:
        numerics.hold_portable_numerics()
    seconds = time_steps(BenchPreset(**spec["preset"]), spec["steps"], spec["warmup"])
    print(json.dumps({"seconds": seconds, "capability": torch.backends.cpu.get_cpu_capability()}))


def measure(preset: BenchPreset, portable: bool, args: argparse.Namespace) -> dict:
    """`child` in a fresh process with native or portable numerics."""
    unpinned = {k: v for k, v in os.environ.items()
                if k not in (*numerics.PORTABLE_ENVIRONMENT, numerics.OVERRIDDEN_ENV)}
    env = {**(numerics.portable_environment(unpinned) if portable else unpinned), "OMP_NUM_THREADS": str(args.threads)}
    spec = {"preset": asdict(preset), "portable": portable, "threads": args.threads, "steps": args.steps,
            "warmup": args.warmup}
    completed = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env, capture_output=True,
                               text=True, check=True, cwd=Path(__file__).parent)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each measuring process.")
    parser.add_argument("--rounds", type=int, default=2, help="Processes of each kind per configuration, alternating.")
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
        seconds: dict[str, list[float]] = {"native": [], "portable": []}
        capability = {}
        for round_ in range(args.rounds):  # the order flips every round
            for kind in ("native", "portable") if round_ % 2 == 0 else ("portable", "native"):
                measured = measure(preset, kind == "portable", args)
                seconds[kind] += measured["seconds"]
                capability[kind] = measured["capability"]
        native, portable = median(seconds["native"]), median(seconds["portable"])
        figures[name] = {"tokens": preset.length, "native_capability": capability["native"],
                         "portable_capability": capability["portable"], "native_s": native, "portable_s": portable,
                         "ratio": portable / native}
    print(format_table(["configuration", "tokens", "native (capability)", "portable (capability)", "portable / native"],
                       [[name, f["tokens"], f"{f['native_s']:.3f} s ({f['native_capability']})",
                         f"{f['portable_s']:.3f} s ({f['portable_capability']})", f["ratio"]]
                        for name, f in figures.items()]))
    write_json(args.json, {"threads": args.threads, "rounds": args.rounds, "steps": args.steps, "figures": figures})
    return figures


if __name__ == "__main__":
    main()
