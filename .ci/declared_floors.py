"""Print `name==floor` for each requirement in setup.cfg whose floor pip can install beside the CPU torch wheel.

The floor check (`.ci/check_floors`) installs exactly these, so setup.cfg stays the one place a floor is written.
torch is left out: its old CPU wheels are not on this machine's registries, and an old torch from the default index
is a multi-GB CUDA build; its floor (transformers' own, 2.6) was tried by hand (README, "Tested versions").
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

NOT_INSTALLED_HERE = {"torch"}
FLOOR = re.compile(r"^([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)")


def declared_floors(setup_cfg: Path) -> dict[str, str]:
    """Each install requirement with a `>=` floor, by name."""
    parser = configparser.ConfigParser()
    parser.read(setup_cfg)
    floors = {}
    for line in parser["options"]["install_requires"].strip().splitlines():
        if match := FLOOR.match(line.strip()):
            floors[match.group(1)] = match.group(2)
    return floors


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    pins = [f"{name}=={version}" for name, version in declared_floors(root / "setup.cfg").items()
            if name not in NOT_INSTALLED_HERE]
    print(" ".join(pins))
