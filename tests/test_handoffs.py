"""The table of hand-offs (`flux_alias_lint/index/handoffs.py`): every entry has its fixture project and
docs/context.md lists it, and each fixture's findings are reached the way its entry says (a hand-off call, not
the forward-step signature guess, unless the entry is that guess)."""

from __future__ import annotations

import pathlib

import pytest
from fixture_corpus import FIXTURES, ROOT, Kind, ProjectCase

from flux_alias_lint.index.handoffs import HAND_OFFS, HandOff, Signature
from flux_alias_lint.index.project import ProjectIndex
from flux_alias_lint.index.reach import UNREACHED


def _case(entry: HandOff) -> ProjectCase:
    return ProjectCase(FIXTURES / entry.fixture)


@pytest.mark.parametrize("entry", HAND_OFFS, ids=lambda e: e.name)
def test_every_entry_has_its_fixture_project(entry: HandOff) -> None:
    case = _case(entry)
    assert case.entry.exists(), f"{entry.name}: no fixture project {entry.fixture}/"
    assert case.kind() is Kind.POSITIVE


def test_the_context_docs_list_every_entry() -> None:
    docs = (ROOT / "docs" / "context.md").read_text(encoding="utf-8")
    assert all(f"`{entry.name}`" in docs for entry in HAND_OFFS)


def test_the_names_are_unique() -> None:
    assert len({entry.name for entry in HAND_OFFS}) == len(HAND_OFFS)


@pytest.mark.parametrize("entry", HAND_OFFS, ids=lambda e: e.name)
def test_the_fixture_is_reached_as_its_entry_says(entry: HandOff) -> None:
    folder = (FIXTURES / entry.fixture).resolve()
    reached = ProjectIndex([str(folder)]).reached
    reaches = [reach for (path, _), reach in reached.items() if pathlib.Path(path).parent == folder]
    assert reaches and all(reach.context != UNREACHED for reach in reaches)
    assert all(reach.guessed == isinstance(entry, Signature) for reach in reaches), [r.steps for r in reaches]
