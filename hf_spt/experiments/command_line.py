"""`run_spt.py`'s command line: flags over a config file over a recipe, and no flag left unread.

The parser is transformers' `HfArgumentParser` (`arguments.SettingsParser`) over the argument groups of `arguments.py`, so
`--help` lists the flags by phase and every `TrainingArguments` flag is typed as in transformers'
example scripts. Three layers give the values, each above the one before:

1. `--recipe NAME|FILE`: a shipped recipe's settings, or a recipe file's (`recipes/`);
2. `--config_file FILE`: the same names as the flags, in YAML or JSON (an unknown name, or a value
   of the wrong type, is an error naming it: `settings_files.check_settings`);
3. the flags typed.

A generic budget flag (`--learning_rate`, `--num_train_epochs`, `--per_device_train_batch_size`,
`--max_steps`) given in a layer replaces the per-phase values of the layers below it, so that an
explicit `--max_steps 100` is not undone by a recipe's `pretrain_max_steps` (`arguments.layered`, the
rule recipes and grids follow too). A value the user gave (flag or file) that the chosen run never reads
is an error, never silently dropped (a generic budget beside the per-phase values of every phase it
trains: `arguments.unread_budgets`).
"""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Any

from ..errors import UserInputError
from .arguments import (ARGUMENT_GROUPS, SettingsParser, CUSTOM_DATA_FIELDS, FINETUNE_FLAGS, FINETUNE_TRAINER_FLAGS,
                        LORA_FLAGS, PER_PHASE_BUDGETS, PRETRAIN_DATA_FIELDS, PRETRAIN_FLAGS, DataArguments,
                        ExperimentArguments, ModelArguments, SharedTrainingArguments, layered, unread_budgets)
from .modes import MODES, uses_lora
from .settings_files import read_config_file, recipe_settings

CONFIG_FILE_FLAG = "--config_file"
NEEDS = {spec.name: spec.metadata["needs"] for group in ARGUMENT_GROUPS for spec in fields(group)
         if "needs" in spec.metadata}
"""Flags read only together with another one (their field's metadata "needs")."""


def build_parser(add_help: bool = True) -> SettingsParser:
    """The parser of every group, with the config-file flag shown in `--help`."""
    parser = SettingsParser(ARGUMENT_GROUPS, add_help=add_help)
    parser.add_argument(CONFIG_FILE_FLAG, help="YAML or JSON file of settings (the flags' names); flags override it.")
    return parser


_NOT_TYPED = object()


def given_flags(parser: SettingsParser, argv: list[str]) -> dict[str, Any]:
    """The settings typed on the command line, `config_file` included (parsed; what is not typed is left out).
    Every setting starts as a marker in the namespace, so argparse leaves out the defaults of what is not typed."""
    names = [spec.name for group in ARGUMENT_GROUPS for spec in fields(group) if spec.init] + ["config_file"]
    typed = parser.parse_known_args(argv, namespace=argparse.Namespace(**dict.fromkeys(names, _NOT_TYPED)))[0]
    return {name: value for name, value in vars(typed).items() if value is not _NOT_TYPED}


def check_all_read(
    given: set[str], data: DataArguments, exp: ExperimentArguments, training: SharedTrainingArguments
) -> None:
    """Fail on a given setting the chosen run does not read (another phase's, another task's...)."""
    mode = MODES[exp.mode]
    unread = {}
    if not mode.pretrains:
        for name in given & {*PRETRAIN_FLAGS, *PRETRAIN_DATA_FIELDS}:
            unread[name] = f"only the pretraining phase reads it, and --mode {exp.mode} does not pretrain"
    if not mode.arms:
        for name in given & {*FINETUNE_FLAGS, *FINETUNE_TRAINER_FLAGS}:
            unread[name] = f"only fine-tuning reads it, and --mode {exp.mode} does not fine-tune"
    elif not any(arm.pretrain for arm in mode.arms):
        if "init_from" in given:  # --init_parts: ExperimentArguments refuses it (arms.check_spt_weights_source)
            unread["init_from"] = f"--mode {exp.mode} starts from random weights (or --model_name_or_path)"
    unread.update(unread_lora_settings(given, exp.mode, exp.finetune_method))
    unread.update(unread_budgets(given, vars(exp), mode.phases))
    if data.task != "custom":
        for name in given & set(CUSTOM_DATA_FIELDS):
            unread[name] = f"only --task custom reads it, not --task {data.task}"
    for name, needed in NEEDS.items():
        if name in given and not getattr(exp if hasattr(exp, needed) else training, needed):
            unread[name] = f"it is read only with --{needed}"
    if unread:
        raise UserInputError("Settings this run would not read:\n" + "\n".join(
            f"  --{name}: {why}." for name, why in sorted(unread.items())) + "\nDrop them or change --mode/--task.")


def unread_lora_settings(given: set[str], mode: str, finetune_method: str) -> dict[str, str]:
    """The LoRA settings a run of `mode` would not read, with why: LoRA flags without a LoRA arm, and
    `--finetune_method` where the mode sets each arm's method (`modes.MODES`)."""
    arms = MODES[mode].arms
    if not arms:  # check_all_read: no fine-tuning setting is read
        return {}
    unread = {"finetune_method": f"--mode {mode} sets each arm's method"} if all(arm.method for arm in arms) else {}
    if not uses_lora(mode, finetune_method):
        lora_modes = " or ".join(f"--mode {mode}" for mode in MODES if uses_lora(mode, "full"))
        unread.update({name: f"it is read only with --finetune_method lora (or {lora_modes})"
                       for name in LORA_FLAGS})
    return {name: why for name, why in unread.items() if name in given}


def parse_arguments(
    argv: list[str],
) -> tuple[DataArguments, ModelArguments, ExperimentArguments, SharedTrainingArguments]:
    """Parse `run_spt.py`'s flags over `--config_file` over `--recipe`; see the module docstring."""
    parser = build_parser()
    flags = given_flags(parser, argv)
    file_settings = read_config_file(flags["config_file"]) if flags.get("config_file") else {}
    recipe = flags.get("recipe") or file_settings.get("recipe")
    task = flags.get("task") or file_settings.get("task") or DataArguments.task
    recipe_layer = recipe_settings(recipe, task) if recipe else {}
    typed_budgets = {name: flags[name] for name in PER_PHASE_BUDGETS.keys() & flags.keys()}  # the top layer's
    parser.set_defaults(**layered([recipe_layer, file_settings, typed_budgets]))
    data, model, experiment, training, _ = parser.parse_args_into_dataclasses(args=argv, look_for_args_file=False)
    check_all_read(set(flags) | set(file_settings), data, experiment, training)
    return data, model, experiment, training


__all__ = ["build_parser", "given_flags", "check_all_read", "unread_lora_settings", "parse_arguments"]
