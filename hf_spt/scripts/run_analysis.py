"""Mechanism analysis of saved SPT models: attention proximity, positional kernel, score gradients, token frequency.

Usage:
    # a run_spt.py run: its scratch, spt and pretrain models, on the data it was trained on
    python run_scripts/run_analysis.py --run runs/markov            # writes runs/markov/analysis/

    # add the Fair-LM weight-decay sweep (trains one tiny MLM per decay)
    python run_scripts/run_analysis.py --run runs/markov --weight_decay_sweep 0 0.1 1.0

    # an ablation grid: one model per arm, for the grid's task `markov` and seed 0
    python run_scripts/run_analysis.py --run runs/ablation --task markov --seed 0

    # any model folders, with the task flags of the run that trained them
    python run_scripts/run_analysis.py --model runs/markov/pretrain --task markov --output_dir analysis

    # figures that reproduce on any Intel CPU with AVX2 (as a --portable_numerics run's rows do)
    python run_scripts/run_analysis.py --run runs/markov --portable_numerics

With `--run`, the task, `--task_options`, `--max_length` and `--seed` come from the run's
results.json (an ablation's: its grid.json); giving one that contradicts it is an error naming
both values. Writes report.md, report.json and PNGs into --output_dir (default RUN/analysis, or
./analysis without --run).
"""

from __future__ import annotations

from hf_spt.experiments.suites.analysis_run import AnalysisArguments, analyse, report_folder
from hf_spt.experiments.arguments import DataArguments, SettingsParser
from hf_spt.experiments.exit_status import run_cli
from hf_spt.experiments.numerics_entry import hold_numerics


def parse_arguments(argv: list[str]) -> tuple[DataArguments, AnalysisArguments, set[str]]:
    """Parse flags; also return the names of the flags typed (which `--run` checks against the run)."""
    data_args, args = SettingsParser((DataArguments, AnalysisArguments)).parse_args_into_dataclasses(args=argv)
    given = {arg[2:].split("=", 1)[0] for arg in argv if arg.startswith("--")}
    return data_args, args, given


def run(data_args: DataArguments, args: AnalysisArguments, given: set[str] | None = None) -> dict:
    """The analysis report of `args` written; returns it (`given`: the flags typed, see `parse_arguments`). With
    `--portable_numerics` the process is pinned first (the analysis computes on the CPU)."""
    hold_numerics(args.portable_numerics, use_cpu=True)
    report = analyse(data_args, args, given)
    print(f"Report written to {report_folder(args) / 'report.md'}")
    return report


def main(argv: list[str] | None = None) -> None:
    """`hf-spt analysis`: `run` on the flags in `argv` (default: the command line), ended by `run_cli`."""
    run_cli(lambda flags: run(*parse_arguments(flags)), argv)


if __name__ == "__main__":
    main()
