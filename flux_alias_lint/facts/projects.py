"""What makes a folder a project: the files declaring what it installs.

One list for three readers: the project's root (`index/files.py`: without a git work tree, the folder
holding one of these), where a setting holds (`index/settings.py`: a folder declaring its own
dependencies keeps its settings) and which release of a host a project runs (`index/releases.py`
reads these very files).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Read for the declared ranges (`index/releases.py` has a reader for each).
DECLARING_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "environment.yml", "environment.yaml")
# Pinned lockfiles: the one version each names.
LOCK_FILES = ("poetry.lock", "uv.lock", "pdm.lock", "Pipfile.lock")
# requirements.txt, requirements-dev.txt, requirement.txt, ...; and folders of them (`requirements/*.txt`).
REQUIREMENTS_FILE = re.compile(r"requirements?.*\.txt")
REQUIREMENTS_FOLDERS = ("requirements", "requirement")

_NAMED = frozenset((*DECLARING_FILES, *LOCK_FILES, *REQUIREMENTS_FOLDERS))


def declares_a_project(names: Iterable[str]) -> bool:
    """Whether a folder with these entries declares a project (its dependencies) of its own."""
    return any(name in _NAMED or REQUIREMENTS_FILE.fullmatch(name) for name in names)
