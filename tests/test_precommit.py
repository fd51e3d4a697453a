"""The pre-commit hooks, run by the real `pre-commit` against a snapshot of this repository.

pre-commit builds the hook environment the way a user's machine would (a fresh virtualenv,
`pip install` of the hook repository from the package registry), so this takes a few seconds.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from megatron_shapes import FORWARD_STEP

from flux_alias_lint.cli import main

ROOT = Path(__file__).resolve().parents[1]

# The bug from the Flux validation-loss fix, as it stood before it.
SEED = (
    """\
def loss_func(output_tensor):
    loss_sum = output_tensor.sum()
    sample_count = output_tensor.new_tensor(output_tensor.numel())
    return loss_sum, {"loss": (loss_sum.detach(), sample_count.detach())}
"""
    + FORWARD_STEP
)
FIXED = SEED.replace("(loss_sum.detach(),", "(loss_sum.detach().clone(),")

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="pre-commit needs git")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    # No GIT_DIR & co. from an enclosing hook, no outer virtualenv or PYTHONPATH (the hook must run
    # the package pre-commit installed, not a checkout on the path), a private pre-commit cache.
    drop = ("GIT_", "PRE_COMMIT", "VIRTUAL_ENV", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    for role in ("AUTHOR", "COMMITTER"):
        env |= {f"GIT_{role}_NAME": "test", f"GIT_{role}_EMAIL": "test@example.invalid"}
    return env | {"PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}


def git(cwd: Path, env: dict[str, str], *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def snapshot(destination: Path, env: dict[str, str]) -> str:
    """This working tree (tracked and new files, uncommitted edits included) as one commit; its sha."""
    listed = git(ROOT, env, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)
    git(destination, env, "init", "-q")
    git(destination, env, "add", "-A")
    git(destination, env, "commit", "-q", "-m", "snapshot")
    return git(destination, env, "rev-parse", "HEAD").strip()


def pre_commit(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never", *args]
    return subprocess.run(cmd, check=False, cwd=project, env=env, capture_output=True, text=True, timeout=300)


def test_check_hook_fails_fix_hook_rewrites_then_both_pass(tmp_path: Path, env: dict[str, str]) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    sha = snapshot(hooks, env)

    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(SEED)
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hooks}\n    rev: {sha}\n    hooks:\n      - id: flux-alias-lint\n      - id: flux-alias-lint-fix\n"
    )
    git(project, env, "init", "-q")
    git(project, env, "add", "-A")

    check = pre_commit(project, env, "flux-alias-lint")
    assert check.returncode == 1, check.stdout + check.stderr
    assert 'train.py:4:32: FAL001 [*] report["loss"][0] = `loss_sum.detach()`' in check.stdout
    assert (project / "train.py").read_text() == SEED  # the check hook writes nothing

    fix = pre_commit(project, env, "flux-alias-lint-fix")
    assert fix.returncode == 1, fix.stdout + fix.stderr
    assert "files were modified by this hook" in fix.stdout
    assert (project / "train.py").read_text() == FIXED

    again = pre_commit(project, env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("Passed") == 2

    # The hook environment has our package and libcst, and no torch.
    (python,) = Path(env["PRE_COMMIT_HOME"]).glob("repo*/py_env-*/bin/python")
    probe = "import importlib.util as u; print([u.find_spec(m) is not None for m in ('flux_alias_lint', 'libcst', 'torch')])"
    found = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True, env=env).stdout
    assert found.strip() == "[True, True, False]"


def test_exit_non_zero_on_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("train.py").write_text(SEED)
    assert main(["check", "--fix", "--exit-non-zero-on-fix", "train.py"]) == 1  # changed a file
    assert Path("train.py").read_text() == FIXED
    assert main(["check", "--fix", "--exit-non-zero-on-fix", "train.py"]) == 0  # nothing left to change
    Path("train.py").write_text(SEED)
    assert main(["check", "--fix", "train.py"]) == 0  # without the flag, fixing everything is success


def readme_snippet() -> str:
    """The `.pre-commit-config.yaml` the README documents."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## pre-commit\n") :]
    block = re.search(r"```yaml\n(# \.pre-commit-config\.yaml\n.*?)```", section, re.DOTALL)
    assert block is not None, "the pre-commit section has no .pre-commit-config.yaml block"
    return block[1]


def test_readme_snippet_resolves_its_rev(tmp_path: Path, env: dict[str, str]) -> None:
    snippet = readme_snippet()
    rev = re.search(r"^\s+rev: (\S+)", snippet, re.MULTILINE)[1]
    # A clone of this repository, as pre-commit would fetch it from where it is hosted.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, capture_output=True, env=env)
    if subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=clone, env=env, check=False).returncode:
        if git(ROOT, env, "rev-parse", "--is-shallow-repository").strip() == "true":
            pytest.skip(f"{rev} is not in this shallow checkout's history")
        pytest.fail(f"the README's rev {rev} is not a commit of this repository")

    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(SEED)
    config = re.sub(r"^(\s+- repo: )\S+", rf"\g<1>{clone}", snippet, count=1, flags=re.MULTILINE)
    (project / ".pre-commit-config.yaml").write_text(config)
    git(project, env, "init", "-q")
    git(project, env, "add", "-A")
    check = pre_commit(project, env)
    assert check.returncode == 1, check.stdout + check.stderr  # the hook ran at that rev and found the bug
    assert "train.py:4:32: FAL001" in check.stdout


LOSSES = SEED.replace(FORWARD_STEP, "")
HANDED_OVER = "from losses import loss_func\n" + FORWARD_STEP


def test_the_readme_rev_has_the_cross_file_verdict_the_readme_promises(tmp_path: Path, env: dict[str, str]) -> None:
    """The README's pre-commit section says a commit that changes only the file handing a loss
    function to Megatron gets the error in the loss function's own file: the hook at the README's
    rev, installed by pre-commit from a clone of this repository, must do it (at an older rev the
    commit passes)."""
    snippet = readme_snippet()
    assert "changes only the file handing a loss function to Megatron" in (ROOT / "README.md").read_text()
    rev = re.search(r"^\s+rev: (\S+)", snippet, re.MULTILINE)[1]
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, capture_output=True, env=env)
    if subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=clone, env=env, check=False).returncode:
        pytest.skip(f"{rev} is not in this checkout's history (test_doc_numbers.py says whether it should be)")

    project = tmp_path / "project"
    project.mkdir()
    (project / "losses.py").write_text(LOSSES)
    (project / "train.py").write_text("from losses import loss_func\n")
    config = re.sub(r"^(\s+- repo: )\S+", rf"\g<1>{clone}", snippet, count=1, flags=re.MULTILINE)
    (project / ".pre-commit-config.yaml").write_text(config)
    git(project, env, "init", "-q")
    git(project, env, "add", "-A")
    git(project, env, "commit", "-q", "--no-verify", "-m", "a loss function nothing hands over: a warning")
    # The commit that hands it over, alone: pre-commit checks the staged train.py only.
    (project / "train.py").write_text(HANDED_OVER)
    git(project, env, "add", "train.py")
    cmd = [sys.executable, "-m", "pre_commit", "run", "--color", "never"]
    run = subprocess.run(cmd, check=False, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "losses.py:4:32: FAL001" in run.stdout and "[megatron via train.py:" in run.stdout, run.stdout
