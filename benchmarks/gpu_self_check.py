"""The one prepared GPU script: every GPU figure docs/performance.md quotes, in one JSON, under 8 minutes.

1. The default experiment through `accelerate launch run_scripts/run_spt.py`, fp32 and `--bf16`, offline
   (`HF_HUB_OFFLINE=1`): its results beside the CPU's (README), and proof that SPT's fine-tuning evaluates on a
   GPU without fetching Hub kernels (`training.hub_kernels`).
2. `bench_gpu_mfu.py` (LRA Text preset, bf16, SptForMaskedLM against BERT), eager and `--torch_compile`: MFU,
   the ratio to BERT, and whether compiling pays.
3. Full-scale ListOps SPT as `run_lra.py` runs it (the `amos_lra` recipe: 6 layers, d 512, 8 heads,
   FFN 2048, 2048 positions, batch 32, 10% masking, AdamW 1e-3; bf16, flash_attention_2 when
   installed, else SDPA; length-grouped batches, widths padded to a multiple of 8) for `--steps` steps on
   generated trees of the release's lengths (500-2000 tokens). Steps/s are counted over training steps only:
   two runs, 50 and `--steps` steps, and the difference of their phase clocks, so set-up, the first steps'
   warm-up and the final evaluation cancel (data generation is outside the clock). With the step counts of `run_lra.py --dry_run` it gives the
   suite's GPU-hours for ListOps:
       GPU-hours = seeds x (scratch + scratch_compute_matched + spt steps) / (steps/s x 3600)
4. `bench_padded_attention.py` at ListOps's full batch (32 x 2000, bf16): a padded batch against an unpadded
   one of the same width, and the attention operator each ran.
5. The GPU-only tests (`test_on_a_gpu_*` in `GPU_TEST_FILES`: Hub kernels stay off on a loaded model and a whole
   run offline; a sparse SPT training step gathers the masked tokens without a host sync).

Writes OUTPUT_DIR/gpu_self_check.json (every step's exit status and figures). Without a CUDA device it
prints what it needs and exits with status 2, as bench_gpu_mfu.py does. On the lent machine, install the
package first (`pip install -e .`, with the wheels its README says to carry).

Usage (on a lent GPU):
    python benchmarks/gpu_self_check.py --output_dir $OUT
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SEEDS = 3
# each step's limit in seconds: the whole check stays under 8 minutes
DEFAULT_RUN_SECONDS, MFU_SECONDS, LISTOPS_SECONDS, PADDED_SECONDS, TESTS_SECONDS = 75, 75, 120, 60, 60
WARMUP_STEPS = 50  # the short ListOps run, whose clock is taken off the long one's
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
GPU_TEST_FILES = ("test_hub_kernels.py", "test_host_syncs.py")  # their `test_on_a_gpu_*` tests


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", default="runs/gpu_self_check")
    parser.add_argument("--steps", type=int, default=350, help="ListOps SPT steps of the long run (the short one: 50).")
    parser.add_argument("--num_train", type=int, default=12000, help="Generated ListOps trees (>= steps x 32).")
    parser.add_argument("--skip_mfu", action="store_true", help="Leave out the MFU benchmark.")
    parser.add_argument("--skip_default_run", action="store_true", help="Leave out the default experiment.")
    return parser.parse_args(argv)


def listops_command(args: argparse.Namespace, folder: Path, steps: int) -> list[str]:
    """run_spt.py --mode spt with the amos_lra recipe, bf16 and the attention the suite would use."""
    attention = "flash_attention_2" if importlib.util.find_spec("flash_attn") else "sdpa"
    options = json.dumps({"num_train": args.num_train, "num_validation": 64, "num_test": 64})
    return [sys.executable, str(ROOT / "run_scripts" / "run_spt.py"), "--task", "listops", "--recipe", "amos_lra",
            "--mode", "spt", "--task_options", options, "--pretrain_max_steps", str(steps), "--bf16",
            "--attn_implementation", attention, "--train_sampling_strategy", "group_by_length",
            "--eval_strategy", "no", "--save_strategy", "no", "--load_best_model_at_end", "false",
            "--logging_strategy", "steps", "--logging_steps", "50", "--report_to", "none",
            "--output_dir", str(folder), "--overwrite_output_dir"]


def run_step(command: list[str], seconds: int) -> int | str:
    """Run one step of the check offline; its exit status, or "timeout" (the check goes on and reports it)."""
    try:
        return subprocess.run(command, timeout=seconds, env={**os.environ, **OFFLINE}).returncode
    except subprocess.TimeoutExpired:
        return "timeout"


def default_run(output: Path, bf16: bool) -> dict:
    """The default experiment (`run_spt.py` with no arguments) through `accelerate launch`, fp32 or bf16: its exit
    status and each arm's test and validation accuracy."""
    folder = output / ("default_bf16" if bf16 else "default_fp32")
    command = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1",
               "--mixed_precision", "bf16" if bf16 else "no", "--dynamo_backend", "no",
               str(ROOT / "run_scripts" / "run_spt.py"), "--output_dir", str(folder), "--overwrite_output_dir",
               "--disable_tqdm", "true", *(["--bf16"] if bf16 else [])]
    status = run_step(command, DEFAULT_RUN_SECONDS)
    results = json.loads((folder / "results.json").read_text()) if (folder / "results.json").is_file() else {}
    return {"status": status, "arms": {arm["arm"]: {key: arm.get(key) for key in ("test_accuracy", "eval_accuracy",
                                                                                   "seconds")}
                                       for arm in results.get("arms", [])}}


def pretraining_seconds(folder: Path) -> tuple[int, float] | None:
    """The steps and seconds of the SPT phase a `run_spt.py --mode spt` run in `folder` recorded (None: no result)."""
    result = json.loads((folder / "results.json").read_text()) if (folder / "results.json").is_file() else {}
    pretrain = result.get("pretrain", {})
    return (pretrain["steps"], pretrain["seconds"]) if pretrain.get("steps") and pretrain.get("seconds") else None


def main(args: argparse.Namespace) -> dict:
    if not torch.cuda.is_available():
        print("gpu_self_check.py needs a CUDA device: a CUDA build of torch (this one: "
              f"{torch.__version__}) and a visible GPU. It runs the default experiment, bench_gpu_mfu.py, "
              f"{args.steps} steps of full-scale ListOps SPT, the padded-batch benchmark and the GPU tests (under 8 "
              "minutes on one GPU). Nothing measured.")
        sys.exit(2)
    output = Path(args.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    report: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                    "flash_attn": importlib.util.find_spec("flash_attn") is not None}
    if not args.skip_default_run:
        report["default_experiment"] = {"fp32": default_run(output, False), "bf16": default_run(output, True)}
    if not args.skip_mfu:
        report["mfu_status"] = run_step([sys.executable, str(ROOT / "benchmarks" / "bench_gpu_mfu.py"), "--output",
                                         str(output / "gpu_mfu.json"), "--torch_compile"], MFU_SECONDS)
        if (output / "gpu_mfu.json").is_file():
            report["mfu"] = json.loads((output / "gpu_mfu.json").read_text())
    # two runs, WARMUP_STEPS and --steps long: the difference of their clocks is --steps - WARMUP_STEPS training
    # steps alone (set-up, the loop's start and the first steps' warm-up cancel; data generation is outside both)
    runs = {}
    for steps in (WARMUP_STEPS, args.steps):
        folder = output / f"listops_spt_{steps}"
        report[f"listops_{steps}_status"] = run_step(listops_command(args, folder, steps), LISTOPS_SECONDS)
        runs[steps] = pretraining_seconds(folder)
    if all(runs.values()) and runs[args.steps][1] > runs[WARMUP_STEPS][1]:
        speed = (runs[args.steps][0] - runs[WARMUP_STEPS][0]) / (runs[args.steps][1] - runs[WARMUP_STEPS][1])
        from hf_spt.experiments.suites.lra import LraSuite, gpu_hours, lra_grid, step_counts

        counts = step_counts(lra_grid(LraSuite(output_dir=str(output), tasks=["listops"])))
        report.update(listops_steps_per_second=speed, listops_runs_steps_seconds=runs,
                      listops_step_counts=counts["listops"],
                      listops_gpu_hours_3_seeds=gpu_hours(counts, SEEDS, {"listops": speed})["listops"])
    report["padded_status"] = run_step([sys.executable, str(ROOT / "benchmarks" / "bench_padded_attention.py"),
                                        "--device", "cuda", "--bf16", "--batch_size", "32", "--length", "2000",
                                        "--json", str(output / "padded_attention.json")], PADDED_SECONDS)
    if (output / "padded_attention.json").is_file():
        report["padded_attention"] = json.loads((output / "padded_attention.json").read_text())
    report["gpu_tests_status"] = run_step([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                           *(str(ROOT / "tests" / name) for name in GPU_TEST_FILES), "-k", "on_a_gpu"],
                                          TESTS_SECONDS)
    (output / "gpu_self_check.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "mfu"}, indent=1))
    return report


if __name__ == "__main__":
    main(parse_arguments())
