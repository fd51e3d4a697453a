"""A function under `@torch.no_grad()` or `@torch.inference_mode()`, or one whose first element is
detached, has nothing to backpropagate.

Diffusion samplers return `(img, {"x_inter": [img, ...]})`, and attention surrogates save their graph
for a backward of their own (`return out.detach(), {"out": out}`): real aliases, but not loss
functions, and nothing rescales the first element. Such a function's report is a finding only where a
caller is known to rescale its first element in place: Megatron's evaluation runs loss functions
without gradients too.
"""

from __future__ import annotations

import os
import pathlib

import pytest

from flux_alias_lint.index.project import ProjectIndex
from flux_alias_lint.lint import check_text
from flux_alias_lint.source import decode

SAMPLER = """\
import torch
{imports}


{decorator}
def sample(x_T):
    img = torch.randn_like(x_T)
    intermediates = {{"x_inter": [img]}}
    return img, intermediates
{hand_off}"""

HAND_OFF = """

def forward_step(data_iterator, model):
    return model(next(data_iterator)), sample
"""


def _contexts(tmp_path: pathlib.Path, imports: str, decorator: str, hand_off: str = "") -> list[str]:
    path = tmp_path / "sampler.py"
    path.write_text(SAMPLER.format(imports=imports, decorator=decorator, hand_off=hand_off))
    reached = ProjectIndex([str(tmp_path)]).reached_by_path()
    found, _ = check_text(decode(path.read_bytes(), str(path)), reaches=reached.get(os.path.realpath(path), {}))
    return [f"{f.code} {f.report_path} {f.context}" for f in found]


@pytest.mark.parametrize(
    ("imports", "decorator"),
    [
        ("", "@torch.no_grad()"),
        ("", "@torch.inference_mode()"),
        ("from torch import no_grad", "@no_grad()"),
        ("import torch as th", "@th.no_grad()"),
    ],
)
def test_a_gradless_function_needs_a_rescaling_caller(tmp_path: pathlib.Path, imports: str, decorator: str):
    assert _contexts(tmp_path, imports, decorator) == []
    assert _contexts(tmp_path, imports, decorator, HAND_OFF) == ['FAL002 report["x_inter"][0] megatron']


def test_other_decorators_leave_the_unreached_rule_as_it_is(tmp_path: pathlib.Path):
    assert _contexts(tmp_path, "import functools", "@functools.lru_cache()") == [
        'FAL002 report["x_inter"][0] unreached'
    ]


SURROGATE = """\
import torch


def forward_surrogate(q, k, v):
    with torch.enable_grad():
        ins = tuple(t.detach().requires_grad_(True) for t in (q, k, v))
        out = torch.softmax(ins[0] @ ins[1].transpose(-1, -2), dim=-1) @ ins[2]
    return {returned}, {{"ins": ins, "out": out}}
{hand_off}"""


@pytest.mark.parametrize(
    ("returned", "expected_reached"),
    [
        ("out.detach()", 'FAL001 report["out"] megatron'),
        ("out.view(-1).detach()", 'FAL003 report["out"] megatron'),
    ],
)
def test_a_detached_first_element_needs_a_rescaling_caller(
    tmp_path: pathlib.Path, returned: str, expected_reached: str
) -> None:
    path = tmp_path / "surrogate.py"
    hand_off = HAND_OFF.replace("sample", "forward_surrogate")
    for text, expected in (
        (SURROGATE.format(returned=returned, hand_off=""), []),
        (SURROGATE.format(returned=returned, hand_off=hand_off), [expected_reached]),
    ):
        path.write_text(text)
        reached = ProjectIndex([str(tmp_path)]).reached_by_path()
        found, _ = check_text(decode(path.read_bytes(), str(path)), reaches=reached.get(os.path.realpath(path), {}))
        assert [f"{f.code} {f.report_path} {f.context}" for f in found] == expected


def test_a_first_element_detached_on_one_path_only_keeps_the_unreached_rule(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "loss.py"
    path.write_text(
        "import torch\n\n\ndef loss_func(output_tensor, eval_mode):\n"
        "    loss = output_tensor.sum()\n"
        "    out = loss.detach() if eval_mode else loss\n"
        '    return out, {"lm": loss.view(1)}\n'
    )
    found, _ = check_text(decode(path.read_bytes(), str(path)))
    assert [f"{f.code} {f.report_path} {f.context}" for f in found] == ['FAL003 report["lm"] unreached']
