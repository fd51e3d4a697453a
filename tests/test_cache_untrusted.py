"""The cache is untrusted input (it may be checked into a repository): whatever it holds, a run
gives exactly the output of a run without it (no traceback, no lost or invented finding, never an
unknown rule) and the next save rewrites what was malformed."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux_alias_lint.cache import _FIELDS, _header
from flux_alias_lint.cli import main
from flux_alias_lint.rules import RULES

BUG = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach(), "v": loss.view(-1)}\n'
FILES = {"bug.py": BUG, "broken.py": "def f(:\n", "clean.py": "x = 1\n"}
AN_HOUR_AGO = 3600


def _run(tree: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["check", str(tree / "src"), "--format", "json", *args])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    (root / "src").mkdir()
    for name, text in FILES.items():
        path = root / "src" / name
        path.write_text(text)
        st = path.stat()  # old enough for the cache to trust the stamp (see cache._RACY_NS)
        os.utime(path, (st.st_atime - AN_HOUR_AGO, st.st_mtime - AN_HOUR_AGO))
    return root


@pytest.fixture(scope="module")
def expected(tree: Path) -> tuple[int, str, str]:
    return _run(tree, "--no-cache")


@pytest.fixture(scope="module")
def good_cache(tree: Path, expected: tuple[int, str, str]) -> dict[str, Any]:
    cache_dir = tree / "good-cache"
    assert _run(tree, "--cache-dir", str(cache_dir)) == expected
    (cache_file,) = cache_dir.glob("check-*.json")
    data = _read(cache_file)
    assert len(data["files"]) == 3 and any(rows for rows, *_ in data["results"].values())
    return data


def _cache_file(tree: Path, good: dict[str, Any], name: str) -> Path:
    """A cache directory holding the good cache, under a fresh name; its cache file."""
    cache_dir = tree / name
    _run(tree, "--cache-dir", str(cache_dir))
    (cache_file,) = cache_dir.glob("check-*.json")
    _write(cache_file, good)
    return cache_file


def _read(cache_file: Path) -> Any:
    return json.loads(cache_file.read_bytes().partition(b"\n")[2])


def _write(cache_file: Path, document: Any, forge: bool = True) -> None:
    """Write `document` as the cache, with its checksum recomputed unless `forge` is False: a
    forged cache passes the checksum, so only the schema stands between it and the output."""
    body = json.dumps(document).encode()
    header = _header(body) if forge else cache_file.read_bytes().partition(b"\n")[0]
    cache_file.write_bytes(header + b"\n" + body)


def _finding_rows(data: dict[str, Any]) -> list[list[Any]]:
    return [row for rows, *_ in data["results"].values() for row in rows]


def _set_all_rows(change: Callable[[list[Any]], None]) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        for row in _finding_rows(data):
            change(row)

    return mutate


def _set_results(value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        for digest in data["results"]:
            data["results"][digest] = copy.deepcopy(value)

    return mutate


def _error_of(value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        for result in data["results"].values():
            result[1] = value

    return mutate


# Each turns a good cache into a bad one, in one of the ways a stress run found or the schema forbids.
MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "row too short": _set_all_rows(lambda row: row.pop()),
    "row too long": _set_all_rows(lambda row: row.append(1)),
    "line as a string": _set_all_rows(lambda row: row.__setitem__(0, "3")),
    "line as a float": _set_all_rows(lambda row: row.__setitem__(0, 3.0)),
    "line as a bool": _set_all_rows(lambda row: row.__setitem__(0, True)),
    "line zero": _set_all_rows(lambda row: row.__setitem__(0, 0)),
    "end before start": _set_all_rows(lambda row: row.__setitem__(2, 1)),
    "unknown rule": _set_all_rows(lambda row: row.__setitem__(4, "FAL999")),
    "code not a string": _set_all_rows(lambda row: row.__setitem__(4, 1)),
    "message not a string": _set_all_rows(lambda row: row.__setitem__(5, None)),
    "null rows": lambda data: [result.__setitem__(0, None) for result in data["results"].values()],
    "null row": _set_results([[None], None]),
    "result not a list": _set_results({"rows": []}),
    "result too short": _set_results([[]]),
    "int in the error field": _error_of(1),
    "error with a newline": _error_of("bad\nworse"),
    "rows lost": lambda data: [result.__setitem__(0, []) for result in data["results"].values() if result[0]],
    "stamp of strings": lambda data: [entry.__setitem__(0, ["1", "2", "3", "4"]) for entry in data["files"].values()],
    "stamp too short": lambda data: [entry.__setitem__(0, [1]) for entry in data["files"].values()],
    "digest not hex": lambda data: [entry.__setitem__(1, "z" * 32) for entry in data["files"].values()],
    "file entry null": lambda data: [data["files"].__setitem__(key, None) for key in list(data["files"])],
    "files a list": lambda data: data.__setitem__("files", []),
    "results missing": lambda data: data.pop("results"),
    "unknown context": _set_all_rows(lambda row: row.__setitem__(_FIELDS.index("context"), "elsewhere")),
    "step of the wrong shape": _set_all_rows(lambda row: row.__setitem__(_FIELDS.index("reached_by"), [["a.py"]])),
    "dependency not a pair": lambda data: [result.__setitem__(2, [["a.py"]]) for result in data["results"].values()],
    "lookups missing": lambda data: [result.pop() for result in data["results"].values()],
    "lookup of another shape": lambda data: [
        result.__setitem__(3, [["", "m", 0]]) for result in data["results"].values()
    ],
    "lookup of a negative level": lambda data: [
        result.__setitem__(3, [["", "m", -1, None]]) for result in data["results"].values()
    ],
    "lookup of a path for a module": lambda data: [
        result.__setitem__(3, [["", "../../etc/passwd", 0, None]]) for result in data["results"].values()
    ],
    # Printed, a control character would reach the terminal or end a GitHub workflow command.
    "message with an escape sequence": _set_all_rows(lambda row: row.__setitem__(5, "x\x1b]8;;file:///\x1b\\y")),
    "message with a workflow command": _set_all_rows(lambda row: row.__setitem__(5, "x\n::error file=a.py::forged")),
    "report path with a carriage return": _set_all_rows(lambda row: row.__setitem__(7, "r\r")),
    "step with a bidi override": _set_all_rows(
        lambda row: row.__setitem__(_FIELDS.index("reached_by"), [["a.py", 1, "\u202eevil"]])
    ),
    "error with an escape sequence": _error_of("bad\x1b[2J"),
    "result key not a digest": lambda data: data.__setitem__(
        "results", {k + "!": v for k, v in data["results"].items()}
    ),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_malformed_entry_is_dropped_and_rebuilt(
    tree: Path, good_cache: dict[str, Any], expected: tuple[int, str, str], mutation: str
) -> None:
    cache_file = _cache_file(tree, good_cache, "c-" + mutation.replace(" ", "-"))
    data = copy.deepcopy(good_cache)
    MUTATIONS[mutation](data)
    _write(cache_file, data, forge=False)  # corrupted: the checksum no longer matches
    assert _run(tree, "--cache-dir", str(cache_file.parent)) == expected
    assert _read(cache_file) == good_cache  # rebuilt
    _write(cache_file, data)  # forged: the schema is what drops the entry
    if mutation != "rows lost":  # well-formed, so trusted once forged
        assert _run(tree, "--cache-dir", str(cache_file.parent)) == expected
        assert _read(cache_file) == good_cache  # rebuilt
    assert "FAL999" not in _run(tree, "--cache-dir", str(cache_file.parent))[1]


@pytest.mark.parametrize(
    "content",
    [b"", b"{not json", b"[]", b"null", b"\xff\xfe\x00", b"[" * 100_000 + b"]" * 100_000, b'{"files": {}}'],
    ids=["empty", "truncated", "a list", "null", "binary", "deeply nested", "no results"],
)
def test_unusable_cache_file_is_replaced(
    tree: Path, good_cache: dict[str, Any], expected: tuple[int, str, str], content: bytes
) -> None:
    cache_file = _cache_file(tree, good_cache, f"raw-{len(content)}-{content[:3].hex()}")
    cache_file.write_bytes(content)
    assert _run(tree, "--cache-dir", str(cache_file.parent)) == expected
    assert _read(cache_file) == good_cache
    _write(cache_file, None)
    cache_file.write_bytes(cache_file.read_bytes().partition(b"\n")[0] + b"\n" + content)  # forged
    assert _run(tree, "--cache-dir", str(cache_file.parent)) == expected


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink to /dev/zero"])
def test_non_regular_cache_file_is_never_read(
    tree: Path, good_cache: dict[str, Any], expected: tuple[int, str, str], kind: str
) -> None:
    cache_file = _cache_file(tree, good_cache, "special-" + kind.replace(" ", "-").replace("/", "-"))
    cache_file.unlink()
    if kind == "fifo":
        os.mkfifo(cache_file)  # opening it for reading the ordinary way would block forever
    elif kind == "directory":
        cache_file.mkdir()
    else:
        cache_file.symlink_to("/dev/zero")
    assert _run(tree, "--cache-dir", str(cache_file.parent)) == expected


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 2**40)
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["FAL001", "FAL999"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document, the root first."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


def _mutated(data: st.DataObject, good: dict[str, Any]) -> Any:
    """The good cache with one to three places in it replaced by arbitrary JSON."""
    document: Any = copy.deepcopy(good)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(document)))
        replacement = data.draw(JSON)
        if not path:
            document = replacement
            continue
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = replacement
    return document


FUZZ = settings(
    max_examples=100,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(st.data())
def test_fuzzed_cache_never_changes_the_output(
    tree: Path, good_cache: dict[str, Any], expected: tuple[int, str, str], data: st.DataObject
) -> None:
    cache_file = _cache_file(tree, good_cache, "fuzz")
    document = _mutated(data, good_cache)
    _write(cache_file, document, forge=False)
    assert _run(tree, "--cache-dir", str(cache_file.parent)) == expected
    assert _read(cache_file) == good_cache


@FUZZ
@given(st.data())
def test_forged_cache_never_shows_what_the_tool_could_not_have_reported(
    tree: Path, good_cache: dict[str, Any], expected: tuple[int, str, str], data: st.DataObject
) -> None:
    """A forged cache is trusted where it is well-formed (a changed message, an emptied row list),
    as any cache is; what must hold is no traceback and no finding the tool could not have made."""
    cache_file = _cache_file(tree, good_cache, "forged")
    document = _mutated(data, good_cache)
    _write(cache_file, document)
    code, out, err = _run(tree, "--cache-dir", str(cache_file.parent))
    assert "Traceback" not in err
    reported = json.loads(out)
    assert all(f["code"] in RULES and f["line"] >= 1 and isinstance(f["message"], str) for f in reported)
    failing = any(f["severity"] == "error" for f in reported)  # warnings alone pass (unreached, escapes)
    assert code == (2 if "error" in err else 1 if failing else 0)


def test_the_fingerprint_reads_every_module_of_the_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit anywhere in the package (the analysis is in subpackages) must invalidate the cache."""
    from flux_alias_lint import cache

    package = Path(cache.__file__).parent
    read: list[Path] = []
    original = Path.read_bytes

    def recording(self: Path) -> bytes:
        read.append(self)
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", recording)
    cache._build_fingerprint()
    assert {path for path in read if path.is_relative_to(package)} == set(package.rglob("*.py"))
    assert any(path.name == "_version.py" and path.parent.name == "libcst" for path in read)  # which libcst
    assert any(path.parent.name == "analysis" for path in read)


def _indexed(tmp_path: Path) -> tuple[tuple[int, str, str], Path, Any]:
    """A project whose gated file depends on another by its position, checked with a cache: (what an
    uncached run reports, the cached index file, its document)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "bug.py").write_text(BUG)
    (src / "train.py").write_text(  # resolved against bug.py: a dependency, written as its position
        "from bug import loss_func\n\n\ndef forward_step(data_iterator, model):\n    return model(data_iterator), loss_func\n"
    )
    for path in src.iterdir():
        st = path.stat()
        os.utime(path, (st.st_atime - AN_HOUR_AGO, st.st_mtime - AN_HOUR_AGO))
    expected = _run(tmp_path, "--no-cache")
    assert '"context": "megatron"' in expected[1]
    assert _run(tmp_path, "--cache-dir", str(tmp_path / "cache")) == expected
    index_file = tmp_path / "cache" / "index.json"
    return expected, index_file, _read(index_file)


@pytest.mark.parametrize("same", [[9], [-1], [True], ["0"], [0.0], [[0]], "0", {}, None], ids=json.dumps)
def test_forged_index_dependency_positions_are_rebuilt(tmp_path: Path, same: object) -> None:
    """The project index lists a gated file's dependencies as positions in its stamps: a position
    that is out of range or not an int discards the cached index (rebuilt), never a traceback."""
    expected, index_file, good = _indexed(tmp_path)
    ((dependencies, _),) = good["gated"].values()
    assert dependencies[0], "the gated file depends on the other file by its position"
    forged = copy.deepcopy(good)
    for record in forged["gated"].values():
        record[0][0] = same
    _write(index_file, forged)
    assert _run(tmp_path, "--cache-dir", str(tmp_path / "cache")) == expected
    assert _read(index_file) == good  # rebuilt


@pytest.mark.parametrize(
    "forge",
    [
        lambda answers, gated: answers[0][3].append(99),  # a file that is not the project's
        lambda answers, gated: answers[0].__setitem__(1, "sounds"),  # a kind of query there is not
        lambda answers, gated: answers[0].__setitem__(0, "/elsewhere"),  # another project's query
        lambda answers, gated: answers[0].__setitem__(2, 7),  # a word that is not a string
        lambda answers, gated: answers.append(["/elsewhere"]),  # a row of another shape
        lambda answers, gated: gated[2].append(len(answers)),  # a query the table does not hold
    ],
    ids=["file", "kind", "root", "word", "shape", "query"],
)
def test_forged_index_answers_are_rebuilt(tmp_path: Path, forge: Callable[[list, list], None]) -> None:
    """The index keeps which files answer each query the evidence asked, by position, and each gated
    file's queries as positions in that table: anything else discards it (rebuilt), never a traceback."""
    expected, index_file, good = _indexed(tmp_path)
    assert good["answers"], "the evidence asked the project's texts"
    forged = copy.deepcopy(good)
    ((dependencies, _),) = forged["gated"].values()
    forge(forged["answers"], dependencies)
    _write(index_file, forged)
    assert _run(tmp_path, "--cache-dir", str(tmp_path / "cache")) == expected
    assert _read(index_file) == good  # rebuilt


@pytest.mark.parametrize("output_format", ["text", "full", "github", "json"])
def test_a_forged_message_is_never_printed(tree: Path, good_cache: dict[str, Any], output_format: str) -> None:
    """A forged entry whose message holds a newline and escape sequences (a second GitHub workflow
    command, a terminal hyperlink) passes the checksum: it is dropped, the file checked again, and the
    output is what the tool computes, byte for byte."""
    cache_file = _cache_file(tree, good_cache, f"forged-message-{output_format}")
    forged = copy.deepcopy(good_cache)
    for row in _finding_rows(forged):
        row[_FIELDS.index("message")] = "injected\n::error file=setup.py,line=1::injected\x1b]8;;https://x\x1b\\"
    _write(cache_file, forged)
    expected = _run(tree, "--no-cache", "--format", output_format)
    assert _run(tree, "--cache-dir", str(cache_file.parent), "--format", output_format) == expected
    assert "injected" not in expected[1]
    assert _read(cache_file) == good_cache  # the entry was rebuilt from what the tool computed


def _shipped_cache(root: Path) -> tuple[Path, list[str]]:
    """The project's default cache directory, and the names a run writes in it (learnt from a run)."""
    (root / "pyproject.toml").write_text("[tool.flux-alias-lint]\n")
    cache = root / ".flux-alias-lint-cache"
    _run(root)
    names = sorted(p.name for p in cache.iterdir())
    shutil.rmtree(cache)
    assert {".gitignore", "CACHEDIR.TAG", "index.json"} <= set(names) and any(n.startswith("check-") for n in names)
    return cache, names


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with a pyproject.toml (the default cache goes beside it), the working directory."""
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    (root / "src").mkdir()
    for name, text in FILES.items():
        (root / "src" / name).write_text(text)
    monkeypatch.chdir(root)
    return root


def test_dangling_links_in_a_shipped_cache_folder_are_never_followed(project: Path, tmp_path: Path) -> None:
    """A repository ships `.flux-alias-lint-cache/` with every name a run writes as a link to a place
    that does not exist yet: a plain `check` creates nothing there and gives what `-n` gives."""
    cache, names = _shipped_cache(project)
    outside = tmp_path / "outside"
    outside.mkdir()
    cache.mkdir()
    for name in names:
        (cache / name).symlink_to(outside / f"target-{name}")
    expected = _run(project, "--no-cache")
    assert _run(project) == expected
    assert _run(project) == expected  # and warm, from what the first run wrote in the folder itself
    assert list(outside.iterdir()) == []
    assert (cache / ".gitignore").is_symlink() and (cache / "CACHEDIR.TAG").is_symlink()  # left alone
    (check,) = (name for name in names if name.startswith("check-"))
    assert not (cache / check).is_symlink() and _read(cache / check)["files"]  # replaced, not written through


@pytest.mark.parametrize("target", ["an empty folder", "nowhere"])
def test_a_shipped_cache_folder_that_is_a_link_is_not_used(project: Path, tmp_path: Path, target: str) -> None:
    cache, _ = _shipped_cache(project)
    outside = tmp_path / "outside"
    if target == "an empty folder":
        outside.mkdir()
    cache.symlink_to(outside)
    expected = _run(project, "--no-cache")
    assert _run(project) == expected
    assert list(outside.iterdir()) == [] if target == "an empty folder" else not outside.exists()


def test_a_cache_behind_a_linked_folder_is_not_read(project: Path, tmp_path: Path) -> None:
    """A well-formed cache where the shipped folder's link points is neither read nor rewritten."""
    cache, _ = _shipped_cache(project)
    outside = tmp_path / "outside"
    _run(project, "--cache-dir", str(outside))
    (check,) = outside.glob("check-*.json")
    forged = _read(check)
    for row in _finding_rows(forged):
        row[_FIELDS.index("message")] = "read through the link"
    _write(check, forged)
    assert "read through the link" in _run(project, "--cache-dir", str(outside))[1]  # taken where it is the folder
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    cache.symlink_to(outside)
    assert _run(project) == _run(project, "--no-cache")
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before
