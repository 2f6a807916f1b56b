"""Self-pretraining (SPT) and fine-tuning on one task, compared with training from scratch.

Usage:
    # the default experiment (synthetic Markov task, 1 layer, arms scratch and spt), a few minutes on a CPU
    python run_scripts/run_spt.py
    accelerate launch run_scripts/run_spt.py --output_dir runs/markov

    # one phase at a time
    python run_scripts/run_spt.py --mode spt --output_dir runs/x
    python run_scripts/run_spt.py --mode finetune --init_from runs/x/pretrain --output_dir runs/x

    # transformers' TrainingArguments flags reach both phases; per-phase flags set one phase
    python run_scripts/run_spt.py --bf16 --gradient_accumulation_steps 2 --report_to tensorboard \
        --learning_rate 5e-4 --finetune_learning_rate 1e-4 --max_steps 1000 --overwrite_output_dir

    # CPU numerics pinned to AVX2: the same numbers on any Intel CPU (docs/lra.md); cross_vendor: Intel and AMD
    python run_scripts/run_spt.py --portable_numerics --output_dir runs/portable
    python run_scripts/run_spt.py --portable_numerics cross_vendor --output_dir runs/cross_vendor

    # settings from a file (JSON or YAML, the flags' names); flags still override it
    python run_scripts/run_spt.py --config_file my_run.yaml --seed 3

    python run_scripts/run_spt.py --list_tasks
    python run_scripts/run_spt.py --help      # the flags, grouped by phase

    # any transformers backbone, from scratch or pretrained; causal pretraining for decoders; published recipes
    python run_scripts/run_spt.py --model_type bert --from_scratch --output_dir runs/bert
    python run_scripts/run_spt.py --model_type gpt2 --from_scratch --pretrain_objective causal --output_dir runs/gpt2
    python run_scripts/run_spt.py --mode scratch --model_name_or_path path/to/pretrained --output_dir runs/pre
    python run_scripts/run_spt.py --recipe balestriero_huang --mode scratch --model_type llama --from_scratch

    # Balestriero & Huang's comparison: from scratch vs pretrained + LoRA vs pretrained + full fine-tuning
    # (pip install -e ".[peft]"); --finetune_method lora fine-tunes any run's arms with LoRA
    python run_scripts/run_spt.py --recipe balestriero_huang --mode lora_comparison \
        --model_name_or_path path/to/pretrained
"""

from __future__ import annotations

from hf_spt.experiments.arguments import DataArguments, ExperimentArguments, ModelArguments, SharedTrainingArguments
from hf_spt.experiments.exit_status import run_cli
from hf_spt.experiments.command_line import parse_arguments
from hf_spt.experiments.numerics_entry import hold_numerics
from hf_spt.experiments.pipeline import run_experiment
from hf_spt.experiments.results_files import results_table
from hf_spt.tasks import list_tasks


def run(
    data_args: DataArguments, model_args: ModelArguments, exp_args: ExperimentArguments,
    training_args: SharedTrainingArguments,
) -> dict:
    """The task list, or the experiment the arguments ask for with its results table printed; returns the results."""
    if data_args.list_tasks:
        print(list_tasks())
        return {}
    hold_numerics(exp_args.portable_numerics, training_args.use_cpu)
    results = run_experiment(data_args, model_args, exp_args, training_args)
    print("\n" + results_table(results["task"], results["arms"]))
    return results


def main(argv: list[str] | None = None) -> None:
    """`hf-spt run`: `run` on the flags in `argv` (default: the command line), ended by `run_cli`."""
    run_cli(lambda flags: run(*parse_arguments(flags)), argv)


__all__ = ["run", "main", "parse_arguments"]


if __name__ == "__main__":
    main()
