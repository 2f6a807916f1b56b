"""Mechanism analysis of saved SPT models: attention proximity, positional kernel, score gradients, token frequency.

Usage:
    # scratch vs SPT of a compare run, side by side
    python run_scripts/run_analysis.py --model runs/markov/scratch runs/markov/spt runs/markov/pretrain \
        --task markov --output_dir runs/markov/analysis

    # add the Fair-LM weight-decay sweep (trains one tiny MLM per decay)
    python run_scripts/run_analysis.py --model runs/markov/pretrain --weight_decay_sweep 0 0.1 1.0

Task options (`--task_options`, `--max_length`, `--seed`) must match the run that trained the
models, so that the analysed sequences come from the same data. Writes report.md, report.json
and PNGs into --output_dir.
"""

from __future__ import annotations

import json

from transformers import HfArgumentParser

from hf_spt.analysis.report import AnalysisArguments, analyse_models
from hf_spt.experiments.arguments import DataArguments
from hf_spt.experiments.cli import run_cli
from hf_spt.experiments.pipeline import prepare_task


def parse_arguments(argv: list[str]) -> tuple[DataArguments, AnalysisArguments]:
    """Parse flags; `--task_options` is decoded as JSON here (argparse cannot type a dict flag)."""
    parser = HfArgumentParser((DataArguments, AnalysisArguments))
    if "--task_options" in argv:
        index = argv.index("--task_options")
        parser.set_defaults(task_options=json.loads(argv[index + 1]))
        argv = argv[:index] + argv[index + 2 :]
    return parser.parse_args_into_dataclasses(args=argv)


def main(data_args: DataArguments, args: AnalysisArguments) -> dict:
    task = prepare_task(data_args, args.seed)
    report = analyse_models(task, args)
    print(f"Report written to {args.output_dir}/report.md")
    return report


if __name__ == "__main__":
    run_cli(lambda argv: main(*parse_arguments(argv)))
