"""What a ruff user expects of the command line, each case run as a subprocess on a tree built on disk.

Config cases are monorepo layouts: several packages, each with or without its own pyproject.toml.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from megatron_shapes import FORWARD_STEP

ROOT = Path(__file__).resolve().parents[1]

# `import torch`: in a function nothing is seen to call, the loss must show that it is a tensor.
BUG = (
    'import torch\n\n\ndef loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach()}\n' + FORWARD_STEP
)
FIXED = BUG.replace("detach()}", "detach().clone()}")
SAME = 'import torch\n\n\ndef loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss}\n'
CONVERT = 'import torch\n\n\ndef loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach().float()}\n'


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def config(*lines: str) -> str:
    return "[tool.flux-alias-lint]\n" + "".join(line + "\n" for line in lines)


def cli(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CI", None)
    return subprocess.run(
        [sys.executable, "-m", "flux_alias_lint", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def codes(run: subprocess.CompletedProcess[str]) -> list[tuple[str, str]]:
    """(path, code) of each finding in text output."""
    found = []
    for line in run.stdout.splitlines():
        parts = line.split(": ", 2)
        if len(parts) >= 2 and parts[1].startswith("FAL"):
            found.append((parts[0].rsplit(":", 2)[0], parts[1].split()[0]))
    return found


# ---------------------------------------------------------------- 1. config and CLI semantics


def test_each_file_takes_its_nearest_config(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "a_pkg/a.py": BUG,
            "b_pkg/pyproject.toml": config('ignore = ["FAL001"]'),
            "b_pkg/b.py": BUG,
            "b_pkg/sub/pyproject.toml": config('select = ["FAL00"]'),  # nearest wins, parents are not merged
            "b_pkg/sub/c.py": BUG,
        },
    )
    run = cli(tmp_path, "check", "--no-cache", "b_pkg/b.py", "a_pkg/a.py", "b_pkg/sub/c.py")
    assert run.returncode == 1, run.stderr
    assert codes(run) == [("a_pkg/a.py", "FAL001"), ("b_pkg/sub/c.py", "FAL001")]
    # From inside a package: a file with no config above it takes the one found from the working
    # directory, as in ruff.
    assert codes(cli(tmp_path / "b_pkg", "check", "--no-cache", "../a_pkg", ".")) == [("sub/c.py", "FAL001")]
    # --config applies one file to every path.
    (tmp_path / "all.toml").write_text('ignore = ["FAL001"]\n')
    assert codes(cli(tmp_path, "check", "--no-cache", "--config", "all.toml", ".")) == []


def test_excludes_come_from_the_nearest_config(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": config(),
            "gen/x.py": BUG,
            "svc/pyproject.toml": config('extend-exclude = ["gen"]'),
            "svc/gen/x.py": BUG,
        },
    )
    assert codes(cli(tmp_path, "check", "--no-cache", ".")) == [("gen/x.py", "FAL001")]


def test_cli_selection_beats_config(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": config('select = ["FAL001", "FAL002"]', 'ignore = ["FAL004"]'),
            "m/convert.py": CONVERT,
            "m/same.py": SAME,
            "m/bug.py": BUG,
        },
    )
    base = ("check", "--no-cache", "m")
    assert [c for _, c in codes(cli(tmp_path, *base))] == ["FAL001", "FAL002"]
    assert [c for _, c in codes(cli(tmp_path, *base, "--select", "FAL004"))] == ["FAL004"]
    assert [c for _, c in codes(cli(tmp_path, *base, "--extend-select", "FAL004"))] == ["FAL001", "FAL004", "FAL002"]
    # Repeated flags add up.
    assert [c for _, c in codes(cli(tmp_path, *base, "--select", "FAL001", "--select", "FAL004"))] == [
        "FAL001",
        "FAL004",
    ]
    assert codes(cli(tmp_path, *base, "--ignore", "FAL001", "--ignore", "FAL002")) == []
    # Within one source, the more specific selector wins.
    (tmp_path / "pyproject.toml").write_text(
        config('select = ["FAL004"]', 'ignore = ["FAL"]', 'extend-select = ["FAL002"]')
    )
    assert [c for _, c in codes(cli(tmp_path, *base))] == ["FAL004", "FAL002"]


def test_per_file_ignores_and_file_level_noqa(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": config("[tool.flux-alias-lint.per-file-ignores]", '"tests/*" = ["FAL001"]'),
            "tests/test_x.py": BUG + SAME.replace("loss_func", "other"),
            "src/x.py": BUG,
            "src/blanket.py": "# flux-alias-lint: noqa\n" + BUG,
            "src/ruff.py": "# ruff: noqa: FAL001\n" + BUG,
            "src/other.py": "# ruff: noqa: FAL002\n" + BUG,
        },
    )
    run = cli(tmp_path, "check", "--no-cache", ".")
    assert codes(run) == [("src/other.py", "FAL001"), ("src/x.py", "FAL001"), ("tests/test_x.py", "FAL002")]
    # --fix leaves what is suppressed alone.
    cli(tmp_path, "check", "--no-cache", "--fix", ".")
    assert (tmp_path / "src/ruff.py").read_text() == "# ruff: noqa: FAL001\n" + BUG


def test_bad_config_names_the_file(tmp_path: Path) -> None:
    write(tmp_path, {"pkg/pyproject.toml": config('ignore = ["FAL009"]'), "pkg/x.py": BUG})
    run = cli(tmp_path, "check", ".")
    assert run.returncode == 2
    assert run.stderr.startswith(f"flux-alias-lint: error: {tmp_path / 'pkg' / 'pyproject.toml'}: `ignore`: unknown")
    run = cli(tmp_path, "check", "--select", "E501", ".")
    assert run.returncode == 2 and "--select: unknown rule selector 'E501'" in run.stderr


def test_usage_errors_are_the_subcommands(tmp_path: Path) -> None:
    write(tmp_path, {"x.py": BUG})
    for args in (["--form", "json"], ["--bogus"], ["--output-format", "xml"], ["-", "x.py"]):
        run = cli(tmp_path, "check", *args)
        assert run.returncode == 2, args
        assert run.stderr.startswith("usage: flux-alias-lint check "), run.stderr
    assert cli(tmp_path, "verify", "--prof", "latest").stderr.startswith("usage: flux-alias-lint verify ")
    assert json.loads(cli(tmp_path, "check", "--format", "json", "x.py").stdout)[0]["code"] == "FAL001"
    assert json.loads(cli(tmp_path, "check", "--output-format", "json", "x.py").stdout)[0]["code"] == "FAL001"


def test_stdin_filename_implies_stdin(tmp_path: Path) -> None:
    write(tmp_path, {"pkg/pyproject.toml": config('ignore = ["FAL002"]'), "pkg/on_disk.py": BUG})
    run = cli(tmp_path, "check", "--stdin-filename", "pkg/buffer.py", stdin=SAME + BUG.replace("loss_func", "f"))
    assert codes(run) == [("pkg/buffer.py", "FAL001")]  # stdin, not the tree; pkg's config applies
    run = cli(tmp_path, "check", "--stdin-filename", "pkg/buffer.py", "--fix", stdin=BUG)
    assert run.returncode == 0 and run.stdout == FIXED
    assert cli(tmp_path, "check", "--stdin-filename", "x.py", "pkg").returncode == 2


# ---------------------------------------------------------------- 2. unparseable files are findings


def test_unparseable_file_is_a_finding_in_every_format(tmp_path: Path) -> None:
    write(tmp_path, {"legacy.py": 'print "hello"\n', "ok.py": BUG})
    text = cli(tmp_path, "check", "--no-cache", ".")
    assert text.returncode == 1 and text.stderr == ""
    assert text.stdout.splitlines()[0].startswith("legacy.py:1:1: FAL000 syntax error: Missing parentheses")
    assert cli(tmp_path, "check", "--no-cache", "--exit-zero", ".").returncode == 0
    (row, _) = json.loads(cli(tmp_path, "check", "--output-format", "json", ".").stdout)
    assert (row["path"], row["code"], row["rule"], row["fixable"]) == ("legacy.py", "FAL000", "invalid-syntax", False)
    github = cli(tmp_path, "check", "--output-format", "github", ".").stdout
    assert github.startswith("::error file=legacy.py,line=1,col=1,endLine=1,endColumn=1,title=FAL000::syntax error")
    sarif = json.loads(cli(tmp_path, "check", "--output-format", "sarif", "--exit-zero", ".").stdout)
    result = sarif["runs"][0]["results"][0]
    assert result["ruleId"] == "FAL000" and "fixes" not in result
    gitlab = json.loads(cli(tmp_path, "check", "--output-format", "gitlab", ".").stdout)
    assert gitlab[0]["check_name"] == "FAL000" and gitlab[0]["location"]["path"] == "legacy.py"
    doc = cli(tmp_path, "rule", "FAL000")
    assert doc.returncode == 0 and doc.stdout.startswith("# FAL000 (invalid-syntax)")
    # Only an ignore naming it exactly turns it off.
    assert [c for _, c in codes(cli(tmp_path, "check", "--select", "FAL002", "."))] == ["FAL000"]
    assert codes(cli(tmp_path, "check", "--ignore", "FAL000,FAL001", ".")) == []


# ---------------------------------------------------------------- 3. pipes, Ctrl-C, read-only files


def test_closed_pipe_is_quiet(tmp_path: Path) -> None:
    write(tmp_path, {"m.py": BUG})
    reader, writer = os.pipe()
    os.close(reader)  # like `| head -1` that has already exited
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(writer, "wb") as stdout:
        run = subprocess.run(
            [sys.executable, "-m", "flux_alias_lint", "check", "--no-cache", "."],
            cwd=tmp_path,
            env=env,
            stdout=stdout,
            stderr=subprocess.PIPE,
            check=False,
            timeout=300,
        )
    assert run.returncode == 141
    assert run.stderr == b""


def _blocked_reading_stdin(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/syscall").read_text().startswith("0 0x0 ")  # read(0, ...)
    except OSError:
        pytest.skip("needs /proc/<pid>/syscall")


def test_ctrl_c_exits_130_without_a_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "flux_alias_lint", "check", "-"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 300
    while not _blocked_reading_stdin(proc.pid):  # started, and waiting in main() for its input
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130
    assert err == b""


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        pytest.skip("needs /proc/<pid>/task/<pid>/children")


def test_ctrl_c_in_the_worker_pool_is_quiet(tmp_path: Path) -> None:
    # Enough source for the pool (256 kB and more), checked for seconds; Ctrl-C at a terminal
    # signals the whole process group: the parent and every worker.
    write(tmp_path, {f"pkg/m{i}.py": BUG * 40 for i in range(300)})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "flux_alias_lint", "check", "--no-cache", "-j", "2", "pkg"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while not _children(proc.pid):  # the workers are forked from main(): imports are done
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert err == b"" and out == b""


def test_read_only_files_are_not_fixed(tmp_path: Path) -> None:
    write(tmp_path, {"rw/bug.py": BUG, "ro_file/bug.py": BUG, "ro_dir/bug.py": BUG})
    (tmp_path / "ro_file/bug.py").chmod(0o444)
    (tmp_path / "ro_dir").chmod(0o555)
    try:
        run = cli(tmp_path, "check", "--no-cache", "--fix", ".")
        assert (tmp_path / "rw/bug.py").read_text() == FIXED
        for name in ("ro_file/bug.py", "ro_dir/bug.py"):
            assert (tmp_path / name).read_text() == BUG
        assert oct((tmp_path / "ro_file/bug.py").stat().st_mode & 0o777) == "0o444"
        assert run.returncode == 1  # the two findings are still there
        assert codes(run) == [("ro_dir/bug.py", "FAL001"), ("ro_file/bug.py", "FAL001")]
        warnings = [line for line in run.stderr.splitlines() if line.startswith("flux-alias-lint: warning")]
        assert warnings == [
            "flux-alias-lint: warning: ro_dir/bug.py: read-only directory, not fixed",
            "flux-alias-lint: warning: ro_file/bug.py: read-only file, not fixed",
        ]
        assert "Scanned 3 files" in run.stderr and "Findings: 3 (FAL001: 3)." in run.stderr
        assert "Fixed 1, changed 1 file." in run.stderr and "Not fixed: 2 files" in run.stderr
        assert "Found 3 errors (1 fixed, 2 remaining).\n2 files were not fixed" in run.stdout
    finally:
        (tmp_path / "ro_dir").chmod(0o755)


def test_no_python_files_warns(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text("# x\n")
    run = cli(tmp_path, "check", "docs")
    assert run.returncode == 0
    assert run.stderr == "flux-alias-lint: warning: No Python files found under the given path(s)\n"


# ---------------------------------------------------------------- 4. options and messages


def test_output_file_show_fixes_and_statistics(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": BUG, "b.py": SAME, "c.py": CONVERT})
    run = cli(tmp_path, "check", "--no-cache", "--output-file", "report.json", "--output-format", "json", ".")
    assert run.returncode == 1 and run.stdout == ""
    assert [row["code"] for row in json.loads((tmp_path / "report.json").read_text())] == ["FAL001", "FAL002", "FAL004"]

    stats = json.loads(cli(tmp_path, "check", "--statistics", "--output-format", "json", ".").stdout)
    assert stats == [
        {"code": "FAL001", "name": "detached-alias-in-report", "count": 1, "fixable": True},
        {"code": "FAL002", "name": "backprop-tensor-in-report", "count": 1, "fixable": True},
        {"code": "FAL004", "name": "may-return-self-conversion-in-report", "count": 1, "fixable": True},
    ]

    run = cli(tmp_path, "check", "--no-cache", "--fix", "--show-fixes", "a.py", "b.py")
    assert run.returncode == 0
    assert run.stdout == (
        "Fixed 2 errors:\n"
        "- a.py:\n    1 \u00d7 FAL001 (detached-alias-in-report)\n"
        "- b.py:\n    1 \u00d7 FAL002 (backprop-tensor-in-report)\n"
        "Found 2 errors (2 fixed, 0 remaining).\n"
    )


def test_messages_are_short_and_marked_fixable(tmp_path: Path) -> None:
    write(tmp_path, {"b.py": SAME})
    line = cli(tmp_path, "check", "b.py").stdout.splitlines()[0]
    assert line == (
        'b.py:6:27: FAL002 [*] report["loss"] = `loss` is the backprop tensor `loss`; an in-place rescale of it '
        "after this function returns (as Megatron's schedule does; none is seen in this project) would change the "
        "reported value too (flux-alias-lint rule FAL002) [unreached, warning]"
    )
    run = cli(ROOT, "check", "--no-cache", "--output-format", "json", "fixtures")
    rows = json.loads(run.stdout)
    assert {row["code"] for row in rows} == {"FAL001", "FAL002", "FAL003", "FAL004", "FAL005"}
    # One line: what the entry is (the expression shortened), what happens at run time, the rule.
    assert max(len(row["message"]) for row in rows) <= 300
    assert all(row["message"].endswith(f"(flux-alias-lint rule {row['code']})") for row in rows)
    assert not any(".clone()" in row["message"] for row in rows)
    consequences = {row["context"]: row["message"].split("; ", 1)[1] for row in rows}
    # What Megatron does depends on the returned tuple (megatron-core 0.12 on): ×cp ÷microbatches for
    # `(loss, report)`, ÷num_tokens ÷microbatches for `(loss, num_tokens, report)`.
    # (A write in a function Megatron calls, to the input it hands over, says that write: FAL005 in-function's.)
    megatron = {
        row["message"].split("; ", 1)[1]
        for row in rows
        if row["context"] == "megatron"
        and row["severity"] == "error"
        and "changed by the in-place" not in row["message"]
    }
    # Under the project's calculate_per_token_loss=True a 3-tuple's loss is not rescaled: a warning saying where.
    spared = {
        row["message"].split("; ", 1)[1]
        for row in rows
        if row["context"] == "megatron" and "changed by the in-place" not in row["message"]
    } - megatron
    assert spared and all(m.startswith("Megatron leaves a 3-tuple's loss as it is under calculate_per") for m in spared)
    # what Megatron does comes first; then when, or the setting the project computes that would spare it
    assert {re.split(" (?:after|unless) ", m)[0] for m in megatron} == {
        "Megatron multiplies it in place by the context-parallel size and divides it by num_microbatches",
        "Megatron divides it in place by num_tokens and num_microbatches",
        "Megatron divides it in place by num_microbatches",  # a capture's loss: how it is returned is not known
    }
    assert consequences["in-place-caller"].startswith("the caller at ")
    text = cli(ROOT, "check", "--no-cache", "fixtures").stdout.splitlines()
    assert sum(" [*] " in line for line in text) == sum(row["fixable"] for row in rows)


# ---------------------------------------------------------------- 5. syntax newer than the interpreter

PEP701 = 'import torch\n\n\ndef loss_func(x):\n    loss = x.sum()\n    print(f"{", ".join(["a", "b"])}")\n    return loss, {"loss": loss.detach()}\n'


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the running Python parses PEP 701 itself")
def test_newer_syntax_is_parsed_where_the_project_targets_it(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "new/pyproject.toml": '[project]\nname = "new"\nrequires-python = ">=3.12"\n',
            "new/m.py": PEP701,
            "pinned/pyproject.toml": config('target-version = "py312"'),
            "pinned/m.py": PEP701,
            "old/pyproject.toml": '[project]\nname = "old"\nrequires-python = ">=3.10"\n',
            "old/m.py": PEP701,
            "new/broken.py": "def f(:\n",
        },
    )
    run = cli(tmp_path, "check", "--no-cache", ".")
    assert codes(run) == [
        ("new/broken.py", "FAL000"),  # a real syntax error stays one, in CPython's words
        ("new/m.py", "FAL001"),
        ("old/m.py", "FAL000"),  # 3.10 does not allow it: a syntax error there
        ("pinned/m.py", "FAL001"),
    ]
    assert "new/broken.py:1:7: FAL000 syntax error: invalid syntax" in run.stdout
    assert codes(cli(tmp_path, "check", "--no-cache", "--target-version", "py312", "old")) == [("old/m.py", "FAL001")]
    assert cli(tmp_path, "check", "--no-cache", "--fix", "new/m.py").returncode == 0
    assert (tmp_path / "new/m.py").read_text() == PEP701.replace("detach()}", "detach().clone()}")
