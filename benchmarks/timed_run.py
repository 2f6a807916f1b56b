"""`run_spt.py` with a clock on every training step: step times that a killed run keeps, and a profile of a slow run.

`gpu_self_check.py` runs ListOps SPT through this script, as a subprocess under a time limit. It adds one callback,
`StepTimes`, to every Trainer the run builds (transformers' `DEFAULT_CALLBACKS`; meant for a run of one training
phase, `--mode spt`). For each optimizer step it records the width of the batch the model read (the last dimension
of its `input_ids`: the padded width, or a packed row's tokens) and when the step ended: on a GPU a CUDA event, read
once the device has passed it, so the clock adds no host sync; on a CPU `time.perf_counter`. A step's time runs from
the previous step's end (the first step's: from its start), so it counts the training loop's data loading and
logging, never set-up or the final evaluation. Every `WRITE_EVERY` steps and at the end of training, STEP_LOG is
rewritten atomically, so a run stopped at its time limit still leaves its steps:
    {"device", "widths": [...], "ends": [seconds since the first step began...], "profiled": [first, last] | null,
     "profile": {...} | null}
("ends" may trail "widths" by the steps the device has not finished yet.)

With `--profile_below S`, once `--profile_after` steps have run, a run slower than S steps/s over them runs its
next `--profile_steps` steps under `torch.profiler` (those steps are listed in "profiled"; whoever reads the log
leaves them out of its rates), and the log gets a summary (`profile_summary`), not the trace.

With `--stand_in_kernel` (`gpu_self_check.py --dry_run`'s packed run, on a CPU), a `--padding_free` run takes the
path it takes on a GPU: it runs on `--attn_implementation torch_varlen_reference` (`varlen_attention.
REFERENCE_VARLEN`: batches carry no `seq_idx`, attention keeps autocast's half precision, and
`reference_varlen_kernel` stands in for torch's kernel, checking every call's arguments against the kernel's
contract: a break raises, and the run fails). The back-end is registered again, through transformers'
`AttentionInterface`, with a kernel that counts its calls for the log ("stand_in_kernel_calls"); no module of
hf_spt is patched.

Usage (the flags after `--` are run_spt.py's):
    python benchmarks/timed_run.py --step_log steps.json --profile_below 20 -- --task listops --mode spt ...
"""

from __future__ import annotations

import argparse
import functools
import runpy
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import torch
import transformers.trainer
from torch.profiler import ProfilerActivity, profile
from transformers import AttentionInterface, TrainerCallback

from hf_spt.atomic_files import write_json
from hf_spt.models.varlen_attention import REFERENCE_VARLEN, packed_attention, reference_varlen_kernel

ROOT = Path(__file__).resolve().parents[1]
WRITE_EVERY = 10  # steps between rewrites of the log: a killed run loses at most these
TOP_OPERATORS = 10  # rows of each table in the profile summary


def install_stand_in_kernel() -> list[int]:
    """Register `REFERENCE_VARLEN` again with a kernel that counts its calls (module docstring); returns the
    one-element list that counts them. The run must ask for the back-end (`STAND_IN_FLAGS`)."""
    calls = [0]

    def kernel(*arguments: Any) -> torch.Tensor:
        calls[0] += 1
        return reference_varlen_kernel(*arguments)

    AttentionInterface.register(REFERENCE_VARLEN, functools.partial(packed_attention, kernel))
    return calls


STAND_IN_FLAGS = ["--attn_implementation", REFERENCE_VARLEN]
"""run_spt.py's flags that put the run on the stand-in's back-end."""


def busy_seconds(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of (start, end) intervals: how long at least one of them ran."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def profile_summary(profiler: profile, wall_seconds: float, steps: int) -> dict[str, Any]:
    """Per step, in seconds: the wall time, the time the device ran at least one kernel, the gaps between kernels
    (wall minus busy: the device waiting for the host), and the host time spent in operators (their self CPU time);
    with the top operators by device time and by host time (milliseconds over all profiled steps)."""
    events = profiler.events()
    kernels = [(event.time_range.start, event.time_range.end) for event in events
               if event.device_type == torch.autograd.DeviceType.CUDA]
    busy = busy_seconds(kernels) / 1e6  # the profiler's times are microseconds
    averages = profiler.key_averages()

    def top(field: str) -> list[dict[str, Any]]:
        rows = sorted(averages, key=lambda average: getattr(average, field), reverse=True)[:TOP_OPERATORS]
        return [{"operator": row.key, "calls": row.count, "device_ms": row.self_device_time_total / 1e3,
                 "host_ms": row.self_cpu_time_total / 1e3} for row in rows if getattr(row, field) > 0]

    return {"steps": steps, "wall_per_step": wall_seconds / steps, "device_busy_per_step": busy / steps,
            "device_gaps_per_step": (wall_seconds - busy) / steps, "kernels": len(kernels),
            "host_operator_time_per_step": sum(row.self_cpu_time_total for row in averages) / 1e6 / steps,
            "top_by_device_time": top("self_device_time_total"), "top_by_host_time": top("self_cpu_time_total")}


class StepTimes(TrainerCallback):
    """Records each training step's batch width and end time into `log_path` as training runs (module docstring),
    and profiles `profile_steps` steps of a run slower than `profile_below` steps/s after `profile_after` steps."""

    def __init__(self, log_path: Path, profile_below: float = 0.0, profile_after: int = 100, profile_steps: int = 20,
                 kernel_calls: list[int] | None = None):
        self.log_path = log_path
        self.kernel_calls = kernel_calls  # `install_stand_in_kernel`'s count, logged when given
        self.profile_below, self.profile_after, self.profile_steps = profile_below, profile_after, profile_steps
        self.cuda = torch.cuda.is_available()
        self.start: Any = None  # the first step's start: an event or a perf_counter value
        self.width: int | None = None  # the width of the latest training forward
        self.widths: list[int | None] = []
        self.pending: deque = deque()  # step ends not read yet (events the device has not reached)
        self.ends: list[float] = []
        self.profiled: tuple[int, int] | None = None
        self.profiler: profile | None = None
        self.profile_started = 0.0
        self.profile: dict[str, Any] | None = None

    def _mark(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def _read_done(self) -> None:
        """Move the step ends the device has passed from `pending` to `ends` (seconds since the first step began)."""
        while self.pending and (not self.cuda or self.pending[0].query()):
            mark = self.pending.popleft()
            self.ends.append(self.start.elapsed_time(mark) / 1e3 if self.cuda else mark - self.start)

    def _write(self) -> None:
        log = {"device": torch.cuda.get_device_name() if self.cuda else "cpu", "widths": self.widths,
               "ends": self.ends, "profiled": self.profiled, "profile": self.profile,
               "stand_in_kernel_calls": self.kernel_calls[0] if self.kernel_calls is not None else None}
        write_json(self.log_path, log)

    def _record_width(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        if module.training:
            ids = kwargs.get("input_ids", args[0] if args else None)
            self.width = int(ids.shape[-1])

    def _synchronize(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        model.register_forward_pre_hook(self._record_width, with_kwargs=True)

    def on_step_begin(self, args, state, control, **kwargs):
        if self.start is None:
            self.start = self._mark()
        if self.profiled is not None and state.global_step + 1 == self.profiled[0]:
            self._synchronize()
            self.profiler = profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else []))
            self.profiler.start()
            self.profile_started = time.perf_counter()

    def _stop_profiler(self, last_step: int) -> None:
        """End the profiled steps at `last_step` (training may end before the planned last) and summarise them."""
        self._synchronize()
        wall = time.perf_counter() - self.profile_started
        self.profiler.stop()
        self.profiled = (self.profiled[0], last_step)
        self.profile = profile_summary(self.profiler, wall, last_step - self.profiled[0] + 1)
        self.profiler = None
        self._write()

    def on_step_end(self, args, state, control, **kwargs):
        self.widths.append(self.width)
        self.pending.append(self._mark())
        step = state.global_step
        if self.profiler is not None and step == self.profiled[1]:
            self._stop_profiler(step)
        if self.profile_below and step == self.profile_after:
            self._synchronize()  # once: the rate so far, over every step ended
            self._read_done()
            if step / self.ends[-1] < self.profile_below:
                self.profiled = (step + 1, step + self.profile_steps)
        self._read_done()
        if step % WRITE_EVERY == 0:
            self._write()

    def on_train_end(self, args, state, control, **kwargs):
        if self.profiler is not None:
            self._stop_profiler(state.global_step)
        self._synchronize()
        self._read_done()
        self._write()


def main(argv: list[str]) -> None:
    ours, run_spt_argv = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--step_log", required=True, help="Where the steps' widths and end times go (JSON).")
    parser.add_argument("--profile_below", type=float, default=0.0,
                        help="Profile steps of a run slower than this many steps/s (0: never).")
    parser.add_argument("--profile_after", type=int, default=100, help="Steps before the rate is judged.")
    parser.add_argument("--profile_steps", type=int, default=20, help="Steps run under the profiler.")
    parser.add_argument("--stand_in_kernel", action="store_true",
                        help="On a CPU: packed rows take the kernel's path through a contract-checking stand-in.")
    args = parser.parse_args(ours)
    kernel_calls = install_stand_in_kernel() if args.stand_in_kernel else None
    transformers.trainer.DEFAULT_CALLBACKS.append(
        StepTimes(Path(args.step_log), args.profile_below, args.profile_after, args.profile_steps, kernel_calls))
    stand_in = STAND_IN_FLAGS if args.stand_in_kernel else []
    sys.argv = [str(ROOT / "run_scripts" / "run_spt.py"), *run_spt_argv, *stand_in]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
