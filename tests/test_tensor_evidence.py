"""Where a function nothing is known to rescale needs evidence that its first element is a tensor.

A method's result in a module that imports torch is taken for a tensor (`loss = self.criterion(...)`),
but not once it is unpacked into names: `loss, metrics = self.model.get_loss_and_metrics(...)` is a
tuple, and its parts are often Python numbers (`tests/non_tensor_corpus/trainer_steps_torch.py`).
A tensor method used on the part, an alias op before the unpacking, or a rescaling caller still
makes it a finding.
"""

from __future__ import annotations

import os
import pathlib
import textwrap

import pytest

from flux_alias_lint.index.project import ProjectIndex
from flux_alias_lint.lint import check_text
from flux_alias_lint.source import decode


def _findings(tmp_path: pathlib.Path, body: str) -> list[str]:
    path = tmp_path / "steps.py"
    path.write_text("import torch\n\n\n" + textwrap.dedent(body))
    reached = ProjectIndex([str(tmp_path)]).reached_by_path()
    found, _ = check_text(decode(path.read_bytes(), str(path)), reaches=reached.get(os.path.realpath(path), {}))
    return [f"{f.code} {f.report_path} {f.context}" for f in found]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            """\
            def step(model, batch):
                loss, metrics = model.get_loss_and_metrics(batch)
                return loss, {"loss": loss, **metrics}
            """,
            [],
            id="unpacked method result",
        ),
        pytest.param(
            """\
            def step(model, batch):
                loss = model.criterion(batch)
                return loss, {"loss": loss}
            """,
            ['FAL002 report["loss"] unreached'],
            id="method result used whole",
        ),
        pytest.param(
            """\
            def step(model, batch):
                loss, metrics = model.get_loss_and_metrics(batch)
                return loss, {"loss": loss.detach(), **metrics}
            """,
            ['FAL001 report["loss"] unreached'],
            id="a tensor method on the part",
        ),
        pytest.param(
            """\
            def step(model, batch):
                first, second = model(batch).sum(-1).chunk(2)
                return first, {"first": first}
            """,
            ['FAL002 report["first"] unreached'],
            id="an alias op before the unpacking",
        ),
        pytest.param(
            """\
            def step(model, batch):
                loss, metrics = model.get_loss_and_metrics(batch)
                return loss, {"loss": loss}


            def forward_step(data_iterator, model):
                return model(next(data_iterator)), step
            """,
            ['FAL002 report["loss"] megatron'],
            id="a rescaling caller",
        ),
        pytest.param(
            """\
            def step(logits, labels):
                loss_fct = torch.nn.CrossEntropyLoss()
                loss = loss_fct(logits, labels)
                return loss, {"lm loss": loss}
            """,
            ['FAL002 report["lm loss"] unreached'],
            id="a module torch made, called",
        ),
        pytest.param(
            """\
            def step(compute, batch):
                loss = compute(batch)
                return loss, {"lm loss": loss}
            """,
            [],
            id="a callable argument, called",
        ),
    ],
)
def test_evidence_that_the_first_element_is_a_tensor(tmp_path: pathlib.Path, body: str, expected: list[str]) -> None:
    assert _findings(tmp_path, body) == expected
