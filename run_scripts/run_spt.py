"""Self-pretraining (SPT) and fine-tuning on one task, compared with training from scratch.

Usage:
    # the default experiment (synthetic Markov task, 1 layer, arms scratch and spt), a few minutes on a CPU
    python run_scripts/run_spt.py
    accelerate launch run_scripts/run_spt.py --output_dir runs/markov

    # one phase at a time
    python run_scripts/run_spt.py --mode spt --output_dir runs/x
    python run_scripts/run_spt.py --mode finetune --init_from runs/x/pretrain --output_dir runs/x

    # settings from a file (JSON or YAML); flags still override it
    python run_scripts/run_spt.py --config_file my_run.yaml --seed 3

    python run_scripts/run_spt.py --list_tasks

    # any transformers backbone, from scratch or pretrained; causal SPT for decoders; published recipes
    python run_scripts/run_spt.py --model_type bert --from_scratch --output_dir runs/bert
    python run_scripts/run_spt.py --model_type gpt2 --from_scratch --spt_objective causal --output_dir runs/gpt2
    python run_scripts/run_spt.py --mode scratch --model_name_or_path path/to/pretrained --output_dir runs/pre
    python run_scripts/run_spt.py --recipe balestriero_huang --mode scratch --model_type llama --from_scratch
"""

from __future__ import annotations

import json

from transformers import HfArgumentParser

from hf_spt.experiments.arguments import DataArguments, ExperimentArguments, ModelArguments
from hf_spt.experiments.cli import run_cli
from hf_spt.experiments.pipeline import results_table, run_experiment
from hf_spt.experiments.recipes import recipe_defaults
from hf_spt.tasks import list_tasks

ARGUMENT_CLASSES = (DataArguments, ModelArguments, ExperimentArguments)


def parse_arguments(argv: list[str]) -> tuple[DataArguments, ModelArguments, ExperimentArguments]:
    """Parse flags, with `--config_file FILE` (JSON or YAML) supplying defaults first."""
    parser = HfArgumentParser(ARGUMENT_CLASSES)
    defaults: dict = {}
    if "--config_file" in argv:
        index = argv.index("--config_file")
        path = argv[index + 1]
        argv = argv[:index] + argv[index + 2 :]
        with open(path) as handle:
            if path.endswith((".yaml", ".yml")):
                import yaml

                defaults = yaml.safe_load(handle) or {}
            else:
                defaults = json.load(handle)
        known = {f for cls in ARGUMENT_CLASSES for f in cls.__dataclass_fields__}
        unknown = sorted(set(defaults) - known)
        if unknown:
            raise ValueError(f"{path}: unknown settings {unknown}; run with --help for the valid names.")
    # a --recipe supplies defaults below the config file's and the flags'
    parser.set_defaults(**recipe_defaults(argv, defaults, DataArguments.task))
    return parser.parse_args_into_dataclasses(args=argv)


def main(data_args: DataArguments, model_args: ModelArguments, exp_args: ExperimentArguments) -> dict:
    if data_args.list_tasks:
        print(list_tasks())
        return {}
    results = run_experiment(data_args, model_args, exp_args)
    print("\n" + results_table(results["task"], results["arms"]))
    return results


if __name__ == "__main__":
    run_cli(lambda argv: main(*parse_arguments(argv)))
