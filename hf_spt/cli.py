"""`hf-spt`, the command the package installs: `hf-spt <command> [flags]` runs one job of `hf_spt.scripts`.

    hf-spt --help                  # the commands
    hf-spt --version               # the imported hf_spt's version, as runs record it
    hf-spt run --help              # a command's flags (those of run_scripts/run_spt.py)
    hf-spt run --task listops      # = python -m hf_spt.scripts.run_spt --task listops
    python -m hf_spt run ...       # the same as hf-spt, where the console script is not on PATH

Launchers that start a module take the job's module (`accelerate launch -m hf_spt.scripts.run_spt ...`), or this
one (`accelerate launch -m hf_spt.cli run ...`).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path

from .experiments.exit_status import USER_ERROR_STATUS
from .training.model_card import package_version

COMMANDS = {
    "run": "run_spt",
    "ablation": "run_ablation",
    "lra": "run_lra",
    "budget-study": "run_budget_study",
    "compute-curves": "run_compute_curves",
    "analysis": "run_analysis",
    "generate-listops": "generate_listops",
    "generate-pathfinder": "generate_pathfinder",
    "generate-digits-images": "generate_digits_images",
    "pathfinder-examples": "pathfinder_examples",
}
"""Each command and the module of `hf_spt.scripts` that runs it."""


def usage() -> str:
    """The commands, each with what its module's docstring says first."""
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {summary(module)}" for name, module in COMMANDS.items()]
    return "\n".join(["usage: hf-spt <command> [flags]   (hf-spt <command> --help: its flags; hf-spt --version)", "",
                      "commands:", *lines])


def summary(module: str) -> str:
    """The first sentence or paragraph of the docstring of `hf_spt.scripts.<module>`, read from its source (nothing
    imported)."""
    source = Path(importlib.util.find_spec(f"hf_spt.scripts.{module}").origin).read_text(encoding="utf-8")
    return " ".join((ast.get_docstring(ast.parse(source)) or "").split("\n\n")[0].split())


def main(argv: list[str] | None = None) -> None:
    """Run the command `argv` (default: the command line) names with the rest of it; `--help` prints the commands,
    `--version` the version (no command, or an unknown one, is a user error: exit status 2)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(usage())
        return
    if argv[:1] == ["--version"]:
        print(f"hf-spt {package_version()[0]}")
        return
    if not argv or argv[0] not in COMMANDS:
        named = f"unknown command {argv[0]!r}" if argv else "no command given"
        print(f"error: {named}; choose one of: {', '.join(COMMANDS)} (hf-spt --help).", file=sys.stderr)
        raise SystemExit(USER_ERROR_STATUS)
    sys.argv = [f"hf-spt {argv[0]}", *argv[1:]]  # the command's usage line names it as typed
    importlib.import_module(f"hf_spt.scripts.{COMMANDS[argv[0]]}").main(argv[1:])


if __name__ == "__main__":
    main()
