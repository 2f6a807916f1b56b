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


__all__ = ["UserInputError", "MissingInputError"]
