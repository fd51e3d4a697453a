"""`python -m flux_alias_lint`: run from a repository's root, the working directory is sys.path[0],
and that repository's json.py or ast.py would be imported in place of the standard library's. As
pip does, that entry is taken off before anything else is imported (the package's __init__ imports
nothing the interpreter has not loaded). The console script's sys.path[0] is its own bin directory."""

import os
import sys


def _working_directory() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # removed: the command says so
        return None


if sys.path and sys.path[0] in ("", ".", _working_directory()):
    del sys.path[0]

from .cli import main  # noqa: E402 - once sys.path is safe

sys.exit(main())
