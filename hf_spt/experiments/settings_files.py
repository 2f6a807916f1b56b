"""Settings files: a `--config_file`, a recipe (`--recipe`), a grid or study file; YAML or JSON, read and checked.

`read_settings_file` reads any of them (a missing or unparsable file is a user error naming it). A config file or
a recipe holds `run_spt.py`'s settings by their flag names (`arguments.ARGUMENT_GROUPS`): `check_settings` refuses
an unknown name or a value of the wrong type, naming it and the file, before anything runs.
"""

from __future__ import annotations

import json
import re
import typing
from decimal import Decimal
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..errors import MissingInputError, UserInputError
from ..value_checks import fits, type_words
from .arguments import ARGUMENT_GROUPS, SettingsParser, layered
from .recipes import RECIPES, recipe_path, task_key


class DuplicateKeyError(UserInputError):
    """A settings file names one key twice in a mapping (YAML and JSON readers would keep the last silently)."""


def _unique_pairs(pairs: list[tuple[str, Any]], where: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise DuplicateKeyError(f"{where}: the key {key!r} is given twice in one mapping; keep one.")
        seen[key] = value
    return seen


def _yaml_without_duplicates(text: str, where: str) -> Any:
    """`yaml.safe_load`, refusing a key given twice in one mapping."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):  # noqa: ANN001, ANN202 (yaml's signature)
            keys = [self.construct_object(key, deep=deep) for key, _ in node.value
                    if key.tag != "tag:yaml.org,2002:merge"]  # a merge (<<: *anchor) may be overridden
            _unique_pairs([(key, None) for key in keys], f"{where}, line {node.start_mark.line + 1}")
            return super().construct_mapping(node, deep=deep)

    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (a SafeLoader)


def read_settings_file(path: str | Path, what: str) -> Any:
    """The content of a YAML (.yaml/.yml) or JSON file; a missing or unparsable file, or a key given twice in one
    mapping, is a one-line user error naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        raise MissingInputError(f"{what} {path}: no such file.") from None
    except UnicodeDecodeError as error:
        raise UserInputError(f"{what} {path} is not UTF-8 text: {error}") from None
    if str(path).endswith((".yaml", ".yml")):
        import yaml

        try:
            return _yaml_without_duplicates(text, f"{what} {path}")
        except yaml.YAMLError as error:
            raise UserInputError(f"{what} {path} is not valid YAML: {' '.join(str(error).split())}") from None
    try:
        return json.loads(text, object_pairs_hook=lambda pairs: _unique_pairs(pairs, f"{what} {path}"))
    except json.JSONDecodeError as error:
        raise UserInputError(f"{what} {path} is not valid JSON: {error}") from None


MAPPING_SETTINGS = ("task_options", "pretrain_task_options")  # JSON text as a flag, a mapping in a file
RECIPE_UNREAD = ("recipe", "task", "config_file")
"""Names a recipe may not hold: a recipe names no other recipe, and it holds settings for a task (by `tasks:`), it
does not choose the task."""


def check_setting_types(settings: dict[str, Any], where: str, groups: tuple[type, ...] = ARGUMENT_GROUPS,
                        text_parsed: bool = True) -> None:
    """Raise `UserInputError` listing every setting of a file whose value has not its field's type (`hidden_size:
    32.5`, `seed: [1, 2]`), with the type expected. `text_parsed`: text passes, for the parser reads it as the flag
    typed (a config file, a recipe); a grid or study file has no parser, so there "32" is no number."""
    hints = {name: hint for group in groups for name, hint in typing.get_type_hints(group).items()}
    hints.update({name: dict | str | None for name in MAPPING_SETTINGS if name in hints})
    flag = "--" if text_parsed else ""  # a grid or study file names settings, not flags
    wrong = [f"{name}: {value!r} does not fit {flag}{name}, which takes {type_words(hints[name])}"
             f"{_exponent_as_text(value, hints[name])}" for name, value in settings.items()
             if name in hints and not (text_parsed and isinstance(value, str)) and not fits(value, hints[name])]
    if wrong:
        raise UserInputError(f"{where}: {'; '.join(wrong)}.")


EXPONENT_NUMBER = re.compile(r"([+-]?[0-9]+)(\.[0-9]*)?[eE]([+-]?)([0-9]+)")
"""A number in exponent form, which YAML 1.1 (PyYAML) reads as text unless it has a dot and a signed exponent."""


def _exponent_as_text(value: Any, hint: Any) -> str:
    """Why `value` is text where `hint` takes a number, when YAML read a number as text (`1e-3`), with two spellings
    it reads as a number; otherwise nothing."""
    matched = EXPONENT_NUMBER.fullmatch(value.strip()) if isinstance(value, str) else None
    if matched is None or not fits(float(value), hint):
        return ""
    whole, fraction, sign, exponent = matched.groups()
    return (f" (YAML 1.1 reads {value} as text: a number in exponent form needs a dot and a signed exponent; write "
            f"{whole}{fraction or '.0'}e{sign or '+'}{exponent} or {format(Decimal(value.strip()), 'f')})")


def check_settings(settings: Any, where: str) -> dict[str, Any]:
    """The settings of a file (config file, recipe) at `where`; not a mapping, unknown names and values of the
    wrong type fail, naming them and `where`."""
    if not isinstance(settings, dict):
        raise UserInputError(f"{where}: expected a mapping of setting names to values, not {type(settings).__name__}.")
    unknown = sorted(set(settings) - {f.name for group in ARGUMENT_GROUPS for f in fields(group)})
    if unknown:
        raise UserInputError(f"{where}: unknown settings {unknown}; run with --help for the valid names.")
    check_setting_types(settings, where)
    SettingsParser(ARGUMENT_GROUPS).parse_dict(settings)  # the groups' own checks (JSON options...)
    return settings


def read_config_file(path: str) -> dict[str, Any]:
    """A config file's settings, checked (`check_settings`)."""
    return check_settings(read_settings_file(path, "--config_file") or {}, path)


def read_recipe(recipe: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A recipe's common settings and its per-task settings (by `task_key`; empty: for every task)."""
    path = recipe_path(recipe)
    content = read_settings_file(path, "--recipe") or {}
    tasks = (content.pop("tasks", None) if isinstance(content, dict) else None) or {}
    if not isinstance(tasks, dict):
        raise UserInputError(f"--recipe {path}: tasks: is a mapping of task name -> settings, not "
                             f"{type(tasks).__name__}.")
    for where, settings in (("", content), *((f", tasks: {name}", settings) for name, settings in tasks.items())):
        named = sorted(set(settings) & set(RECIPE_UNREAD)) if isinstance(settings, dict) else []
        if named:
            raise UserInputError(f"--recipe {path}{where}: a recipe may not set {named}: it holds settings for tasks "
                                 "(under tasks:), it does not choose the task, another recipe or a config file.")
    common = check_settings(content, f"--recipe {path}")
    return common, {task_key(name): check_settings(settings, f"--recipe {path}, tasks: {name}")
                    for name, settings in tasks.items()}


def recipe_settings(recipe: str, task: str) -> dict[str, Any]:
    """The settings (argument-dataclass field names) that recipe `recipe` (a name or a file) gives task `task`: its
    settings for the task over its common ones, layered as flags over a config file are (`arguments.layered`)."""
    common, tasks = read_recipe(recipe)
    if not tasks:
        return common
    if task_key(task) not in tasks:
        for_every_task = " or ".join(f"--recipe {name}" for name in RECIPES if not read_recipe(name)[1])
        raise UserInputError(
            f"--recipe {recipe} has settings for the tasks {', '.join(tasks)}, not for task {task!r}: use the "
            f"task's own preset (no --recipe) or a recipe for every task ({for_every_task}).")
    return layered([common, tasks[task_key(task)]])


__all__ = ["DuplicateKeyError", "read_settings_file", "check_setting_types", "check_settings", "read_config_file", "read_recipe",
           "recipe_settings"]
