"""The one prepared GPU script: what the first GPU minutes must tell, in a JSON that no failing step can lose.

Steps, in the order of their value; each runs as a subprocess, offline (`HF_HUB_OFFLINE=1`), with this checkout
first on PYTHONPATH, under its own time limit (`STEP_SECONDS`: 530 s in all, within the 540 s that leave a
600-second command room for the offline install; docs/performance.md gives each limit's reason):
1. `preflight` (60 s: a cold CUDA torch import, cuDNN, compiling `.pyc` files, the CUDA context): the stack imports
   (hf_spt, transformers, datasets, evaluate, accelerate), its versions (hf_spt's from the installed distribution,
   else `hf_spt.__version__`; `hf_spt_version_source` says which), CUDA, cuDNN and the GPU, one SPT training step
   on the device, and the step counts of the suite's ListOps column. A failure ends the check, with its message.
2. `listops`: full-scale ListOps SPT as `run_lra.py` runs it (the `amos_lra` recipe: 6 layers, d 512, 8 heads,
   FFN 2048, batch 32, 10% masking, AdamW 1e-3; bf16, SDPA whether or not flash-attn is installed, length-grouped
   batches, widths padded to a multiple of 8) on generated trees of the release's lengths (500-2000 tokens),
   through `timed_run.py`: every step's width and end time, so a run stopped at its limit still gives steps/s.
   `listops_steps_per_second` counts the warm steps (a width seen before: what a long run mostly meets), training
   only; cold steps (a new width) are reported apart, with the cost of a new width. A run under
   `PROFILE_BELOW` steps/s profiles `PROFILE_STEPS` steps in the same run (a small table in the JSON). The
   GPU-hours of the suite's ListOps column follow:
       GPU-hours = seeds x (scratch + scratch_compute_matched + spt steps) / (steps/s x 3600)
3. `listops_packed`: the same run with `--padding_free` (packed rows on torch's variable-length kernel), against 2;
   its steps/s count every step but the first (a packed row's width is its token count, rarely seen twice).
4. `gpu_tests`: the GPU-only tests (`test_on_a_gpu_*` in `GPU_TEST_FILES`: the kernel against padding and the
   packed step sync-free, among others); skipped, with the reason, where pytest is not installed (it is not a
   requirement).
5. `attention`: `bench_padded_attention.py` at ListOps's full batch (32 x 2000, bf16): which SDPA operator a
   padded batch runs and what it costs against an unpadded one, the cuDNN version, and the cost of a new width
   (20 synchronised steps each on new and on seen widths, cuDNN and memory-efficient forced, and SDPA's choice).
6. `mfu`: `bench_gpu_mfu.py` (LRA Text preset, bf16, SptForMaskedLM against BERT), eager and compiled, both on
   the same unmasked batch.
7. `default_bf16`, `default_fp32`: the default experiment through `accelerate launch run_scripts/run_spt.py`,
   `--bf16` and fp32, shortened (`DEFAULT_SHORTENED`: 4 + 2 epochs, 1,000 steps instead of 4,125, so it fits its
   limit; its figures name the flags, and are not the README's configuration): proof that a whole run finishes
   offline on a GPU, and its accuracies.

OUTPUT_DIR receives two small files only: `gpu_self_check.json`, rewritten atomically before and after every step
(while a step runs, `running` names it, its limit and its process group, so a check killed with SIGKILL leaves
what it was running on record, and `kill -- -PROCESS_GROUP` ends it; each finished step's status, seconds, limit,
figures, and for a step that did not succeed its stderr's tail; the key figures at the top, `SUMMARY`), and
`gpu_self_check.log`, one line per step. Run folders (checkpoints, generated data) go to a temporary folder,
removed at the end. A check stopped with SIGTERM ends its running step's processes first. The exit status is 0
when every step succeeded (or was skipped), else 1. An OUTPUT_DIR the report cannot go to (what hf_spt's
`check_writable_folder` refuses for any command, or a folder where one of the two files goes) is refused in one
line, exit status 2, before anything runs.

`--dry_run` runs every step's plumbing on the CPU at toy sizes (a tiny model, a few steps, short ListOps trees;
its figures mean nothing), so the script is known to work before a GPU sees it (tests/test_gpu_self_check.py). Its
`listops_packed` step trains through the kernel's path with `varlen_attention.reference_varlen_kernel` standing in
for the kernel (`timed_run.py --stand_in_kernel`): every call's arguments are checked against the real kernel's
contract (one half-precision dtype, contiguous (N, H, d), int32 offsets from 0, a host-int longest sequence, a
head size a multiple of 8), so a break of that contract fails the dry run, and CI with it.
Without a CUDA device and without `--dry_run`, it says what it needs and exits with status 2. `--preflight`
runs step 1 alone, in this process. Installing on a GPU machine without internet: docs/performance.md.

Usage (on a lent GPU):
    python benchmarks/gpu_self_check.py --output_dir $OUT
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
# each step's time limit in seconds, in the order the steps run (by value): 530 s in all, within `TOTAL_SECONDS`
STEP_SECONDS = {"preflight": 60, "listops": 90, "listops_packed": 60, "gpu_tests": 60, "attention": 60, "mfu": 90,
                "default_bf16": 55, "default_fp32": 55}
TOTAL_SECONDS = 540  # one 600-second command on a lent machine, after the offline install
PREFLIGHT_FLOOR = 45  # a cold CUDA torch import, cuDNN, .pyc compiling and the context: never under this
DRY_RUN_LIMIT_FACTOR = 4  # a shared 2-core CPU imports the stack several times slower than a GPU machine
SEEDS = 3
LISTOPS_STEPS, PACKED_STEPS = 300, 150
PROFILE_BELOW, PROFILE_AFTER, PROFILE_STEPS = 20.0, 100, 20  # steps/s under which ListOps is profiled; when; how long
STDERR_TAIL = 4000  # characters of a failed step's stderr kept in the JSON
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
GPU_TEST_FILES = ("test_hub_kernels.py", "test_host_syncs.py", "test_varlen_attention.py")  # their `test_on_a_gpu_*` tests
REPORT_NAME, LOG_NAME = "gpu_self_check.json", "gpu_self_check.log"
# the figures the JSON repeats at its top: {key: (step, figure)}
SUMMARY = {"device": ("preflight", "device"), "cudnn": ("preflight", "cudnn"),
           "listops_steps_per_second": ("listops", "warm_steps_per_second"),
           "listops_cold_steps_per_second": ("listops", "cold_steps_per_second"),
           "listops_new_width_cost_seconds": ("listops", "new_width_cost_seconds"),
           "listops_gpu_hours": ("listops", "gpu_hours"),
           "listops_packed_steps_per_second": ("listops_packed", "steps_per_second"),
           "listops_packed_gpu_hours": ("listops_packed", "gpu_hours"),
           "padded_batch_attention_operators": ("attention", "padded_operators"),
           "spt_over_bert_tokens_per_second": ("mfu", "spt_over_bert"),
           "compiled_over_eager_tokens_per_second": ("mfu", "compiled_over_eager")}
# the ListOps runs' run_spt.py flags besides the sizes: one SPT phase as the suite runs it, nothing saved
LISTOPS_FLAGS = ["--task", "listops", "--recipe", "amos_lra", "--mode", "spt", "--bf16",
                 "--train_sampling_strategy", "group_by_length", "--eval_strategy", "no", "--save_strategy", "no",
                 "--load_best_model_at_end", "false", "--logging_strategy", "steps", "--logging_steps", "50",
                 "--report_to", "none", "--disable_tqdm", "true", "--overwrite_output_dir"]
# the default experiment shortened to fit its limit (4,125 steps and 33 evaluations and saves: 45-70 s): 1,000 steps
DEFAULT_SHORTENED = ["--pretrain_epochs", "4", "--finetune_epochs", "2"]
# toy sizes of --dry_run: the default experiment's and ListOps's (with the ListOps model's)
DRY_DEFAULT = ["--task_options", '{"num_train": 64, "num_validation": 16, "num_test": 16}', "--max_steps", "2",
               "--hidden_size", "16"]
DRY_LISTOPS = {"num_train": 64, "num_validation": 8, "num_test": 8, "min_length": 20, "max_length": 60}
DRY_LISTOPS_MODEL = ["--hidden_size", "16", "--num_hidden_layers", "1", "--num_attention_heads", "2",
                     "--intermediate_size", "32", "--per_device_train_batch_size", "4"]
DRY_LISTOPS_STEPS, DRY_PROFILE_AFTER, DRY_PROFILE_STEPS = 12, 4, 3


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", default="runs/gpu_self_check", help="Where the JSON and the log go.")
    parser.add_argument("--skip", nargs="*", default=[], choices=[name for name in STEP_SECONDS if name != "preflight"],
                        help="Steps to leave out.")
    parser.add_argument("--dry_run", action="store_true", help="Every step's plumbing on the CPU at toy sizes.")
    parser.add_argument("--preflight", action="store_true",
                        help="Run the preflight alone, here: OUTPUT_DIR/preflight.json.")
    return parser.parse_args(argv)


# ---- the preflight (step 1, run as `gpu_self_check.py --preflight` in its own process)

def preflight(dry_run: bool) -> dict[str, Any]:
    """What the stack is and whether it trains: versions, the device, one SPT training step (bf16 on a GPU), and
    the ListOps column's step counts with its GPU-hours at 1 step/s (hours scale as 1 / steps/s)."""
    import evaluate

    import hf_spt
    from benchmarking import build_model, make_batch, resolve_preset, synchronize, training_step
    from hf_spt.experiments.suites.lra import LraSuite, gpu_hours, lra_grid, step_counts
    from hf_spt.runs.provenance import run_provenance
    from hf_spt.training.model_card import package_version

    device = "cpu" if dry_run else "cuda"
    figures: dict[str, Any] = {**run_provenance(), "hf_spt_version_source": package_version()[1],
                               "evaluate": evaluate.__version__,
                               "hf_spt_folder": str(Path(hf_spt.__file__).parent), "python": sys.version.split()[0],
                               "torch_cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                               "flash_attn": importlib.util.find_spec("flash_attn") is not None,
                               "pytest": importlib.util.find_spec("pytest") is not None}
    if device == "cuda":
        properties = torch.cuda.get_device_properties(0)
        figures.update(device=properties.name, gpu_memory_gib=properties.total_memory / 2**30,
                       compute_capability=f"{properties.major}.{properties.minor}")
    preset = resolve_preset("tiny")
    started = time.perf_counter()
    model = build_model("spt_mlm", preset).to(device)
    batch = make_batch("spt_mlm", preset, device=device, pad_fraction=0.25)
    training_step(model, batch, None if dry_run else torch.bfloat16)
    synchronize(device)
    figures["training_step_seconds"] = time.perf_counter() - started
    counts = step_counts(lra_grid(LraSuite(output_dir=tempfile.gettempdir(), tasks=["listops"])))
    figures["listops_step_counts"] = counts["listops"]
    figures["listops_gpu_hours_at_1_step_per_second"] = gpu_hours(counts, SEEDS, {"listops": 1.0})["listops"]
    return figures


# ---- reading what each step left in its folder (after a success, a failure or a timeout alike)

def step_rates(widths: list[int], ends: list[float], profiled: list[int] | None = None) -> dict[str, Any]:
    """Steps/s of a `timed_run.py` log: step i lasted ends[i] - ends[i-1]. Warm steps met a width seen before,
    cold ones a new width; the first step (one-time set-up) and profiled steps count in neither. The cost of a new
    width: median cold step minus median warm step, in seconds."""
    durations = [end - start for start, end in zip([0.0, *ends], ends)]
    seen: set[int] = set()
    warm, cold = [], []
    for step, (width, seconds) in enumerate(zip(widths, durations), start=1):
        new = width not in seen
        seen.add(width)
        if step == 1 or profiled and profiled[0] <= step <= profiled[1]:
            continue
        (cold if new else warm).append(seconds)

    def rate(values: list[float]) -> float | None:
        return len(values) / sum(values) if values else None

    return {"steps_timed": len(durations), "warm_steps": len(warm), "cold_steps": len(cold), "widths": len(seen),
            "warm_steps_per_second": rate(warm), "cold_steps_per_second": rate(cold),
            "steps_per_second": rate(warm + cold),
            "new_width_cost_seconds": statistics.median(cold) - statistics.median(warm) if warm and cold else None}


def read_json(path: Path) -> dict[str, Any]:
    """A step's JSON output, or {} when the step left none."""
    return json.loads(path.read_text()) if path.is_file() else {}


def read_preflight(folder: Path) -> dict[str, Any]:
    return read_json(folder / "preflight.json")


def timed_run_reader(gpu_hours_at_1_step_per_second: Callable[[], float | None],
                     rate: str) -> Callable[[Path], dict]:
    """The reader of a ListOps run's step log: its rates, the profile summary, and the GPU-hours of the suite's
    ListOps column at the rate `rate` of `step_rates` (from the preflight's figure at 1 step/s)."""
    def read(folder: Path) -> dict[str, Any]:
        log = read_json(folder / "step_times.json")
        if not log:
            return {}
        figures = {**step_rates(log["widths"], log["ends"], log["profiled"]), "device": log["device"],
                   "profiled_steps": log["profiled"], "profile": log["profile"]}
        if log.get("stand_in_kernel_calls") is not None:  # --dry_run's packed run: the kernel's contract checked
            figures["stand_in_kernel_calls"] = log["stand_in_kernel_calls"]
        hours = gpu_hours_at_1_step_per_second()
        if hours is not None and figures[rate]:
            figures["gpu_hours"] = hours / figures[rate]
        return figures
    return read


def read_attention(folder: Path) -> dict[str, Any]:
    bench = read_json(folder / "padded_attention.json")
    padded = next((result for name, result in bench.get("results", {}).items() if name.startswith("padded")), {})
    return {**bench, "padded_operators": padded.get("attention_operators")} if bench else {}


def default_run_reader(flags: list[str]) -> Callable[[Path], dict]:
    """The reader of a default-experiment step run with `flags` besides the defaults: each arm's test and validation
    accuracy and seconds (results.json), or the phases finished before a stop, with the flags (a shortened run's
    accuracies are not the README's)."""
    def read(folder: Path) -> dict[str, Any]:
        results = read_json(folder / "run" / "results.json")
        if results:
            return {"flags": flags, "arms": {arm["arm"]: {key: arm.get(key) for key in
                                                          ("test_accuracy", "eval_accuracy", "seconds")}
                                             for arm in results.get("arms", [])}}
        return {"flags": flags,
                "finished_phases": sorted(path.parent.name for path in (folder / "run").glob("*/phase.json"))}
    return read


def read_mfu(folder: Path) -> dict[str, Any]:
    """bench_gpu_mfu.py's JSON, with SPT's tokens/s over BERT's (eager, compiled) and compiled over eager (SPT)."""
    bench = read_json(folder / "gpu_mfu.json")
    speed = {(row["model"], row["compiled"]): row["tokens_per_s"] for row in bench.get("results", [])}
    modes = {"eager": False, "compiled": True}
    ratios = {"spt_over_bert": {mode: speed[("spt_mlm", compiled)] / speed[("bert_mlm", compiled)]
                                for mode, compiled in modes.items() if ("bert_mlm", compiled) in speed}}
    if ("spt_mlm", True) in speed:
        ratios["compiled_over_eager"] = speed[("spt_mlm", True)] / speed[("spt_mlm", False)]
    return {**bench, **ratios} if bench else {}


def read_tests(folder: Path) -> dict[str, Any]:
    """pytest's summary line."""
    lines = (folder / "stdout.txt").read_text(errors="replace").strip().splitlines()
    return {"pytest_summary": lines[-1]} if lines else {}


# ---- the steps

@dataclass(frozen=True)
class Step:
    """One step: its command (None: skipped, for `skip_reason`) and how its figures are read from its folder."""

    name: str
    command: list[str] | None
    read: Callable[[Path], dict[str, Any]]
    skip_reason: str | None = None


def plan(args: argparse.Namespace, work: Path, steps: dict[str, dict]) -> list[Step]:
    """The steps in order, their folders under `work`; `steps` (the report's, filled as they run) gives the
    ListOps readers the preflight's figures."""
    python, dry = sys.executable, args.dry_run
    listops_options = {**(DRY_LISTOPS if dry else {"num_train": LISTOPS_STEPS * 32, "num_validation": 64,
                                                   "num_test": 64}),
                       "cache_dir": str(work / "listops_data")}  # generated once, for both ListOps runs
    listops_size = [*(DRY_LISTOPS_MODEL if dry else []), "--task_options", json.dumps(listops_options)]

    def listops(name: str, steps_to_run: int, flags: list[str], profile: list[str]) -> list[str]:
        return [python, str(BENCHMARKS / "timed_run.py"), "--step_log", str(work / name / "step_times.json"),
                *profile, *(["--stand_in_kernel"] if dry and "--padding_free" in flags else []), "--", *LISTOPS_FLAGS, *listops_size, *flags, "--pretrain_max_steps",
                str(DRY_LISTOPS_STEPS if dry else steps_to_run), "--output_dir", str(work / name / "run")]

    profile = ["--profile_below", "inf" if dry else str(PROFILE_BELOW), "--profile_after",
               str(DRY_PROFILE_AFTER if dry else PROFILE_AFTER), "--profile_steps",
               str(DRY_PROFILE_STEPS if dry else PROFILE_STEPS)]

    def hours_at_1_step_per_second() -> float | None:
        return steps.get("preflight", {}).get("figures", {}).get("listops_gpu_hours_at_1_step_per_second")

    default_flags = DRY_DEFAULT if dry else DEFAULT_SHORTENED

    def default_run(name: str, bf16: bool) -> list[str]:
        return [python, "-m", "accelerate.commands.launch", "--num_processes", "1", "--mixed_precision",
                "bf16" if bf16 else "no", "--dynamo_backend", "no", str(ROOT / "run_scripts" / "run_spt.py"),
                "--output_dir", str(work / name / "run"), "--overwrite_output_dir", "--disable_tqdm", "true",
                *(["--bf16"] if bf16 else []), *default_flags]

    attention_sizes = (["--device", "cpu", "--batch_size", "2", "--length", "64", "--layers", "1", "--width_steps", "2",
                        "--repetitions", "1"] if dry else
                       ["--device", "cuda", "--bf16", "--batch_size", "32", "--length", "2000", "--width_steps", "20",
                        "--repetitions", "3"])
    has_pytest = importlib.util.find_spec("pytest") is not None
    planned = [
        Step("preflight", [python, str(Path(__file__)), "--preflight", "--output_dir", str(work / "preflight"),
                           *(["--dry_run"] if dry else [])], read_preflight),
        Step("listops", listops("listops", LISTOPS_STEPS, ["--attn_implementation", "sdpa", "--pad_to_multiple_of", "8"],
                                profile), timed_run_reader(hours_at_1_step_per_second, "warm_steps_per_second")),
        Step("listops_packed", listops("listops_packed", PACKED_STEPS, ["--padding_free"], []),
             timed_run_reader(hours_at_1_step_per_second, "steps_per_second")),
        Step("gpu_tests", [python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *(str(ROOT / "tests" / name) for name in GPU_TEST_FILES), "-k", "on_a_gpu"]
             if has_pytest else None, read_tests,
             None if has_pytest else "pytest is not installed (not a requirement: carry its wheel, docs/performance.md)"),
        Step("attention", [python, str(BENCHMARKS / "bench_padded_attention.py"), *attention_sizes, "--json",
                           str(work / "attention" / "padded_attention.json")], read_attention),
        Step("mfu", [python, str(BENCHMARKS / "bench_gpu_mfu.py"), "--torch_compile", "--repetitions", "5", "--output",
                     str(work / "mfu" / "gpu_mfu.json"), *(["--dry_run"] if dry else [])], read_mfu),
        Step("default_bf16", default_run("default_bf16", True), default_run_reader(default_flags)),
        Step("default_fp32", default_run("default_fp32", False), default_run_reader(default_flags)),
    ]
    return [Step(step.name, None, step.read, "left out with --skip") if step.name in args.skip else step
            for step in planned]


# ---- running a step and keeping its record

def run_step(command: list[str], seconds: float, folder: Path,
             started: Callable[[int], None] = lambda process_group: None) -> dict[str, Any]:
    """Run `command` offline in its own process group, stdout and stderr to files in `folder`; past `seconds` the
    whole group is killed (a launcher's children too). `started` is told the group's id once the process runs.
    Its status (ok, failed, timeout), seconds and limit, and for a step that did not succeed, its exit status and
    the tail of its stderr."""
    folder.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))  # this checkout's hf_spt first
    environment = {**os.environ, **OFFLINE, "PYTHONPATH": path}
    began = time.monotonic()
    with open(folder / "stdout.txt", "wb") as stdout, open(folder / "stderr.txt", "wb") as stderr:
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=environment, cwd=ROOT,
                                   start_new_session=True)  # its own session: its process group id is its pid
        try:
            started(process.pid)
            exit_status = process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            exit_status = None
        finally:  # a timed-out step, what a finished one left running, the step of a check that is stopped itself
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
    record: dict[str, Any] = {"status": "timeout" if exit_status is None else "ok" if exit_status == 0 else "failed",
                              "seconds": round(time.monotonic() - began, 1), "limit": seconds}
    if record["status"] != "ok":
        record["exit_status"] = exit_status
        record["stderr_tail"] = (folder / "stderr.txt").read_bytes()[-STDERR_TAIL:].decode(errors="replace")
    return record


def write_report(output: Path, report: dict[str, Any]) -> None:
    """Rewrite OUTPUT_DIR/gpu_self_check.json atomically (`hf_spt.atomic_files.write_json`: a temporary file, then
    `os.replace`): a check killed at any moment leaves the previous whole report."""
    from hf_spt.atomic_files import write_json

    write_json(output / REPORT_NAME, report)


def summary(steps: dict[str, dict]) -> dict[str, Any]:
    """The `SUMMARY` figures the steps gave so far."""
    return {key: steps[step]["figures"][figure] for key, (step, figure) in SUMMARY.items()
            if figure in steps.get(step, {}).get("figures", {})}


def log_line(name: str, record: dict[str, Any]) -> str:
    """One line of the log: the step's status, seconds and limit, its `SUMMARY` figures, or why it failed."""
    figures = summary({name: record})
    line = f"{name}: {record['status']}"
    if "seconds" in record:
        line += f" in {record['seconds']} s (limit {record['limit']} s)"
    line += "".join(f", {key} {value:.4g}" if isinstance(value, float) else f", {key} {value}"
                    for key, value in figures.items())
    reason = record.get("reason") or record.get("figures_error") or record.get("stderr_tail", "").strip()
    return line + (f": {reason.splitlines()[-1]}" if reason else "")


def checked_output_dir(folder: str) -> Path:
    """OUTPUT_DIR as a Path once the report and the log can be written there, before anything else runs; otherwise
    one line on stderr and exit status 2, nothing written: what `hf_spt.runs.folder.check_writable_folder` refuses
    (an empty name, a file, a path under a file, a symbolic link to nothing, a path too long, a folder a write fails
    in), or a folder standing where the report or the log goes. hf_spt is imported here, in the first second: every
    step runs it, so a check where it does not import would measure nothing."""
    sys.path.insert(0, str(ROOT))  # this checkout's hf_spt, as the steps get it (`run_step`'s PYTHONPATH)
    try:
        from hf_spt.errors import UserInputError
        from hf_spt.runs.folder import check_writable_folder
    except ImportError as error:
        print(f"error: gpu_self_check.py runs hf_spt, which does not import here ({error}): install it and its "
              "requirements (pip install -e .) and run the check again.", file=sys.stderr)
        sys.exit(2)
    try:
        path = check_writable_folder(folder)
        if taken := [name for name in (REPORT_NAME, LOG_NAME) if (path / name).is_dir()]:
            raise UserInputError(f"--output_dir {folder} holds a folder named {' and '.join(taken)}, where the check "
                                 "writes its file: move it or pass another folder.")
    except UserInputError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    return path


def main(args: argparse.Namespace) -> dict[str, Any]:
    output = checked_output_dir(args.output_dir)
    if args.preflight:
        figures = preflight(args.dry_run)
        output.mkdir(parents=True, exist_ok=True)
        (output / "preflight.json").write_text(json.dumps(figures, indent=1))
        print(json.dumps(figures, indent=1))
        return figures
    if not torch.cuda.is_available() and not args.dry_run:
        print("gpu_self_check.py needs a CUDA device: a CUDA build of torch (this one: "
              f"{torch.__version__}) and a visible GPU. It runs a preflight, full-scale ListOps SPT padded and "
              "packed, the GPU tests, the attention diagnosis, bench_gpu_mfu.py and the default experiment "
              f"({sum(STEP_SECONDS.values())} s at most on one GPU); --dry_run runs their plumbing on this CPU. Nothing measured.")
        sys.exit(2)
    output.mkdir(parents=True, exist_ok=True)
    # stopped from outside (a machine's time limit): end the running step's processes, keep the report written so far
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    factor = DRY_RUN_LIMIT_FACTOR if args.dry_run else 1
    steps: dict[str, dict] = {}
    report: dict[str, Any] = {"summary": {}, "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                              "dry_run": args.dry_run, "step_seconds": STEP_SECONDS, "steps": steps}
    write_report(output, report)

    def record_process_group(process_group: int) -> None:
        report["running"]["process_group"] = process_group
        write_report(output, report)

    with tempfile.TemporaryDirectory(prefix="gpu_self_check_") as work, open(output / LOG_NAME, "w") as log:
        for step in plan(args, Path(work), steps):
            if step.command is None:
                record = {"status": "skipped", "reason": step.skip_reason}
            else:
                limit = STEP_SECONDS[step.name] * factor
                report["running"] = {"step": step.name, "limit": limit,
                                     "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}
                write_report(output, report)  # a check killed with SIGKILL leaves what it was running on record
                record = run_step(step.command, limit, Path(work) / step.name, record_process_group)
                del report["running"]
                try:
                    record["figures"] = step.read(Path(work) / step.name)
                except Exception as error:  # noqa: BLE001  (a reader's slip must not lose the report)
                    record["figures_error"] = f"{type(error).__name__}: {error}"
            steps[step.name] = record
            report["summary"] = summary(steps)
            if step.name == "preflight" and record["status"] != "ok":
                report["ended"] = "the preflight failed (its stderr_tail says why): nothing else ran"
            write_report(output, report)
            for stream in (log, sys.stdout):
                print(log_line(step.name, record), file=stream, flush=True)
            if "ended" in report:
                break
    print(json.dumps(report["summary"], indent=1))
    return report


def exit_status(report: dict[str, Any]) -> int:
    """0 when every step succeeded or was skipped, else 1 (the preflight's own run: 0)."""
    return int(any(record["status"] not in ("ok", "skipped") for record in report.get("steps", {}).values()))


if __name__ == "__main__":
    sys.exit(exit_status(main(parse_arguments())))
