"""Run an ablation grid (arms x seeds x tasks) and write results.csv, results.md and results.png.

Usage:
    # the paper's ablations on the default synthetic task (hf_spt/scripts/ablation_default.yaml)
    python run_scripts/run_ablation.py --torch_threads 2

    # a subset of arms and seeds, another output folder
    python run_scripts/run_ablation.py --arms scratch,spt,hybrid_qk --seeds 0,1 --output_dir runs/abl

    # cells on several processes: one rank per GPU, or on a CPU-only machine two gloo ranks
    # (`--cpu --num_processes 2` would silently start only one)
    accelerate launch --multi_gpu --num_processes 2 run_scripts/run_ablation.py
    ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 run_scripts/run_ablation.py

    # a copy of the default grid to edit (it ships inside the package), then that grid run
    python run_scripts/run_ablation.py --write_default_grid my_grid.yaml
    python run_scripts/run_ablation.py --grid_file my_grid.yaml

Re-running the same command skips finished cells and SPT checkpoints (resume after an interruption).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


from hf_spt.atomic_files import write_text
from hf_spt.errors import UserInputError
from hf_spt.experiments.suites.grid_runner import run_grid
from hf_spt.experiments.suites.grid import load_grid, with_portable_numerics
from hf_spt.experiments.numerics_entry import hold_grid_numerics
from hf_spt.reports.grid_report import RESULTS_MD_NAME
from hf_spt.runs.folder import check_writable_file
from hf_spt.experiments.declarations import SettingsParser
from hf_spt.experiments.exit_status import run_cli
from hf_spt.experiments.suite_flags import (comma_names, comma_seeds, portable_numerics_field, set_torch_threads,
                                           torch_threads_field)
from hf_spt.value_checks import check_declared

DEFAULT_GRID_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ablation_default.yaml")


@dataclass
class AblationArguments:
    grid_file: str = field(default=DEFAULT_GRID_FILE, metadata={"help": "Grid file (YAML or JSON)."})
    output_dir: str | None = field(default=None, metadata={"help": "Overrides the grid's output_dir."})
    arms: str | None = field(default=None, metadata={"help": "Train only these arms (comma-separated names); the "
                                                             "results still list every finished cell of the grid."})
    seeds: str | None = field(default=None, metadata={"help": "Train only these seeds (comma-separated; a seed the "
                                                              "grid lacks joins it); the results list every finished "
                                                              "cell."})
    torch_threads: int | None = torch_threads_field()
    write_default_grid: str | None = field(default=None, metadata={
        "help": "Write a copy of the default grid file (the paper's arms) to this new file, to edit and pass as "
                "--grid_file, and train nothing."})
    portable_numerics: str | None = portable_numerics_field()

    def __post_init__(self):
        check_declared(self)
        self.arm_names = comma_names(self.arms, "--arms") if self.arms is not None else None
        self.seed_list = comma_seeds(self.seeds) if self.seeds is not None else None
        if self.write_default_grid is not None and (self.grid_file != DEFAULT_GRID_FILE or self.output_dir is not None
                                                    or self.arms is not None or self.seeds is not None
                                                    or self.portable_numerics is not None):
            raise UserInputError("--write_default_grid copies the default grid and trains nothing: give it without "
                                 "--grid_file, --output_dir, --arms, --seeds and --portable_numerics.")


def run(args: AblationArguments) -> None:
    """The grid of `args.grid_file` (the arms and seeds asked for) trained or resumed, its results table printed; or
    with `--write_default_grid`, the default grid copied there."""
    if args.write_default_grid is not None:
        write_default_grid(args.write_default_grid)
        return
    grid = with_portable_numerics(load_grid(args.grid_file), args.portable_numerics)
    hold_grid_numerics(grid.experiment, None if args.portable_numerics is not None else f"grid file {args.grid_file}")
    set_torch_threads(args.torch_threads)
    if args.output_dir is not None:
        grid.output_dir = args.output_dir
    arms, seeds = args.arm_names, args.seed_list
    if arms is not None:
        unknown = sorted(set(arms) - {arm.name for arm in grid.arms})
        if unknown:
            raise UserInputError(f"--arms {unknown} not in {args.grid_file}; its arms: {[a.name for a in grid.arms]}.")
    if seeds is not None:
        grid.seeds = list(dict.fromkeys([*grid.seeds, *seeds]))  # a new seed joins the grid; a listed one is kept
    run_grid(grid, arms=arms, seeds=seeds)
    from accelerate import PartialState

    if PartialState().is_main_process:
        print(open(os.path.join(grid.output_dir, RESULTS_MD_NAME)).read())


def write_default_grid(path: str) -> None:
    """A copy of `DEFAULT_GRID_FILE` at `path` (a new file in a folder that can be written: one line and exit status
    2 otherwise, never replacing a file), for a user whose copy lies inside an installed package."""
    target = check_writable_file(path, "--write_default_grid")
    if target.exists():
        raise UserInputError(f"--write_default_grid {path} already exists: name a new file (the copy replaces "
                             "nothing).")
    write_text(target, Path(DEFAULT_GRID_FILE).read_text(encoding="utf-8"))
    print(f"wrote the default grid to {path}; edit it and run: hf-spt ablation --grid_file {path}")


def main(argv: list[str] | None = None) -> None:
    """`hf-spt ablation`: `run` on the flags in `argv` (default: the command line), ended by `run_cli`."""
    run_cli(lambda flags: run(*SettingsParser(AblationArguments).parse_args_into_dataclasses(args=flags)), argv)


if __name__ == "__main__":
    main()
