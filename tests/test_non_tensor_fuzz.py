"""Differential fuzz of code that holds no tensors: generated functions shaped like loss functions,
`(value, {...})`, whose values are ints, floats, strings and lists of them, in modules that import
torch or not. The checker must flag nothing and `fix_source` must change nothing (an inserted
`.clone()` would raise), and megatron-core's rescale, run on each, moves nothing.
"""

from __future__ import annotations

import pathlib
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fixtures_runtime import run_loss_func

from flux_alias_lint.lint import check_source, fix_source

NUMBERS = ("n", "x", "y")
# (template over earlier names, kind it makes): every kind is a Python number or string or a list of them.
STEPS = (
    ("{a} + 1", "number"),
    ("{a} * 2.0", "number"),
    ("-{a}", "number"),
    ("abs({a})", "number"),
    ("max({a}, {b})", "number"),
    ("min([{a}, {b}])", "number"),
    ("round({a})", "number"),
    ("float({a})", "number"),
    ("runtime_of({a})", "number"),
    ("scale * {a}", "number"),
    ("[{a}, {b}][0]", "number"),
    ('{{"v": {a}}}["v"]', "number"),
    ("str({a})", "text"),
)
TEXT_STEPS = (("{s}.strip()", "text"), ('{s}.split(",")[0]', "text"), ("len({s})", "number"))


@st.composite
def non_tensor_function(draw: st.DrawFn) -> str:
    imports = draw(st.sampled_from(["import torch\n\n\n", "import math\n\n\n", ""]))
    lines = [
        "def runtime_of(value):",
        "    return value * 1.5",
        "",
        "",
        "def loss_func(output_tensor, scale: float = 2.0):",
        "    n = output_tensor.numel()",
    ]
    numbers, texts = ["n"], []
    for index in range(draw(st.integers(1, 8))):
        if texts and draw(st.booleans()):
            template, kind = draw(st.sampled_from(TEXT_STEPS))
            expression = template.format(s=draw(st.sampled_from(texts)))
        else:
            template, kind = draw(st.sampled_from(STEPS))
            expression = template.format(a=draw(st.sampled_from(numbers)), b=draw(st.sampled_from(numbers)))
        name = f"v{index}"
        lines.append(f"    {name} = {expression}")
        (numbers if kind == "number" else texts).append(name)
    loss = draw(st.sampled_from(numbers))
    entries = ", ".join(f'"{name}": {name}' for name in draw(st.lists(st.sampled_from(numbers + texts), min_size=1)))
    if draw(st.booleans()):  # and a list of every number (Megatron's 3-tuple path needs a tensor count)
        entries += f', "all": [{", ".join(numbers)}]'
    lines.append(f"    return {loss}, {{{entries}}}")
    return imports + "\n".join(lines) + "\n"


@pytest.mark.filterwarnings("ignore::UserWarning")
@settings(
    max_examples=300, derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(non_tensor_function())
def test_non_tensor_code_is_never_flagged_nor_fixed(source: str) -> None:
    assert check_source(source) == [], source
    assert fix_source(source) == source
    with tempfile.TemporaryDirectory() as directory:
        path = pathlib.Path(directory) / "generated.py"
        path.write_text(source)
        assert run_loss_func(path).moved == {}, source
