"""The same code gets the same verdict however it is handed over.

- A folder without `.git` (a tarball, `git archive`, Docker's `COPY . .`) and its `git init`-ed copy:
  the project is the folder declaring it (`pyproject.toml`, `setup.py`, `setup.cfg`, `requirements*.txt`,
  `requirements/`, ...) or the folder the run was given, never each directory apart
  (`index/files.py`, `project_root`). Run through `check`, pre-commit's files handed over, flake8, the
  editor and `verify`.
- stdin named after a file (`--stdin-filename`) and the file itself: the file's project, its index, its
  verdict; a text that is not the saved file's gets its own evidence on top, as the editor's does.
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from fixture_corpus import ProjectCase, project_cases

from flux_alias_lint.cli import main
from flux_alias_lint.index import files

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
VENDORED = FIXTURES / "FAL001" / "vendored_schedule_divides_a_copy"  # a Megatron fork running its own schedule
PINNED = FIXTURES / "FAL005" / "neg_pinned_at_the_root_trainer_in_a_package"  # transformers==4.46.2 at the root
HANDED_OVER = FIXTURES / "FAL001" / "dataclass_report_handed_over_by_another_file"  # losses.py, via train.py

# The project cases whose files sit in more than one folder: a flat folder is its own project either way.
NESTED = [case for case in project_cases() if any(len(p.relative_to(case.folder).parts) > 1 for p in case.modules())]


def _copies(tmp_path: pathlib.Path, folder: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """The folder as a plain copy and as a `git init`-ed one, under the same name."""
    plain, repository = tmp_path / "plain" / folder.name, tmp_path / "git" / folder.name
    for copy in (plain, repository):
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("expected"))
    subprocess.run(["git", "init", "-q", str(repository)], check=True)
    return plain, repository


def _check(
    where: pathlib.Path, capsys: pytest.CaptureFixture[str], *argv: str, stdin: bytes | None = None
) -> tuple[int, list[dict]]:
    """`check ARGV --output-format json` run in `where`: the exit code and the findings."""
    cwd = os.getcwd()
    os.chdir(where)
    saved = sys.stdin
    try:
        if stdin is not None:
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
        code = main(["check", *argv, "--no-cache", "--output-format", "json"])
    finally:
        os.chdir(cwd)
        sys.stdin = saved
    return code, json.loads(capsys.readouterr().out)


def test_the_nested_project_cases_are_there() -> None:
    assert {VENDORED, PINNED} <= {case.folder for case in NESTED}


@pytest.mark.parametrize("case", NESTED, ids=lambda c: c.id)
def test_a_folder_without_git_gets_the_git_checkouts_findings(
    case: ProjectCase, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain, repository = _copies(tmp_path, case.folder)
    assert _check(plain, capsys, ".") == _check(repository, capsys, ".")
    # Named from above, as `check` in its parent folder: the folder named is the project all the same.
    assert _check(plain.parent, capsys, plain.name) == _check(repository.parent, capsys, repository.name)


def test_a_pin_at_the_root_holds_for_a_package_below_it(tmp_path: pathlib.Path, capsys) -> None:
    """The issue's Trainer project: `transformers==4.46.2` in the root's requirements.txt, a release whose
    `training_step` divides out of place; the Trainer subclass in a package folder. No finding either way,
    however the files are named."""
    plain, repository = _copies(tmp_path, PINNED)
    trainer = "trainer_app/logging_trainer.py"
    for project in (plain, repository):
        assert _check(project, capsys, ".") == (0, [])
        assert _check(project, capsys, trainer) == (0, [])
        assert _check(project / "trainer_app", capsys, ".") == (0, [])  # the requirements.txt above it still holds
    (plain / "requirements.txt").unlink()  # nothing pinned: every release, 4.46.0 and 4.46.1 among them
    code, found = _check(plain, capsys, trainer)
    assert code == 1 and [f["context"] for f in found] == ["transformers-training-step"]


def test_the_fork_running_its_own_schedule_is_judged_by_it_without_git(tmp_path: pathlib.Path, capsys) -> None:
    """The issue's Megatron fork: its vendored schedule divides a copy, so its loss function is a warning
    (`unreached`), never a `megatron` error, as a folder too."""
    plain, _ = _copies(tmp_path, VENDORED)
    code, found = _check(plain, capsys, ".")
    assert code == 0 and [f["context"] for f in found] == ["unreached"]


def test_the_files_handed_over_one_by_one_get_the_folders_verdict(tmp_path: pathlib.Path, capsys) -> None:
    """pre-commit's way: the changed files named, not the folder; and `check $(find . -name '*.py')`."""
    plain, repository = _copies(tmp_path, VENDORED)
    named = sorted(str(p.relative_to(plain)) for p in plain.rglob("*.py"))
    whole = _check(repository, capsys, ".")
    assert _check(plain, capsys, "--force-exclude", *named) == whole
    assert _check(plain, capsys, "loss.py", "megatron/training.py") == whole


def test_flake8_gets_the_same_verdict_in_a_folder_without_git(tmp_path: pathlib.Path) -> None:
    """flake8 reports errors only: the fork's warning is none, in the folder as in the checkout."""
    plain, repository = _copies(tmp_path, VENDORED)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    runs = [
        subprocess.run(
            [sys.executable, "-m", "flake8", "--select", "FAL", "--fal-unreached", "error", "."],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        for project in (plain, repository)
    ]
    assert runs[0].stdout == runs[1].stdout and runs[0].returncode == runs[1].returncode == 1, runs
    assert "[unreached" in runs[0].stdout and "megatron" not in runs[0].stdout


def test_the_editor_gets_the_same_verdict_in_a_folder_without_git(tmp_path: pathlib.Path) -> None:
    """The server's workspace folder is what `check`'s path is: the fork's loss function is `unreached`."""
    from flux_alias_lint.server import lint_document, project_index

    plain, repository = _copies(tmp_path, VENDORED)
    contexts = []
    for project in (plain, repository):
        loss = str(project / "loss.py")
        with files.run_given([]):
            files.folders_given([str(project)])  # what the server does with the client's workspace folders
            contexts.append(
                [f.context for f in lint_document(loss, (project / "loss.py").read_text(), project_index(loss))]
            )
    assert contexts == [["unreached"], ["unreached"]]


def test_verify_gets_the_same_verdict_in_a_folder_without_git(tmp_path: pathlib.Path, capsys) -> None:
    pytest.importorskip("megatron.core")
    plain, repository = _copies(tmp_path, VENDORED)
    runs = []
    for project in (plain, repository):
        cwd = os.getcwd()
        os.chdir(project)
        try:
            code = main(["verify", ".", "--format", "json"])
        finally:
            os.chdir(cwd)
        verdicts = json.loads(capsys.readouterr().out)
        runs.append((code, [(v["path"], v["line"], v["context"], v["confirmed"]) for v in verdicts]))
    assert runs[0] == runs[1]
    assert [context for _, _, context, _ in runs[0][1]] == ["unreached"]


def test_the_project_root_rule(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each marker makes a project of the folder holding it; the git work tree wins over one below it;
    the folder given holds a file no marker places, the outermost of the two otherwise."""
    monkeypatch.chdir(tmp_path)
    for marker in ("pyproject.toml", "setup.py", "setup.cfg", "requirements-dev.txt", "requirements/", ".git/"):
        folder = tmp_path / f"with{marker.strip('/').replace('.', '_')}" / "pkg"
        folder.mkdir(parents=True)
        (folder / "a.py").write_text("")
        target = folder.parent / marker
        target.mkdir() if marker.endswith("/") else target.write_text("")
        with files.run_given([str(folder / "a.py")]):
            assert files.project_root(str(folder / "a.py")) == str(folder.parent.resolve()), marker
    (tmp_path / "with_git" / "pkg" / "pyproject.toml").write_text("")
    assert files.project_root("with_git/pkg/a.py") == str((tmp_path / "with_git").resolve())
    plain = tmp_path / "plain" / "deep"
    plain.mkdir(parents=True)
    (plain / "b.py").write_text("")
    assert files.project_root("plain/deep/b.py") == str(plain.resolve())  # nothing given: its own folder
    with files.run_given(["plain"]):
        assert files.project_root("plain/deep/b.py") == str(plain.parent.resolve())
    with files.run_given(["plain/deep/b.py", "withsetup_py/pkg/a.py"]):  # several: the folder holding them all
        assert files.project_root("plain/deep/b.py") == str(tmp_path.resolve())
        assert files.project_root("withsetup_py/pkg/a.py") == str(
            tmp_path.resolve()
        )  # above its setup.py: the outermost
    with files.run_given(["withsetup_py/pkg/a.py"]):
        assert files.project_root("withsetup_py/pkg/a.py") == str((tmp_path / "withsetup_py").resolve())


# stdin


def _stdin_and_file(project: pathlib.Path, name: str, capsys, *argv: str) -> tuple[object, object]:
    text = (project / name).read_bytes()
    return (
        _check(project, capsys, "--stdin-filename", name, "-", *argv, stdin=text),
        _check(project, capsys, name, *argv),
    )


@pytest.mark.parametrize("git", [True, False], ids=["git", "folder"])
def test_stdin_gets_the_files_verdict(tmp_path: pathlib.Path, capsys, git: bool) -> None:
    """The issue's `cat losses.py | check --stdin-filename losses.py -`: `megatron via train.py`, an
    error, as `check losses.py` says; and the same for every file of the nested projects."""
    project = _copies(tmp_path, HANDED_OVER)[git]
    by_stdin, by_file = _stdin_and_file(project, "losses.py", capsys)
    assert by_stdin == by_file
    assert by_file[0] == 1 and [f["context"] for f in by_file[1]] == ["megatron"]


@pytest.mark.parametrize("case", NESTED, ids=lambda c: c.id)
def test_stdin_gets_each_files_verdict_in_the_nested_projects(
    case: ProjectCase, tmp_path: pathlib.Path, capsys
) -> None:
    plain, _ = _copies(tmp_path, case.folder)
    for path in sorted(plain.rglob("*.py")):
        name = str(path.relative_to(plain))
        (code, by_stdin), (_, by_file) = _stdin_and_file(plain, name, capsys)
        # `check FILE` also reports another file whose verdict FILE decides (docs/usage.md, pre-commit): stdin
        # stands for one file, and reports that file.
        assert by_stdin == [f for f in by_file if f["path"] == name], name
        assert code == (1 if any(f["severity"] == "error" for f in by_stdin) else 0)


def test_stdin_that_is_not_the_saved_file_is_the_file_as_it_would_be_saved(tmp_path: pathlib.Path, capsys) -> None:
    """An editor's unsaved buffer: the project on disk, the text standing in for the file. A loss
    function added below the one handed over gets its own text's verdict; the one handed over keeps
    its `megatron` context from train.py."""
    project = _copies(tmp_path, HANDED_OVER)[1]
    added = (
        "\n\ndef eval_loss(output_tensor):\n    loss = torch.mean(output_tensor)\n"
        '    return loss, {"eval loss": loss.detach()}\n'
    )
    text = (project / "losses.py").read_text() + added
    by_stdin = _check(project, capsys, "--stdin-filename", "losses.py", "-", stdin=text.encode())
    (project / "losses.py").write_text(text)
    assert by_stdin == _check(project, capsys, "losses.py")
    assert [f["context"] for f in by_stdin[1]] == ["megatron", "unreached"]


def test_verify_on_stdin_gets_the_files_verdicts(tmp_path: pathlib.Path, capsys) -> None:
    pytest.importorskip("megatron.core")
    project = _copies(tmp_path, HANDED_OVER)[1]
    text = (project / "losses.py").read_bytes()
    runs = []
    for argv, stdin in ((["--stdin-filename", "losses.py", "-"], text), (["losses.py"], None)):
        cwd, saved = os.getcwd(), sys.stdin
        os.chdir(project)
        try:
            if stdin is not None:
                sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
            runs.append((main(["verify", *argv, "--format", "json"]), json.loads(capsys.readouterr().out)))
        finally:
            os.chdir(cwd)
            sys.stdin = saved
    assert runs[0] == runs[1]
    assert [(v["context"], v["confirmed"]) for v in runs[0][1]] == [("megatron", True)]
