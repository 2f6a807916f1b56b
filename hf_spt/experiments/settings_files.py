"""Settings files: a `--config_file`, a recipe (`--recipe`), a grid or study file; YAML or JSON, read and checked.

`read_settings_file` reads any of them (a missing or unparsable file is a user error naming it). A config file or
a recipe holds `run_spt.py`'s settings by their flag names (`arguments.ARGUMENT_GROUPS`): `check_settings` refuses
an unknown name or a value of the wrong type, naming it and the file, before anything runs.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import fields
from enum import Enum
from pathlib import Path
from typing import Any, Literal, Union

from transformers import HfArgumentParser

from ..errors import MissingInputError, UserInputError
from .arguments import ARGUMENT_GROUPS
from .recipes import RECIPES, recipe_path, task_key


def read_settings_file(path: str | Path, what: str) -> Any:
    """The content of a YAML (.yaml/.yml) or JSON file; a missing or unparsable file is a user error naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        raise MissingInputError(f"{what} {path}: no such file.") from None
    except UnicodeDecodeError as error:
        raise UserInputError(f"{what} {path} is not UTF-8 text: {error}") from None
    if str(path).endswith((".yaml", ".yml")):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise UserInputError(f"{what} {path} is not valid YAML: {error}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise UserInputError(f"{what} {path} is not valid JSON: {error}") from None


MAPPING_SETTINGS = ("task_options", "pretrain_task_options")  # JSON text as a flag, a mapping in a file
TYPE_WORDS = {int: "a whole number", float: "a number", bool: "true or false", str: "text", type(None): "null",
              dict: "a mapping", list: "a list"}


def _fits(value: Any, annotation: Any) -> bool:
    """Whether a file's `value` (a YAML/JSON value) has the type `annotation` of a dataclass field."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        return any(_fits(value, option) for option in args)
    if origin is Literal:
        return value in args
    if annotation in (int, float) and isinstance(value, bool):
        return False
    if annotation is float:
        return isinstance(value, (int, float))
    if (origin or annotation) in (list, tuple):
        return isinstance(value, list) and all(_fits(item, args[0]) for item in value if args)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return value in {member.value for member in annotation}
    if annotation in TYPE_WORDS or origin is dict:
        return isinstance(value, origin or annotation)
    return True  # a type a file cannot spell (a config object): the dataclass judges it


def _type_words(annotation: Any) -> str:
    """`annotation` in words: "a whole number or null", "a list (text each)"..."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        return " or ".join(dict.fromkeys(_type_words(option) for option in args))
    if origin is Literal or isinstance(annotation, type) and issubclass(annotation, Enum):
        return "one of " + ", ".join(repr(getattr(option, "value", option)) for option in (args or annotation))
    if (origin or annotation) in (list, tuple):
        return f"a list ({_type_words(args[0])} each)" if args else "a list"
    return TYPE_WORDS.get(origin or annotation, getattr(annotation, "__name__", str(annotation)))


def check_setting_types(settings: dict[str, Any], where: str, groups: tuple[type, ...] = ARGUMENT_GROUPS) -> None:
    """Raise `UserInputError` listing every setting of a file whose value has not its field's type (`hidden_size:
    32.5`, `seed: [1, 2]`), with the type expected. Text passes: the parser reads it as the flag typed."""
    hints = {name: hint for group in groups for name, hint in typing.get_type_hints(group).items()}
    hints.update({name: dict | str | None for name in MAPPING_SETTINGS})
    wrong = [f"{name}: {value!r} does not fit --{name}, which takes {_type_words(hints[name])}"
             for name, value in settings.items()
             if name in hints and not isinstance(value, str) and not _fits(value, hints[name])]
    if wrong:
        raise UserInputError(f"{where}: {'; '.join(wrong)}.")


def check_settings(settings: Any, where: str) -> dict[str, Any]:
    """The settings of a file (config file, recipe) at `where`; not a mapping, unknown names and values of the
    wrong type fail, naming them and `where`."""
    if not isinstance(settings, dict):
        raise UserInputError(f"{where}: expected a mapping of setting names to values, not {type(settings).__name__}.")
    unknown = sorted(set(settings) - {f.name for group in ARGUMENT_GROUPS for f in fields(group)})
    if unknown:
        raise UserInputError(f"{where}: unknown settings {unknown}; run with --help for the valid names.")
    check_setting_types(settings, where)
    HfArgumentParser(ARGUMENT_GROUPS).parse_dict(settings)  # the groups' own checks (JSON options...)
    return settings


def read_config_file(path: str) -> dict[str, Any]:
    """A config file's settings, checked (`check_settings`)."""
    return check_settings(read_settings_file(path, "--config_file") or {}, path)


def read_recipe(recipe: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A recipe's common settings and its per-task settings (by `task_key`; empty: for every task)."""
    path = recipe_path(recipe)
    content = read_settings_file(path, "--recipe") or {}
    tasks = (content.pop("tasks", None) if isinstance(content, dict) else None) or {}
    common = check_settings(content, f"--recipe {path}")
    if not isinstance(tasks, dict):
        raise UserInputError(f"--recipe {path}: tasks: is a mapping of task name -> settings, not "
                             f"{type(tasks).__name__}.")
    return common, {task_key(name): check_settings(settings, f"--recipe {path}, tasks: {name}")
                    for name, settings in tasks.items()}


def recipe_settings(recipe: str, task: str) -> dict[str, Any]:
    """The settings (argument-dataclass field names) that recipe `recipe` (a name or a file) gives task `task`."""
    common, tasks = read_recipe(recipe)
    if not tasks:
        return common
    if task_key(task) not in tasks:
        for_every_task = " or ".join(f"--recipe {name}" for name in RECIPES if not read_recipe(name)[1])
        raise UserInputError(
            f"--recipe {recipe} has settings for the tasks {', '.join(tasks)}, not for task {task!r}: use the "
            f"task's own preset (no --recipe) or a recipe for every task ({for_every_task}).")
    return {**common, **tasks[task_key(task)]}


__all__ = ["read_settings_file", "check_setting_types", "check_settings", "read_config_file", "read_recipe",
           "recipe_settings"]
