"""`[tool.flux-alias-lint]` in the nearest pyproject.toml (or the file given with --config)."""

from __future__ import annotations

import dataclasses
import os
import tomllib
from pathlib import Path


class ConfigError(Exception):
    """A configuration that cannot be used; `str()` is the one-line message."""


@dataclasses.dataclass(frozen=True)
class Config:
    select: tuple[str, ...] = ("FAL",)
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] | None = None  # None: the default excludes
    extend_exclude: tuple[str, ...] = ()
    # "warn": findings in functions nothing is known to rescale (context "unreached") print but do not fail the run.
    unreached: str = "error"
    root: Path | None = None  # the directory of the file the settings came from
    source: Path | None = None


_KEYS = {"select", "ignore", "exclude", "extend-exclude", "unreached"}
UNREACHED_CHOICES = ("error", "warn")


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start` that has our table."""
    directory = start if start.is_dir() else start.parent
    for candidate in (directory, *directory.parents):
        path = candidate / "pyproject.toml"
        if path.is_file() and _table(path, required=False) is not None:
            return path
    return None


def _table(path: Path, required: bool) -> dict[str, object] | None:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    table = data.get("tool", {}).get("flux-alias-lint")
    if table is None and required and path.name != "pyproject.toml":
        table = data  # a dedicated config file may hold the keys at top level
    return table


def load_config(explicit: str | None, start: Path) -> Config:
    path = Path(explicit) if explicit else find_pyproject(start.resolve())
    if path is None:
        return Config()
    table = _table(path, required=True) or {}
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown option(s) in [tool.flux-alias-lint]: {', '.join(unknown)}")
    values: dict[str, tuple[str, ...] | str] = {}
    for key, value in table.items():
        if key == "unreached":
            if value not in UNREACHED_CHOICES:
                raise ConfigError(f"{path}: `unreached` must be one of {', '.join(map(repr, UNREACHED_CHOICES))}")
            values[key] = value
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{path}: `{key}` must be a list of strings")
        values[key.replace("-", "_")] = tuple(value)
    return Config(**values, root=path.resolve().parent, source=path)


def split_codes(value: str) -> tuple[str, ...]:
    return tuple(part.strip().upper() for part in value.split(",") if part.strip())


def relative(path: Path, root: Path) -> str:
    try:
        return os.path.relpath(path, root)
    except ValueError:
        return str(path)
