"""What a wheel of the package holds is what the checkout holds (issue 47): an editable install reads the folder on
disk and hides a module or a data file the wheel leaves out, so these checks read setup.cfg as setuptools does.

- Every folder of `hf_spt/` holding Python files is a package (`packages = find:` takes only folders with an
  `__init__.py`), unless its files are package data (the `evaluate` metric scripts, loaded by path).
- Every `package_data` pattern matches a file, and every file of `hf_spt/` that is not a module is matched by one.

`.ci/check_installed` builds the wheel itself and runs it from outside the checkout.
"""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hf_spt"


def setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def package_data() -> list[str]:
    """The `package_data` patterns of `hf_spt`, relative to `hf_spt/`."""
    return setup_cfg()["options.package_data"]["hf_spt"].split()


def package_files() -> list[Path]:
    """Every file under `hf_spt/` but Python's caches."""
    return sorted(path for path in PACKAGE.rglob("*") if path.is_file() and "__pycache__" not in path.parts)


def as_data(path: Path) -> bool:
    return any(path.match(str(PACKAGE / pattern)) for pattern in package_data())


def test_every_folder_of_modules_is_a_package():
    folders = {path.parent for path in package_files() if path.suffix == ".py" and not as_data(path)}
    not_packages = sorted(str(folder.relative_to(ROOT)) for folder in folders if not (folder / "__init__.py").is_file())
    assert not not_packages, f"folders of modules without __init__.py, left out of the wheel: {not_packages}"


def test_every_package_data_pattern_matches_a_file():
    empty = [pattern for pattern in package_data() if not any(PACKAGE.glob(pattern))]
    assert not empty, f"setup.cfg package_data patterns that match no file: {empty}"


def test_every_data_file_is_package_data():
    left_out = [str(path.relative_to(ROOT)) for path in package_files() if path.suffix != ".py" and not as_data(path)]
    assert not left_out, f"files under hf_spt/ no package_data pattern ships: {left_out}"
