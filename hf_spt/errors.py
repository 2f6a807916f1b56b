"""Errors in what the user gave (a flag, a file, a value), as opposed to bugs.

The command-line scripts (`experiments.exit_status.run_cli`) print a `UserInputError` as one line and
exit with status 2, without a traceback: the message names the file, row, flag or folder and the
fix. Any other exception is unexpected and keeps its traceback. This module imports nothing of
the package, so every layer may raise these.
"""

from __future__ import annotations


class UserInputError(ValueError):
    """A flag, file or value the user gave is wrong; the message says which and how to fix it."""


class MissingInputError(UserInputError, FileNotFoundError):
    """A file or folder the user named does not exist (still a `FileNotFoundError` for callers)."""


def one_line(error: BaseException) -> str:
    """Another library's error as the one line a `UserInputError` quotes: a validator's wrapped message (its last
    line, "ValueError: <reason>") as its reason, other lines joined with "; " (bullets dropped); a message that lists
    every choice (transformers' optimizers, model types, attention kernels) cut after the part naming the value."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if lines and lines[-1].startswith("ValueError: "):
        text = lines[-1].removeprefix("ValueError: ")
    else:
        text = "; ".join(line.removeprefix("- ") for line in lines)
    if len(text) <= 200:
        return text
    named = text.split(", please select one of")[0]
    return named if named != text else text.split(". ")[0] + "."


__all__ = ["UserInputError", "MissingInputError", "one_line"]
