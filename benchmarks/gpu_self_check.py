"""GPU self-check before the full LRA suite: MFU, then a few hundred steps of full-scale ListOps SPT (under 10 minutes).

1. `bench_gpu_mfu.py` (LRA Text preset, bf16, SptForMaskedLM against BERT): MFU and peak memory.
2. Full-scale ListOps SPT as `run_lra.py` runs it (the `amos_lra` recipe: 6 layers, d 512, 8 heads,
   FFN 2048, 2048 positions, batch 32, 10% masking, AdamW 1e-3; bf16, flash_attention_2 when
   installed, else SDPA; length-grouped batches) for `--steps` steps on generated trees of the
   release's lengths (500-2000 tokens). The SPT steps/s measured here, with the step counts of
   `run_lra.py --dry_run`, gives the suite's GPU-hours for ListOps:
       GPU-hours = seeds x (scratch + scratch_compute_matched + spt steps) / (steps/s x 3600)

Writes OUTPUT_DIR/gpu_self_check.json (steps/s, the MFU results, the ListOps estimate). Without a
CUDA device it prints what it needs and exits with status 2, as bench_gpu_mfu.py does.

Usage (on a lent GPU):
    python benchmarks/gpu_self_check.py --output_dir $OUT
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SEEDS = 3
MFU_SECONDS, LISTOPS_SECONDS = 180, 360  # each step's limit: the whole check stays under 10 minutes


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", default="runs/gpu_self_check")
    parser.add_argument("--steps", type=int, default=300, help="ListOps SPT steps to time.")
    parser.add_argument("--num_train", type=int, default=12000, help="Generated ListOps trees (>= steps x 32).")
    parser.add_argument("--skip_mfu", action="store_true", help="Only the ListOps run.")
    return parser.parse_args(argv)


def listops_command(args: argparse.Namespace, folder: Path) -> list[str]:
    """run_spt.py --mode spt with the amos_lra recipe, bf16 and the attention the suite would use."""
    attention = "flash_attention_2" if importlib.util.find_spec("flash_attn") else "sdpa"
    options = json.dumps({"num_train": args.num_train, "num_validation": 64, "num_test": 64})
    return [sys.executable, str(ROOT / "run_scripts" / "run_spt.py"), "--task", "listops", "--recipe", "amos_lra",
            "--mode", "spt", "--task_options", options, "--pretrain_max_steps", str(args.steps), "--bf16",
            "--attn_implementation", attention, "--train_sampling_strategy", "group_by_length",
            "--eval_strategy", "no", "--save_strategy", "no", "--load_best_model_at_end", "false",
            "--logging_strategy", "steps", "--logging_steps", "50", "--report_to", "none",
            "--output_dir", str(folder), "--overwrite_output_dir"]


def run_step(command: list[str], seconds: int) -> int | str:
    """Run one step of the check; its exit status, or "timeout" (the check goes on and reports it)."""
    try:
        return subprocess.run(command, timeout=seconds).returncode
    except subprocess.TimeoutExpired:
        return "timeout"


def main(args: argparse.Namespace) -> dict:
    if not torch.cuda.is_available():
        print("gpu_self_check.py needs a CUDA device: a CUDA build of torch (this one: "
              f"{torch.__version__}) and a visible GPU. It runs bench_gpu_mfu.py and {args.steps} steps of "
              "full-scale ListOps SPT (under 10 minutes on one GPU). Nothing measured.")
        sys.exit(2)
    output = Path(args.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    report: dict = {"device": torch.cuda.get_device_name(), "flash_attn": importlib.util.find_spec("flash_attn") is not None}
    if not args.skip_mfu:
        report["mfu_status"] = run_step([sys.executable, str(ROOT / "benchmarks" / "bench_gpu_mfu.py"), "--output",
                                         str(output / "gpu_mfu.json")], MFU_SECONDS)
        if (output / "gpu_mfu.json").is_file():
            report["mfu"] = json.loads((output / "gpu_mfu.json").read_text())
    folder = output / "listops_spt"
    start = time.perf_counter()
    report["listops_status"] = run_step(listops_command(args, folder), LISTOPS_SECONDS)
    report["listops_wall_seconds"] = time.perf_counter() - start
    result = json.loads((folder / "results.json").read_text()) if (folder / "results.json").is_file() else {}
    pretrain = result.get("pretrain", {})
    if pretrain.get("steps") and pretrain.get("seconds"):  # seconds of training, data generation excluded
        speed = pretrain["steps"] / pretrain["seconds"]
        from hf_spt.experiments.suites.lra import LraSuite, gpu_hours, lra_grid, step_counts

        counts = step_counts(lra_grid(LraSuite(output_dir=str(output), tasks=["listops"])))
        report.update(listops_steps_per_second=speed, listops_step_counts=counts["listops"],
                      listops_gpu_hours_3_seeds=gpu_hours(counts, SEEDS, {"listops": speed})["listops"])
    (output / "gpu_self_check.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "mfu"}, indent=1))
    return report


if __name__ == "__main__":
    main(parse_arguments())
