"""Portable CPU numerics (issues 55, 66): `--portable_numerics` trains the same bits whatever kernels the CPU offers.

Two CPU kinds are stood in for by two environments of one machine, each less strict than the pin (so the pin
replaces their values): this CPU's own kernel level with MKL choosing its path (`ATEN_CPU_CAPABILITY=<native>
MKL_CBWR=AUTO`), and an AVX2 CPU's (`ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX512`). Without the setting the two train
different weights on an AVX-512 CPU (so the comparison can fail); with it the same, in one process and as two gloo
ranks. The goldens (`fixtures/portable_golden.json`, one per numerics label, each written with `python
tests/test_portable_numerics.py --write` on a machine that makes it) are a portable run's metrics and weight
digest: "portable AVX2" on an Intel CPU, "portable AVX2, MKL AUTO on AMD EPYC" on an AMD one (MKL holds its AVX2
branch on Intel CPUs only; the two differ in their weight bits), and "portable AVX2, MKL COMPATIBLE", the
cross-vendor mode's, whose label names no CPU: made on an AMD EPYC, it is checked on every vendor CI runs on. CI
checks the labels its CPU's numerics name, and skips where none is committed.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from gloo_launch import gloo_launcher

from hf_spt import numerics
from hf_spt.errors import UserInputError
from hf_spt.experiments import numerics_entry
from hf_spt.experiments.suites.budget_study import study_grid
from hf_spt.experiments.suites.grid import parse_grid, unit_run, with_portable_numerics
from hf_spt.reports.budget_report import write_study_report
from hf_spt.reports.budget_sources import combined_reports
from hf_spt.numerics import numerics_label
from hf_spt.runs.phase_definition import PhaseDefinitionMismatch
from hf_spt.scripts import run_spt
from hf_spt.scripts.run_budget_study import BudgetStudyArguments

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).with_name("fixtures") / "portable_golden.json"
TINY = ["--task_options", '{"num_train": 96, "num_validation": 32, "num_test": 32, "length": 24}',
        "--hidden_size", "16", "--intermediate_size", "32", "--num_attention_heads", "2", "--finetune_epochs", "1",
        "--per_device_train_batch_size", "16", "--disable_tqdm", "true", "--report_to", "none", "--mode", "scratch"]
NATIVE = torch.backends.cpu.get_cpu_capability()
KINDS = {"this CPU": {"ATEN_CPU_CAPABILITY": NATIVE.lower(), "MKL_CBWR": "AUTO"},
         "an AVX2 CPU": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX512"}}
MODE_FLAGS = {None: [], "true": ["--portable_numerics"], "cross_vendor": ["--portable_numerics", "cross_vendor"]}
METRICS = ("test_accuracy", "test_loss", "eval_accuracy", "eval_loss")
needs_avx2 = pytest.mark.skipif(NATIVE not in ("AVX2", "AVX512"), reason=f"portable numerics pins x86 AVX2; this "
                                                                         f"CPU's torch capability is {NATIVE}")


def weights_digest(folder: Path) -> str:
    """sha256 over a saved model's tensors (names and bytes, in name order)."""
    from safetensors.torch import load_file

    weights = load_file(folder / "model.safetensors")
    digest = hashlib.sha256()
    for name in sorted(weights):
        digest.update(name.encode() + weights[name].contiguous().numpy().tobytes())
    return digest.hexdigest()


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without the pinning variables, one thread, this checkout imported, and `extra`."""
    return {**{k: v for k, v in os.environ.items() if k not in (numerics.OVERRIDDEN_ENV, *numerics.PORTABLE_ENVIRONMENT)},
            "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", **extra}


def result_of(folder: Path) -> dict:
    """A tiny run's weight digest, metrics and numerics record."""
    result = json.loads((folder / "scratch" / "phase.json").read_text())
    return {"weights": weights_digest(folder / "scratch"), "metrics": {k: result[k] for k in METRICS},
            "numerics": result["numerics"], "label": numerics_label(result), "torch_threads": result["torch_threads"]}


def train(folder: Path, kind: str, mode: str | None, ranks: int = 1) -> dict:
    """A tiny scratch run of run_spt.py in a fresh process (`ranks` gloo ranks) under the environment of CPU `kind`
    with `portable_numerics` `mode` (None: native): its weight digest, metrics and numerics record."""
    env = clean_env(**KINDS[kind])
    launcher = [] if ranks == 1 else gloo_launcher(ranks)
    if ranks > 1:
        env["ACCELERATE_USE_CPU"] = "1"
    command = [sys.executable, *launcher, str(ROOT / "run_scripts" / "run_spt.py"), *TINY, "--output_dir", str(folder),
               *MODE_FLAGS[mode]]
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return result_of(folder)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each run asked for, trained once per module: `runs(kind, mode, ranks)`."""
    done: dict = {}

    def run(kind: str, mode: str | None, ranks: int = 1) -> dict:
        if (kind, mode, ranks) not in done:
            folder = tmp_path_factory.mktemp(f"{mode or 'native'}_{ranks}")
            done[kind, mode, ranks] = {**train(folder, kind, mode, ranks), "folder": folder}
        return done[kind, mode, ranks]

    return run


needs_avx512 = pytest.mark.skipif(NATIVE != "AVX512", reason="the two environments run other kernels only where "
                                                                "the CPU has AVX-512")


@needs_avx512
def test_one_process_trains_the_same_bits_on_two_cpu_kinds_only_with_portable_numerics(runs):
    native = [runs(kind, None) for kind in KINDS]
    assert native[0]["weights"] != native[1]["weights"], "the two environments must run other kernels here"
    assert [run["numerics"]["label"] for run in native] == ["native", "native"]
    portable = [runs(kind, "true") for kind in KINDS]
    assert portable[0]["weights"] == portable[1]["weights"] and portable[0]["metrics"] == portable[1]["metrics"]
    for run, kind in zip(portable, KINDS):
        record = run["numerics"]
        assert record["label"] == numerics.PORTABLE_LABEL and record["capability"] == "AVX2" and record["deterministic"]
        assert record["environment"] == numerics.PORTABLE_ENVIRONMENT
        replaced = {name: value for name, value in KINDS[kind].items() if value != numerics.PORTABLE_ENVIRONMENT[name]}
        assert record["overridden"] == replaced  # the user's values, replaced, and the record says so


@needs_avx512
def test_two_gloo_ranks_train_the_same_bits_on_two_cpu_kinds(runs):
    first, second = (runs(kind, "true", ranks=2) for kind in KINDS)
    assert first["weights"] == second["weights"] and first["metrics"] == second["metrics"]
    assert first["numerics"]["label"] == second["numerics"]["label"] == numerics.PORTABLE_LABEL


@needs_avx2
@pytest.mark.parametrize("mode", ["true", "cross_vendor"])
def test_a_portable_run_matches_the_committed_golden(runs, mode):
    """The golden of this CPU's numerics was made on another machine (its CPU is in the file): the same bits here.
    The cross-vendor mode's golden names no CPU, so an Intel CI checks the bits an AMD EPYC made."""
    run = runs("this CPU", mode)
    golden = json.loads(GOLDEN.read_text()).get(run["label"])
    if golden is None:
        pytest.skip(f"no golden of {run['label']!r} is committed: write one on this machine with "
                    "`python tests/test_portable_numerics.py --write`")
    if golden["versions"] != golden_versions():
        pytest.skip(f"the golden belongs to {golden['versions']}; this is {golden_versions()}")
    assert run["torch_threads"] == golden["torch_threads"]
    assert run["metrics"] == golden["metrics"] and run["weights"] == golden["weights"]


@needs_avx2
def test_resuming_a_portable_phase_with_native_numerics_is_refused(runs):
    folder = runs("this CPU", "true")["folder"]
    with pytest.raises(PhaseDefinitionMismatch, match=r"numerics: 'portable AVX2' -> '<unset>'"):
        run_spt.run(*run_spt.parse_arguments(TINY + ["--output_dir", str(folder)]))


def test_the_library_call_pins_a_process_before_its_first_operation(tmp_path):
    """`hf_spt.portable_numerics()` after `import hf_spt`: torch at AVX2, deterministic, a user's less strict value
    replaced (one line says it) and recorded."""
    script = ("import hf_spt, torch, json; hf_spt.portable_numerics(); from hf_spt.numerics import "
              "numerics_record; print(json.dumps(numerics_record()))")
    env = clean_env(ATEN_CPU_CAPABILITY="avx512")
    completed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    if NATIVE not in ("AVX2", "AVX512"):
        assert completed.returncode != 0 and "lacks AVX2" in completed.stderr
        return
    assert completed.returncode == 0, completed.stderr[-2000:]
    record = json.loads(completed.stdout.strip().splitlines()[-1])
    assert record["label"] == "portable AVX2" and record["capability"] == "AVX2" and record["deterministic"]
    assert record["overridden"] == {"ATEN_CPU_CAPABILITY": "avx512"}
    assert "portable numerics: ATEN_CPU_CAPABILITY avx512 -> avx2" in completed.stderr


def test_numerics_imports_no_torch_when_imported():
    """The module a library user calls first reads no torch at import time (layer 0)."""
    tree = ast.parse((ROOT / "hf_spt" / "numerics.py").read_text())
    top = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    names = [alias.name for node in top for alias in node.names] + [node.module or "" for node in top
                                                                  if isinstance(node, ast.ImportFrom)]
    assert not any(name.split(".")[0] == "torch" for name in names)


def test_pinning_replaces_less_strict_values_and_keeps_them_recorded():
    pinned = numerics.portable_environment({"MKL_CBWR": "AUTO", "PATH": "/bin"})
    assert numerics.is_pinned(pinned) and pinned["PATH"] == "/bin" and pinned["MKL_CBWR"] == "AVX2"
    assert json.loads(pinned[numerics.OVERRIDDEN_ENV]) == {"MKL_CBWR": "AUTO"}
    again = numerics.portable_environment(pinned)  # a child process keeps the user's value
    assert json.loads(again[numerics.OVERRIDDEN_ENV]) == {"MKL_CBWR": "AUTO"}
    assert not numerics.is_pinned({**pinned, "MKL_CBWR": "AUTO"})


@pytest.mark.parametrize("mode, name, value, kept", [
    ("true", "MKL_CBWR", "COMPATIBLE", "COMPATIBLE"),  # the branch every vendor holds: stays (not AVX2)
    ("true", "MKL_CBWR", "AVX2,STRICT", "AVX2,STRICT"),
    ("true", "MKL_CBWR", "AVX512,STRICT", "AVX2,STRICT"),  # the branch replaced, STRICT kept
    ("true", "MKL_CBWR", "AVX", "AVX"),
    ("true", "ONEDNN_MAX_CPU_ISA", "AVX", "AVX"),  # a lower ISA stays
    ("true", "ONEDNN_MAX_CPU_ISA", "AVX512_CORE", "AVX2"),
    ("true", "ATEN_CPU_CAPABILITY", "default", "default"),
    ("true", "ATEN_CPU_CAPABILITY", "avx512", "avx2"),
    ("cross_vendor", "MKL_CBWR", "AVX2", "COMPATIBLE"),
    ("cross_vendor", "MKL_CBWR", "COMPATIBLE,STRICT", "COMPATIBLE,STRICT"),
])
def test_a_setting_at_least_as_strict_as_the_pin_is_kept(mode, name, value, kept):
    pinned = numerics.portable_environment({name: value}, mode)
    assert pinned[name] == kept and numerics.is_pinned(pinned, mode)
    assert json.loads(pinned.get(numerics.OVERRIDDEN_ENV, "{}")) == ({} if kept == value else {name: value})


def test_a_replaced_value_is_printed_with_both_values_on_one_line(monkeypatch, capsys):
    monkeypatch.setattr(numerics, "check_portable_numerics", lambda: None)
    for name in (*numerics.PORTABLE_ENVIRONMENT, numerics.OVERRIDDEN_ENV):
        monkeypatch.delenv(name, raising=False)  # restored after the test, with what the call sets
    monkeypatch.setenv("MKL_CBWR", "AUTO")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX")
    numerics.portable_numerics()
    assert capsys.readouterr().err.splitlines() == [
        "portable numerics: MKL_CBWR AUTO -> AVX2 (a value less strict than the pin is replaced)"]
    assert os.environ["ONEDNN_MAX_CPU_ISA"] == "AVX"  # kept, and so recorded in the record's environment


def test_an_accelerator_run_is_refused_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(numerics_entry, "accelerator_present", lambda: "cuda")
    with pytest.raises(SystemExit) as exited:
        run_spt.main(TINY + ["--portable_numerics", "--output_dir", "unused"])
    assert exited.value.code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "cuda" in error and "--use_cpu" in error


def test_a_cpu_without_avx2_is_refused(monkeypatch):
    for name, value in numerics.portable_environment({}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
    with pytest.raises(UserInputError, match="lacks AVX2"):
        numerics.check_portable_numerics()


@pytest.mark.skipif(NATIVE == "AVX2", reason="torch already runs AVX2 kernels here: pinning late changes nothing")
def test_pinning_after_torch_chose_its_kernels_is_refused(monkeypatch):
    for name in (*numerics.PORTABLE_ENVIRONMENT, numerics.OVERRIDDEN_ENV):
        monkeypatch.delenv(name, raising=False)  # restored after the test, with what the call sets
    torch.ones(3).sum()  # an operation: torch has chosen its kernels
    with pytest.raises(UserInputError, match="after torch chose its kernels"):
        numerics.portable_numerics()


def test_config_grid_and_study_files_ask_for_portable_numerics(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("portable_numerics: true\n")
    assert run_spt.parse_arguments(["--config_file", str(config)])[2].portable_numerics
    grid = {"tasks": {"m": {"task": "markov"}}, "arms": [{"name": "scratch"}], "seeds": [0]}
    asked = with_portable_numerics(parse_grid(grid), "true")  # a suite's --portable_numerics
    from_file = parse_grid({**grid, "experiment": {"portable_numerics": True}})
    for portable in (asked, from_file):
        assert unit_run(portable, 0, "m").finetune.portable_numerics
    assert not unit_run(parse_grid(grid), 0, "m").finetune.portable_numerics
    study = study_grid("digits_data_size")  # the shipped studies make new rows portable
    assert study.experiment["portable_numerics"] is True


def test_a_study_combine_does_not_take_portable_numerics():
    with pytest.raises(UserInputError, match="--combine trains nothing"):
        BudgetStudyArguments(combine="a,b", portable_numerics="false")


def test_a_grid_task_cannot_set_its_own_numerics():
    grid = {"tasks": {"m": {"task": "markov", "experiment": {"portable_numerics": True}}},
            "arms": [{"name": "scratch"}], "seeds": [0]}
    with pytest.raises(UserInputError, match="portable_numerics holds for the whole grid"):
        parse_grid(grid)


def _study_folder(folder: Path, seed: int, numerics_record: dict | None, cpu: dict | None = None) -> Path:
    folder.mkdir()
    row = {"task": "digits", "config": "c", "arm": "scratch", "arm_name": "scratch", "seed": seed,
           "test_accuracy": 0.5, "eval_accuracy": 0.5, "pretrain_epochs": None, "pretrain_tokens": 0,
           "budget_tokens": 0, "num_layers": 2, **({"numerics": numerics_record} if numerics_record else {}),
           **({"cpu": cpu} if cpu else {})}
    (folder / "budget_study.json").write_text(json.dumps([row]))
    (folder / "budget_study_checkpoints.json").write_text("[]")
    return folder


def test_adding_seeds_made_with_other_numerics_is_refused_unless_asked_and_reported(tmp_path):
    native = _study_folder(tmp_path / "native", 0, None)  # a row written before numerics were recorded: native
    portable = _study_folder(tmp_path / "portable", 1, {"label": numerics.PORTABLE_LABEL, "capability": "AVX2"})
    with pytest.raises(UserInputError, match=r"--add_seeds c: .*portable AVX2 \(seed 1\) and native \(seed 0\)|"
                                             r"--add_seeds c: .*native \(seed 0\) and portable AVX2 \(seed 1\)"):
        combined_reports([native, portable], added=["c"])
    rows, probes = combined_reports([native, portable], added=["c"], mix_numerics=True)
    assert [row["seed"] for row in rows] == [0, 1]
    from hf_spt.reports.study_evidence import study_evidence, summarize_study

    write_study_report(rows, probes, {}, tmp_path)
    assert "configuration c mixes CPU numerics, native (seed 0) and portable AVX2 (seed 1)" in (
        tmp_path / "budget_study.md").read_text()


def test_portable_rows_of_an_amd_cpu_are_named_apart_from_intel_ones(tmp_path):
    """MKL holds AVX2 on Intel CPUs only: a portable row made on an AMD CPU (recorded before MKL's branch was, or
    with the branch MKL reports there, AUTO) is named with MKL's automatic branch and its CPU, and joining it to
    Intel rows is a mix of numerics."""
    portable = {"label": numerics.PORTABLE_LABEL, "capability": "AVX2"}
    intel, amd = {"model": "Intel(R) Xeon(R) Processor"}, {"model": "AMD EPYC"}
    assert numerics_label({"numerics": portable, "cpu": intel}) == "portable AVX2"
    assert numerics_label({"numerics": portable, "cpu": amd}) == "portable AVX2, MKL AUTO on AMD EPYC"
    assert numerics_label({"numerics": {**portable, "mkl_branch": "AUTO"}, "cpu": amd}) == (
        "portable AVX2, MKL AUTO on AMD EPYC")
    assert numerics_label({"numerics": {**portable, "mkl_branch": None}, "cpu": intel}) == (
        "portable AVX2, MKL branch unknown on Intel(R) Xeon(R) Processor")
    assert numerics_label({"numerics": {"label": "native", "mkl_branch": "AUTO"}, "cpu": amd}) == "native"
    first = _study_folder(tmp_path / "amd", 0, portable, amd)
    second = _study_folder(tmp_path / "intel", 1, {**portable, "mkl_branch": "AVX2"}, intel)
    with pytest.raises(UserInputError, match=r"portable AVX2, MKL AUTO on AMD EPYC \(seed 0\) and portable AVX2 "
                                             r"\(seed 1\)"):
        combined_reports([first, second], added=["c"])


def test_pinning_warns_where_mkl_does_not_hold_avx2(recwarn):
    with pytest.warns(UserWarning, match="MKL runs its AUTO branch on this CPU .*, not AVX2"):
        numerics.warn_unless_mkl_holds("AUTO", "AVX2")
    numerics.warn_unless_mkl_holds("AVX2", "AVX2")
    numerics.warn_unless_mkl_holds(None, "AVX2")  # no MKL to ask: nothing to say
    assert not recwarn.list


@needs_avx2
def test_the_cross_vendor_mode_runs_mkls_compatible_branch_and_a_users_compatible_setting_stays(runs, tmp_path):
    """Both MKL branches started in subprocesses: the AVX2 mode (MKL's AVX2 branch on Intel, AUTO on AMD) and the
    cross-vendor mode (COMPATIBLE, on every vendor) train other bits, so a golden comparison of either can fail.
    `MKL_CBWR=COMPATIBLE` exported by the user with the plain flag is kept, recorded, and trains the cross-vendor
    mode's bits."""
    avx2, cross = runs("this CPU", "true"), runs("this CPU", "cross_vendor")
    assert avx2["weights"] != cross["weights"]
    if torch.backends.mkl.is_available():
        assert avx2["numerics"]["mkl_branch"] in ("AVX2", "AUTO") and cross["numerics"]["mkl_branch"] == "COMPATIBLE"
    assert cross["label"] == numerics.MODE_LABELS["cross_vendor"] == "portable AVX2, MKL COMPATIBLE"
    command = [sys.executable, str(ROOT / "run_scripts" / "run_spt.py"), *TINY, "--output_dir", str(tmp_path),
               "--portable_numerics"]
    done = subprocess.run(command, env=clean_env(MKL_CBWR="COMPATIBLE"), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    kept = result_of(tmp_path)
    assert kept["numerics"]["environment"]["MKL_CBWR"] == "COMPATIBLE" and "overridden" not in kept["numerics"]
    assert kept["weights"] == cross["weights"] and kept["label"] == cross["label"]
    assert "portable numerics:" not in done.stderr  # nothing replaced, nothing to say


DRIVER = "print('driver ran')\nfrom hf_spt.scripts import run_spt\nrun_spt.main()\n"


@needs_avx2
def test_a_driver_read_from_stdin_trains_once_and_pinned(tmp_path):
    """`python - --portable_numerics ... < driver.py`: nothing starts Python again, so the driver's code runs once
    and its run trains (a re-executed interpreter read an exhausted stdin and trained nothing)."""
    command = [sys.executable, "-", *TINY, "--output_dir", str(tmp_path), "--portable_numerics"]
    done = subprocess.run(command, input=DRIVER, env=clean_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("driver ran") == 1
    assert result_of(tmp_path)["numerics"]["label"] == numerics.PORTABLE_LABEL


@needs_avx2
def test_a_config_from_a_pipe_pins(tmp_path):
    """`python -m hf_spt run --config_file /dev/stdin` with `{"portable_numerics": true}` piped in: read once, so it
    trains pinned (the re-executed command read an empty pipe)."""
    command = [sys.executable, "-m", "hf_spt", "run", "--config_file", "/dev/stdin", *TINY,
               "--output_dir", str(tmp_path)]
    done = subprocess.run(command, input='{"portable_numerics": true}', capture_output=True, text=True, timeout=600,
                          env=clean_env(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert result_of(tmp_path)["numerics"]["label"] == numerics.PORTABLE_LABEL


@needs_avx2
def test_a_startup_hook_that_sets_mkl_cbwr_cannot_make_the_command_loop(tmp_path):
    """A startup hook that sets MKL_CBWR=AUTO in every new interpreter made the re-executing command start itself
    again and again: now it trains, once, the hook's value replaced in one printed line."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text("import os\nos.environ['MKL_CBWR'] = 'AUTO'\n")
    command = [sys.executable, "-m", "hf_spt", "run", *TINY, "--output_dir", str(tmp_path / "run"),
               "--portable_numerics"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=clean_env(PYTHONPATH=f"{hook}{os.pathsep}{ROOT}"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "portable numerics: MKL_CBWR AUTO -> AVX2" in done.stderr
    record = result_of(tmp_path / "run")["numerics"]
    assert record["label"] == numerics.PORTABLE_LABEL and record["overridden"] == {"MKL_CBWR": "AUTO"}


@pytest.mark.parametrize("before, variable", [
    ("import torch; torch.ones(3).sum()", "ATEN_CPU_CAPABILITY"),  # torch chose its kernels
    ("import os; os.environ['ATEN_CPU_CAPABILITY'] = 'avx2'; import torch; torch.ones(64, 64) @ torch.ones(64, 64)",
     "MKL_CBWR"),  # MKL ran a GEMM first
])
def test_a_pin_after_torch_or_mkl_computed_is_refused_in_one_line(before, variable):
    """A driver (or notebook, or startup hook) that ran an operation before the command: the pin cannot hold there,
    and the refusal names the variable read too early, the three to export, and the library call."""
    if variable == "ATEN_CPU_CAPABILITY" and NATIVE == "AVX2":
        pytest.skip("torch chooses AVX2 kernels here anyway: a late pin changes nothing")
    if variable == "MKL_CBWR" and not torch.backends.mkl.is_available():
        pytest.skip("no MKL")
    script = f"{before}\nfrom hf_spt.scripts import run_spt\nrun_spt.main()\n"
    done = subprocess.run([sys.executable, "-c", script, *TINY, "--output_dir", "unused", "--portable_numerics"],
                          env=clean_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("error: Portable numerics was asked for after") and f"({variable} read before" in error
    assert "export ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2" in error
    assert "hf_spt.portable_numerics()" in error


def test_the_library_call_after_a_gemm_is_refused():
    """`hf_spt.portable_numerics()` after MKL ran a GEMM (its branch fixed OFF): refused, as for torch's kernels,
    not recorded as portable AVX2 with MKL's branch OFF (issue 66 item 9)."""
    if not torch.backends.mkl.is_available():
        pytest.skip("no MKL")
    script = ("import os; os.environ['ATEN_CPU_CAPABILITY'] = 'avx2'\n"
              "import hf_spt, torch\ntorch.ones(64, 64) @ torch.ones(64, 64)\nhf_spt.portable_numerics()\n")
    done = subprocess.run([sys.executable, "-c", script], env=clean_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "UserInputError" in done.stderr and "MKL chose its branch (OFF)" in done.stderr


def test_a_suite_flag_is_three_valued_and_false_turns_a_study_files_setting_off(monkeypatch):
    """Shipped studies set `portable_numerics: true`; on a GPU machine `--portable_numerics false` runs them, and
    the refusal without it names the study file and that fix, not a flag the user never gave."""
    from hf_spt.experiments.declarations import SettingsParser

    def flag(*argv: str) -> str | None:
        return SettingsParser(BudgetStudyArguments).parse_args_into_dataclasses(args=list(argv))[0].portable_numerics

    assert [flag(), flag("--portable_numerics"), flag("--portable_numerics", "false"),
            flag("--portable_numerics", "cross_vendor")] == [None, "true", "false", "cross_vendor"]
    study = study_grid("digits_data_size")
    assert not unit_run(with_portable_numerics(study, "false"), 0, next(iter(study.tasks))).finetune.portable_numerics
    monkeypatch.setattr(numerics_entry, "accelerator_present", lambda: "cuda")
    numerics_entry.hold_grid_numerics(with_portable_numerics(study, "false").experiment, None)  # nothing to refuse
    with pytest.raises(UserInputError) as refused:
        numerics_entry.hold_grid_numerics(study.experiment, "the study file of 'digits_data_size'")
    assert str(refused.value).startswith("the study file of 'digits_data_size' sets portable_numerics")
    assert "pass --portable_numerics false" in str(refused.value)


def test_a_phase_definition_follows_the_settings_not_the_shells_variables(monkeypatch):
    from hf_spt.experiments.phases import phase_numerics

    for name, value in numerics.PORTABLE_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)  # the shell exported the pin; the settings ask for native numerics
    grid = parse_grid({"tasks": {"m": {"task": "markov"}}, "arms": [{"name": "scratch"}], "seeds": [0]})
    assert phase_numerics(unit_run(grid, 0, "m").finetune) is None


def test_the_mkl_label_trusts_mkls_answer_and_the_vendor_not_the_model_name():
    """An Intel VM whose CPU is named "Common KVM processor": MKL reported AVX2 there, so the row is portable AVX2
    (not "MKL AUTO"); a row recorded before MKL's answer goes by the recorded vendor."""
    portable = {"label": numerics.PORTABLE_LABEL, "capability": "AVX2"}
    vm = {"model": "Common KVM processor", "vendor": "GenuineIntel"}
    assert numerics_label({"numerics": {**portable, "mkl_branch": "AVX2"}, "cpu": vm}) == "portable AVX2"
    assert numerics_label({"numerics": portable, "cpu": vm}) == "portable AVX2"
    assert numerics_label({"numerics": portable, "cpu": {**vm, "vendor": "AuthenticAMD"}}) == (
        "portable AVX2, MKL AUTO on Common KVM processor")
    strict = {**portable, "mkl_branch": "AVX2", "environment": {"MKL_CBWR": "AVX2,STRICT", "ONEDNN_MAX_CPU_ISA": "AVX"}}
    assert numerics_label({"numerics": strict, "cpu": vm}) == "portable AVX2, MKL AVX2,STRICT, oneDNN AVX"


def test_a_record_names_the_cpus_vendor_and_native_isa():
    """What MKL's AUTO branch follows on AMD (the CPU's own ISA) is recorded beside the level torch ran."""
    description = numerics.cpu_description()
    assert description["native_isa"] in ("AVX512", "AVX2", "DEFAULT") and "vendor" in description
    if NATIVE in ("AVX2", "AVX512"):
        assert description["native_isa"] == NATIVE


def golden_versions() -> dict[str, str]:
    """The libraries whose code decides the golden's bits besides the CPU (torch's kernels, transformers' init)."""
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__}


def label_here(mode: str = "true") -> str:
    """The numerics label a portable run of `mode` takes on this machine, asked of a fresh pinned process (MKL's
    branch is fixed at its first GEMM)."""
    code = ("import json, torch, hf_spt\nfrom hf_spt import numerics\n"
            f"hf_spt.portable_numerics({mode!r})\n"
            "torch.ones(8, 8) @ torch.ones(8, 8)\n"
            "print(numerics.numerics_label({'numerics': numerics.numerics_record(), 'cpu': numerics.cpu_description()}))")
    done = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_label_here_follows_what_mkl_answers_on_this_vendor():
    """Issue 64 item 7: a portable process here is labelled by the branch MKL reports on this CPU's vendor (AVX2 on
    Intel; its automatic branch on any other), not by a branch recorded in a test; and the cross-vendor mode's label
    names no CPU."""
    vendor = numerics.cpu_description().get("vendor", "")
    here = label_here()
    assert (here == numerics.PORTABLE_LABEL) == (vendor == "GenuineIntel"), (vendor, here)
    if vendor != "GenuineIntel":
        assert "MKL AUTO on" in here
    assert label_here("cross_vendor") == "portable AVX2, MKL COMPATIBLE"


def write_golden() -> None:
    """Train the golden's run here and record it under its numerics label, beside the other labels' goldens
    (`python tests/test_portable_numerics.py --write`)."""
    import tempfile

    goldens = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {}
    for mode in ("true", "cross_vendor"):
        with tempfile.TemporaryDirectory() as folder:
            run = train(Path(folder), "this CPU", mode)
        goldens[run["label"]] = {"made_on": numerics.cpu_model(), "native_capability": NATIVE,
                                 "mkl_branch": run["numerics"]["mkl_branch"], "versions": golden_versions(),
                                 "torch_threads": run["torch_threads"],
                                 "command": ["run_scripts/run_spt.py", *TINY, *MODE_FLAGS[mode]],
                                 "metrics": run["metrics"], "weights": run["weights"]}
    GOLDEN.write_text(json.dumps(goldens, indent=1, sort_keys=True) + "\n")


def which_golden() -> str:
    """One line for CI's log: which committed golden this machine's portable runs are checked against, or that
    none is (the golden test then skips)."""
    goldens = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {}
    found = []
    for mode in ("true", "cross_vendor"):
        label = label_here(mode)
        golden = goldens.get(label)
        found.append(f"{label!r}: " + ("no golden committed (the golden test skips it)" if golden is None else
                                       f"the golden made on {golden['made_on']}"
                                       + ("" if golden["versions"] == golden_versions() else
                                          f", of other versions {golden['versions']} (the golden test skips it)")))
    return "portable numerics goldens checked here: " + "; ".join(found)


if __name__ == "__main__":
    if "--write" in sys.argv:
        write_golden()
    if "--which" in sys.argv:
        print(which_golden())
