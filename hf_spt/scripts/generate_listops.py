"""Write ListOps TSVs (basic_{train,val,test}.tsv) as LRA released them.

    python run_scripts/generate_listops.py --output_dir data/listops [--num_train 96000] [--seed 0]
    python run_scripts/generate_listops.py --help

`--output_dir` is checked as a run's is (an empty name, a file, a folder that cannot be written: one line, exit
status 2), and the export writes only into a new or empty folder or a previous export of the same settings
(`hf_spt.runs.export_folder`), so it never overwrites a file it did not write (the user's own basic_train.tsv).
Every flag is checked (`FLAG_RANGES`, `check_lengths`) before anything is written.
"""

from __future__ import annotations

import argparse

from hf_spt.experiments.exit_status import run_cli
from hf_spt.runs.export_folder import claim_export_folder
from hf_spt.tasks.listops_generator import SPLIT_FILES, check_lengths, generate_listops, write_listops_tsv
from hf_spt.value_checks import NON_NEGATIVE_INT, POSITIVE_INT, check_ranges

EXPORT_SETTINGS = ("num_train", "num_validation", "num_test", "seed", "min_length", "max_length")
"""The flags the files depend on (`--num_workers` only splits the work: the trees are the same)."""
FLAG_RANGES = {"num_train": POSITIVE_INT, "num_validation": POSITIVE_INT, "num_test": POSITIVE_INT,
               "num_workers": POSITIVE_INT, "min_length": NON_NEGATIVE_INT}
"""What each flag may be (every split holds a tree; `--num_workers` may be left out: all CPUs)."""


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Write ListOps TSVs (basic_{train,val,test}.tsv) as LRA released them.")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--num_train", type=int, default=96000)
    parser.add_argument("--num_validation", type=int, default=2000)
    parser.add_argument("--num_test", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num_workers", type=int, default=None)
    parser.add_argument("--min_length", type=int, default=500)
    parser.add_argument("--max_length", type=int, default=2000)
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> None:
    """The three splits written into `args.output_dir`, once `claim_export_folder` allows it (before any tree is
    drawn, so a refused folder costs no time), and only once every flag is valid."""
    check_ranges(vars(args), FLAG_RANGES)
    check_lengths(args.min_length, args.max_length)
    folder = claim_export_folder(args.output_dir, {"export": "listops",
                                                   **{name: getattr(args, name) for name in EXPORT_SETTINGS}})
    sizes = {"train": args.num_train, "validation": args.num_validation, "test": args.num_test}
    examples = generate_listops(sizes, args.seed, args.num_workers, args.min_length, args.max_length)
    for split, rows in examples.items():
        write_listops_tsv(rows, folder / SPLIT_FILES[split])
        print(f"wrote {len(rows)} trees to {folder / SPLIT_FILES[split]}")


def main(argv: list[str] | None = None) -> None:
    """`hf-spt generate-listops`: `run` on the flags in `argv` (default: the command line), ended by `run_cli`."""
    run_cli(lambda flags: run(parse_arguments(flags)), argv)


if __name__ == "__main__":
    main()
