"""setup.cfg's floors are the ones the floor check installs and the README names ("Tested versions")."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _declared_floors_module():
    spec = importlib.util.spec_from_file_location("declared_floors", ROOT / ".ci" / "declared_floors.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_floor_is_parsed_and_named_in_the_readme():
    module = _declared_floors_module()
    floors = module.declared_floors(ROOT / "setup.cfg")
    assert {"torch", "transformers", "datasets", "accelerate", "evaluate", "safetensors", "huggingface_hub"} <= set(floors)
    assert floors["transformers"] == "5.20.0", "transformers 5.20 is the first with SubConfigSpec"
    tested = re.search(r"\*\*Tested versions\.\*\*(.*?)\n\n", (ROOT / "README.md").read_text(), re.S).group(1)
    tested = " ".join(tested.split())
    for name, version in floors.items():
        assert f"{name} {version}" in tested, f"README's Tested versions does not name {name} {version}"


def test_the_floor_check_installs_every_floor_but_torch():
    module = _declared_floors_module()
    floors = module.declared_floors(ROOT / "setup.cfg")
    pins = [f"{name}=={version}" for name, version in floors.items() if name not in module.NOT_INSTALLED_HERE]
    assert len(pins) == len(floors) - 1 and not any(pin.startswith("torch==") for pin in pins)
