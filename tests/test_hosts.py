"""The host table (`facts/hosts.py`), the releases a project declares (`index/releases.py`, read with the
PEP 440 evaluator of `index/versions.py`) and the settings it sets (`index/settings.py`)."""

from __future__ import annotations

import os
import pathlib

import pytest
from fixture_corpus import FIXTURES, PROJECT_LINE, ROOT, Kind, ProjectCase

from flux_alias_lint.facts.hosts import BY_NAME, COMPUTE_LOSS, HOSTS, MEGATRON, TRAINING_STEP, Host
from flux_alias_lint.finding import ERROR, WARNING
from flux_alias_lint.index import releases, settings
from flux_alias_lint.index.handoffs import SCHEDULE_CALLS
from flux_alias_lint.index.project import ProjectIndex
from flux_alias_lint.index.reach import Reach, Step
from flux_alias_lint.index.releases import declarations, host_release, released
from flux_alias_lint.index.settings import setting
from flux_alias_lint.index.versions import allowed, any_of, key, poetry_specifiers, relation
from flux_alias_lint.lint import check_text
from flux_alias_lint.source import decode

# ---- the table ----------------------------------------------------------------------------------


@pytest.mark.parametrize("host", HOSTS, ids=lambda h: h.name)
def test_every_host_has_a_fixture_project_giving_its_context(host: Host) -> None:
    case = ProjectCase(FIXTURES / host.fixture)
    assert case.entry.exists() and case.kind() is Kind.POSITIVE, host.fixture
    assert all(PROJECT_LINE.match(line)["context"] == host.name for line in case.expected())
    assert any((case.folder / name).exists() for name in ("requirements.txt", "pyproject.toml")), "no pin of its own"


@pytest.mark.parametrize("host", HOSTS, ids=lambda h: h.name)
def test_every_host_release_range_parses(host: Host) -> None:
    assert any_of(host.releases)
    if host.setting is not None and host.setting.releases_if_on is not None:
        assert any_of(host.setting.releases_if_on)
    assert host.then is None or host.then in BY_NAME


def test_the_names_are_the_contexts_and_unique() -> None:
    assert len(BY_NAME) == len(HOSTS) and HOSTS[0] is MEGATRON and MEGATRON.name == "megatron"


def test_the_schedule_calls_name_their_host() -> None:
    assert all(call.host in BY_NAME for call in SCHEDULE_CALLS)


def test_megatrons_row_agrees_with_the_release_profiles() -> None:
    """The harness' profiles (`harness/profiles.py`) were checked against named releases: those in place
    are the row's releases, the others are not."""
    profiles = pytest.importorskip("flux_alias_lint.harness.profiles")
    releases_ = any_of(MEGATRON.releases)
    for profile in profiles.PROFILES.values():
        for version in profile.pinned_to:
            expected = "within" if profile.in_place else "excludes"
            assert relation(allowed(f"=={version}"), releases_) == expected, (profile.name, version)


def _row(host: Host) -> str:
    depends = ", ".join(host.depends_on)
    setting = f"; `{host.setting.name}` {host.setting.effect}" if host.setting else ""
    releases_ = f"{host.shown} (`{'`, `'.join(host.releases)}`)"
    if host.setting is not None and host.setting.releases_if_on is not None:
        releases_ += f"; set on: `{'`, `'.join(host.setting.releases_if_on)}`"
    return (
        f"| `{host.name}` | `{host.distribution}` | {host.receives} | {host.operation} | {host.factor} | "
        f"{depends}{setting} | {releases_} | {host.line} | `fixtures/{host.fixture}/` |"
    )


def _doc(host: Host) -> str:
    return f"- `{host.name}`: {host.doc}"


def test_the_context_docs_list_every_host_as_the_table_says() -> None:
    docs = (ROOT / "docs" / "context.md").read_text(encoding="utf-8")
    lines = docs.splitlines()
    missing = [line for host in HOSTS for line in (_row(host), _doc(host)) if line not in lines]
    assert not missing, "docs/context.md 'Hosts' should have these rows:\n" + "\n".join(missing)


# ---- PEP 440 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        ("==4.46.0", "within"),
        ("==4.46.1", "within"),
        ("==4.46", "within"),  # zero padding
        ("==4.46.1.post1", "within"),
        (">=4.46.0,<=4.46.1", "within"),
        ("~=4.46.0", "overlaps"),  # 4.46.2 and later too
        ("==4.46.*", "overlaps"),
        ("!=4.46.0,==4.46.*", "overlaps"),
        (">=4.40,<4.47", "overlaps"),
        ("", "overlaps"),
        ("<4.46", "excludes"),
        (">=4.57", "excludes"),
        ("==4.46.2rc1", "excludes"),
        ("==4.45.*", "excludes"),
        ("!=4.46.0,!=4.46.1,<4.46.2", "overlaps"),  # 4.46.0.post1 is neither
        ("<4.46.2,>4.46.1.post0", "within"),  # post-releases of 4.46.1
        ("===4.46.0", "within"),
    ],
)
def test_a_declared_range_against_transformers_training_step(declared: str, expected: str) -> None:
    assert relation(allowed(declared), any_of(TRAINING_STEP.releases)) == expected


def test_the_version_order() -> None:
    order = ["1.0.dev1", "1.0a1", "1.0a2.dev1", "1.0b1", "1.0rc1", "1.0", "1.0.post1", "1.0.1", "1.1.dev0", "v2"]
    assert sorted(order, key=key) == order
    assert key("1.0") == key("1.0.0") == key("1.0+cu121")


@pytest.mark.parametrize(
    ("specifier", "inside", "outside"),
    [
        ("<0.7", ["0.6.9", "0.6.0.post1"], ["0.7.0rc1", "0.7.0"]),  # `<V` keeps out V's pre-releases
        (">0.7", ["0.7.1", "0.8"], ["0.7.0", "0.7.0.post1"]),  # `>V` keeps out V's post-releases
        ("<=0.7", ["0.7.0", "0.7.0rc1"], ["0.7.0.post1"]),
        ("~=0.11.0", ["0.11.0", "0.11.9"], ["0.12.0", "0.10.9"]),
        ("~=0.11", ["0.11.0", "0.19"], ["1.0", "0.10"]),
        ("!=0.12.*", ["0.11.9", "0.13"], ["0.12.0", "0.12.3"]),
    ],
)
def test_specifiers(specifier: str, inside: list[str], outside: list[str]) -> None:
    for version in inside:
        assert relation(allowed(f"=={version}"), allowed(specifier)) == "within", version
    for version in outside:
        assert relation(allowed(f"=={version}"), allowed(specifier)) == "excludes", version


@pytest.mark.parametrize(
    ("constraint", "specifiers"),
    [
        ("^1.2.3", ">=1.2.3,<2"),
        ("^0.2.3", ">=0.2.3,<0.3"),
        ("^0.0.3", ">=0.0.3,<0.0.4"),
        ("~1.2.3", ">=1.2.3,<1.3"),
        ("~1", ">=1,<2"),
        (">=1.2 <2", ">=1.2,<2"),
        ("1.2.3", "==1.2.3"),
        ("4.46.*", "==4.46.*"),
        ("*", ""),
    ],
)
def test_poetry_constraints(constraint: str, specifiers: str) -> None:
    assert poetry_specifiers(constraint) == specifiers
    with pytest.raises(ValueError, match="alternative"):
        poetry_specifiers(f"{constraint} || ^9")


@pytest.mark.parametrize("bad", [">=", "=>1.0", "~=1", ">=1.0.*", "==banana"])
def test_what_is_no_specifier_is_said(bad: str) -> None:
    with pytest.raises(ValueError):
        allowed(bad)


# ---- which release a project declares -----------------------------------------------------------


def _project(tmp_path: pathlib.Path, files: dict[str, str]) -> str:
    (tmp_path / ".git").mkdir()
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "loss.py").write_text("", encoding="utf-8")
    return str(tmp_path / "pkg" / "loss.py")


@pytest.mark.parametrize(
    ("files", "text"),
    [
        (
            {"requirements.txt": "torch\n-r reqs/train.txt\n", "reqs/train.txt": "transformers==4.46.0  # pinned\n"},
            "transformers==4.46.0",
        ),
        (
            {"requirements/base.txt": "Transformers[torch] >= 4.46, < 4.47 ; python_version >= '3.9'\n"},
            "Transformers[torch] >= 4.46, < 4.47",
        ),
        (
            {
                "pyproject.toml": '[project]\nname = "x"\nversion = "1"\n[project.optional-dependencies]\n'
                'train = ["transformers==4.46.1"]\n'
            },
            "transformers==4.46.1",
        ),
        ({"setup.cfg": "[options]\ninstall_requires =\n    torch\n    transformers==4.46.0\n"}, "transformers==4.46.0"),
        (
            {"setup.py": "from setuptools import setup\nsetup(install_requires=['transformers==4.46.0'])\n"},
            "transformers==4.46.0",
        ),
        ({"setup.py": "setup(extras_require={'hf': ['transformers~=4.46.0']})\n"}, "transformers~=4.46.0"),
        (
            {
                "setup.py": "deps = ['torch']\nextras = {}\nextras['hf'] = ['transformers==4.46.0']\n"
                "setup(install_requires=deps, extras_require=extras)\n"
            },
            "transformers==4.46.0",
        ),
    ],
)
def test_declarations_are_read(tmp_path: pathlib.Path, files: dict[str, str], text: str) -> None:
    found, read = declarations(_project(tmp_path, files), "transformers")
    assert found is not None and [d.text for d in found.lines] == [text] and read


_DEPS_SETUP_PY = """import re
from setuptools import setup
_deps = ["torch>=2.0", "transformers>=4.41.2", "accelerate>=0.31.0"]
KEYWORDS = ["transformers", "transformers for diffusion"]
deps = {b: a for a, b in (re.findall(r"^(([^!=<>~]+)(?:[!=<>~].*)?$)", x)[0] for x in _deps)}
def deps_list(*pkgs):
    return [deps[pkg] for pkg in pkgs]
extras = {"training": deps_list("accelerate")}
install_requires = [deps["torch"], deps["transformers"]]
setup(install_requires=list(install_requires), extras_require=extras)
"""


@pytest.mark.parametrize(
    ("files", "texts"),
    [
        # setup.py pins held in a module-level table, read through a helper: its literals
        ({"setup.py": _DEPS_SETUP_PY}, ["transformers>=4.41.2"]),
        # ... only where no keyword names the distribution
        (
            {"setup.py": "_deps = ['transformers>=4.0']\nsetup(extras_require={'hf': ['transformers==4.46.0']})\n"},
            ["transformers==4.46.0"],
        ),
        # conda: the `pip:` list, and a conda entry (`=4.46` is `4.46.*`)
        (
            {
                "environment.yml": "name: x\ndependencies:\n  - python=3.10.14=h955ad1f_0\n  - pip:\n"
                "      - accelerate==0.29.2\n      - transformers==4.44.2\n"
            },
            ["transformers==4.44.2"],
        ),
        (
            {"environment.yaml": "dependencies:\n  - conda-forge::transformers=4.46=pyhd8ed1ab_0\n"},
            ["transformers==4.46.*"],
        ),
        ({"requirement.txt": "transformers==4.33.0\n"}, ["transformers==4.33.0"]),
        ({"requirement/train.txt": "transformers==4.33.0\n"}, ["transformers==4.33.0"]),
        (
            {"pyproject.toml": '[tool.poetry.dependencies]\npython = "^3.10"\ntransformers = "^4.46"\n'},
            ["transformers >=4.46,<5"],
        ),
        (
            {"pyproject.toml": '[tool.poetry.dependencies]\ntransformers = { version = "~4.46.0", optional = true }\n'},
            ["transformers >=4.46.0,<4.47"],
        ),
    ],
)
def test_more_declarations_are_read(tmp_path: pathlib.Path, files: dict[str, str], texts: list[str]) -> None:
    found, _ = declarations(_project(tmp_path, files), "transformers")
    assert found is not None and [d.text for d in found.lines] == texts


_TRL_PYPROJECT = """[project]
name = "trl"
version = "1"
dependencies = ["accelerate>=1.4.0", "transformers>=4.56.2"]
[project.optional-dependencies]
liger = ["transformers!=5.1.0"]
kernels = ["transformers[kernels]", "transformers[hub-kernels]"]
"""


@pytest.mark.parametrize(
    ("files", "rescales", "said"),
    [
        # an extra is installed on top of the base requirement: it narrows it, never widens it
        ({"pyproject.toml": _TRL_PYPROJECT}, False, "pinned outside them in pyproject.toml (transformers>=4.56.2)"),
        # the lines of one file narrow each other
        (
            {"requirements.txt": "transformers>=4.40\ntransformers<4.46\n"},
            False,
            "pinned outside them in requirements.txt (transformers>=4.40) and 1 more",
        ),
        # ... except under different environment markers: alternatives
        (
            {
                "requirements.txt": "transformers==4.46.0; python_version < '3.9'\n"
                "transformers>=4.57; python_version >= '3.9'\n"
            },
            True,
            "which requirements.txt (transformers==4.46.0) and 1 more allows",
        ),
        # two files are two ways to install the project: alternatives
        (
            {"requirements-old.txt": "transformers==4.46.0\n", "requirements.txt": "transformers==4.57.1\n"},
            True,
            "which requirements-old.txt (transformers==4.46.0) and 1 more allows",
        ),
        # extras alone are alternatives too
        (
            {
                "pyproject.toml": '[project]\nname = "x"\nversion = "1"\n[project.optional-dependencies]\n'
                'old = ["transformers==4.46.0"]\nnew = ["transformers==4.57.1"]\n'
            },
            True,
            "which pyproject.toml (transformers==4.46.0) and 1 more allows",
        ),
    ],
)
def test_how_declarations_combine(tmp_path: pathlib.Path, files: dict[str, str], rescales: bool, said: str) -> None:
    release = host_release(_project(tmp_path, files), TRAINING_STEP)
    assert release.rescales is rescales and release.said.endswith(said), release.said


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("poetry.lock", '[[package]]\nname = "transformers"\nversion = "4.46.0"\n'),
        ("uv.lock", 'version = 1\n[[package]]\nname = "transformers"\nversion = "4.46.0"\n'),
        ("pdm.lock", '[[package]]\nname = "transformers"\nversion = "4.46.0"\n'),
        ("Pipfile.lock", '{"default": {"transformers": {"version": "==4.46.0"}}, "develop": {}}'),
    ],
)
def test_a_lockfile_pins_over_the_declared_range(tmp_path: pathlib.Path, name: str, text: str) -> None:
    path = _project(tmp_path, {"requirements.txt": "transformers>=4.40\n", name: text})
    release = host_release(path, TRAINING_STEP)
    assert release.rescales and release.said.endswith(f"pinned in {name} (transformers 4.46.0)")


def test_the_nearest_declaring_directory_wins(tmp_path: pathlib.Path) -> None:
    path = _project(tmp_path, {"requirements.txt": "transformers==4.57.1\n", "pkg/requirements.txt": "accelerate\n"})
    assert not host_release(path, TRAINING_STEP).rescales  # pkg/ declares accelerate only: the root's pin holds
    (tmp_path / "pkg" / "requirements.txt").write_text("transformers==4.46.0\n", encoding="utf-8")
    releases._declared_in.cache_clear()
    assert host_release(path, TRAINING_STEP).rescales


def test_a_range_over_both_behaviours_is_an_error_naming_it(tmp_path: pathlib.Path) -> None:
    release = host_release(_project(tmp_path, {"requirements.txt": "transformers>=4.40,<5\n"}), TRAINING_STEP)
    assert release.rescales and release.said == (
        "in transformers 4.46.0–4.46.1, which requirements.txt (transformers>=4.40,<5) allows"
    )


def test_nothing_declared_falls_back_to_the_installed_release(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _project(tmp_path, {"requirements.txt": "torch\n"})
    monkeypatch.setattr(releases, "installed", lambda distribution: "4.46.1")
    assert host_release(path, TRAINING_STEP).said.endswith("installed here (transformers 4.46.1) and pinned nowhere")
    monkeypatch.setattr(releases, "installed", lambda distribution: "4.57.1")
    assert not host_release(path, TRAINING_STEP).rescales
    monkeypatch.setattr(releases, "installed", lambda distribution: None)
    release = host_release(path, TRAINING_STEP)
    assert release.rescales and release.said.endswith("transformers is not pinned in the project")


def test_a_checkout_of_the_host_itself_is_its_own_release(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # transformers' own repository declares no dependency on transformers: its `__version__` is the release.
    monkeypatch.setattr(releases, "installed", lambda distribution: "4.57.1")  # what the linter runs beside: not it
    path = _project(tmp_path, {"src/transformers/__init__.py": '__version__ = "4.46.0"\n', "setup.py": ""})
    release = host_release(path, TRAINING_STEP)
    assert release.rescales and release.said.endswith(
        "pinned in src/transformers/__init__.py (transformers 4.46.0, this checkout's own release)"
    )
    assert str(tmp_path / "src" / "transformers" / "__init__.py") in release.files  # a change there re-checks
    (tmp_path / "src" / "transformers" / "__init__.py").write_text('__version__: str = "4.57.0.dev0"\n')
    releases._own_release.cache_clear()
    assert not host_release(path, TRAINING_STEP).rescales
    (tmp_path / "requirements.txt").write_text("transformers==4.46.1\n", encoding="utf-8")  # a pin still wins
    releases._declared_in.cache_clear()
    assert host_release(path, TRAINING_STEP).said.endswith("pinned in requirements.txt (transformers==4.46.1)")


def test_megatron_before_0_7_is_out_of_place(tmp_path: pathlib.Path) -> None:
    path = _project(tmp_path, {"requirements.txt": "megatron_core<0.7\n"})
    reach = Reach("megatron", (Step(path, 1, "x"),))
    assert released(path, reach, 2)[0] is None
    (tmp_path / "requirements.txt").write_text("megatron-core>=0.6\n", encoding="utf-8")
    releases._declared_in.cache_clear()
    assert released(path, reach, 2)[0] == reach  # Megatron's messages say no release


# ---- the settings -------------------------------------------------------------------------------


def test_a_test_modules_setting_is_read_only_when_that_module_is_checked(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test sets up its own run, so another module never reads a test module's settings: it is not
    even parsed for it (Megatron-LM has 16 such modules of 32 that set calculate_per_token_loss)."""
    path = _project(tmp_path, {"tests/test_per_token.py": "cfg = dict(calculate_per_token_loss=True)\n"})
    test_module = str(tmp_path / "tests" / "test_per_token.py")
    read: list[str] = []
    real = settings._module_settings
    monkeypatch.setattr(settings, "_module_settings", lambda *args: read.append(args[0]) or real(*args))
    settings._settings.cache_clear()
    assert setting(path, "calculate_per_token_loss") is None and read == []
    assert setting(test_module, "calculate_per_token_loss") == ("tests/test_per_token.py:1", True)
    assert read == [os.path.realpath(test_module)]


def test_average_tokens_across_devices(tmp_path: pathlib.Path) -> None:
    path = _project(tmp_path, {"requirements.txt": "transformers>=4.49,<4.54\n"})
    assert not host_release(path, COMPUTE_LOSS).rescales  # off by default before 4.54
    (tmp_path / "pkg" / "args.py").write_text("args = dict(average_tokens_across_devices=True)\n", encoding="utf-8")
    settings._settings.cache_clear()
    release = host_release(path, COMPUTE_LOSS)
    assert release.rescales and "with average_tokens_across_devices=True at pkg/args.py:1" in release.said
    (tmp_path / "pkg" / "args.py").write_text("args = dict(average_tokens_across_devices=False)\n", encoding="utf-8")
    settings._settings.cache_clear()
    assert setting(path, "average_tokens_across_devices") == ("pkg/args.py:1", False)
    assert host_release(path, COMPUTE_LOSS).said == "average_tokens_across_devices=False at pkg/args.py:1 turns it off"


def test_a_compute_loss_func_goes_on_to_training_step(tmp_path: pathlib.Path) -> None:
    """The compute_loss row excluded (4.46.0: no multiplication by the world size), what compute_loss
    returns goes on to training_step, which multiplies it in place."""
    path = _project(tmp_path, {"requirements.txt": "transformers==4.46.0\n"})
    reach, _ = released(path, Reach(COMPUTE_LOSS.name, (Step(path, 1, "x"),), whole_return=True), 0)
    assert reach is not None and reach.context == TRAINING_STEP.name and "4.46.0–4.46.1" in reach.release


def test_a_three_tuple_under_per_token_loss_is_a_warning_that_says_why() -> None:
    folder = (FIXTURES / "FAL001" / "three_tuple_under_per_token_loss").resolve()
    reached = ProjectIndex([str(folder)]).reached_by_path()
    path = folder / "loss.py"
    found, dependencies = check_text(decode(path.read_bytes(), str(path)), reaches=reached[str(path)])
    (finding,) = found
    assert finding.severity == WARNING and finding.context == "megatron"
    assert "under calculate_per_token_loss=True at fixtures/FAL001/three_tuple_under_per_token_loss/config.py:11" in (
        finding.message
    )
    assert str(folder / "config.py") in dependencies.files and str(folder / "requirements.txt") in dependencies.files


@pytest.mark.parametrize("host", HOSTS[1:], ids=lambda h: h.name)
def test_a_host_finding_names_the_host_the_release_and_the_pin(host: Host) -> None:
    folder = (FIXTURES / host.fixture).resolve()
    reached = ProjectIndex([str(folder)]).reached_by_path()
    messages = []
    for path in sorted(folder.glob("*.py")):
        found, _ = check_text(decode(path.read_bytes(), str(path)), reaches=reached.get(str(path), {}))
        messages += [(f.severity, f.message) for f in found]
    assert messages  # one a capture (host_composer_total keeps its 'total' in three places)
    for severity, message in messages:
        assert severity == ERROR and host.does in message and host.shown in message and ", pinned in " in message
        assert len(message) <= 300


_COMPOSER_MODEL = """from composer.models import HuggingFaceModel


class Foundry(HuggingFaceModel):
    def loss(self, outputs, batch):
        loss, lbl = outputs["loss"], outputs["lbl"]
        total = loss + lbl
        self.kept_total = total.detach()
        self.kept_loss = loss.detach()
        outputs["kept_total"] = total.detach()
        return {"total": total, "loss": loss, "lbl": lbl}
"""


# What it keeps of 'total' on itself and in a parameter's container; not what it keeps of `loss`, another entry.
_KEPT_TOTAL = ["self.kept_total composer-total", 'outputs["kept_total"] composer-total']


@pytest.mark.parametrize(
    ("pin", "found"),
    [
        ("composer==0.16.3", _KEPT_TOTAL),  # `composer` is mosaicml's other name
        ("mosaicml==0.16.3", _KEPT_TOTAL),
        ("mosaicml==0.9.0", []),  # sums every loss into a new tensor
        ("mosaicml==0.8.2", _KEPT_TOTAL),  # multiplies every value of the dict: 'total' among them
    ],
)
def test_a_composer_model_keeping_its_total_is_found_under_the_pinned_release(
    tmp_path: pathlib.Path, pin: str, found: list[str]
) -> None:
    path = _project(tmp_path, {"requirements.txt": pin + "\n", "pkg/model.py": _COMPOSER_MODEL})
    model = str(pathlib.Path(path).with_name("model.py"))
    reached = ProjectIndex([str(tmp_path)]).reached_by_path()
    findings, _ = check_text(decode(pathlib.Path(model).read_bytes(), model), reaches=reached.get(model, {}))
    assert [f"{f.report_path} {f.context}" for f in findings] == found
    assert all(pin in f.message for f in findings)
