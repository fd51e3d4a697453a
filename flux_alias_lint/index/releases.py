"""Which release of a host a project runs: its declared dependencies, and whether they rescale in place.

A host (`facts/hosts.py`) rescales in place only in some releases. The releases a project may run
are read from what it declares, in the nearest directory at or above a file that declares the
host's distribution, up to the project's root: a pinned lockfile there (poetry.lock, uv.lock,
pdm.lock, Pipfile.lock: the one version), else every range its declarations allow (pyproject
`[project] dependencies` and `optional-dependencies`, `requirements*.txt` and the files they `-r`,
setup.cfg `install_requires`, the literals of `setup.py`'s `install_requires=[...]` and
`extras_require`, read with `ast`, never run); failing all, the release installed beside the linter.
Each directory is read once per process. Nothing declared and nothing installed: every release.
"""

from __future__ import annotations

import ast
import configparser
import dataclasses
import functools
import importlib.metadata
import json
import os
import re
import tomllib
from collections.abc import Iterator

from ..facts.hosts import BY_NAME, MEGATRON, Host
from .files import project_root
from .reach import Reach
from .settings import setting
from .versions import EVERY, Versions, allowed, any_of, relation

_LOCKS = ("poetry.lock", "uv.lock", "pdm.lock", "Pipfile.lock")
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)")


@dataclasses.dataclass(frozen=True)
class Declaration:
    """One declaration of a distribution: the file (its name in the nearest directory declaring the
    distribution, the one meant) and what it says."""

    where: str
    text: str  # `transformers==4.46.0`, as written (or `transformers 4.46.0` for a lock or an install)
    versions: Versions


@dataclasses.dataclass(frozen=True)
class Release:
    """Whether a host rescales in place in the releases a project may run, and the clause saying so."""

    rescales: bool
    said: str  # "in transformers 4.46.0–4.46.1, pinned in requirements.txt (transformers==4.46.0)"
    files: tuple[str, ...]  # the files it was read from (what a cached result depends on)


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(line: str) -> tuple[str, str] | None:
    """(normalised name, the versions it allows as a specifier set) of a PEP 508 requirement, or None."""
    line = line.split("#", 1)[0].split(";", 1)[0].strip()
    match = _REQUIREMENT.fullmatch(line)
    if match is None or line.startswith("-"):
        return None
    rest = match[2].strip()
    if rest.startswith("@"):
        return normalised(match[1]), ""  # a URL: any release
    return normalised(match[1]), rest.strip("()").strip()


def _requirements_file(path: str, seen: set[str]) -> Iterator[str]:
    """The requirement lines of a requirements file and the files it includes (`-r other.txt`)."""
    real = os.path.realpath(path)
    if real in seen:
        return
    seen.add(real)
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return
    for line in lines:
        stripped = line.strip()
        include = re.match(r"(?:-r|--requirement)\s*=?\s*(\S+)", stripped)
        if include:
            yield from _requirements_file(os.path.join(os.path.dirname(path), include[1]), seen)
        elif stripped and not stripped.startswith(("#", "-")):
            yield stripped


def _pyproject(path: str) -> Iterator[str]:
    project = _toml(path).get("project", {})
    yield from _strings(project.get("dependencies", []))
    for extra in (project.get("optional-dependencies") or {}).values():
        yield from _strings(extra)


def _setup_cfg(path: str) -> Iterator[str]:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return
    for section, option in (("options", "install_requires"),):
        if parser.has_option(section, option):
            yield from (line for line in parser.get(section, option).splitlines() if line.strip())
    if parser.has_section("options.extras_require"):
        for _, value in parser.items("options.extras_require"):
            yield from (line for line in value.splitlines() if line.strip())


def _setup_py(path: str) -> Iterator[str]:
    """The string literals of `install_requires=` and `extras_require=` keywords: a list (a dict of
    lists), or a module-level name assigned one (`install_requires = [...]`, then
    `install_requires=install_requires`); also `extras_deps["x"] = [...]`."""
    try:
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return
    named: dict[str, list[ast.expr]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            name = target.value if isinstance(target, ast.Subscript) else target
            if isinstance(name, ast.Name):
                named.setdefault(name.id, []).append(stmt.value)
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("install_requires", "extras_require"):
            given = named.get(node.value.id, []) if isinstance(node.value, ast.Name) else [node.value]
            for value in given:
                for listed in value.values if isinstance(value, ast.Dict) else [value]:
                    if isinstance(listed, (ast.List, ast.Tuple)):
                        yield from (
                            e.value for e in listed.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                        )


def _strings(values: object) -> Iterator[str]:
    if isinstance(values, list):
        yield from (value for value in values if isinstance(value, str))


def _toml(path: str) -> dict:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}


def _locked(path: str) -> Iterator[tuple[str, str]]:
    """(normalised name, version) of each package a lockfile pins."""
    if path.endswith("Pipfile.lock"):
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return
        for group in ("default", "develop"):
            for name, entry in (data.get(group) or {}).items():
                version = entry.get("version", "") if isinstance(entry, dict) else ""
                if version.startswith("=="):
                    yield normalised(name), version[2:]
        return
    for package in _toml(path).get("package", []):
        if (
            isinstance(package, dict)
            and isinstance(package.get("name"), str)
            and isinstance(package.get("version"), str)
        ):
            yield normalised(package["name"]), package["version"]


@functools.cache
def _declared_in(directory: str) -> tuple[dict[str, tuple[Declaration, ...]], tuple[str, ...]]:
    """What the files of one directory declare, by normalised distribution (a lockfile's pins
    replacing the ranges), and the files read."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return {}, ()
    ranges: dict[str, list[Declaration]] = {}
    locked: dict[str, list[Declaration]] = {}
    read: list[str] = []

    def add(into: dict[str, list[Declaration]], where: str, lines: Iterator[str]) -> None:
        for line in lines:
            parsed = _requirement(line)
            if parsed is None:
                continue
            try:
                versions = allowed(parsed[1])
            except ValueError:
                versions = EVERY  # a range it cannot read allows, as far as it knows, any release
            text = line.split("#", 1)[0].split(";", 1)[0].strip()
            into.setdefault(parsed[0], []).append(Declaration(where, text, versions))

    files = [n for n in names if re.fullmatch(r"requirements.*\.txt", n)]
    if os.path.isdir(os.path.join(directory, "requirements")):
        sub = sorted(os.listdir(os.path.join(directory, "requirements")))
        files += [f"requirements/{n}" for n in sub if n.endswith(".txt")]
    for name in files:
        read.append(os.path.join(directory, name))
        add(ranges, name, _requirements_file(os.path.join(directory, name), set()))
    readers = {"pyproject.toml": _pyproject, "setup.cfg": _setup_cfg, "setup.py": _setup_py}
    for name, reader in readers.items():
        if name in names:
            read.append(os.path.join(directory, name))
            add(ranges, name, reader(os.path.join(directory, name)))
    for name in _LOCKS:
        if name in names:
            read.append(os.path.join(directory, name))
            for dist, version in _locked(os.path.join(directory, name)):
                try:
                    versions = allowed(f"=={version}")
                except ValueError:
                    continue
                locked.setdefault(dist, []).append(Declaration(name, f"{dist} {version}", versions))
    ranges.update(locked)
    return {dist: tuple(found) for dist, found in ranges.items()}, tuple(read)


@functools.cache
def installed(distribution: str) -> str | None:
    """The version of `distribution` installed beside the linter, or None."""
    try:
        return importlib.metadata.version(distribution)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def declarations(path: str, distribution: str) -> tuple[tuple[Declaration, ...], tuple[str, ...]]:
    """What the nearest directory at or above `path` (up to its project's root) declaring
    `distribution` declares of it; else its installed release; else nothing. And the files read."""
    root = project_root(path)
    directory = os.path.dirname(os.path.realpath(path))
    dist = normalised(distribution)
    read: list[str] = []
    while True:
        found, files = _declared_in(directory)
        read += files
        if dist in found:
            return found[dist], tuple(read)
        if directory == root or os.path.dirname(directory) == directory or not directory.startswith(root):
            break
        directory = os.path.dirname(directory)
    version = installed(distribution)
    if version is None:
        return (), tuple(read)
    try:
        return (Declaration("installed", f"{distribution} {version}", allowed(f"=={version}")),), tuple(read)
    except ValueError:
        return (), tuple(read)


def host_release(path: str, host: Host) -> Release:
    """Whether `host` rescales a loss returned by a function of the file `path` in place, in the
    releases its project may run, and the clause saying which release and where it is pinned."""
    found, files = declarations(path, host.distribution) if path not in ("-", "<string>") else ((), ())
    releases, shown = any_of(host.releases), host.shown
    set_at = ""
    if host.setting is not None and (host.setting.releases_if_on is not None or host.setting.off_stops_it):
        value = setting(path, host.setting.name)
        if value is not None:
            files += (os.path.join(project_root(path), value[0].rsplit(":", 1)[0]),)
            set_at = f"{host.setting.name}={value[1]} at {value[0]}"
            if not value[1] and host.setting.off_stops_it:
                return Release(False, f"{set_at} turns it off", files)
            if value[1] and host.setting.releases_if_on is not None:
                releases = any_of(host.setting.releases_if_on)
                shown = f"{host.distribution} {host.setting.releases_if_on[0].removeprefix('>=')} and later"
    said = f"in {shown}" + (f" with {set_at}" if set_at else "")
    if not found:
        return Release(True, f"{said}; {host.distribution} is not pinned in the project", files)
    declared = tuple(interval for d in found for interval in d.versions)
    how = relation(declared, releases)
    first = found[0]
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    if how == "excludes":
        return Release(
            False, f"{host.distribution} is pinned outside them in {first.where} ({first.text}){more}", files
        )
    if first.where == "installed":
        return Release(True, f"{said}, installed here ({first.text}) and pinned nowhere", files)
    if how == "within":
        return Release(True, f"{said}, pinned in {first.where} ({first.text}){more}", files)
    return Release(True, f"{said}, which {first.where} ({first.text}){more} allows", files)


def released(path: str, reach: Reach, returned: int) -> tuple[Reach | None, tuple[str, ...]]:
    """`reach` as the releases and settings of the project of `path` have it: None where no release it
    may run rescales in place (no finding: the host leaves the value as it is); `spared_by` where a
    setting spares this value (`returned`: the length of the returned tuple, 0 not known); else with
    the release clause for the message (Megatron's messages say none: its rescale is in place in every
    release from mid-2024, and only a pin before 0.7 changes anything). And the files read."""
    host = BY_NAME.get(reach.context)
    if host is None:
        return reach, ()
    release = host_release(path, host)
    files = release.files
    while not release.rescales and host.then is not None:
        host = BY_NAME[host.then]  # what it returns goes on to the next host, which may rescale it
        release = host_release(path, host)
        files += release.files
        reach = dataclasses.replace(reach, context=host.name)
    if not release.rescales:
        return None, files
    spares = host.setting is not None and host.setting.on_spares_three_tuples
    if spares and returned == 3 and host.setting is not None:
        value = setting(path, host.setting.name)
        if value is not None and value[1]:
            files += (os.path.join(project_root(path), value[0].rsplit(":", 1)[0]),)
            return dataclasses.replace(reach, spared_by=f"{host.setting.name}=True at {value[0]}"), files
    return (reach if host is MEGATRON else dataclasses.replace(reach, release=release.said)), files
