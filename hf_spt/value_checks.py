"""What a valid value is, declared once and read everywhere: ranges, choices and the types settings files spell.

A flag declares its range (`"range": POSITIVE_INT`) or its choices (`"values": (...)`) in its dataclass field's
metadata, and the dataclass checks itself in `__post_init__` with `check_declared`: the command line, config files,
recipes and grid or study files all build the same dataclasses, so a value is checked once whatever it came from.
A task declares its options' ranges the same way, in its builder's signature (`Annotated[int, POSITIVE_INT]`).
`fits` tells whether a value read from a YAML/JSON file has a field's type (a file has no parser to turn "32"
into 32, so text where a number belongs is an error there). This module imports nothing of the package but its
errors, so every layer may use it.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from enum import Enum
from typing import Annotated, Any, Literal, NamedTuple, Union

from .errors import UserInputError


class Range(NamedTuple):
    """A valid range: its test and its words ("a whole number >= 1")."""

    test: Callable[[Any], bool]
    words: str


POSITIVE_INT = Range(lambda v: v >= 1, "a whole number >= 1")
NON_NEGATIVE_INT = Range(lambda v: v >= 0, "a whole number >= 0")
AT_LEAST_TWO = Range(lambda v: v >= 2, "a whole number >= 2")
POSITIVE = Range(lambda v: v > 0 and math.isfinite(v), "a finite number > 0")
NON_NEGATIVE = Range(lambda v: v >= 0 and math.isfinite(v), "a finite number >= 0")
PROBABILITY = Range(lambda v: 0 <= v <= 1, "a number in [0, 1]")
OPEN_PROBABILITY = Range(lambda v: 0 < v <= 1, "a number in (0, 1]")
FRACTION = Range(lambda v: 0 < v < 1, "a number in (0, 1)")
DROPOUT = Range(lambda v: 0 <= v < 1, "a number in [0, 1)")
MAX_STEPS = Range(lambda v: v == -1 or v >= 1, "a whole number >= 1, or -1 (train by epochs)")

TYPE_WORDS = {int: "a whole number", float: "a number", bool: "true or false", str: "text", type(None): "null",
              dict: "a mapping", list: "a list"}


def fits(value: Any, annotation: Any) -> bool:
    """Whether `value`, as a YAML/JSON file gives it, has the type `annotation` (a dataclass field's or a builder
    parameter's): `true` is no number, `32.5` no whole number, `"32"` no number."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return fits(value, args[0])
    if origin in (Union, types.UnionType):
        return any(fits(value, option) for option in args)
    if origin is Literal:
        return value in args
    if annotation is Any:
        return True
    if annotation in (int, float) and isinstance(value, bool):
        return False
    if annotation is float:
        return isinstance(value, (int, float))
    if (origin or annotation) in (list, tuple):
        items = args[:1] if origin is list or (len(args) == 2 and args[1] is Ellipsis) else ()
        return isinstance(value, (list, tuple)) and all(fits(item, items[0]) for item in value if items)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return value in {member.value for member in annotation}
    if annotation in TYPE_WORDS or origin is dict:
        return isinstance(value, origin or annotation)
    return True  # a type a file cannot spell (a config object): the dataclass judges it


def type_words(annotation: Any) -> str:
    """`annotation` in words: "a whole number or null", "a list (text each)"..."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return type_words(args[0])
    if origin in (Union, types.UnionType):
        return " or ".join(dict.fromkeys(type_words(option) for option in args))
    if origin is Literal or isinstance(annotation, type) and issubclass(annotation, Enum):
        return "one of " + ", ".join(repr(getattr(option, "value", option)) for option in (args or annotation))
    if (origin or annotation) in (list, tuple):
        return f"a list ({type_words(args[0])} each)" if args else "a list"
    if dataclasses.is_dataclass(annotation):
        return "a mapping"
    return TYPE_WORDS.get(origin or annotation, getattr(annotation, "__name__", str(annotation)))


def declared_range(annotation: Any) -> Range | None:
    """The `Range` an `Annotated[...]` annotation carries, if any."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return next(filter(None, map(declared_range, typing.get_args(annotation))), None)
    if typing.get_origin(annotation) is Annotated:
        return next((extra for extra in annotation.__metadata__ if isinstance(extra, Range)), None)
    return None


def value_problem(shown: str, value: Any, value_range: Range | None = None, values: tuple | None = None) -> str | None:
    """Why `value` (shown as `shown`, e.g. "--seed") is not valid, or None: outside `value_range`, or not one of
    `values`. None is always valid (the preset's, or our default); so is text where a number belongs, which only a
    type check can judge (a parser turns "32" into 32)."""
    if value is None:
        return None
    if values is not None and value not in values:
        return f"{shown} {value!r}: must be one of {', '.join(map(str, values))}"
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)  # text is judged by its type check
    if value_range is not None and is_number and not value_range.test(value):
        return f"{shown} {value!r}: must be {value_range.words}"
    return None


def check_declared(settings: Any, extra_ranges: dict[str, Range] | None = None) -> None:
    """Raise one line listing every field of the dataclass `settings` outside its declared range or choices (its
    metadata's "range" and "values", and `extra_ranges` for fields declared elsewhere, e.g. transformers')."""
    problems = (value_problem(f"--{spec.name}", getattr(settings, spec.name, None),
                              spec.metadata.get("range") or (extra_ranges or {}).get(spec.name),
                              spec.metadata.get("values")) for spec in fields(settings))
    _raise_problems(problems)


def check_ranges(values: Mapping[str, Any], ranges: Mapping[str, Range]) -> None:
    """Raise one line listing every flag `--<name>` of `values` (an argparse command's flags, `vars(args)`) outside
    its range in `ranges`, so a command checks all its flags before it writes anything."""
    _raise_problems(value_problem(f"--{name}", values[name], value_range) for name, value_range in ranges.items())


def _raise_problems(problems: Iterable[str | None]) -> None:
    wrong = [problem for problem in problems if problem]
    if wrong:
        raise UserInputError("; ".join(wrong) + ".")


__all__ = ["Range", "POSITIVE_INT", "NON_NEGATIVE_INT", "AT_LEAST_TWO", "POSITIVE", "NON_NEGATIVE", "PROBABILITY",
           "OPEN_PROBABILITY", "FRACTION", "DROPOUT", "MAX_STEPS", "TYPE_WORDS", "fits", "type_words", "declared_range",
           "value_problem", "check_declared", "check_ranges"]
