"""How the command-line scripts end: a user error is one line on stderr and exit status 2.

Exit statuses: 0 done; 2 a user error (a bad flag, file, value or folder: `UserInputError`, or argparse's own usage
error, or an unknown flag: "unrecognized arguments: --x" whichever parser read it), printed as `error: <message>`
without a Python traceback; 1 (with the traceback) anything unexpected, which is a bug to report. `--debug` on the
command line or `HF_SPT_DEBUG=1` in the environment shows the traceback of user errors too. A command reads the
package's commit as it starts (`runs.provenance.read_package_state`): its records say the code it loaded.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Callable
from typing import Any

from ..errors import UserInputError
from ..runs.provenance import read_package_state

DEBUG_FLAG = "--debug"
DEBUG_ENV = "HF_SPT_DEBUG"
USER_ERROR_STATUS = 2
UNUSED_ARGUMENTS = "Some specified arguments are not used by the HfArgumentParser"  # its unknown-flag error


def debugging(argv: list[str]) -> bool:
    """Whether user errors should keep their traceback (`--debug`, or HF_SPT_DEBUG set to 1/true/yes)."""
    return DEBUG_FLAG in argv or os.environ.get(DEBUG_ENV, "").lower() in ("1", "true", "yes")


def run_cli(main: Callable[[list[str]], Any], argv: list[str] | None = None) -> Any:
    """Call `main(argv)` (default: the command line, `--debug` removed), the package's commit read first; exit 2
    with one line on a user error."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = debugging(argv)
    read_package_state()
    try:
        return main([arg for arg in argv if arg != DEBUG_FLAG])
    except (UserInputError, ValueError) as error:
        if debug or not (isinstance(error, UserInputError) or str(error).startswith(UNUSED_ARGUMENTS)):
            raise
        print(f"error: {user_words(error)}", file=sys.stderr)
        raise SystemExit(USER_ERROR_STATUS) from None


def user_words(error: ValueError) -> str:
    """The error's message, with transformers' unknown-flag error ("... not used by the HfArgumentParser: ['--x',
    '1']") in argparse's words ("unrecognized arguments: --x 1"), so every command says it alike."""
    message = str(error)
    if message.startswith(UNUSED_ARGUMENTS):
        return "unrecognized arguments: " + " ".join(ast.literal_eval(message.split(": ", 1)[1]))
    return message


__all__ = ["DEBUG_FLAG", "DEBUG_ENV", "USER_ERROR_STATUS", "debugging", "run_cli", "user_words"]
