"""The Long Range Arena table in one command: scratch, compute-matched scratch and SPT on every LRA task with data.

Usage:
    # what would run, what is missing and where to put it, and the step counts (no training)
    python run_scripts/run_lra.py --data_root data/lra --dry_run

    # full scale on 8 GPUs (cells split between ranks; bf16, flash attention, length-grouped batches)
    accelerate launch --multi_gpu --num_processes 8 run_scripts/run_lra.py --data_root data/lra \\
        --seeds 0,1,2 --bf16 --attn_implementation flash_attention_2 --train_sampling_strategy group_by_length

    # the mini suite on a 2-core CPU (generated ListOps and Pathfinder, Markov), two seeds
    python run_scripts/run_lra.py --scale mini --seeds 0,1 --torch_threads 2

Re-running the same command skips finished cells and SPT checkpoints and resumes an interrupted
one, so a killed suite never duplicates a row. Writes OUTPUT_DIR/lra_results.{json,md,png} (and
the grid's results.{csv,md,png}). See docs/lra.md.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field


from hf_spt.errors import UserInputError
from hf_spt.experiments.declarations import SettingsParser
from hf_spt.experiments.exit_status import run_cli
from hf_spt.experiments.numerics_entry import hold_grid_numerics
from hf_spt.experiments.suite_flags import (comma_names, comma_seeds, portable_numerics_field, positive_numbers,
                                           set_torch_threads, torch_threads_field)
from hf_spt.experiments.suites.lra import (ARMS, MINI_GENERATED, LraSuite, gpu_hours, lra_grid, run_lra_suite,
                                          runnable_tasks, step_counts)
from hf_spt.experiments.suites.grid import Grid, check_trainer_settings_of, with_portable_numerics
from hf_spt.reports.lra_report import LRA_MD_NAME
from hf_spt.tasks.lra_data import missing_data_report
from hf_spt.value_checks import check_declared


@dataclass
class LraArguments:
    scale: str = field(default="full", metadata={"help": "full (the published recipe) or mini (36 min measured on a 2-core CPU, two seeds)."})
    data_root: str | None = field(default=None, metadata={"help": "One folder per task (docs/lra.md); ListOps and "
                                                          "Pathfinder are generated when absent."})
    output_dir: str | None = field(default=None, metadata={"help": "Default: runs/lra (full) or runs/lra_mini."})
    seeds: str = field(default="0,1,2", metadata={"help": "Comma-separated seeds."})
    tasks: str | None = field(default=None, metadata={"help": "Only these tasks (comma-separated)."})
    finetune_epochs: float | None = field(default=None, metadata={"help": "Maximum fine-tuning epochs of every arm."})
    pretrain_epochs: float | None = field(default=None, metadata={"help": "SPT epochs (default: the recipe's 200; mini: "
                                                                  "per task)."})
    early_stopping_patience: int | None = field(default=None, metadata={"help": "Evaluations without a better "
                                                                        "validation accuracy before a fine-tuning arm stops."})
    bf16: bool = field(default=False, metadata={"help": "bf16 mixed precision (GPU)."})
    attn_implementation: str | None = field(default=None, metadata={"help": "sdpa, eager or flash_attention_2 "
                                                                    "(when flash_attn is installed)."})
    train_sampling_strategy: str | None = field(default=None, metadata={"help": "group_by_length where lengths vary "
                                                                        "(ListOps, Text, Retrieval)."})
    dry_run: bool = field(default=False, metadata={"help": "Print the plan, missing data and step counts; train nothing."})
    steps_per_second: str | None = field(default=None, metadata={"help": "With --dry_run: JSON {task: measured "
                                                                 "training steps/s} to print GPU-hours."})
    torch_threads: int | None = torch_threads_field()
    portable_numerics: str | None = portable_numerics_field()

    def __post_init__(self):
        check_declared(self)
        self.seed_list = comma_seeds(self.seeds)
        self.task_names = comma_names(self.tasks, "--tasks") if self.tasks else None
        self.measured_steps_per_second = positive_numbers(self.steps_per_second, "--steps_per_second")


def suite_from(args: LraArguments) -> LraSuite:
    training: dict = {}
    if args.bf16:
        training["bf16"] = True
    if args.train_sampling_strategy:
        training["train_sampling_strategy"] = args.train_sampling_strategy
    model = {}
    if args.attn_implementation:
        if args.attn_implementation == "flash_attention_2" and importlib.util.find_spec("flash_attn") is None:
            raise UserInputError("--attn_implementation flash_attention_2 needs the flash_attn package; "
                             "install it or use sdpa.")
        model["attn_implementation"] = args.attn_implementation
    return LraSuite(output_dir=args.output_dir or ("runs/lra" if args.scale == "full" else "runs/lra_mini"),
                    scale=args.scale, data_root=args.data_root, seeds=args.seed_list,
                    tasks=args.task_names, finetune_epochs=args.finetune_epochs,
                    pretrain_epochs=args.pretrain_epochs, early_stopping_patience=args.early_stopping_patience,
                    training=training, model=model)


def plan_text(suite: LraSuite, grid: Grid) -> str:
    """Which tasks run (with their data folder or 'generated': the suite's `grid`), then what is missing and where
    to put it."""
    found, _ = runnable_tasks(suite)
    lines = [f"LRA suite ({suite.scale}), seeds {suite.seeds}, output {suite.output_dir}:"]
    lines += [f"  {task}: {spec.data_dir or 'generated'}" for task, spec in grid.tasks.items()]
    always_generated = MINI_GENERATED if suite.scale == "mini" else ()
    missing = missing_data_report(suite.data_root, {t: f for t, f in found.items() if t not in always_generated})
    return "\n".join(lines + ([f"Data missing:\n{missing}"] if missing else []))


def dry_run_text(suite: LraSuite, grid: Grid, steps_per_second: dict[str, float]) -> str:
    counts = step_counts(grid)
    arms = [arm["name"] for arm in ARMS]
    lines = ["Optimizer steps per seed, at most (early stopping cuts fine-tuning):",
             f"| task | train rows | pretrain | fine-tune | {' | '.join(arms)} |", "|---|" + "---|" * (3 + len(arms))]
    lines += [f"| {t} | {c['train_rows']} | {c['pretrain']} | {c['finetune']} | "
              + " | ".join(str(c[arm]) for arm in arms) + " |" for t, c in counts.items()]
    lines.append(f"GPU-hours per task = {len(suite.seeds)} seeds x ({' + '.join(arms)} steps) / (steps/s x 3600)")
    for task, hours in gpu_hours(counts, len(suite.seeds), steps_per_second).items():
        lines.append(f"  {task}: {hours:.1f} GPU-hours at {steps_per_second[task]:g} steps/s")
    return "\n".join(lines)


def run(args: LraArguments) -> None:
    """The LRA suite of `args`: its plan printed, then trained or resumed (with `--dry_run`, the step counts instead)."""
    suite = suite_from(args)
    grid = with_portable_numerics(lra_grid(suite), args.portable_numerics)  # every setting checked (a dry run too)
    if not args.dry_run:
        hold_grid_numerics(grid.experiment, None)  # before any torch operation; only the flag sets it here
    set_torch_threads(args.torch_threads)
    # the grid sets up the process group (gloo on CPU, a long timeout) itself: read the rank without touching it
    main_process = os.environ.get("RANK", "0") == "0"
    if main_process:
        print(plan_text(suite, grid), flush=True)
    if args.dry_run:
        check_trainer_settings_of(grid)  # what the run checks before any data, but for the data themselves
        if main_process:
            print(dry_run_text(suite, grid, args.measured_steps_per_second))
        return
    if not grid.tasks:
        raise UserInputError("No LRA task has data to run; see the listing above.")
    run_lra_suite(grid)
    from accelerate import PartialState

    if PartialState().is_main_process:
        print(open(os.path.join(grid.output_dir, LRA_MD_NAME)).read())


def main(argv: list[str] | None = None) -> None:
    """`hf-spt lra`: `run` on the flags in `argv` (default: the command line), ended by `run_cli`."""
    run_cli(lambda flags: run(*SettingsParser(LraArguments).parse_args_into_dataclasses(args=flags)), argv)


if __name__ == "__main__":
    main()
