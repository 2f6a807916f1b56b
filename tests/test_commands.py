"""The commands that come with the package (issue 47): `hf-spt <command>` (`hf_spt.cli`), `python -m
hf_spt.scripts.<module>`, and the checkout's `run_scripts/<module>.py`, three ways into one `main` with the same flags.
`.ci/check_installed` runs the installed `hf-spt` from a wheel."""

from __future__ import annotations

import ast
import configparser
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hf_spt
from hf_spt import cli
from hf_spt.experiments.exit_status import USER_ERROR_STATUS

ROOT = Path(__file__).resolve().parents[1]


def test_every_run_script_is_a_command_and_a_thin_wrapper():
    """Each module of hf_spt/scripts is a command, and run_scripts/ holds one wrapper per command, which calls its
    module's `main` and nothing else."""
    modules = {path.stem for path in (ROOT / "hf_spt" / "scripts").glob("*.py")} - {"__init__"}
    assert set(cli.COMMANDS.values()) == modules == {path.stem for path in (ROOT / "run_scripts").glob("*.py")}
    for module in modules:
        tree = ast.parse((ROOT / "run_scripts" / f"{module}.py").read_text())
        imports = [node for node in tree.body if isinstance(node, ast.ImportFrom)]
        assert [(node.module, [alias.name for alias in node.names]) for node in imports] == [
            (f"hf_spt.scripts.{module}", ["main"])], module


def test_the_package_installs_hf_spt():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    assert config["options.entry_points"]["console_scripts"].split() == ["hf-spt", "=", "hf_spt.cli:main"]


def test_help_lists_every_command(capsys):
    cli.main(["--help"])
    out = capsys.readouterr().out
    assert all(f"\n  {name} " in out for name in cli.COMMANDS), out
    assert "Self-pretraining (SPT) and fine-tuning on one task" in out


@pytest.mark.parametrize("argv, words", [([], "no command given"), (["train"], "unknown command 'train'")])
def test_no_command_or_an_unknown_one_is_one_line_exit_2(argv, words, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == USER_ERROR_STATUS and err.startswith(f"error: {words}") and err.count("\n") == 1


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_each_commands_help_names_it_and_lists_its_flags(command, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # the command renames itself in sys.argv
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0 and out.startswith(f"usage: hf-spt {command} [-h]") and "--" in out, out


def test_a_module_runs_with_python_dash_m(tmp_path):
    """`python -m hf_spt.scripts.run_spt` (what `accelerate launch -m` starts) parses its flags and ends as the
    command does: a bad value is one line, exit status 2."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "hf_spt.scripts.run_spt", "--help"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage: run_spt.py [-h]"), done.stderr[-2000:]
    done = subprocess.run([sys.executable, "-m", "hf_spt.scripts.run_spt", "--learning_rate", "inf", "--output_dir",
                           "unused"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == USER_ERROR_STATUS and done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert not any(tmp_path.iterdir())


def test_python_dash_m_hf_spt_is_the_console_script_and_says_its_version(tmp_path):
    """Issue 54: `python -m hf_spt` (no `__main__`) failed, and `hf-spt --version` was an unknown command."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "hf_spt", "--version"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == f"hf-spt {hf_spt.__version__}\n", done.stderr[-2000:]
    done = subprocess.run([sys.executable, "-m", "hf_spt", "--help"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage: hf-spt <command>"), done.stderr[-2000:]


@pytest.mark.parametrize("command", ["run", "budget-study", "generate-digits-images", "generate-listops"])
def test_an_unknown_flag_is_worded_alike_by_every_command(command, tmp_path, capsys, monkeypatch):
    """Issue 54: the commands on transformers' parser said "not used by the HfArgumentParser: ['--bogus', '1']"
    where argparse's say "unrecognized arguments: --bogus 1"; every command now says the latter, exit status 2."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--output_dir", str(tmp_path / "out"), "--bogus", "1"])
    err = capsys.readouterr().err
    assert exit_info.value.code == USER_ERROR_STATUS and err.splitlines()[-1].endswith(
        "error: unrecognized arguments: --bogus 1"), err
    assert not any(tmp_path.iterdir())


def test_the_build_needs_setuptools_alone():
    """Issue 54: pyproject.toml listed `wheel` as a build requirement; setuptools 70.1 and later build wheels and
    editable installs without it (docs/performance.md), so the build needs nothing more."""
    import tomllib

    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert requires == ["setuptools>=70.1"]


def test_the_default_grid_is_copied_out_for_an_installed_user(tmp_path, capsys, monkeypatch):
    """Issue 54: the grid error and docs/ablations.md pointed at hf_spt/scripts/ablation_default.yaml, inside
    site-packages for an installed user; `hf-spt ablation --write_default_grid PATH` writes a copy (never over a
    file), which the grid error names."""
    from hf_spt.experiments.suites.grid import load_grid, parse_grid
    from hf_spt.errors import UserInputError
    from hf_spt.scripts.run_ablation import DEFAULT_GRID_FILE

    monkeypatch.setattr(sys, "argv", list(sys.argv))
    copy = tmp_path / "my_grid.yaml"
    cli.main(["ablation", "--write_default_grid", str(copy)])
    assert copy.read_text() == Path(DEFAULT_GRID_FILE).read_text() and load_grid(copy).arms
    assert f"--grid_file {copy}" in capsys.readouterr().out
    copy.write_text("the user's edited grid")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["ablation", "--write_default_grid", str(copy)])
    err = capsys.readouterr().err
    assert exit_info.value.code == USER_ERROR_STATUS and "already exists" in err and err.count("\n") == 1, err
    assert copy.read_text() == "the user's edited grid"
    with pytest.raises(UserInputError, match="--write_default_grid my_grid.yaml` writes a copy"):
        parse_grid({"seeds": [0]})
    with pytest.raises(SystemExit) as exit_info:  # a flag it would not read
        cli.main(["ablation", "--write_default_grid", str(tmp_path / "other.yaml"), "--arms", "spt"])
    assert exit_info.value.code == USER_ERROR_STATUS and "trains nothing" in capsys.readouterr().err
    assert not (tmp_path / "other.yaml").exists()
