"""Every phase.json, and so every row built from one, records the commit and library versions that made it; rows
of runs made before that still read, and seeds run at other commits still join (`--add_seeds`)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

from hf_spt.experiments.phases import _finish
from hf_spt.reports.budget_sources import combined_reports
from hf_spt.reports.grid_report import write_report
from hf_spt.runs import provenance
from hf_spt.runs.folder import PHASE_RESULT_NAME

LIBRARIES = {"hf_spt", "torch", "transformers", "datasets", "accelerate"}


class _Trainer:
    """What `_finish` asks of a Trainer, without training."""

    state = SimpleNamespace(log_history=[])

    def save_model(self, folder: str) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)

    def is_world_process_zero(self) -> bool:
        return True


def test_every_phase_result_records_the_commit_and_versions(tmp_path):
    returned = _finish(_Trainer(), tmp_path, {"phase": "pretrain", "eval_loss": 1.0})
    written = json.loads((tmp_path / PHASE_RESULT_NAME).read_text())
    assert written == returned and written["eval_loss"] == 1.0
    assert written["commit"] == provenance.package_commit() and written["commit"]
    assert LIBRARIES <= set(written["versions"]) and all(written["versions"][name] for name in LIBRARIES)
    assert written["torch_threads"] == torch.get_num_threads()
    assert written["cpu"]["model"] and written["cpu"]["capability"] == torch.backends.cpu.get_cpu_capability()


def clone_of_this_checkout(folder: Path) -> Path:
    """A local clone of the package's checkout at `folder`."""
    subprocess.run(["git", "clone", "--quiet", "--local", str(provenance.PACKAGE_ROOT), str(folder)], check=True,
                   timeout=120)
    return folder


def run_in(clone: Path, script: str) -> str:
    """The last line `script` prints, run with `clone`'s package imported."""
    done = subprocess.run([sys.executable, "-c", script, str(clone)], cwd=clone, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(clone)}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_commit_is_the_checkouts_as_the_command_started_not_as_a_result_is_written(tmp_path):
    """A commit made in the checkout while a run trained (its loaded code unchanged) was recorded as the run's:
    the commit was read when the first result was written. A command reads it as it starts (`run_cli`)."""
    clone = clone_of_this_checkout(tmp_path / "clone")
    loaded = subprocess.run(["git", "-C", str(clone), "describe", "--always", "--dirty", "--abbrev=12"],
                            capture_output=True, text=True, check=True).stdout.strip()
    script = ("import subprocess, sys\n"
              "from hf_spt.experiments.exit_status import run_cli\n"
              "from hf_spt.runs import provenance\n"
              "def command(argv):\n"
              "    subprocess.run(['git', '-C', sys.argv[1], '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', "
              "'--quiet', '--allow-empty', '-m', 'made while the run trains'], check=True)\n"
              "    print(provenance.package_commit())\n"
              "run_cli(command, [])\n")
    assert run_in(clone, script) == loaded


def test_importing_the_reports_layer_runs_no_git():
    """Reading a row's numerics (`reports.report_sources`) needs no commit: importing it runs no git."""
    script = ("import subprocess\n"
              "started = []\n"
              "real = subprocess.Popen.__init__\n"
              "def record(self, args, *rest, **options):\n"
              "    started.append(args)\n"
              "    real(self, args, *rest, **options)\n"
              "subprocess.Popen.__init__ = record\n"
              "import hf_spt.reports.report_sources, hf_spt.runs.provenance\n"
              "print([args for args in started if 'git' in str(args).split()[0]])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(provenance.PACKAGE_ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_row_at_an_annotated_tag_records_its_full_hash(tmp_path):
    """`git describe` at an annotated tag says "v9.9", which names no commit: the record keeps the full hash
    beside it, and `row_commit` checks on that (a row without it falls back to its described commit)."""
    assert "commit_hash" in provenance.PROVENANCE_KEYS
    clone = clone_of_this_checkout(tmp_path / "clone")
    subprocess.run(["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t", "tag", "-a", "v9.9", "-m",
                    "a release"], check=True)
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    script = ("import json\nfrom hf_spt.runs import provenance\nrecord = provenance.run_provenance()\n"
              "print(json.dumps({key: record.get(key) for key in ('commit', 'commit_hash')}))\n")
    row = json.loads(run_in(clone, script))
    assert row == {"commit": "v9.9", "commit_hash": head}
    assert provenance.described_commit(row["commit"]) is None and provenance.row_commit(row) == head
    assert provenance.row_commit({"commit": "0123456789ab-dirty"}) == "0123456789ab"
    assert provenance.row_commit({"commit": "v9.9"}) is None and provenance.row_commit({}) is None


def test_is_ancestor_asks_git_through_the_one_helper(monkeypatch):
    asked = []
    real = provenance.git_output
    monkeypatch.setattr(provenance, "git_output", lambda *arguments: asked.append(arguments) or real(*arguments))
    root = provenance.PACKAGE_ROOT
    assert provenance.is_ancestor(root, "HEAD~1", "HEAD") is True
    assert provenance.is_ancestor(root, "HEAD", "HEAD~1") is False
    assert provenance.is_ancestor(root, "HEAD", "0" * 40) is None  # a commit the repository does not hold
    assert [arguments[1:3] for arguments in asked] == [("merge-base", "--is-ancestor")] * 3


def test_the_recorded_version_is_the_imported_packages(monkeypatch, capsys):
    """A checkout on PYTHONPATH over an installed older release records its own version, and `hf-spt --version`
    (and `python -m hf_spt --version`) prints it: neither reads the distribution's metadata, so neither needs one."""
    from importlib import metadata

    import hf_spt
    from hf_spt import cli
    from hf_spt.training.model_card import installed_versions

    real, installed = metadata.version, {"hf-spt": "0.0.1"}
    monkeypatch.setattr(metadata, "version", lambda name: installed.get(name) or real(name))
    monkeypatch.setattr(hf_spt, "__version__", "9.9.9.dev0")
    cli.main(["--version"])
    assert capsys.readouterr().out == "hf-spt 9.9.9.dev0\n"
    assert installed_versions()["hf_spt"] == "9.9.9.dev0"


def test_a_dirty_commit_names_the_files_changed_on_top_of_it(tmp_path):
    """"-dirty" alone cannot tell a documentation edit from a code edit: the result names the changed files."""
    clone = clone_of_this_checkout(tmp_path / "clone")
    script = ("import json\n"
              "from hf_spt.runs import provenance\n"
              "record = provenance.run_provenance()\n"
              "print(json.dumps({'commit': record['commit'], 'uncommitted': record.get('uncommitted')}))\n")

    def recorded() -> dict:
        done = subprocess.run([sys.executable, "-c", script], cwd=clone, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(clone)}, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    clean = recorded()
    assert not clean["commit"].endswith("-dirty") and clean["uncommitted"] is None  # a clean checkout adds no key
    for path in ("README.md", "hf_spt/errors.py"):
        with (clone / path).open("a") as changed:
            changed.write("\n")
    dirty = recorded()
    assert dirty == {"commit": f"{clean['commit']}-dirty", "uncommitted": "README.md, hf_spt/errors.py"}


def test_the_commit_is_unknown_outside_the_packages_own_checkout(tmp_path, monkeypatch):
    provenance.package_commit.cache_clear()
    monkeypatch.setattr(provenance, "PACKAGE_ROOT", tmp_path)  # no git checkout there
    try:
        assert provenance.package_commit() == provenance.UNKNOWN_COMMIT
    finally:
        provenance.package_commit.cache_clear()
    assert provenance.recorded_provenance({"test_accuracy": 0.5}) == {}  # a result written before: nothing added


def test_grid_rows_with_and_without_provenance_write_one_csv(tmp_path):
    old = {"task": "t", "arm": "scratch", "seed": 0, "test_accuracy": 0.5}
    new = {**old, "seed": 1, "commit": "abc123", "versions": {"torch": "2.4"}}
    write_report([old, new], tmp_path)
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert rows[0]["commit"] == "" and rows[1]["commit"] == "abc123"
    assert json.loads(rows[1]["versions"]) == {"torch": "2.4"}


def test_seeds_run_at_other_commits_join_with_add_seeds(tmp_path):
    for seed, extra in ((0, {}), (1, {"commit": "def456", "versions": {"torch": "2.5"}})):
        folder = tmp_path / f"seed{seed}"
        folder.mkdir()
        row = {"task": "digits", "config": "c", "arm": "scratch", "arm_name": "scratch", "seed": seed,
               "test_accuracy": 0.5, "eval_accuracy": 0.5, "pretrain_epochs": None, "pretrain_tokens": 0,
               "budget_tokens": 0, "num_layers": 2, **extra}
        (folder / "budget_study.json").write_text(json.dumps([row]))
        (folder / "budget_study_checkpoints.json").write_text("[]")
    rows, _ = combined_reports([tmp_path / "seed0", tmp_path / "seed1"], added=["c"])
    assert [row.get("commit") for row in rows] == [None, "def456"]


