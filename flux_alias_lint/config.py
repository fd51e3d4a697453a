"""`[tool.flux-alias-lint]` settings: each file takes them from its nearest pyproject.toml, as in ruff.

The closest `pyproject.toml` with our table wins and parent ones are not merged in (a closer one
without it still gives the target Python through `requires-python`). A file with
none above it takes the settings found from the working directory, else the defaults. `--config`
replaces all of this with one file for every path.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import os
import re
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from .rules import RULES
from .runner import DEFAULT_TIMEOUT
from .selection import DEFAULT_UNREACHED, UNREACHED_MODES, Layer, Selection, resolve
from .source import DEFAULT_MAX_FILE_SIZE


class ConfigError(Exception):
    """A configuration that cannot be used; `str()` is the one-line message."""


@dataclasses.dataclass(frozen=True)
class Config:
    select: tuple[str, ...] | None = None  # None: not given (every rule)
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] | None = None  # None: the default excludes
    extend_exclude: tuple[str, ...] = ()
    # Findings in functions nothing is known to rescale (context "unreached"): "warn" prints them as
    # warnings, which do not fail the run; "error" fails on them too; "ignore" hides them.
    unreached: str = DEFAULT_UNREACHED
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (glob, codes)
    target_version: tuple[int, int] | None = None  # the oldest Python the project supports
    root: Path | None = None  # the directory of the file the settings came from
    source: Path | None = None
    file_timeout: float = DEFAULT_TIMEOUT  # seconds per file before the run fails (a safety net); 0: none
    max_file_size: int = DEFAULT_MAX_FILE_SIZE  # bytes

    def ignored_for(self, path: str) -> tuple[str, ...]:
        """The `per-file-ignores` codes for `path`: globs match its path below `root`, or its name."""
        if not self.per_file_ignores:
            return ()
        absolute = Path(os.path.abspath(path))
        rel = relative(absolute, self.root).replace(os.sep, "/") if self.root else absolute.as_posix()
        return tuple(
            code
            for pattern, codes in self.per_file_ignores
            if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(absolute.name, pattern)
            for code in codes
        )


TABLE = "flux-alias-lint"
_LISTS = {"select", "extend-select", "ignore", "exclude", "extend-exclude"}
_CODE_LISTS = {"select", "extend-select", "ignore"}
_KEYS = _LISTS | {"per-file-ignores", "target-version", "unreached"}
_TARGET = re.compile(r"py3(\d+)")
_REQUIRES = re.compile(r">=?\s*3\.(\d+)")
_NUMBERS = {"file-timeout", "max-file-size"}  # non-negative numbers (max-file-size: an integer)


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start` that has our table."""
    directory = start if start.is_dir() else start.parent
    for candidate in (directory, *directory.parents):
        path = candidate / "pyproject.toml"
        if path.is_file() and _table(path, required=False) is not None:
            return path
    return None


@functools.cache  # a pyproject.toml is read once per run, however many files it configures
def _load(path: Path) -> dict[str, object]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _table(path: Path, required: bool) -> dict[str, object] | None:
    data = _load(path)
    tools = data.get("tool", {})
    table = tools.get(TABLE)
    if table is None:
        _warn_near_misses(path, tuple(tools))
    if table is None and required and path.name != "pyproject.toml":
        table = data  # a dedicated config file may hold the keys at top level
    return table


def _normalized(name: str) -> str:
    return re.sub(r"[-_.\s]", "", name.lower())


@functools.cache  # once per file and process
def _warn_near_misses(path: Path, tools: tuple[str, ...]) -> None:
    """A table meant to be ours (`[tool.flux_alias_lint]`, the import name) would otherwise be
    ignored without a word, and with it the user's `ignore`."""
    import difflib  # loaded only for a config file holding other tools' tables

    ours = _normalized(TABLE)
    for name in tools:
        if difflib.SequenceMatcher(None, _normalized(name), ours).ratio() >= 0.8:
            print(
                f"flux-alias-lint: warning: {path}: [tool.{name}] is not read; the table is [tool.{TABLE}]",
                file=sys.stderr,
            )


def load_config(path: Path, overrides: Mapping[str, object] | None = None) -> Config:
    """The settings in `path` (a pyproject.toml, or a TOML file given with --config), with
    `overrides` (inline `--config KEY=VALUE`) on top."""
    return _config({**(_table(path, required=True) or {}), **(overrides or {})}, str(path), path)


def override_config(overrides: Mapping[str, object]) -> Config:
    """The defaults with inline `--config KEY=VALUE` settings on top; checks them, in their own name."""
    return _config(overrides, "--config", None)


def _config(table: Mapping[str, object], where: str, path: Path | None) -> Config:
    unknown = sorted(set(table) - _KEYS - _NUMBERS)
    if unknown:
        raise ConfigError(
            f"{where}: unknown option(s) in [tool.{TABLE}]: {', '.join(unknown)} "
            f"(valid: {', '.join(sorted(_KEYS | _NUMBERS))})"
        )
    values: dict[str, object] = {}
    for key in _LISTS & set(table):
        values[key.replace("-", "_")] = _strings(where, key, table[key], codes=key in _CODE_LISTS)
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{where}: `per-file-ignores` must be a table of glob = [codes]")
    values["per_file_ignores"] = tuple(
        (glob, _strings(where, f"per-file-ignores.{glob}", codes, codes=True)) for glob, codes in per_file.items()
    )
    values["target_version"] = _target_version(where, path, table)
    for key in _NUMBERS & set(table):
        value = table[key]
        integral = isinstance(value, int) or key == "file-timeout" and isinstance(value, float)
        if isinstance(value, bool) or not integral or value < 0:
            raise ConfigError(
                f"{where}: `{key}` must be a non-negative {'number' if key == 'file-timeout' else 'integer'}"
            )
        values[key.replace("-", "_")] = value
    if "unreached" in table:
        if table["unreached"] not in UNREACHED_MODES:
            raise ConfigError(f"{where}: `unreached` must be one of {', '.join(map(repr, UNREACHED_MODES))}")
        values["unreached"] = table["unreached"]
    root = path.resolve().parent if path else None
    return Config(**values, root=root, source=path)  # type: ignore[arg-type]


def _strings(where: str, key: str, value: object, *, codes: bool) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: `{key}` must be a list of strings")
    if codes:
        value = [normalize_selector(v) for v in value]
        check_selectors(value, where=f"{where}: `{key}`")
    return tuple(value)


def _target_version(where: str, path: Path | None, table: Mapping[str, object]) -> tuple[int, int] | None:
    """`target-version = "py312"`, else the minimum of `[project] requires-python` (as ruff infers it)."""
    if "target-version" in table:
        try:
            return parse_target_version(str(table["target-version"]))
        except ValueError as exc:
            raise ConfigError(f"{where}: `target-version`: {exc}") from None
    return _requires_python(path) if path is not None and path.name == "pyproject.toml" else None


def _requires_python(path: Path) -> tuple[int, int] | None:
    requires = _load(path).get("project", {}).get("requires-python")
    match = _REQUIRES.search(requires) if isinstance(requires, str) else None
    return (3, int(match[1])) if match else None


def parse_target_version(value: str) -> tuple[int, int]:
    """`py312` → (3, 12), as ruff spells it."""
    match = _TARGET.fullmatch(value)
    if not match:
        raise ValueError(f"{value!r} is not a version such as py312")
    return 3, int(match[1])


def check_selectors(selectors: list[str] | tuple[str, ...], where: str) -> None:
    for code in selectors:
        if not any(known.startswith(code) for known in RULES):
            raise ConfigError(f"{where}: unknown rule selector {code!r}; known rules: {', '.join(RULES)}")


class Resolver:
    """The `Config` for each path, looked up once per directory; `overrides` (inline `--config
    KEY=VALUE`) go on top of every one."""

    def __init__(self, explicit: str | None, cwd: Path, overrides: Mapping[str, object] | None = None) -> None:
        _load.cache_clear()  # a new run reads the files afresh: they may have changed since the last
        self._overrides = dict(overrides or {})
        defaults = override_config(self._overrides)  # checked before any file, so its errors name --config
        self._fixed = load_config(Path(explicit), self._overrides) if explicit else None
        self._by_dir: dict[str, Config] = {}
        self._by_spelling: dict[str, Config] = {}
        if self._fixed is None:
            found = find_pyproject(cwd.resolve())
            self._fallback = load_config(found, self._overrides) if found else defaults

    def __call__(self, path: Path | str) -> Config:
        """The settings for the file (or directory) `path`: those of the directory holding it."""
        if self._fixed is not None:
            return self._fixed
        # By the directory as spelled (the working directory does not change during a run): asked
        # several times for each of thousands of files, without a `Path` each time.
        spelled = os.path.dirname(os.fspath(path).rstrip("/") or "/")
        config = self._by_spelling.get(spelled)
        if config is None:
            config = self._by_spelling[spelled] = self._directory(os.path.dirname(os.path.abspath(path)))
        return config

    def _directory(self, directory: str) -> Config:
        """By the absolute directory as a string: asked once for each directory of a walk, with one
        stat for its pyproject.toml."""
        config = self._by_dir.get(directory)
        if config is None:
            candidate = os.path.join(directory, "pyproject.toml")
            is_file = os.path.isfile(candidate)
            parent = os.path.dirname(directory)
            if is_file and _table(Path(candidate), required=False) is not None:
                config = load_config(Path(candidate), self._overrides)
            elif parent == directory:
                config = self._fallback
            else:
                config = self._directory(parent)
                # A package's own pyproject.toml without our table still says which Python it targets.
                target = _requires_python(Path(candidate)) if is_file else None
                if target is not None:
                    config = dataclasses.replace(config, target_version=target)
            self._by_dir[directory] = config
        return config


def normalize_selector(code: str) -> str:
    """ruff's `ALL` (every rule) is every one of ours: `FAL`."""
    code = code.strip().upper()
    return "FAL" if code == "ALL" else code


def split_codes(value: str) -> tuple[str, ...]:
    return tuple(normalize_selector(part) for part in value.split(",") if part.strip())


def parse_config_options(values: Sequence[str]) -> tuple[str | None, dict[str, object]]:
    """`--config` values as ruff reads them: a file that exists, else a TOML `KEY = VALUE` setting.
    The file (at most one) and the settings, later ones winning."""
    file, overrides = None, {}
    for value in values:
        if os.path.isfile(value):
            if file is not None:
                raise ConfigError(f"--config: only one configuration file can be given ({file}, {value})")
            file = value
            continue
        try:
            overrides.update(tomllib.loads(value))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"--config {value}: neither an existing file nor a TOML `KEY = VALUE` ({exc})") from None
    return file, overrides


def relative(path: Path, root: Path) -> str:
    try:
        return os.path.relpath(path, root)
    except ValueError:
        return str(path)


def selection_for(
    config: Config,
    path: str,
    command_line: Layer | None = None,
    target_version: tuple[int, int] | None = None,
    unreached: str | None = None,
) -> Selection:
    """What `path` reports: its config's selection with the command line's on top, as ruff resolves it."""
    layers = [Layer(config.select, config.extend_select, config.ignore), *([command_line] if command_line else [])]
    selection = resolve(tuple(RULES), layers, config.ignored_for(path))
    return dataclasses.replace(
        selection, target_version=target_version or config.target_version, unreached=unreached or config.unreached
    )
