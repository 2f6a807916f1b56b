"""Errors of the user's making (a bad flag, file or value), told apart from bugs.

The command-line scripts print a `UserInputError` as one message and exit with status 2; any
other exception keeps its traceback. Every layer may raise it.
"""


class UserInputError(ValueError):
    """The input asked for cannot be used as given; the message names the problem and the fix."""


__all__ = ["UserInputError"]
