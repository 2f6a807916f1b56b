"""Portable CPU numerics (issue 55): `--portable_numerics` trains the same bits whatever kernels the CPU offers.

Two CPU kinds are stood in for by two environments of one machine: this CPU's own kernel level with MKL choosing
its path (`ATEN_CPU_CAPABILITY=<native> MKL_CBWR=AUTO`), and an older CPU's (`ATEN_CPU_CAPABILITY=default
MKL_CBWR=COMPATIBLE`, no vectorised ATen kernels, MKL's oldest path). Without the setting the two train different
weights (so the comparison can fail); with it the same, in one process and as two gloo ranks. The goldens
(`fixtures/portable_golden.json`, one per numerics label, each written with `python tests/test_portable_numerics.py
--write` on a machine that makes it) are a portable run's metrics and weight digest: "portable AVX2" on an Intel
CPU, "portable AVX2, MKL AUTO on AMD EPYC" on an AMD one (MKL holds its AVX2 branch on Intel CPUs only; the two
differ in their weight bits). CI checks the one its CPU's numerics name, and skips where none is committed.
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

from hf_spt import numerics
from hf_spt.errors import UserInputError
from hf_spt.experiments import numerics_entry
from hf_spt.experiments.suites.budget_study import study_grid
from hf_spt.experiments.suites.grid import parse_grid, unit_run, with_portable_numerics
from hf_spt.reports.budget_report import write_study_report
from hf_spt.reports.budget_sources import combined_reports
from hf_spt.runs.phase_definition import PhaseDefinitionMismatch
from hf_spt.runs.provenance import numerics_label
from hf_spt.scripts import run_spt
from hf_spt.scripts.run_budget_study import BudgetStudyArguments

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).with_name("fixtures") / "portable_golden.json"
TINY = ["--task_options", '{"num_train": 96, "num_validation": 32, "num_test": 32, "length": 24}',
        "--hidden_size", "16", "--intermediate_size", "32", "--num_attention_heads", "2", "--finetune_epochs", "1",
        "--per_device_train_batch_size", "16", "--disable_tqdm", "true", "--report_to", "none", "--mode", "scratch"]
NATIVE = torch.backends.cpu.get_cpu_capability()
KINDS = {"this CPU": {"ATEN_CPU_CAPABILITY": NATIVE.lower(), "MKL_CBWR": "AUTO"},
         "an older CPU": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}}
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


def train(folder: Path, kind: str, portable: bool, ranks: int = 1) -> dict:
    """A tiny scratch run of run_spt.py in a fresh process (`ranks` gloo ranks) under the environment of CPU `kind`:
    its weight digest, metrics and numerics record."""
    env = {**{k: v for k, v in os.environ.items() if k not in (numerics.OVERRIDDEN_ENV, *numerics.PORTABLE_ENVIRONMENT)},
           **KINDS[kind], "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    launcher = [] if ranks == 1 else ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(ranks),
                                      "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    if ranks > 1:
        env["ACCELERATE_USE_CPU"] = "1"
    command = [sys.executable, *launcher, str(ROOT / "run_scripts" / "run_spt.py"), *TINY, "--output_dir", str(folder),
               *(["--portable_numerics"] if portable else [])]
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads((folder / "scratch" / "phase.json").read_text())
    return {"weights": weights_digest(folder / "scratch"), "metrics": {k: result[k] for k in METRICS},
            "numerics": result["numerics"], "label": numerics_label(result), "torch_threads": result["torch_threads"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each run asked for, trained once per module: `runs(kind, portable, ranks)`."""
    done: dict = {}

    def run(kind: str, portable: bool, ranks: int = 1) -> dict:
        if (kind, portable, ranks) not in done:
            folder = tmp_path_factory.mktemp(f"{'portable' if portable else 'native'}_{ranks}")
            done[kind, portable, ranks] = {**train(folder, kind, portable, ranks), "folder": folder}
        return done[kind, portable, ranks]

    return run


@needs_avx2
def test_one_process_trains_the_same_bits_on_two_cpu_kinds_only_with_portable_numerics(runs):
    native = [runs(kind, False) for kind in KINDS]
    assert native[0]["weights"] != native[1]["weights"], "the two environments must run other kernels here"
    if torch.backends.mkl.is_available():  # MKL's own word on the branch each environment set (every vendor's MKL
        assert [run["numerics"]["mkl_branch"] for run in native] == ["AUTO", "COMPATIBLE"]  # holds these two)
    assert [run["numerics"]["label"] for run in native] == ["native", "native"]
    portable = [runs(kind, True) for kind in KINDS]
    assert portable[0]["weights"] == portable[1]["weights"] and portable[0]["metrics"] == portable[1]["metrics"]
    for run, kind in zip(portable, KINDS):
        record = run["numerics"]
        assert record["label"] == numerics.PORTABLE_LABEL and record["capability"] == "AVX2" and record["deterministic"]
        assert record["environment"] == numerics.PORTABLE_ENVIRONMENT
        assert record["overridden"] == KINDS[kind]  # the user's values, overridden, and the record says so


@needs_avx2
def test_two_gloo_ranks_train_the_same_bits_on_two_cpu_kinds(runs):
    first, second = (runs(kind, True, ranks=2) for kind in KINDS)
    assert first["weights"] == second["weights"] and first["metrics"] == second["metrics"]
    assert first["numerics"]["label"] == second["numerics"]["label"] == numerics.PORTABLE_LABEL


@needs_avx2
def test_a_portable_run_matches_the_committed_golden(runs):
    """The golden of this CPU's numerics was made on another machine (its CPU is in the file): the same bits here."""
    run = runs("this CPU", True)
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
    folder = runs("this CPU", True)["folder"]
    with pytest.raises(PhaseDefinitionMismatch, match=r"numerics: 'portable AVX2' -> '<unset>'"):
        run_spt.run(*run_spt.parse_arguments(TINY + ["--output_dir", str(folder)]))


def test_the_library_call_pins_a_process_before_its_first_operation(tmp_path):
    """`hf_spt.portable_numerics()` after `import hf_spt`: torch at AVX2, deterministic, a user's value recorded."""
    script = ("import hf_spt, torch, json; hf_spt.portable_numerics(); from hf_spt.runs.provenance import "
              "numerics_record; print(json.dumps(numerics_record()))")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "PYTHONPATH": str(ROOT)}
    env.pop(numerics.OVERRIDDEN_ENV, None)
    completed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    if NATIVE not in ("AVX2", "AVX512"):
        assert completed.returncode != 0 and "lacks AVX2" in completed.stderr
        return
    assert completed.returncode == 0, completed.stderr[-2000:]
    record = json.loads(completed.stdout.strip().splitlines()[-1])
    assert record["label"] == "portable AVX2" and record["capability"] == "AVX2" and record["deterministic"]
    assert record["overridden"] == {"ATEN_CPU_CAPABILITY": "default"}


def test_numerics_imports_no_torch_when_imported():
    """The module a library user calls first reads no torch at import time (layer 0)."""
    tree = ast.parse((ROOT / "hf_spt" / "numerics.py").read_text())
    top = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    names = [alias.name for node in top for alias in node.names] + [node.module or "" for node in top
                                                                  if isinstance(node, ast.ImportFrom)]
    assert not any(name.split(".")[0] == "torch" for name in names)


def test_pinning_overrides_the_users_values_and_keeps_them():
    pinned = numerics.portable_environment({"MKL_CBWR": "COMPATIBLE", "PATH": "/bin"})
    assert numerics.is_pinned(pinned) and pinned["PATH"] == "/bin"
    assert json.loads(pinned[numerics.OVERRIDDEN_ENV]) == {"MKL_CBWR": "COMPATIBLE"}
    again = numerics.portable_environment(pinned)  # a re-executed or child process keeps the user's value
    assert json.loads(again[numerics.OVERRIDDEN_ENV]) == {"MKL_CBWR": "COMPATIBLE"}
    assert not numerics.is_pinned({**pinned, "MKL_CBWR": "AUTO"})


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
    asked = with_portable_numerics(parse_grid(grid), True)  # a suite's --portable_numerics
    from_file = parse_grid({**grid, "experiment": {"portable_numerics": True}})
    for portable in (asked, from_file):
        assert unit_run(portable, 0, "m").finetune.portable_numerics
    assert not unit_run(parse_grid(grid), 0, "m").finetune.portable_numerics
    study = study_grid("digits_data_size")  # the shipped studies make new rows portable
    assert study.experiment["portable_numerics"] is True


def test_a_study_combine_does_not_take_portable_numerics():
    with pytest.raises(UserInputError, match="--combine trains nothing"):
        BudgetStudyArguments(combine="a,b", portable_numerics=True)


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
    with the branch MKL reports) is named with MKL's automatic branch and its CPU, and joining it to Intel rows is a
    mix of numerics."""
    portable = {"label": numerics.PORTABLE_LABEL, "capability": "AVX2"}
    intel, amd = {"model": "Intel(R) Xeon(R) Processor"}, {"model": "AMD EPYC"}
    assert numerics_label({"numerics": portable, "cpu": intel}) == "portable AVX2"
    assert numerics_label({"numerics": portable, "cpu": amd}) == "portable AVX2, MKL AUTO on AMD EPYC"
    assert numerics_label({"numerics": {**portable, "mkl_branch": "AVX2"}, "cpu": amd}) == (
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
    with pytest.warns(UserWarning, match="MKL runs its AUTO branch on this CPU \\(AMD EPYC\\), not AVX2"):
        numerics.warn_unless_mkl_holds("AMD EPYC", "AVX2")
    numerics.warn_unless_mkl_holds("Intel(R) Xeon(R) Processor", "AVX2")
    numerics.warn_unless_mkl_holds("AMD EPYC", None)  # no MKL to ask: nothing to say
    assert not recwarn.list


def golden_versions() -> dict[str, str]:
    """The libraries whose code decides the golden's bits besides the CPU (torch's kernels, transformers' init)."""
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__}


def write_golden() -> None:
    """Train the golden's run here and record it under its numerics label, beside the other labels' goldens
    (`python tests/test_portable_numerics.py --write`)."""
    import tempfile

    from hf_spt.runs.provenance import cpu_description

    with tempfile.TemporaryDirectory() as folder:
        run = train(Path(folder), "this CPU", True)
    goldens = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {}
    goldens[run["label"]] = {"made_on": cpu_description()["model"], "native_capability": NATIVE,
                             "mkl_branch": run["numerics"]["mkl_branch"], "versions": golden_versions(),
                             "torch_threads": run["torch_threads"],
                             "command": ["run_scripts/run_spt.py", *TINY, "--portable_numerics"],
                             "metrics": run["metrics"], "weights": run["weights"]}
    GOLDEN.write_text(json.dumps(goldens, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    if "--write" in sys.argv:
        write_golden()
