"""docs/internals.md's Layout section names every module of the package, and only modules that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _layout() -> str:
    text = (ROOT / "docs" / "internals.md").read_text(encoding="utf-8")
    return text.split("## Layout\n", 1)[1].split("\n## ", 1)[0]


def test_every_module_is_in_the_layout_and_every_named_module_exists() -> None:
    package = ROOT / "flux_alias_lint"
    modules = {path.relative_to(package).as_posix() for path in package.rglob("*.py")}
    named = set(re.findall(r"`([\w/]+\.py)`", _layout()))
    assert modules - named == set(), "modules missing from docs/internals.md's Layout"
    assert named - modules == set(), "docs/internals.md's Layout names modules that do not exist"


def test_the_usage_command_list_names_every_command() -> None:
    from flux_alias_lint.cli import build_parser

    (commands,) = [a for a in build_parser()._actions if a.dest == "command"]
    text = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    listed = re.search(r"```text\n(flux-alias-lint .*?)```", text, re.DOTALL)[1]
    named = set(re.findall(r"^flux-alias-lint (\w+)", listed, re.MULTILINE))
    assert named == set(commands.choices), "docs/usage.md's command list and the commands differ"
