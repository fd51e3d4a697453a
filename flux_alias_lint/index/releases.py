"""Which release of a host a project runs: its declared dependencies, and whether they rescale in place.

A host (`facts/hosts.py`) rescales in place only in some releases. The releases a project may run
are read from what it declares, in the nearest directory at or above a file that declares the
host's distribution, up to the project's root: a pinned lockfile there (poetry.lock, uv.lock,
pdm.lock, Pipfile.lock: the one version), else every range its files allow: pyproject `[project]
dependencies` and `optional-dependencies` and poetry's `[tool.poetry.dependencies]` (`^`, `~`) and
groups, `requirements*.txt`/`requirement*.txt` and `requirements/*.txt` and the files they `-r`,
setup.cfg `install_requires` and extras, setup.py read with `ast`, never run (the literals of
`install_requires=`/`extras_require=`; for a distribution those do not name, every string literal
that module-level statements assign, as in `_deps = [...]` tables read through a helper), conda's
environment.yml (its entries and `pip:` list). In one file, the lines of one list narrow each other
and an extra narrows the base requirement it is installed with; different files, extras alone and
lines under different environment markers are alternatives. Failing all, the release installed
beside the linter. Each directory is read once per process. Nothing declared and nothing
installed: every release."""

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
from ..facts.projects import DECLARING_FILES, LOCK_FILES, REQUIREMENTS_FILE, REQUIREMENTS_FOLDERS
from .files import project_root
from .host_models import default, factors
from .reach import Reach
from .settings import computed, given, numbers, setting
from .versions import EVERY, Versions, allowed, any_of, intersect, poetry_specifiers, relation

_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)")


@dataclasses.dataclass(frozen=True)
class Declaration:
    """One declaration of a distribution: the file (its name in the nearest directory declaring the
    distribution, the one meant) and what it says."""

    where: str
    text: str  # `transformers==4.46.0`, as written (or `transformers 4.46.0` for a lock or an install)
    versions: Versions


@dataclasses.dataclass(frozen=True)
class Declared:
    """What a project declares of a distribution: the lines bounding it, and the versions they allow."""

    lines: tuple[Declaration, ...]
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


# What a reader yields: (group, requirement). A file's lines of one group are installed together (they
# narrow each other); BASE applies whenever the project is installed, an extra only on top of it.
Line = tuple[str, str]
BASE = ""


def _requirements(path: str) -> Iterator[Line]:
    yield from ((BASE, line) for line in _requirements_file(path, set()))


def _pyproject(path: str) -> Iterator[Line]:
    data = _toml(path)
    project = data.get("project", {})
    yield from ((BASE, line) for line in _strings(project.get("dependencies", [])))
    for extra, lines in (project.get("optional-dependencies") or {}).items():
        yield from ((f"extra {extra}", line) for line in _strings(lines))
    # poetry: `[tool.poetry.dependencies]` (an `optional = true` entry is an extra's) and its groups.
    poetry = data.get("tool", {}).get("poetry", {})
    tables = [("", poetry.get("dependencies"))]
    tables += [(f"group {name}", group.get("dependencies")) for name, group in (poetry.get("group") or {}).items()]
    for table_group, table in tables:
        for name, value in table.items() if isinstance(table, dict) else ():
            constraint = value.get("version") if isinstance(value, dict) else value
            if name == "python" or not isinstance(constraint, str):
                continue
            optional = isinstance(value, dict) and value.get("optional") is True
            group = table_group or ("extra" if optional else BASE)
            try:
                yield group, f"{name} {poetry_specifiers(constraint)}"
            except ValueError:
                yield group, name  # a constraint it cannot read allows any release


def _setup_cfg(path: str) -> Iterator[Line]:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return
    if parser.has_option("options", "install_requires"):
        lines = parser.get("options", "install_requires").splitlines()
        yield from ((BASE, line) for line in lines if line.strip())
    if parser.has_section("options.extras_require"):
        for extra, value in parser.items("options.extras_require"):
            yield from ((f"extra {extra}", line) for line in value.splitlines() if line.strip())


def _literals(node: ast.expr) -> Iterator[str]:
    """The strings of a literal list, tuple or set, or of a dict's values, at any depth."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        for element in node.elts:
            yield from _literals(element)
    elif isinstance(node, ast.Dict):
        for value in node.values:
            yield from _literals(value)


def _setup_py(path: str) -> Iterator[Line]:
    """The string literals of `install_requires=` (BASE) and `extras_require=` (an extra each) keywords: a
    list (a dict of lists), or a module-level name assigned one (`install_requires = [...]`, then
    `install_requires=install_requires`; also `extras_deps["x"] = [...]`). Then, in group `literal`,
    every string of a literal a module-level statement assigns (`_deps = ["transformers>=4.41", ...]`
    read through a helper): used for a distribution the keywords do not name, where it reads as a
    name and a version specifier (a bare name or prose in a module-level list is no pin)."""
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
                        group = BASE if node.arg == "install_requires" else f"extra {listed.lineno}.{listed.col_offset}"
                        yield from (
                            (group, e.value)
                            for e in listed.elts
                            if isinstance(e, ast.Constant) and isinstance(e.value, str)
                        )
    for at, stmt in enumerate(tree.body):
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            yield from ((f"literal {at}.{n}", text) for n, text in enumerate(_literals(stmt.value)))


def _conda(entry: str) -> str:
    """A conda dependency (`name=1.2=build`, `channel::name>=1.2`) as a PEP 508 requirement; conda's
    `=1.2` is `1.2.*`."""
    entry = entry.strip().rpartition("::")[2]
    name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", entry)
    if name is None:
        return entry
    spec = entry[name.end() :].strip()
    if re.fullmatch(r"=[^=<>!~,|\s]+(?:=\S*)?", spec):
        version = spec[1:].split("=", 1)[0].removesuffix("*").removesuffix(".")
        return f"{name[0]}=={version}.*"
    if re.fullmatch(r"[^=<>!~,|\s*][^\s]*(?:\s+\S+)?", spec):
        return f"{name[0]}=={spec.split()[0]}"  # `name 1.2` (a version alone, then a build)
    return f"{name[0]} {spec}"


def _environment(path: str) -> Iterator[Line]:
    """A conda environment's `dependencies` and its `pip:` list: one environment, installed together."""
    import yaml  # a dependency of libcst; imported here, as few projects have one (16 ms)

    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return
    for entry in (data.get("dependencies") or []) if isinstance(data, dict) else ():
        if isinstance(entry, str):
            yield BASE, _conda(entry)
        elif isinstance(entry, dict):
            yield from ((BASE, line) for line in _strings(entry.get("pip")))


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


def _together(lines: list[tuple[Declaration, str]]) -> Versions:
    """The versions one group's lines allow together: the unmarked lines narrow each other; lines under
    an environment marker apply where it holds, so lines under different markers are alternatives."""
    unmarked = EVERY
    by_marker: dict[str, Versions] = {}
    for declaration, marker in lines:
        if marker:
            by_marker[marker] = intersect(by_marker.get(marker, EVERY), declaration.versions)
        else:
            unmarked = intersect(unmarked, declaration.versions)
    if by_marker:
        return intersect(unmarked, tuple(i for versions in by_marker.values() for i in versions))
    return unmarked


def _in_file(groups: dict[str, list[tuple[Declaration, str]]]) -> Declared:
    """What one file allows of a distribution. The base requirement always applies and an extra is
    installed on top of it, so with a base line the file allows the base's releases (base and extra
    together are within them); extras alone are alternatives, as are setup.py's loose literals, read
    only where no keyword names the distribution."""
    named = {group: lines for group, lines in groups.items() if not group.startswith("literal")}
    chosen = {BASE: named[BASE]} if BASE in named else (named or groups)
    return Declared(
        tuple(d for lines in chosen.values() for d, _ in lines),
        tuple(i for lines in chosen.values() for i in _together(lines)),
    )


_READERS = {  # one for each of `DECLARING_FILES`
    "pyproject.toml": _pyproject,
    "setup.cfg": _setup_cfg,
    "setup.py": _setup_py,
    "environment.yml": _environment,
    "environment.yaml": _environment,
}


@functools.cache
def _declared_in(directory: str) -> tuple[dict[str, Declared], tuple[str, ...]]:
    """What the files of one directory declare, by normalised distribution (a lockfile's pins
    replacing the ranges), and the files read. Each file is an alternative way to install the
    project (requirements-cpu.txt, requirements-gpu.txt), so the directory allows what any file does."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return {}, ()
    found: dict[str, dict[str, dict[str, list[tuple[Declaration, str]]]]] = {}  # dist, file, group
    locked: dict[str, list[Declaration]] = {}
    read: list[str] = []

    def add(where: str, lines: Iterator[Line]) -> None:
        for group, line in lines:
            parsed = _requirement(line)
            loose = group.startswith("literal")  # any string of setup.py: a requirement only if pinned
            if parsed is None or (loose and not parsed[1]):
                continue
            try:
                versions = allowed(parsed[1])
            except ValueError:
                if loose:
                    continue  # prose ("transformers for diffusion"), not a requirement
                versions = EVERY  # a range it cannot read allows, as far as it knows, any release
            text = line.split("#", 1)[0].split(";", 1)[0].strip()
            marker = line.split("#", 1)[0].partition(";")[2].strip()
            by_group = found.setdefault(parsed[0], {}).setdefault(where, {})
            by_group.setdefault(group, []).append((Declaration(where, text, versions), marker))

    files = [n for n in names if REQUIREMENTS_FILE.fullmatch(n)]
    for folder in REQUIREMENTS_FOLDERS:
        if os.path.isdir(os.path.join(directory, folder)):
            sub = sorted(os.listdir(os.path.join(directory, folder)))
            files += [f"{folder}/{n}" for n in sub if n.endswith(".txt")]
    for name in files:
        read.append(os.path.join(directory, name))
        add(name, _requirements(os.path.join(directory, name)))
    for name in DECLARING_FILES:
        if name in names:
            read.append(os.path.join(directory, name))
            add(name, _READERS[name](os.path.join(directory, name)))
    for name in LOCK_FILES:
        if name in names:
            read.append(os.path.join(directory, name))
            for dist, version in _locked(os.path.join(directory, name)):
                try:
                    versions = allowed(f"=={version}")
                except ValueError:
                    continue
                locked.setdefault(dist, []).append(Declaration(name, f"{dist} {version}", versions))
    declared = {}
    for dist, by_file in found.items():
        each = [_in_file(groups) for groups in by_file.values()]
        declared[dist] = Declared(
            tuple(d for one in each for d in one.lines), tuple(i for one in each for i in one.versions)
        )
    for dist, pins in locked.items():
        declared[dist] = Declared(tuple(pins), tuple(i for d in pins for i in d.versions))
    return declared, tuple(read)


@functools.cache
def installed(distribution: str) -> str | None:
    """The version of `distribution` installed beside the linter, or None."""
    try:
        return importlib.metadata.version(distribution)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


# `__version__ = "4.57.0.dev0"` (annotated or not), as a package states its own release.
_OWN_VERSION = re.compile(rb"""^__version__\s*(?::\s*str\s*)?=\s*['"]([^'"\n]+)['"]""", re.M)


@functools.cache
def _own_release(directory: str, package: str) -> tuple[Declared | None, str | None]:
    """The release of `package` a directory is when it is a checkout of that package's own repository
    (`directory/package/` or `directory/src/package/`): the `__version__` its `_version.py`, `version.py`
    or `__init__.py` states. And the file read."""
    for base in (directory, os.path.join(directory, "src")):
        folder = os.path.join(base, *package.split("."))
        for name in ("_version.py", "version.py", "__init__.py"):
            file = os.path.join(folder, name)
            try:
                with open(file, "rb") as handle:
                    match = _OWN_VERSION.search(handle.read(64 * 1024))
            except OSError:
                continue
            if match is None:
                continue
            version = match[1].decode("utf-8", "replace")
            try:
                versions = allowed(f"=={version}")
            except ValueError:
                return None, file
            text = f"{package} {version}, this checkout's own release"
            return Declared((Declaration(os.path.relpath(file, directory), text, versions),), versions), file
    return None, None


def declarations(path: str, *distributions: str, package: str | None = None) -> tuple[Declared | None, tuple[str, ...]]:
    """What the nearest directory at or above `path` (up to its project's root) declaring one of `distributions`
    (the names one project is published under: `mosaicml`, `composer`) declares of it, or that is a checkout of
    the host's own repository (holds its import `package`) and states its release; else the release of the
    first installed; else None. And the files read."""
    root = project_root(path)
    directory = os.path.dirname(os.path.realpath(path))
    names = [normalised(distribution) for distribution in distributions]
    read: list[str] = []
    while True:
        found, files = _declared_in(directory)
        read += files
        declared = [found[name] for name in names if name in found]
        if declared:
            return Declared(
                tuple(d for one in declared for d in one.lines), tuple(i for one in declared for i in one.versions)
            ), tuple(read)
        own, file = _own_release(directory, package) if package is not None else (None, None)
        read += [file] if file else []
        if own is not None:
            return own, tuple(read)
        if directory == root or os.path.dirname(directory) == directory or not directory.startswith(root):
            break
        directory = os.path.dirname(directory)
    for distribution in distributions:
        version = installed(distribution)
        if version is None:
            continue
        try:
            versions = allowed(f"=={version}")
        except ValueError:
            return None, tuple(read)
        return Declared((Declaration("installed", f"{distribution} {version}", versions),), versions), tuple(read)
    return None, tuple(read)


def host_release(path: str, host: Host) -> Release:
    """Whether `host` rescales a loss returned by a function of the file `path` in place, in the
    releases its project may run, and the clause saying which release and where it is pinned."""
    found, files = (
        declarations(path, *host.distributions, package=host.package) if path not in ("-", "<string>") else (None, ())
    )
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
    if found is None:
        return Release(True, f"{said}; {host.distribution} is not pinned in the project", files)
    how = relation(found.versions, releases)
    first = found.lines[0]
    more = f" and {len(found.lines) - 1} more" if len(found.lines) > 1 else ""
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
    for factor in sorted(factors(host.name)):  # the setting the host's write multiplies or divides by (its models)
        set_to = numbers(path, factor)
        if set_to and all(value == 1 for _, value in set_to):
            files += tuple(os.path.join(project_root(path), where.rsplit(":", 1)[0]) for where, _ in set_to)
            return None, files  # a write by 1 leaves the value as it is
        if not set_to and default(host.name, factor) == 1 and given(path, factor) is None:
            return None, files  # never given, the host's own default 1 holds (`Accelerator()`)
    spares = host.setting is not None and host.setting.on_spares_three_tuples
    if spares and returned == 3 and host.setting is not None:
        value = setting(path, host.setting.name)
        if value is not None and value[1]:
            where, line = value[0].rsplit(":", 1)
            setting_file = os.path.join(project_root(path), where)
            files += (setting_file,)
            # Set in the checked file itself (a test module configures itself): its line says where.
            at = f"line {line}" if os.path.realpath(setting_file) == os.path.realpath(path) else value[0]
            return dataclasses.replace(reach, spared_by=f"{host.setting.name}=True at {at}"), files
        where = computed(path, host.setting.name)
        if where is not None:  # computed where no literal turns it on: the verdict depends on the run's value
            files += (os.path.join(project_root(path), where.rsplit(":", 1)[0]),)
            return dataclasses.replace(reach, depends_on=where), files
    return (reach if host is MEGATRON else dataclasses.replace(reach, release=release.said)), files
