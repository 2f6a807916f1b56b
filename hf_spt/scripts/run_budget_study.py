"""The budget study: SPT's gain over scratch and compute-matched scratch as a function of pretraining tokens.

Usage:
    # the shipped studies, and what one would run (units, no training)
    python run_scripts/run_budget_study.py --list_studies
    python run_scripts/run_budget_study.py --study pathfinder_budget --dry_run

    # one seed on a 2-core CPU: two gloo ranks of one thread each (units split between them)
    ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 run_scripts/run_budget_study.py \\
        --study pathfinder_budget --seeds 0 --torch_threads 1

    # your own study: any grid file (hf_spt/experiments/suites/studies/*.yaml show the arms)
    python run_scripts/run_budget_study.py --study my_study.yaml
    # one report over several finished studies (each configuration from one folder)
    python run_scripts/run_budget_study.py --combine runs/budget_pathfinder,runs/budget_pathfinder_cl2 --output_dir docs/lra
    # the same after more seeds: the study's folder holds every run the report held, and replaces them
    python run_scripts/run_budget_study.py --combine docs/lra,runs/budget_pathfinder --output_dir docs/lra
    # a study re-run under newer code: its configuration is taken whole from the last folder that holds it
    python run_scripts/run_budget_study.py --combine docs/lra,runs/budget_pathfinder \
        --replace_configs pathfinder24 --output_dir docs/lra
    # more seeds run into another folder (a seed run elsewhere, or after the first folder was lost): joined
    python run_scripts/run_budget_study.py --combine docs/lra,runs/budget_digits32 \
        --add_seeds digits32 --output_dir docs/lra

Re-running the same command skips finished units and resumes an interrupted one, so more seeds can be
added later (`--seeds 2`, or `--seeds 0,1,2`) without re-training seeds 0 and 1: the report holds the named
seeds and every seed the output folder already holds. Writes OUTPUT_DIR/budget_study.{json,md,png},
budget_study_checkpoints.json, each cell's attention after fine-tuning in budget_study_attention.{json,png} (a table
in budget_study.md), the accuracy-against-compute report budget_study_compute.{json,md} with one
budget_study_compute_<config>.png per configuration (run_compute_curves.py), and the grid's results.{csv,md,png}.
See docs/lra.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path


from hf_spt.errors import UserInputError
from hf_spt.experiments.suites.grid_runner import run_grid
from hf_spt.reports.budget_report import STUDY_MD_NAME, write_study_report
from hf_spt.reports.budget_sources import combined_attention, combined_reports
from hf_spt.experiments.suites.budget_study import (attention_rows, checkpoint_rows, rows_preregistrations,
                                                    seeds_on_record, shipped_study_configs, shipped_study_titles,
                                                    study_grid, study_names, study_preregistration, study_rows,
                                                    study_titles)
from hf_spt.experiments.declarations import SettingsParser
from hf_spt.reports.preregistration import withheld_units
from hf_spt.experiments.exit_status import run_cli
from hf_spt.experiments.suite_flags import (comma_names, comma_seeds, portable_numerics_field, set_torch_threads,
                                           torch_threads_field)
from hf_spt.experiments.suites.compute_curves import combined_curves, grid_compute_curves
from hf_spt.reports.compute_report import write_compute_report
from hf_spt.runs.folder import check_writable_folder
from hf_spt.experiments.suites.grid import cells, check_trainer_settings_of, pretrain_jobs, with_portable_numerics
from hf_spt.experiments.numerics_entry import hold_grid_numerics
from hf_spt.value_checks import POSITIVE_INT, check_declared

COMPUTE_PREFIX = "budget_study"  # budget_study_compute.{json,md} and budget_study_compute_<config>.png


@dataclass
class BudgetStudyArguments:
    study: str = field(default="pathfinder_budget", metadata={"help": "A shipped study's name (--list_studies) or a "
                                                                     "grid file (.yaml/.json)."})
    seeds: str | None = field(default=None, metadata={
        "help": "Comma-separated seeds to train (default: the study's); the report also holds every seed the output "
                "folder holds from an earlier run."})
    configs: str | None = field(default=None, metadata={
        "help": "Comma-separated configurations (the study's task keys) to train (default: every one); the report "
                "also holds every configuration the output folder has finished."})
    output_dir: str | None = field(default=None, metadata={"help": "Default: the study's output_dir."})
    probe_examples: int = field(default=256, metadata={"range": POSITIVE_INT,
                                                       "help": "Validation inputs each SPT checkpoint is probed on."})
    torch_threads: int | None = torch_threads_field()
    portable_numerics: str | None = portable_numerics_field()
    dry_run: bool = field(default=False, metadata={"help": "Print the SPT checkpoints and cells; train nothing."})
    list_studies: bool = field(default=False, metadata={"help": "Print the shipped studies and exit."})
    combine: str | None = field(default=None, metadata={
        "help": "Comma-separated output folders of finished studies: write one report over all their configurations "
                "into --output_dir (required) and train nothing. Each configuration comes from one folder, or from "
                "the folder that holds every run another holds of it (the same study re-run with more seeds)."})

    replace_configs: str | None = field(default=None, metadata={
        "help": "With --combine: comma-separated configurations to take whole from the last folder that holds them, "
                "dropping the earlier folders' runs of them (a study re-run under newer code)."})
    add_seeds: str | None = field(default=None, metadata={
        "help": "With --combine: comma-separated configurations whose runs in the folders are other seeds of the same "
                "study (run into another folder); joined, refused if a seed is in two folders or the arms' settings "
                "differ."})
    mix_numerics: bool = field(default=False, metadata={
        "help": "With --add_seeds: join seeds made with other CPU numerics (portable and native); the report says "
                "which configurations mix them."})

    def __post_init__(self):
        check_declared(self)
        self.seed_list = comma_seeds(self.seeds) if self.seeds else None
        self.config_list = comma_names(self.configs, "--configs") if self.configs else None
        self.combined_folders = comma_names(self.combine, "--combine") if self.combine else None
        self.replaced_configs = comma_names(self.replace_configs, "--replace_configs") if self.replace_configs else []
        self.added_configs = comma_names(self.add_seeds, "--add_seeds") if self.add_seeds else []
        for flag, named in (("--replace_configs", self.replaced_configs), ("--add_seeds", self.added_configs)):
            if named and not self.combine:
                raise UserInputError(f"{flag} chooses between the folders of --combine: give --combine too.")
        for flag, given in (("--portable_numerics", self.portable_numerics), ("--configs", self.configs)):
            if given is not None and self.combine:
                raise UserInputError(f"{flag} sets what a study trains, and --combine trains nothing: drop one.")
        if self.mix_numerics and not self.added_configs:
            raise UserInputError("--mix_numerics lets --add_seeds join seeds made with other CPU numerics: give "
                                 "--add_seeds too.")
        both = sorted(set(self.replaced_configs) & set(self.added_configs))
        if both:
            raise UserInputError(f"{', '.join(both)}: in both --replace_configs (take the last folder's runs) and "
                                 "--add_seeds (join every folder's seeds); name each configuration in one.")


def run(args: BudgetStudyArguments) -> None:
    """The study list, a combined report of finished studies, a dry run's plan, or the study trained or resumed."""
    if args.list_studies:
        print("\n".join(study_names()))
        return
    if args.combine:
        if not args.output_dir:
            raise UserInputError("--combine writes the combined report into --output_dir: give one.")
        check_writable_folder(args.output_dir)  # before any folder is read: one line, not a traceback at the end
        rows, checkpoints = combined_reports(args.combined_folders, args.replaced_configs, args.added_configs,
                                             args.mix_numerics)
        titles = shipped_study_titles()  # the figures name each configuration as its study file does
        registrations, notes = rows_preregistrations(rows)  # each declaration follows the rows that name its study
        attention = combined_attention(args.combined_folders, args.replaced_configs, args.added_configs)
        write_study_report(rows, checkpoints, shipped_study_configs(), Path(args.output_dir), titles, registrations,
                           notes, attention)
        compute = [Path(folder) / f"{COMPUTE_PREFIX}_compute.json" for folder in args.combined_folders]
        for missing in (path for path in compute if not path.is_file()):
            print(f"{missing.parent}: no compute report (a study run before it existed: rerun its command, which "
                  "trains nothing when finished, to write it); its configurations are left out of the compute report.")
        if any(path.is_file() for path in compute):
            curves = combined_curves([path for path in compute if path.is_file()], args.replaced_configs,
                                     args.added_configs)
            write_compute_report(curves, args.output_dir, COMPUTE_PREFIX, titles)
        print((Path(args.output_dir) / STUDY_MD_NAME).read_text())
        return
    grid = with_portable_numerics(study_grid(args.study, args.seed_list, args.output_dir), args.portable_numerics)
    if not args.dry_run:
        hold_grid_numerics(grid.experiment,  # before any torch operation
                           None if args.portable_numerics is not None else f"the study file of {args.study!r}")
    set_torch_threads(args.torch_threads)
    unknown = [config for config in args.config_list or [] if config not in grid.tasks]
    if unknown:
        raise UserInputError(f"--configs {','.join(unknown)}: the study has no such configuration (it has "
                             f"{', '.join(grid.tasks)}).")
    trained = grid.seeds
    earlier = [seed for seed in seeds_on_record(grid.output_dir) if seed not in trained]
    if earlier:  # the folder's earlier seeds stay in its report (their units are checked, not re-trained)
        grid = replace(grid, seeds=sorted([*trained, *earlier]))
    main_process = os.environ.get("RANK", "0") == "0"
    if args.dry_run:
        check_trainer_settings_of(grid)  # what the run checks before any data, but for the data themselves
        if main_process:
            units = [cell for cell in cells(grid) if cell.seed in trained
                     and (args.config_list is None or cell.task in args.config_list)]
            jobs = pretrain_jobs(grid, units)
            print(f"Study {args.study}: output {grid.output_dir}, seeds {trained} (reported: {grid.seeds})")
            print(f"SPT checkpoints ({len(jobs)}):", *(f"  {job.folder(grid)}" for job in jobs), sep="\n")
            print(f"Cells ({len(units)}):", *(f"  {cell.folder(grid)}" for cell in units), sep="\n")
        return
    run_grid(grid, seeds=trained, tasks=args.config_list)
    from accelerate import PartialState

    if PartialState().is_main_process:
        rows = study_rows(grid, args.study)
        titles = shipped_study_titles() | study_titles(args.study)  # a shipped configuration's, then the study's own
        registrations = [registration] if (registration := study_preregistration(args.study)) else []
        write_study_report(rows, checkpoint_rows(grid, args.probe_examples),
                           {Path(args.study).stem: list(grid.tasks)}, Path(grid.output_dir), titles, registrations,
                           attention=attention_rows(grid))
        withheld = withheld_units(registrations, rows)  # a declared test not shown yet: its curves neither
        curves = [curve for curve in grid_compute_curves(grid) if (curve.config, curve.arm, curve.seed) not in withheld]
        if curves or not withheld:
            write_compute_report(curves, grid.output_dir, COMPUTE_PREFIX, titles)
        else:
            print("No compute report yet: every run is a declared row whose test is not shown yet.")
        print((Path(grid.output_dir) / STUDY_MD_NAME).read_text())


def main(argv: list[str] | None = None) -> None:
    """`hf-spt budget-study`: `run` on the flags in `argv` (default: the command line), ended by `run_cli`."""
    run_cli(lambda flags: run(*SettingsParser(BudgetStudyArguments).parse_args_into_dataclasses(args=flags)), argv)


if __name__ == "__main__":
    main()
