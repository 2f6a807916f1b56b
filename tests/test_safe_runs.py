"""Safe runs: names from settings files never leave the run's folder, no secret is written anywhere, and an
output folder that cannot hold a run is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tiny_backbone_runs import tiny_arguments

from hf_spt.errors import UserInputError
from hf_spt.experiments.arguments import SharedTrainingArguments
from hf_spt.experiments.exit_status import USER_ERROR_STATUS
from hf_spt.experiments.pipeline import run_experiment
from hf_spt.experiments.suites import grid_runner
from hf_spt.experiments.suites.grid import parse_grid
from hf_spt.runs.folder import hold_output_dir

ROOT = Path(__file__).resolve().parents[1]
SCRIPT_ENV = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}  # the checkout's hf_spt
GRID = {"seeds": [0], "tasks": {"m": {"task": "markov"}}, "arms": [{"name": "scratch"}]}


@pytest.mark.parametrize("change", [
    {"arms": [{"name": "../../../../ESCAPED_ARM"}]},
    {"arms": [{"name": "a/b"}]},
    {"arms": [{"name": ".hidden"}]},
    {"tasks": {"../../../ESCAPED_TASK": {"task": "markov"}}},
    {"pretrain_tasks": {"..": {"task": "markov"}}},
])
def test_names_that_become_folders_are_plain(change):
    with pytest.raises(UserInputError, match="becomes a folder name"):
        parse_grid({**GRID, **change}, "study.yaml")


def test_a_study_naming_an_escaping_arm_exits_2_and_writes_nothing(tmp_path):
    study = {**GRID, "output_dir": str(tmp_path / "run"), "arms": [{"name": "../../ESCAPED"}]}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study))
    done = subprocess.run([sys.executable, "run_scripts/run_budget_study.py", "--study", str(tmp_path / "study.yaml")],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == USER_ERROR_STATUS and "becomes a folder name" in done.stderr
    assert "Traceback" not in done.stderr and list(tmp_path.iterdir()) == [tmp_path / "study.yaml"]


def test_no_run_file_holds_the_hub_token(tmp_path):
    secret = "hf_NotARealTokenButSecret"
    run_experiment(*tiny_arguments(tmp_path / "run", hub_token=secret))
    written = [path for path in (tmp_path / "run").rglob("*") if path.is_file()]
    assert any(path.name == "training_args.bin" for path in written) and any(p.name == "results.json" for p in written)
    assert not [path for path in written if secret.encode() in path.read_bytes()]
    assert "<HUB_TOKEN>" in (tmp_path / "run/results.json").read_text()  # recorded as given, never its value


def test_grid_record_and_child_command_line_hold_no_token(monkeypatch):
    grid = parse_grid({**GRID, "experiment": {"hub_token": "hf_secret"}})
    assert grid_runner.grid_record(grid)["experiment"]["hub_token"] == "<HUB_TOKEN>"
    calls = []
    monkeypatch.setattr(grid_runner.subprocess, "run", lambda command, **kwargs: calls.append((command, kwargs)))
    grid_runner._run_in_child(grid, "cell", grid_runner.Cell("m", "scratch", 0), None)
    command, kwargs = calls[0]
    assert "hf_secret" not in " ".join(command) and "hf_secret" in kwargs["input"]  # on stdin, not in `ps`


def test_output_folders_that_cannot_hold_a_run_are_refused(tmp_path):
    with pytest.raises(UserInputError, match="--output_dir is empty"):
        SharedTrainingArguments(output_dir="")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for folder, message in ((a_file, "is a file, not a folder"), (a_file / "below", "is a file"),
                            ("/proc/no_such_pid/run", "cannot be written")):
        with pytest.raises(UserInputError, match=message), hold_output_dir(folder):
            pass
    done = subprocess.run([sys.executable, "run_scripts/run_spt.py", "--output_dir", str(a_file)], cwd=ROOT,
                          capture_output=True, text=True, env=SCRIPT_ENV)
    assert done.returncode == USER_ERROR_STATUS and "is a file, not a folder" in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_a_file_changed_in_place_with_its_size_and_time_kept_is_read_again(tmp_path, suffix):
    import os

    from hf_spt.tasks import load_task

    separator = "," if suffix == ".csv" else "\t"
    path = tmp_path / f"train{suffix}"
    def write(labels: str) -> None:
        path.write_text(f"text{separator}label\n" + "".join(f"row {i}{separator}{label}\n"
                                                           for i, label in enumerate(labels)))
    write("abab")
    stat = path.stat()
    first = load_task("custom", train_file=str(path), validation_fraction=0.5, cache_dir=str(tmp_path / "cache"))
    write("baba")  # same size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same time, as `cp -p` or `rsync -a` leave it
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    second = load_task("custom", train_file=str(path), validation_fraction=0.5, cache_dir=str(tmp_path / "cache"))
    def rows(task):
        return sorted((tuple(ids), label) for split in ("train", "validation")
                      for ids, label in zip(task.dataset[split]["input_ids"], task.dataset[split]["labels"]))

    assert rows(first) != rows(second)


@pytest.mark.parametrize("rows, message", [
    ('{"text": "", "label": "a"}\n{"text": "x", "label": "b"}\n', r"row 1: the text is empty"),
    ('{"input_ids": [5, 6], "label": "a"}\n{"input_ids": [], "label": "b"}\n', r"row 2: input_ids is an empty list"),
])
def test_zero_token_examples_are_refused_naming_the_row(tmp_path, rows, message):
    from hf_spt.tasks import load_task

    (tmp_path / "train.jsonl").write_text(rows * 3)
    with pytest.raises(UserInputError, match=message):
        load_task("custom", train_file=str(tmp_path / "train.jsonl"), cache_dir=str(tmp_path / "cache"))


def test_infinite_values_are_refused_before_any_data():
    from hf_spt.experiments.arguments import ExperimentArguments

    for settings in ({"finetune_learning_rate": float("inf")}, {"pretrain_epochs": float("inf")}):
        with pytest.raises(UserInputError, match="inf: must be a finite number > 0"):
            ExperimentArguments(**settings)  # the arguments check their declared ranges themselves
    done = subprocess.run([sys.executable, "run_scripts/run_spt.py", "--learning_rate", "inf", "--output_dir", "unused"],
                          cwd=ROOT, capture_output=True, text=True, env=SCRIPT_ENV)
    assert done.returncode == USER_ERROR_STATUS and "--learning_rate inf: must be a finite number > 0" in done.stderr


@pytest.mark.parametrize("flags", [["--task", "text"], [
    "--pretrain_task", "image", "--task", "pathfinder", "--task_options", '{"num_images": 20}']])
def test_hub_data_offline_is_one_line_and_exit_2(flags):
    done = subprocess.run([sys.executable, "run_scripts/run_spt.py", *flags, "--output_dir", "unused_offline"],
                          cwd=ROOT, capture_output=True, text=True, env=SCRIPT_ENV)
    assert done.returncode == USER_ERROR_STATUS and "cannot be downloaded here" in done.stderr
    assert "Traceback" not in done.stderr and not (ROOT / "unused_offline").exists()


def test_bf16_on_a_cpu_trains_the_projections_in_bf16_and_attention_in_fp32(tmp_path, monkeypatch):
    import torch

    from hf_spt.models import attention_spt

    seen = []
    original = attention_spt.eager_attention_forward

    def recording(module, query, *args, **kwargs):
        seen.append((query.dtype, torch.is_autocast_enabled("cpu")))
        return original(module, query, *args, **kwargs)

    linear_outputs = set()
    linear_forward = torch.nn.Linear.forward

    def recording_linear(self, inputs):
        output = linear_forward(self, inputs)
        linear_outputs.add(output.dtype)
        return output

    monkeypatch.setitem(attention_spt.ALL_ATTENTION_FUNCTIONS, "sdpa", recording)
    monkeypatch.setattr(torch.nn.Linear, "forward", recording_linear)
    result = run_experiment(*tiny_arguments(tmp_path / "bf16", mode="scratch", bf16=True))
    assert result["arms"][0]["test_accuracy"] is not None
    assert torch.bfloat16 in linear_outputs  # the Trainer autocasts the projections...
    assert seen and set(seen) == {(torch.float32, False)}  # ...and attention is left out of it, in float32
    assert json.loads((tmp_path / "bf16/results.json").read_text())["training"]["bf16"] is True
    with pytest.raises(UserInputError, match="--fp16 needs a GPU"):
        run_experiment(*tiny_arguments(tmp_path / "fp16", mode="scratch", fp16=True))
