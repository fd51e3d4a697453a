"""Dataclass and NamedTuple reports: which fields the analysis follows, and where it stops.

The runtime truth of the fixture projects (`fixtures/*/dataclass_*`, `named_tuple_report`) covers
the shapes that move; these cases pin the edges: where a record is not followed, and that its fields
are findings as a dict's entries are, with a rescaling caller or without.
"""

from __future__ import annotations

import json
import os
import pathlib
import textwrap

import pytest

from flux_alias_lint import triage
from flux_alias_lint.cli import main
from flux_alias_lint.index.project import ProjectIndex
from flux_alias_lint.lint import check_text
from flux_alias_lint.source import decode

HEAD = """\
import dataclasses
from typing import NamedTuple

import torch


@dataclasses.dataclass
class Report:
    lm: torch.Tensor
    n: int = 0


class Pair(NamedTuple):
    a: torch.Tensor
    b: torch.Tensor


@dataclasses.dataclass
class Copying:
    lm: torch.Tensor

    def __init__(self, lm):
        self.lm = lm.clone()


def forward_step(data_iterator, model):
    return model(next(data_iterator)), loss_func

"""


def _report_paths(tmp_path: pathlib.Path, body: str, files: dict[str, str] | None = None) -> list[str]:
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    path = tmp_path / "loss.py"
    path.write_text(HEAD + textwrap.dedent(body))
    reached = ProjectIndex([str(tmp_path)]).reached_by_path()
    source = decode(path.read_bytes(), str(path))
    found, _ = check_text(source, reaches=reached.get(os.path.realpath(path), {}))
    return [f"{f.code} {f.report_path} {f.context}" for f in found]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            """\
            def loss_func(output_tensor):
                loss = output_tensor.sum()
                return loss, Report(loss.detach())
            """,
            ["FAL001 report.lm megatron"],
            id="positional",
        ),
        pytest.param(
            """\
            def loss_func(output_tensor):
                loss = output_tensor.sum()
                report = Report(loss.clone())
                report.lm = loss
                return loss, report
            """,
            ["FAL002 report.lm megatron"],
            id="field set afterwards",
        ),
        pytest.param(
            """\
            def loss_func(output_tensor):
                loss = output_tensor.sum()
                report = Report(loss.detach())
                report.lm = loss.clone()
                return loss, report
            """,
            [],
            id="field replaced by a copy",
        ),
        pytest.param(
            """\
            def loss_func(output_tensor):
                loss = output_tensor.sum()
                report = Report(loss.detach())
                return loss, Report(report.lm.clone())
            """,
            [],
            id="field read and copied",
        ),
        pytest.param(
            """\
            def loss_func(output_tensor):
                loss = output_tensor.sum()
                parts = [loss.detach(), loss.clone()]
                return loss, Pair(*parts)
            """,
            ["FAL001 report[...] megatron"],
            id="starred arguments: any field",
        ),
        pytest.param(
            """\
            def loss_func(output_tensor):
                loss = output_tensor.sum()
                return loss, {"stats": Pair(loss.clone(), b=loss[0:1])}
            """,
            ['FAL003 report["stats"].b megatron'],
            id="record in a dict",
        ),
        pytest.param(
            """\
            def loss_func(output_tensor):
                loss = output_tensor.sum()
                return loss, Copying(loss.detach())
            """,
            [],
            id="own __init__ is not followed",
        ),
        pytest.param(
            """\
            def loss_func(output_tensor):
                loss = output_tensor.sum()
                extra = {}
                return loss, Report(loss.detach(), **extra)
            """,
            ["FAL001 report.lm megatron"],
            id="empty mapping spread into the fields",
        ),
        pytest.param(
            """\
            def loss_func(output_tensor):
                loss = output_tensor.sum()
                return loss, Pair(loss.detach(), *[])
            """,
            ["FAL001 report.a megatron"],
            id="empty sequence spread into the fields",
        ),
    ],
)
def test_record_fields_where_megatron_calls(tmp_path: pathlib.Path, body: str, expected: list[str]):
    assert _report_paths(tmp_path, body) == expected


def test_record_imported_under_another_name(tmp_path: pathlib.Path):
    reports = """\
    from dataclasses import dataclass


    @dataclass
    class LossReport:
        lm_loss: object
    """
    body = """\
    from reports import LossReport as R


    def loss_func(output_tensor):
        loss = output_tensor.sum()
        return loss, R(loss.detach())
    """
    assert _report_paths(tmp_path, body, {"reports.py": reports}) == ["FAL001 report.lm_loss megatron"]


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        ('{"lm": loss.detach()}', 'FAL001 report["lm"] unreached'),
        ("Report(loss.detach())", "FAL001 report.lm unreached"),
        ("Pair(loss.detach(), b=loss.detach().clone())", "FAL001 report.a unreached"),
        ('{"stats": Report(loss.detach())}', 'FAL001 report["stats"].lm unreached'),
    ],
    ids=["dict report", "record report", "named tuple report", "record in a dict report"],
)
@pytest.mark.parametrize("triaged", [True, False])
def test_record_fields_are_found_as_a_dicts_entries_are(
    tmp_path: pathlib.Path, returned: str, expected: str, triaged: bool, monkeypatch: pytest.MonkeyPatch
):
    # Nothing seen calling it: a record's field is the same hazard (`unreached`) as a dict's entry, not silence.
    monkeypatch.setattr(triage, "ENABLED", triaged)
    body = f"""\
    def unreached_loss(output_tensor):
        loss = output_tensor.sum()
        return loss, {returned}
    """
    assert _report_paths(tmp_path, body) == [expected]


FIELDS = """\
import dataclasses
from typing import ClassVar

import torch


@dataclasses.dataclass
class Report:
    scale: "ClassVar[float]" = 1.0
    lm: torch.Tensor = None
    extras: dict = dataclasses.field(default_factory=dict)


def loss_func(output_tensor):
    loss = output_tensor.sum()
    return loss, Report(loss.detach(), extras={"n": 1})


def forward_step(data_iterator, model):
    return model(next(data_iterator)), loss_func
"""


def test_class_variables_and_field_specs_are_read_as_dataclasses_does(tmp_path: pathlib.Path, capsys):
    path = tmp_path / "loss.py"
    path.write_text(FIELDS)
    reached = ProjectIndex([str(tmp_path)]).reached_by_path()
    found, _ = check_text(decode(path.read_bytes(), str(path)), reaches=reached.get(os.path.realpath(path), {}))
    assert [f"{f.code} {f.report_path} {f.context}" for f in found] == ["FAL001 report.lm megatron"]
    # verify's probe builds the same record: the field the value lands in is the one that moves.
    assert main(["verify", str(path), "--format", "json"]) == 0
    verdicts = json.loads(capsys.readouterr().out)
    assert [(v["confirmed"], v["report_path"]) for v in verdicts] == [(True, "report.lm")]


@pytest.mark.parametrize("triaged", [True, False], ids=["triage on", "triage off"])
def test_a_dict_joined_with_a_record_finds_the_records_field(tmp_path: pathlib.Path, monkeypatch, triaged: bool):
    monkeypatch.setattr(triage, "ENABLED", triaged)
    body = """\
    def unreached_loss(output_tensor, flag):
        loss = output_tensor.sum()
        report = {"lm": loss.clone()} if flag else Report(lm=loss.detach())
        return loss, report
    """
    # One key of both (a field is keyed by its name): the path is the dict's spelling.
    assert _report_paths(tmp_path, body) == ['FAL001 report["lm"] unreached']


@pytest.mark.parametrize("triaged", [True, False], ids=["triage on", "triage off"])
@pytest.mark.parametrize(
    "body",
    [
        """\
        def unreached_loss(output_tensor):
            loss = output_tensor.sum()
            stats = Report(lm=loss.detach())
            return loss, {"lm": stats.lm}
        """,
        """\
        def to_report(loss):
            stats = Report(lm=loss.detach())
            return {"lm": stats.lm}


        def unreached_loss(output_tensor):
            loss = output_tensor.sum()
            return loss, to_report(loss)
        """,
    ],
    ids=["read in the function", "read in a helper"],
)
def test_a_field_read_out_of_a_record_is_found_as_the_value_itself(
    tmp_path: pathlib.Path, monkeypatch, body: str, triaged: bool
):
    monkeypatch.setattr(triage, "ENABLED", triaged)
    assert _report_paths(tmp_path, body) == ['FAL001 report["lm"] unreached']
    reached = body.replace("unreached_loss", "loss_func")  # HEAD's forward step hands `loss_func` over
    assert _report_paths(tmp_path, reached) == ['FAL001 report["lm"] megatron']


def test_reading_an_unrelated_field_leaves_the_function_checked(tmp_path: pathlib.Path):
    body = """\
    def unreached_loss(output_tensor):
        config = Report(n=2)
        loss = output_tensor.sum() * config.n
        return loss, {"lm": loss.detach()}
    """
    assert _report_paths(tmp_path, body) == ['FAL001 report["lm"] unreached']
