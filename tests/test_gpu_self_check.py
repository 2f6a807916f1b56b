"""benchmarks/gpu_self_check.py works before a GPU sees it: its `--dry_run` runs every step's plumbing on the CPU and
reports each in the JSON (its packed run through a stand-in that checks the varlen kernel's contract); a step past
its limit is killed with its children and keeps its stderr; a check killed with SIGKILL leaves its running step
on record; step times split into warm and cold steps as documented; the step limits fit 540 s, valuable steps
first; it runs with the checkout on PYTHONPATH alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_self_check  # noqa: E402

def test_the_dry_run_runs_every_step_and_keeps_only_the_report(tmp_path):
    output = tmp_path / "out"
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    completed = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_self_check.py"), "--dry_run",
                                "--output_dir", str(output)], capture_output=True, text=True, env=environment,
                               timeout=900)
    report = json.loads((output / gpu_self_check.REPORT_NAME).read_text())
    steps = report["steps"]
    assert list(steps) == list(gpu_self_check.STEP_SECONDS), completed.stderr[-3000:]
    failed = {name for name, record in steps.items() if record["status"] != "ok"}
    assert not failed, {name: steps[name] for name in failed}  # the packed step too: the block-diagonal fallback
    assert completed.returncode == 0
    for name, record in steps.items():
        assert 0 < record["seconds"] <= record["limit"], name
        assert record["limit"] == gpu_self_check.STEP_SECONDS[name] * gpu_self_check.DRY_RUN_LIMIT_FACTOR
        assert "figures_error" not in record, (name, record["figures_error"])
    listops = steps["listops"]["figures"]
    assert listops["steps_timed"] == gpu_self_check.DRY_LISTOPS_STEPS
    assert listops["warm_steps"] + listops["cold_steps"] + gpu_self_check.DRY_PROFILE_STEPS + 1 == listops["steps_timed"]
    assert listops["profile"]["steps"] == gpu_self_check.DRY_PROFILE_STEPS and listops["profile"]["top_by_host_time"]
    assert steps["listops_packed"]["figures"]["stand_in_kernel_calls"] > 0  # the kernel's path, its contract checked
    assert steps["listops"]["figures"].get("stand_in_kernel_calls") is None
    assert steps["preflight"]["figures"]["hf_spt_version_source"]
    assert set(steps["attention"]["figures"]["width_costs"]) == {"flash", "math", "default"}
    assert set(steps["default_bf16"]["figures"]["arms"]) == {"scratch", "spt"}
    assert steps["default_bf16"]["figures"]["flags"] == gpu_self_check.DRY_DEFAULT
    assert "running" not in report
    assert "skipped" in steps["gpu_tests"]["figures"]["pytest_summary"]
    expected = {key for key in gpu_self_check.SUMMARY if key != "device"}  # "device": a GPU's name
    assert expected <= set(report["summary"])
    assert sorted(path.name for path in output.iterdir()) == sorted([gpu_self_check.LOG_NAME, gpu_self_check.REPORT_NAME])
    assert len((output / gpu_self_check.LOG_NAME).read_text().splitlines()) == len(steps)


def test_the_step_limits_fit_one_command_with_the_preflight_given_a_cold_start_and_listops_first():
    limits = gpu_self_check.STEP_SECONDS
    assert sum(limits.values()) <= gpu_self_check.TOTAL_SECONDS <= 540
    assert limits["preflight"] >= gpu_self_check.PREFLIGHT_FLOOR >= 45
    assert list(limits)[:3] == ["preflight", "listops", "listops_packed"]
    assert limits["mfu"] >= 90 and limits["gpu_tests"] >= 60  # inductor compiling cold; pytest and a whole run
    # the default experiment shortened: 4 + 2 epochs (1,000 steps), not 25 + 4 (4,125)
    assert gpu_self_check.DEFAULT_SHORTENED == ["--pretrain_epochs", "4", "--finetune_epochs", "2"]
    plan = gpu_self_check.plan(gpu_self_check.parse_arguments([]), Path("/work"), {})
    default = next(step for step in plan if step.name == "default_fp32").command
    assert default[-4:] == gpu_self_check.DEFAULT_SHORTENED


def test_the_preflight_reads_hf_spt_version_without_an_installed_distribution(monkeypatch):
    """With the checkout on PYTHONPATH only, there is no hf-spt distribution: the version is hf_spt.__version__,
    and the preflight says which it read."""
    import hf_spt

    real = metadata.version

    def version(name: str) -> str:
        if name == "hf-spt":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", version)
    figures = gpu_self_check.preflight(dry_run=True)
    assert figures["versions"]["hf_spt"] == hf_spt.__version__
    assert figures["hf_spt_version_source"].startswith("hf_spt.__version__")


def test_every_new_width_of_the_attention_step_is_padded():
    """`bench_padded_attention.py --width_steps` times padded batches at new widths (1 / width padded): each must
    pad at least one token, or it takes the mask-free path it is compared against."""
    from dataclasses import replace

    import bench_padded_attention
    from benchmarking import make_batch

    steps, backends = 20, len(bench_padded_attention.WIDTH_BACKENDS["cuda"])  # the self-check's GPU sizes
    reach = bench_padded_attention.WIDTH_MULTIPLE * -(-steps * backends // 2)
    preset = replace(bench_padded_attention.LISTOPS, batch_size=2)
    for widths in bench_padded_attention.fresh_widths(2000 - reach, steps, backends):
        for width in widths:
            batch = make_batch("spt_mlm", replace(preset, length=width), pad_fraction=1 / width)
            assert int((batch["attention_mask"] == 0).sum()) >= 1, width


def start_dry_run(output: Path) -> subprocess.Popen:
    """A `--dry_run` check writing to `output`, in the background, its output discarded."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "gpu_self_check.py"), "--dry_run",
                             "--output_dir", str(output)], env=environment, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def test_a_check_killed_with_sigkill_leaves_its_running_step_and_process_group_on_record(tmp_path):
    output = tmp_path / "out"
    check = start_dry_run(output)
    report_path = output / gpu_self_check.REPORT_NAME
    running = {}
    for _ in range(600):  # written before the preflight starts, its process group once it runs
        running = json.loads(report_path.read_text()).get("running", {}) if report_path.is_file() else {}
        if "process_group" in running:
            break
        time.sleep(0.1)
    check.send_signal(signal.SIGKILL)
    check.wait(timeout=30)
    try:
        report = json.loads(report_path.read_text())
        assert report["running"]["step"] == "preflight" and report["running"]["limit"] > 0
        group = report["running"]["process_group"]
        os.killpg(group, 0)  # the step outlived its check: the record says what to end
    finally:
        if "process_group" in running:
            try:
                os.killpg(running["process_group"], signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_step_past_its_limit_is_killed_with_its_children_and_keeps_its_stderr(tmp_path):
    child = tmp_path / "child.pid"
    script = ("import subprocess, sys, time; "
              "sleeper = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              f"open({str(child)!r}, 'w').write(str(sleeper.pid)); "
              "print('still working', file=sys.stderr, flush=True); time.sleep(60)")
    record = gpu_self_check.run_step([sys.executable, "-c", script], 3, tmp_path / "step")
    assert record["status"] == "timeout" and record["exit_status"] is None and record["seconds"] < 30
    assert "still working" in record["stderr_tail"]
    status = Path(f"/proc/{child.read_text()}/status")
    for _ in range(50):  # killed: gone, or a zombie until something reaps it
        if not status.exists() or "\tZ" in status.read_text():
            break
        time.sleep(0.1)
    else:
        pytest.fail("the step's child process outlived its limit")


def test_a_failing_step_keeps_its_stderr_and_a_passing_one_none(tmp_path):
    failed = gpu_self_check.run_step([sys.executable, "-c", "raise SystemExit('no datasets here')"], 30, tmp_path / "a")
    assert failed["status"] == "failed" and failed["exit_status"] == 1 and "no datasets here" in failed["stderr_tail"]
    passed = gpu_self_check.run_step([sys.executable, "-c", "print('ok')"], 30, tmp_path / "b")
    assert passed["status"] == "ok" and "stderr_tail" not in passed


def test_step_rates_split_warm_and_cold_steps_and_leave_out_the_first_and_the_profiled():
    widths = [64, 64, 72, 64, 72, 80, 64, 64]
    ends = [5.0, 6.0, 8.0, 9.0, 10.0, 13.0, 14.0, 24.0]  # step 8 profiled (10 s)
    rates = gpu_self_check.step_rates(widths, ends, profiled=[8, 8])
    # step 1 (5 s) left out; warm: steps 2, 4, 5, 7 (1 s each); cold: steps 3 (2 s) and 6 (3 s)
    assert rates["warm_steps"] == 4 and rates["warm_steps_per_second"] == pytest.approx(1.0)
    assert rates["cold_steps"] == 2 and rates["cold_steps_per_second"] == pytest.approx(2 / 5)
    assert rates["steps_per_second"] == pytest.approx(6 / 9) and rates["new_width_cost_seconds"] == pytest.approx(1.5)
    assert rates["widths"] == 3 and rates["steps_timed"] == 8
    # a log whose last steps the device had not finished: the widths without an end are not timed
    assert gpu_self_check.step_rates(widths, ends[:3])["steps_timed"] == 3


def test_device_busy_time_is_the_union_of_kernel_intervals():
    import timed_run

    assert timed_run.busy_seconds([(0, 2), (1, 3), (5, 6), (5.5, 5.7)]) == pytest.approx(4)
    assert timed_run.busy_seconds([]) == 0


def test_the_offline_wheel_list_pins_every_requirement_but_torch():
    """docs/gpu_wheels.txt (what a GPU machine without internet is given) names every package setup.cfg requires,
    torch aside (the machine has its own), and pins each to one version."""
    import configparser
    import re

    def name(requirement: str) -> str:
        return re.split(r"[<>=!~;\[ ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")

    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    required = {name(line) for line in setup["options"]["install_requires"].splitlines() if line.strip()}
    pinned = [line for line in (ROOT / "docs" / "gpu_wheels.txt").read_text().splitlines()
              if line and not line.startswith("#")]
    assert all(re.fullmatch(r"[\w.-]+==[\w.]+", line) for line in pinned), pinned
    assert required - {"torch"} <= {name(line) for line in pinned}
    assert "torch" not in {name(line) for line in pinned}


def test_a_check_stopped_from_outside_ends_its_running_step_and_keeps_its_report(tmp_path):
    """SIGTERM (a machine's time limit) while a step runs: the step's process group is killed, and the report
    written before the step stays whole."""
    output = tmp_path / "out"
    check = start_dry_run(output)
    report = output / gpu_self_check.REPORT_NAME
    for _ in range(300):  # the first report is written before the preflight starts
        if report.is_file():
            break
        time.sleep(0.1)
    time.sleep(1)  # the preflight's process is running now
    children = subprocess.run(["pgrep", "-P", str(check.pid)], capture_output=True, text=True).stdout.split()
    check.terminate()
    assert check.wait(timeout=30) == 128 + 15
    assert json.loads(report.read_text())["steps"] == {}
    assert children and all(not Path(f"/proc/{pid}").exists() or "\tZ" in Path(f"/proc/{pid}/status").read_text()
                            for pid in children)


def test_the_stand_in_kernel_is_a_registered_back_end_not_patched_module_globals():
    """Issue 66: `timed_run.install_stand_in_kernel` replaced four functions in hf_spt's modules, which an import
    change would silently bypass; it now registers the stand-in back-end again (transformers' `AttentionInterface`)
    with a counting kernel, and the run asks for that back-end by name."""
    import timed_run
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    from hf_spt.models import attention_spt, modeling_spt, varlen_attention
    from hf_spt.training import padding_free

    def module_functions():
        return [vars(module).copy() for module in (varlen_attention, modeling_spt, attention_spt, padding_free)]

    before = module_functions()
    calls = timed_run.install_stand_in_kernel()
    try:
        assert module_functions() == before
        forward = ALL_ATTENTION_FUNCTIONS[varlen_attention.REFERENCE_VARLEN]
        query = torch.randn(1, 2, 6, 8, dtype=torch.bfloat16)  # (1, H, N, hd): a packed row of two sequences
        offsets = torch.tensor([0, 2, 6], dtype=torch.int32)
        output, _ = forward(None, query, query, query, None, cu_seq_lens_q=offsets, max_length_q=4)
        assert calls == [1] and output.shape == (1, 6, 2, 8)
        assert timed_run.STAND_IN_FLAGS == ["--attn_implementation", varlen_attention.REFERENCE_VARLEN]
    finally:
        AttentionInterface.register(varlen_attention.REFERENCE_VARLEN,
                                    varlen_attention.reference_varlen_attention_forward)
