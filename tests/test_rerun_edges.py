"""Run folders at the edges (issue 20, items 4, 5, 13, 15, 17): a checkpoint's settings against the flags,
a plain checkpoint replaced in place, a failed run's leftovers, a narrower mode re-run into a compare
run's folder, and the permissions of what a run writes. Tiny runs of about a second each."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from tiny_backbone_runs import tiny_arguments

from hf_spt.errors import UserInputError
from hf_spt.experiments import pipeline
from hf_spt.experiments.phase_definition import DEFINITION_NAME, PhaseDefinitionMismatch
from hf_spt.experiments.run_folder import write_json, write_text


def run(folder: Path, **settings) -> dict:
    return pipeline.run_experiment(*tiny_arguments(folder, **settings))


def results(folder: Path) -> dict:
    return json.loads((folder / "results.json").read_text())


# item 17: atomic writes respect the umask


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_atomic_writes_get_the_permissions_of_a_plain_file(tmp_path, umask):
    previous = os.umask(umask)
    try:
        write_json(tmp_path / "results.json", {"a": 1})
        write_text(tmp_path / "results.md", "x")
        (tmp_path / "plain.txt").write_text("x")
    finally:
        os.umask(previous)
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in tmp_path.iterdir()}
    assert modes == dict.fromkeys(["results.json", "results.md", "plain.txt"], 0o666 & ~umask)  # before: 0o600


def test_a_runs_results_and_logs_are_readable_like_its_other_files(tmp_path):
    previous = os.umask(0o022)
    try:
        run(tmp_path, mode="scratch")
    finally:
        os.umask(previous)
    for path in (tmp_path / "results.json", tmp_path / "scratch" / "phase.json", tmp_path / "scratch" / "log_history.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
