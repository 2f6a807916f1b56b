"""Write Pathfinder-style images in the LRA release layout.

    python run_scripts/generate_pathfinder.py --output_dir data/pathfinder32 --num_images 10000 --image_size 32
    python run_scripts/generate_pathfinder.py --help

The images go to OUTPUT_DIR/curv_contour_length_<n>/ (imgs/<k>/sample_<i>.png and metadata/<k>.npy), so one
`--output_dir` holds a release's difficulties side by side. `--output_dir` is checked as a run's is (an empty name,
a file, a folder that cannot be written: one line, exit status 2), and the difficulty folder is written only when
new, empty or a previous export of the same settings (`hf_spt.runs.export_folder`), so the export never overwrites
a file it did not write (a release's own images). Every flag is checked (`FLAG_RANGES`) before anything is written.
"""

from __future__ import annotations

import argparse

from hf_spt.experiments.exit_status import run_cli
from hf_spt.runs.export_folder import claim_export_folder
from hf_spt.runs.folder import check_writable_folder
from hf_spt.tasks.pathfinder_generator import difficulty_folder, write_pathfinder
from hf_spt.value_checks import NON_NEGATIVE_INT, POSITIVE_INT, check_ranges

EXPORT_SETTINGS = ("num_images", "image_size", "contour_length", "seed")
"""The flags the images depend on."""
FLAG_RANGES = {"num_images": POSITIVE_INT, "image_size": POSITIVE_INT, "contour_length": POSITIVE_INT,
               "seed": NON_NEGATIVE_INT}
"""What each flag may be (numpy's generator takes no negative seed)."""


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Write Pathfinder-style images in the LRA release layout.")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--num_images", type=int, default=10000)
    parser.add_argument("--image_size", type=int, default=32, help="32 (Pathfinder), 64, or 128 (Path-X)")
    parser.add_argument("--contour_length", type=int, default=14)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> None:
    """The images written into their difficulty folder under `args.output_dir`, once `claim_export_folder` allows
    it, and only once every flag is valid."""
    check_ranges(vars(args), FLAG_RANGES)
    check_writable_folder(args.output_dir)
    claim_export_folder(difficulty_folder(args.output_dir, args.contour_length),
                        {"export": "pathfinder", **{name: getattr(args, name) for name in EXPORT_SETTINGS}},
                        "--output_dir's difficulty folder")
    root = write_pathfinder(args.output_dir, args.num_images, args.seed, args.image_size, args.contour_length)
    print(f"wrote {args.num_images} images under {root}")


def main(argv: list[str] | None = None) -> None:
    """`hf-spt generate-pathfinder`: `run` on the flags in `argv` (default: the command line), ended by `run_cli`."""
    run_cli(lambda flags: run(parse_arguments(flags)), argv)


if __name__ == "__main__":
    main()
