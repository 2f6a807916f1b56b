"""Accuracy against total compute: validation accuracy after each epoch against cumulative training FLOPs,
pretraining included, for every arm of finished runs (is SPT worth its compute on this data?).

Usage:
    # a run_spt.py run (any task, your own files included): its scratch and spt arms
    python run_scripts/run_compute_curves.py --runs runs/markov --output_dir runs/markov --prefix markov

    # a finished study or ablation grid (its grid.json): every cell, one figure per configuration
    python run_scripts/run_compute_curves.py --runs runs/budget_digits_length --prefix digits_length

    # several sources in one report: folders, or *_compute.json files written before
    python run_scripts/run_compute_curves.py --runs runs/a,docs/lra/b_compute.json --output_dir docs/lra --prefix all

Writes OUTPUT_DIR/PREFIX_compute.{json,md} and PREFIX_compute_<config>.png (hf_spt/reports/compute_report.py says
what each holds; docs/lra.md how FLOPs are counted). run_budget_study.py writes the same
report for its study (prefix budget_study). The report's folder is checked as a run's output folder is (not empty,
not a file, can be written) before any run is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from transformers import HfArgumentParser

from hf_spt.errors import MissingInputError, UserInputError
from hf_spt.experiments.exit_status import run_cli
from hf_spt.experiments.suites.budget_study import shipped_study_titles
from hf_spt.experiments.suites.compute_curves import combined_curves
from hf_spt.reports.compute_report import write_compute_report
from hf_spt.runs.folder import check_writable_folder


@dataclass
class ComputeCurveArguments:
    runs: str = field(metadata={"help": "Comma-separated finished run folders (run_spt.py's, or a study's/grid's with "
                                        "its grid.json) or *_compute.json files."})
    output_dir: str | None = field(default=None, metadata={"help": "Where the report goes (default: the one folder "
                                                                   "of --runs)."})
    prefix: str = field(default="run", metadata={"help": "File-name prefix: PREFIX_compute.{json,md,png}."})


def run(args: ComputeCurveArguments) -> None:
    """The accuracy-against-compute report of `args.runs`, written and printed."""
    sources = [source for source in args.runs.split(",") if source]
    if not sources:
        raise UserInputError(f"--runs {args.runs!r} names no folder or file: pass finished run folders or "
                             "*_compute.json files, separated by commas.")
    missing = [source for source in sources if not Path(source).exists()]
    if missing:
        raise MissingInputError(f"--runs {','.join(missing)}: no such folder or file.")
    if args.output_dir is None and (len(sources) != 1 or Path(sources[0]).suffix == ".json"):
        raise UserInputError("--output_dir is needed with several --runs or a .json source.")
    if not args.prefix.replace("_", "").replace("-", "").isalnum():
        raise UserInputError(f"--prefix becomes part of file names: letters, digits, - and _ only, got {args.prefix!r}.")
    output_dir = (check_writable_folder(args.output_dir) if args.output_dir is not None
                  else check_writable_folder(sources[0], "--output_dir (by default the folder of --runs)"))
    curves = combined_curves(sources)
    if not curves:
        raise UserInputError(f"--runs {args.runs}: no finished fine-tuning run with a per-epoch validation record "
                             "there, so nothing to draw.")
    written = write_compute_report(curves, output_dir, args.prefix, shipped_study_titles())  # figures' titles
    print("\n".join(map(str, written)))
    print(written[1].read_text())


def main(argv: list[str] | None = None) -> None:
    """`hf-spt compute-curves`: `run` on the flags in `argv` (default: the command line), ended by `run_cli`."""
    run_cli(lambda flags: run(*HfArgumentParser(ComputeCurveArguments).parse_args_into_dataclasses(args=flags)), argv)


if __name__ == "__main__":
    main()
