"""How a flag declares itself, and how its declarations are read back.

A flag of `run_spt.py` is a field of one of the argument dataclasses (`arguments.py`); besides its `--help` text,
its metadata declares its valid range or values (`hf_spt.value_checks`), the phase that reads it, the task or flag
it is read with, whether only LoRA reads it (`DECLARED_KEYS`). The range check, the "no flag left unread" check and
the lists of each phase's flags read these declarations (`declared`), so a new flag touches one place: its field.
`SettingsParser` is transformers' `HfArgumentParser` with those keys kept from argparse.
"""

from __future__ import annotations

import copy
import json
import types
from dataclasses import Field, fields
from typing import Any

from transformers import HfArgumentParser

from ..errors import UserInputError

DECLARED_KEYS = ("range", "values", "phase", "task", "lora", "needs", "flag_type")
"""What a field's metadata declares besides argparse's own keys (`help`...): its valid range or values, the phase
that reads it, the task (custom) or flag (needs) it is read with, whether only LoRA reads it, and the type the
command line parses it as where a file may give more (`flag_type`: `str | None` for a field that also takes a
file's booleans)."""


class SettingsParser(HfArgumentParser):
    """transformers' `HfArgumentParser`, handing argparse only its own keys of a field's metadata (`help`...), not
    what the field declares for hf_spt's checks (`DECLARED_KEYS`). Parse these dataclasses with it."""

    @staticmethod
    def _parse_dataclass_field(parser, spec: Field) -> None:  # noqa: ANN001 (argparse's parser or group)
        argparse_only = copy.copy(spec)
        argparse_only.type = spec.metadata.get("flag_type", spec.type)
        argparse_only.metadata = types.MappingProxyType({key: value for key, value in spec.metadata.items()
                                                         if key not in DECLARED_KEYS})
        HfArgumentParser._parse_dataclass_field(parser, argparse_only)


def json_mapping(value: str | dict[str, Any] | None, flag: str) -> dict[str, Any]:
    """A mapping given as JSON text on the command line, or as a mapping in a config file."""
    if value is None or isinstance(value, dict):
        return value or {}
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise UserInputError(f"{flag} must be a JSON object, e.g. '{{\"key\": 1}}'; got {value!r} ({error}).") from None
    if not isinstance(parsed, dict):
        raise UserInputError(f"{flag} must be a JSON object, got {value!r}.")
    return parsed


def declared(group: type, key: str, value: Any = None) -> tuple[str, ...]:
    """The fields of `group` whose metadata declare `key` (as `value`, when given), in their order: the flags of
    one phase (`declared(ExperimentArguments, "phase", "pretrain")`), LoRA's, those read only with another flag."""
    return tuple(f.name for f in fields(group) if key in f.metadata and (value is None or f.metadata[key] == value))


def redacted(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` with every `*_token` value replaced by `<NAME>`, as transformers' `TrainingArguments.to_dict`
    does: a run records that a token was given, never the token."""
    return {key: f"<{key.upper()}>" if key.endswith("_token") and value is not None else value
            for key, value in settings.items()}


def field_default(spec: Field) -> Any:
    """A dataclass field's default value."""
    return spec.default_factory() if callable(spec.default_factory) else spec.default


__all__ = ["DECLARED_KEYS", "SettingsParser", "json_mapping", "declared", "redacted", "field_default"]
