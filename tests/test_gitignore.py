"""`.gitignore` handling, checked against git itself: what we walk is what `git ls-files -o --exclude-standard` lists."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux_alias_lint.discover import DEFAULT_EXCLUDE, Excluder, discover
from flux_alias_lint.gitignore import GitIgnore, parse_line

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is the oracle")

# No user or system git configuration: a global excludes file would change git's answer.
GIT_ENV = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True).stdout


def git_py_files(repo: Path) -> set[str]:
    """The .py files git does not ignore (nothing is committed, so all are untracked)."""
    out = git(repo, "ls-files", "-z", "--others", "--exclude-standard")
    return {name for name in out.split("\0") if name.endswith(".py")}


def our_py_files(repo: Path, top: Path | None = None) -> set[str]:
    files, errors = discover([str(top or repo)], Excluder(DEFAULT_EXCLUDE, repo), gitignore=GitIgnore())
    assert errors == []
    return {Path(f).relative_to(repo).as_posix() for f in files}


def make_tree(root: Path, files: list[str]) -> None:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


ROOT_GITIGNORE = r"""
# a comment, then patterns of every kind
*.gen.py
!keep.gen.py
/top_only.py
build/
!build/keep.py
only_dir.py/
docs/**/skip_*.py
logs
data/*
!data/wanted/
\#hash.py
\!bang.py
trailing.py   
spaced\ name.py
[abc]_class.py
[!x-z]_neg.py
n?.py
deep/**
**/anywhere/*.py
"""  # noqa: W291 (the trailing spaces after trailing.py are the point)

PKG_GITIGNORE = """\
!*.gen.py
local.py
/anchored.py
sub/deep.py
"""

FILES = [
    "top_only.py",
    "a/top_only.py",
    "x.gen.py",
    "keep.gen.py",
    "pkg/y.gen.py",
    "build/b.py",
    "build/keep.py",
    "a/build/c.py",
    "a/only_dir.py",
    "b/only_dir.py/inner.py",
    "docs/x/y/skip_1.py",
    "docs/skip_2.py",
    "docs/x/keep.py",
    "logs/l.py",
    "a/logs/l.py",
    "data/d.py",
    "data/wanted/w.py",
    "data/other/o.py",
    "#hash.py",
    "!bang.py",
    "trailing.py",
    "spaced name.py",
    "a_class.py",
    "d_class.py",
    "a_neg.py",
    "y_neg.py",
    "n1.py",
    "n12.py",
    "deep/d1.py",
    "deep/e/d2.py",
    "x/deep/d3.py",
    "anywhere/q.py",
    "m/n/anywhere/r.py",
    "m/n/anywhere/s/t.py",
    "pkg/local.py",
    "pkg/sub/local.py",
    "pkg/anchored.py",
    "pkg/sub/anchored.py",
    "pkg/sub/deep.py",
    "excluded_by_info.py",
    "plain.py",
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    make_tree(root, FILES)
    (root / ".gitignore").write_text(ROOT_GITIGNORE)
    (root / "pkg" / ".gitignore").write_text(PKG_GITIGNORE)
    (root / ".git" / "info" / "exclude").write_text("excluded_by_info.py\n")
    return root


def test_agrees_with_git_on_every_kind_of_pattern(repo: Path) -> None:
    expected = git_py_files(repo)
    assert our_py_files(repo) == expected
    # The cases that make the comparison mean something.
    for kept in ("a/top_only.py", "keep.gen.py", "pkg/y.gen.py", "a/only_dir.py", "data/wanted/w.py", "n12.py"):
        assert kept in expected
    for ignored in ("top_only.py", "build/keep.py", "b/only_dir.py/inner.py", "docs/skip_2.py", "trailing.py"):
        assert ignored not in expected
    for ignored in ("spaced name.py", "pkg/sub/local.py", "pkg/sub/deep.py", "excluded_by_info.py", "#hash.py"):
        assert ignored not in expected


def test_walking_a_subdirectory_applies_the_gitignores_above_it(repo: Path) -> None:
    expected = {f for f in git_py_files(repo) if f.startswith("pkg/")}
    assert our_py_files(repo, repo / "pkg") == expected == {"pkg/y.gen.py", "pkg/sub/anchored.py"}


def test_a_nested_repository_starts_afresh(repo: Path) -> None:
    nested = repo / "vendor" / "lib"
    make_tree(nested, ["x.gen.py", "own.py", "plain.py"])
    git(nested, "init", "-q")
    (nested / ".gitignore").write_text("own.py\n")
    assert our_py_files(nested) == git_py_files(nested) == {"x.gen.py", "plain.py"}


def test_outside_a_git_work_tree_gitignore_is_not_read(tmp_path: Path) -> None:
    make_tree(tmp_path, ["a.py", "b.py"])
    (tmp_path / ".gitignore").write_text("a.py\n")
    assert our_py_files(tmp_path) == {"a.py", "b.py"}


def test_explicit_paths_are_kept_unless_force_exclude(repo: Path) -> None:
    excluder = Excluder(DEFAULT_EXCLUDE, repo)
    named = [str(repo / "x.gen.py"), str(repo / "logs" / "l.py"), str(repo / "logs")]
    files, _ = discover(named, excluder, force_exclude=False, gitignore=GitIgnore())
    assert files == [str(repo / "x.gen.py"), str(repo / "logs" / "l.py")]
    assert discover(named, excluder, force_exclude=True, gitignore=GitIgnore()) == ([], [])


@pytest.mark.parametrize(
    ("line", "path", "is_dir", "matches"),
    [
        ("a/**/b", "a/b", False, True),
        ("a/**/b", "a/x/y/b", False, True),
        ("a/**/b", "ab", False, False),
        ("**/b", "x/b", False, True),
        ("a/**", "a/x/y", False, True),
        ("a/**", "a", True, False),
        ("a**b", "a/b", False, False),  # not next to a slash: a plain star
        ("*.py", "x/y.py", False, True),
        ("/x/*.py", "x/y/z.py", False, False),
        ("d/", "d", False, False),
        ("d/", "d", True, True),
        ("[a-c]?", "b9", False, True),
        ("[a-c]?", "d9", False, False),
        ("[[:digit:]]x", "7x", False, True),
        ("x[/]y", "x/y", False, False),
        ("foo\\*", "foo*", False, True),
        ("foo\\*", "foobar", False, False),
    ],
)
def test_pattern_semantics(line: str, path: str, is_dir: bool, matches: bool) -> None:
    pattern = parse_line(line)
    assert pattern is not None
    assert pattern.matches(path, is_dir) is matches


@pytest.mark.parametrize("line", ["", "   ", "# comment", "!", "/"])
def test_lines_that_are_no_pattern(line: str) -> None:
    assert parse_line(line) is None


# ---- differential: random .gitignore files against git --------------------------------

FUZZ_FILES = [
    "a.py",
    "b.py",
    "ab.py",
    "a/a.py",
    "a/b.py",
    "a/b/c.py",
    "a/b/a.py",
    "b/a/a.py",
    "b/c.py",
    "c/a/b/ab.py",
    "x1.py",
    "a/x2.py",
]
SEGMENTS = ["a", "b", "c", "*", "**", "?", "a*", "*.py", "a.py", "x?.py", "[ab]*", "[!a]*.py", "ab.py"]
pattern_lines = st.builds(
    lambda neg, lead, segs, trail: (
        ("!" if neg else "") + ("/" if lead else "") + "/".join(segs) + ("/" if trail else "")
    ),
    st.booleans(),
    st.booleans(),
    st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3),
    st.booleans(),
)


@pytest.fixture(scope="module")
def fuzz_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    git(root, "init", "-q")
    make_tree(root, FUZZ_FILES)
    return root


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(root_lines=st.lists(pattern_lines, max_size=5), nested_lines=st.lists(pattern_lines, max_size=3))
def test_random_gitignores_agree_with_git(fuzz_repo: Path, root_lines: list[str], nested_lines: list[str]) -> None:
    (fuzz_repo / ".gitignore").write_text("\n".join(root_lines) + "\n")
    (fuzz_repo / "a" / ".gitignore").write_text("\n".join(nested_lines) + "\n")
    assert our_py_files(fuzz_repo) == git_py_files(fuzz_repo)
