"""The GitHub Action (`action.yml`) and the wheel, as a user without a package index gets them.

`run_action` reads `action.yml` and does what a runner does with a composite action: it evaluates each
step's `if:`, substitutes `${{ ... }}` (inputs, `steps.<id>.outputs`, `github.action_path`,
`runner.temp`), runs each `run:` step with its `env:` in bash, and carries `GITHUB_ENV` and
`GITHUB_OUTPUT` from step to step. It cannot run a `uses:` step (another action, from GitHub): it skips
it and says so in the result. The action's own code is a snapshot of this working tree, as `uses:`
would download it at a ref. Installing it builds the wheel and fetches libcst from the package
registry, so this takes some seconds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("git") is None or shutil.which("bash") is None, reason="needs git, bash")


def snapshot(destination: Path) -> Path:
    """This working tree's files as git would ship them (tracked and new, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)
    return destination


def clean_env(tmp: Path) -> dict[str, str]:
    """No virtualenv, Python path or pytest setting of this run; this interpreter's directory off PATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VIRTUAL_ENV", "PYTHON", "PYTEST", "GITHUB_", "RUNNER_", "PIP_"))
    }
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(sys.prefix))
    # pip's own settings (where the package index is) stay; its cache and config are the user's.
    env |= {k: v for k, v in os.environ.items() if k.startswith("PIP_INDEX") or k.startswith("PIP_FIND")}
    return env | {"HOME": os.environ.get("HOME", str(tmp)), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@dataclass
class ActionRun:
    steps: list[str] = field(default_factory=list)  # one line per step: ran, skipped (and why)
    outputs: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    returncode: int = 0
    stdout: str = ""
    stderr: str = ""


_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _value(expression: str, context: dict[str, object]) -> str:
    """A context lookup (`inputs.paths`, `steps.sarif.outputs.file`); nothing else is in action.yml."""
    if not re.fullmatch(r"[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)*", expression):
        raise ValueError(f"action.yml uses an expression this runner does not evaluate: {expression!r}")
    value: object = context
    for part in expression.split("."):
        assert isinstance(value, dict), expression
        value = value.get(part, "")
    return str(value)


def _condition(expression: str, context: dict[str, object]) -> bool:
    expression = _EXPRESSION.sub(lambda m: m[1], expression).strip()
    compared = re.fullmatch(r"(\S+)\s*(==|!=)\s*'([^']*)'", expression)
    if compared is None:
        raise ValueError(f"action.yml uses a condition this runner does not evaluate: {expression!r}")
    equal = _value(compared[1], context) == compared[3]
    return equal if compared[2] == "==" else not equal


def _substitute(text: str, context: dict[str, object]) -> str:
    return _EXPRESSION.sub(lambda m: _value(m[1], context), text)


def _read_file_commands(path: Path) -> dict[str, str]:
    """`NAME=value` lines (GITHUB_ENV, GITHUB_OUTPUT); the multi-line form is not used by action.yml."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    assert not any("<<" in line for line in lines), lines
    return dict(line.split("=", 1) for line in lines if line)


def run_action(action_path: Path, workspace: Path, inputs: dict[str, str], env: dict[str, str]) -> ActionRun:
    """Run action.yml's steps as a runner would, in `workspace`, with `inputs` given by the workflow."""
    action = yaml.safe_load((action_path / "action.yml").read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    unknown = set(inputs) - set(action["inputs"])
    assert not unknown, f"action.yml has no input {unknown}"
    given = {name: inputs.get(name, str(spec.get("default", ""))) for name, spec in action["inputs"].items()}
    temp = workspace.parent / "runner-temp"
    temp.mkdir(exist_ok=True)
    files = {name: temp / f"{name.lower()}.txt" for name in ("GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH")}
    steps: dict[str, dict[str, dict[str, str]]] = {}
    context: dict[str, object] = {
        "inputs": given,
        "steps": steps,
        "github": {"action_path": str(action_path), "workspace": str(workspace)},
        "runner": {"temp": str(temp)},
    }
    result = ActionRun()
    carried: dict[str, str] = {}
    for number, step in enumerate(action["runs"]["steps"], 1):
        name = step.get("name") or step.get("uses") or f"step {number}"
        if "if" in step and not _condition(step["if"], context):
            result.steps.append(f"skipped (if: {step['if']}): {name}")
            continue
        if "uses" in step:
            result.steps.append(f"not run (uses: {step['uses']}, an action from GitHub): {name}")
            continue
        assert step.get("shell") == "bash", f"{name}: only bash steps run the same on every runner"
        for file in files.values():
            file.write_text("")
        step_env = env | carried | {name: str(path) for name, path in files.items()}
        step_env |= {
            "GITHUB_ACTION_PATH": str(action_path),
            "GITHUB_WORKSPACE": str(workspace),
            "RUNNER_TEMP": str(temp),
        }
        step_env |= {key: _substitute(str(value), context) for key, value in step.get("env", {}).items()}
        script = _substitute(step["run"], context)
        run = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=workspace,
            env=step_env,
            capture_output=True,
            text=True,
            check=False,
            timeout=900,
        )
        result.stdout += run.stdout
        result.stderr += run.stderr
        carried |= _read_file_commands(files["GITHUB_ENV"])
        for directory in files["GITHUB_PATH"].read_text().splitlines():
            carried["PATH"] = directory + os.pathsep + carried.get("PATH", env["PATH"])
        if "id" in step:
            steps[step["id"]] = {"outputs": _read_file_commands(files["GITHUB_OUTPUT"])}
        result.steps.append(f"ran (exit {run.returncode}): {name}")
        if run.returncode:
            result.returncode = run.returncode
            break
    result.env = carried
    result.outputs = {
        name: _substitute(str(spec["value"]), context) for name, spec in action.get("outputs", {}).items()
    }
    return result


SEED = textwrap.dedent(
    """\
    def loss_func(output_tensor):
        loss_sum = output_tensor.sum()
        return loss_sum, {"loss": loss_sum.detach()}


    def forward_step(data_iterator, model):
        return model(next(data_iterator)), loss_func


    def train(forward_backward_func, data_iterator, model):
        forward_backward_func(forward_step_func=forward_step, data_iterator=data_iterator, model=model)
    """
)
UNREACHED = "def stats(x):\n    total = x.sum()\n    return total, {'total': total.detach()}\n"


@pytest.fixture(scope="module")
def action_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return snapshot(tmp_path_factory.mktemp("action"))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    project = tmp_path / "workspace"
    (project / "src").mkdir(parents=True)
    (project / "src" / "train.py").write_text(SEED)
    (project / "src" / "stats.py").write_text(UNREACHED)
    (project / "pyproject.toml").write_text('[project]\nname = "user-project"\nrequires-python = ">=3.11"\n')
    return project


def test_the_action_installs_itself_and_reports_sarif_and_annotations(
    action_path: Path, workspace: Path, tmp_path: Path
) -> None:
    run = run_action(action_path, workspace, {"paths": "src", "python-version": ""}, clean_env(tmp_path))
    assert run.steps == [
        "skipped (if: inputs.python-version != ''): actions/setup-python@v5",
        "ran (exit 0): Install flux-alias-lint",
        "ran (exit 0): flux-alias-lint (SARIF)",
        "not run (uses: github/codeql-action/upload-sarif@v3, an action from GitHub): "
        "github/codeql-action/upload-sarif@v3",
        "ran (exit 1): flux-alias-lint",  # the error fails the job
    ], run.stdout[-3000:] + run.stderr[-3000:]
    assert run.returncode == 1

    # The SARIF log the upload step is given: both findings, the error and the warning.
    sarif = json.loads(Path(run.outputs["sarif-file"]).read_text(encoding="utf-8"))
    results = {
        (r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], r["ruleId"], r["level"])
        for r in sarif["runs"][0]["results"]
    }
    assert results == {("src/train.py", "FAL001", "error"), ("src/stats.py", "FAL001", "warning")}

    # Annotations, with paths relative to the workspace.
    assert re.search(r"^::error file=src/train\.py,line=3,", run.stdout, re.MULTILINE), run.stdout
    assert re.search(r"^::warning file=src/stats\.py,line=3,", run.stdout, re.MULTILINE), run.stdout

    # What it installed: this tree's version, with libcst and what libcst needs, nothing else.
    venv_python = Path(run.env["FLUX_ALIAS_LINT"]).parent / "python"
    assert_only_libcst(venv_python)


def test_the_action_installs_what_it_is_given_and_passes_args(
    action_path: Path, readme_wheel: tuple[Path, Path], workspace: Path, tmp_path: Path
) -> None:
    inputs = {
        "paths": "src/stats.py",
        "args": "--unreached ignore",
        "install": str(readme_wheel[0]),
        "python-version": "",
        "upload-sarif": "false",
    }
    run = run_action(action_path, workspace, inputs, clean_env(tmp_path))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "skipped (if: inputs.upload-sarif == 'true'): github/codeql-action/upload-sarif@v3" in run.steps
    assert "::" not in run.stdout  # the warning is ignored, so no annotation
    # It installed the wheel it was given, not its own code.
    venv_python = Path(run.env["FLUX_ALIAS_LINT"]).parent / "python"
    probe = (
        "from importlib import metadata; print(metadata.distribution('flux-alias-lint').read_text('direct_url.json'))"
    )
    # Run away from this checkout: an editable install's `flux_alias_lint.egg-info` here would be found first.
    origin = subprocess.run([venv_python, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert readme_wheel[0].name in origin, origin
    sarif = json.loads(Path(run.outputs["sarif-file"]).read_text(encoding="utf-8"))
    assert sarif["runs"][0]["results"] == []


def assert_only_libcst(python: Path) -> None:
    """The virtualenv holds flux-alias-lint, libcst and libcst's own requirements: no torch, no megatron."""
    probe = textwrap.dedent(
        """\
        import json
        from importlib import metadata
        from pip._vendor.packaging.requirements import Requirement
        def needed(dist):  # what a plain install of `dist` pulls here: no extras, markers evaluated
            requirements = map(Requirement, metadata.requires(dist) or [])
            return [r.name.lower() for r in requirements if not r.marker or r.marker.evaluate({"extra": ""})]
        wanted, todo = set(), ["flux-alias-lint"]
        while todo:
            dist = todo.pop()
            if dist not in wanted:
                wanted.add(dist)
                todo += needed(dist)
        installed = {d.metadata["Name"].lower().replace("_", "-") for d in metadata.distributions()}
        print(json.dumps({"installed": sorted(installed - {"pip", "setuptools"}), "wanted": sorted(wanted),
                          "flux": metadata.version("flux-alias-lint")}))
        """
    )
    run = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout)
    assert found["installed"] == found["wanted"], found
    assert "libcst" in found["installed"] and not {"torch", "megatron-core"} & set(found["installed"]), found
    import flux_alias_lint

    assert found["flux"] == flux_alias_lint.__version__


def test_the_readme_names_what_the_wheel_pulls() -> None:
    """The wheel line's comment names every distribution a plain install pulls on this Python: the
    dependencies (pyproject.toml) and, as installed here, what libcst requires in turn."""
    from importlib import metadata

    from packaging.requirements import Requirement

    def needed(dist: str) -> list[str]:
        requirements = map(Requirement, metadata.requires(dist) or [])
        return [r.name for r in requirements if not r.marker or r.marker.evaluate({"extra": ""})]

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    direct = [Requirement(line).name for line in project["dependencies"]]
    pulled = {name.lower() for name in direct + [n for dist in direct for n in needed(dist)]}
    comment = readme_install_block(comments=True)[2].split("#", 1)[1]
    named = {word.lower() for word in re.findall(r"[\w.-]+", comment)}
    assert pulled <= named, f"the README says {comment.strip()!r}; a plain install pulls {sorted(pulled)}"


def readme_install_block(comments: bool = False) -> list[str]:
    """The README's install commands from a clone and from a wheel (its first bash block after Quick
    start's), with their comments or not."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Quick start\n") :]
    blocks = re.findall(r"```bash\n(.*?)```", section.split("\n## ", 2)[1], re.DOTALL)
    assert len(blocks) == 2, "Quick start has the quick-start lines, then the install block"
    lines = [line if comments else re.sub(r"\s+#.*", "", line) for line in blocks[1].splitlines()]
    assert len(lines) == 3 and all("/path/to/flux-alias-lint" in line or "dist/" in line for line in lines), lines
    return lines


@pytest.fixture(scope="module")
def readme_wheel(action_path: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The README's wheel lines, run in a clean virtualenv: (the wheel, the virtualenv's bin/)."""
    work = tmp_path_factory.mktemp("wheel")
    env = clean_env(work)
    subprocess.run(["python3", "-m", "venv", str(work / "venv")], check=True, env=env)
    env |= {"PATH": f"{work / 'venv' / 'bin'}{os.pathsep}{env['PATH']}", "VIRTUAL_ENV": str(work / "venv")}
    for line in readme_install_block()[1:]:
        command = line.replace("/path/to/flux-alias-lint", str(action_path))
        run = subprocess.run(
            ["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, check=False, timeout=900
        )
        assert run.returncode == 0, f"{command}\n{run.stdout[-2000:]}{run.stderr[-2000:]}"
    (wheel,) = (work / "dist").iterdir()
    return wheel, work / "venv" / "bin"


def test_the_readme_installs_the_wheel_with_libcst_alone(readme_wheel: tuple[Path, Path], tmp_path: Path) -> None:
    wheel, bin_dir = readme_wheel
    assert wheel.name == f"flux_alias_lint-{version()}-py3-none-any.whl"
    assert_only_libcst(bin_dir / "python")
    (tmp_path / "train.py").write_text(SEED)
    lint = subprocess.run(
        [bin_dir / "flux-alias-lint", "check", "train.py"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert lint.returncode == 1 and "train.py:3:31: FAL001" in lint.stdout, lint.stdout + lint.stderr
    # The README's first line, from a clone, is what the action runs by default (its first test runs it).
    action = (ROOT / "action.yml").read_text(encoding="utf-8")
    assert readme_install_block()[0] == "pip install /path/to/flux-alias-lint"
    assert 'pip install --quiet --disable-pip-version-check "${INSTALL:-$GITHUB_ACTION_PATH}"' in action


def version() -> str:
    import flux_alias_lint

    return flux_alias_lint.__version__
