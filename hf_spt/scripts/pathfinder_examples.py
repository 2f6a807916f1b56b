"""Save a grid of generated Pathfinder images, positive and negative, at 32, 64 and 128 px.

    python run_scripts/pathfinder_examples.py --output docs/pathfinder_examples.png [--seed 0]

`--output` is required (a default name would replace a file of that name wherever the command is run) and checked
before anything is drawn: an empty name, a folder, a folder that cannot be written or a format matplotlib cannot
write is one line, exit status 2, and no file changes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from hf_spt.analysis.plotting import saved_figure
from hf_spt.errors import UserInputError
from hf_spt.experiments.exit_status import run_cli
from hf_spt.runs.folder import check_writable_file
from hf_spt.tasks.pathfinder_generator import generate_pathfinder_image
from hf_spt.value_checks import NON_NEGATIVE_INT, check_ranges

SIZES = (32, 64, 128)
PER_CLASS = 3


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="The figure's file (.png, .pdf, .svg...).")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> None:
    """The grid drawn with `args.seed` and saved to `args.output` (matplotlib: the [plots] extra), once both are
    valid."""
    check_ranges(vars(args), {"seed": NON_NEGATIVE_INT})
    check_writable_file(args.output)
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if Path(args.output).suffix[1:].lower() not in formats:
        raise UserInputError(f"--output {args.output}: name a file ending in one of .{', .'.join(formats)}.")
    rng = np.random.default_rng(args.seed)
    with saved_figure(args.output, dpi=110, nrows=len(SIZES), ncols=2 * PER_CLASS,
                      figsize=(2 * PER_CLASS * 1.6, len(SIZES) * 1.7)) as (_, axes):
        for row, size in enumerate(SIZES):
            for column in range(2 * PER_CLASS):
                positive = column < PER_CLASS
                axis = axes[row, column]
                axis.imshow(generate_pathfinder_image(rng, positive, image_size=size), cmap="gray", vmin=0, vmax=255)
                axis.set_xticks([])
                axis.set_yticks([])
                axis.set_title(f"{'connected' if positive else 'not connected'}, {size}px", fontsize=7)
    print(f"saved {args.output}")


def main(argv: list[str] | None = None) -> None:
    """`hf-spt pathfinder-examples`: `run` on the flags in `argv` (default: the command line), ended by `run_cli`."""
    run_cli(lambda flags: run(parse_arguments(flags)), argv)


if __name__ == "__main__":
    main()
