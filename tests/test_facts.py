"""The facts tables (`flux_alias_lint/facts/`): every row documented, true of the real library, and
handled alike by both interpreters, so that a new row cannot be half-handled.

Each row of `facts.storage` has a case below: a loss function handed to Megatron whose report is
built through that builtin or method from `kept = loss.detach()`. The case says whether the
analysis flags it (the row's transfer is right) and the triage must keep it whenever the analysis
does (its transfer over-approximates). A row without a case fails `test_every_row_has_a_case`.
"""

from __future__ import annotations

import ast
import collections
import copy

import pytest
from megatron_shapes import FORWARD_STEP

from flux_alias_lint import check_source, triage
from flux_alias_lint.analysis import calls as analysis_calls
from flux_alias_lint.facts.reports import AUGMENTED_METHODS
from flux_alias_lint.facts.storage import BUILTINS, CONTAINER_METHODS, Gives, Updates
from flux_alias_lint.facts.tensor_ops import IDENTITY_OPERANDS, leaves_unchanged
from flux_alias_lint.index.nodes import rescaled_in_place
from flux_alias_lint.triage import calls as triage_calls

HEAD = "import collections\nimport copy\nfrom collections import OrderedDict, defaultdict\n\n"

# row -> (the lines that build `report` from `kept`, whether the report aliases the loss)
BUILTIN_CASES: dict[str, tuple[str, bool]] = {
    "int": ('report = {"v": int(kept)}', False),
    "float": ('report = {"v": float(kept)}', False),
    "len": ('report = {"v": len(kept)}', False),
    "bool": ('report = {"v": bool(kept)}', False),
    "dict": ("report = dict(v=kept)", True),
    "OrderedDict": ("report = OrderedDict(v=kept)", True),
    "defaultdict": ("report = defaultdict(list, v=kept)", True),
    "collections.OrderedDict": ("report = collections.OrderedDict(v=kept)", True),
    "collections.defaultdict": ("report = collections.defaultdict(list, v=kept)", True),
    "list": ('report = {"v": list([kept])}', True),
    "tuple": ('report = {"v": tuple([kept])}', True),
    "set": ('report = {"v": set([kept])}', False),  # a set's elements are not followed (the row says so)
    "zip": ('report = {"v": list(zip([kept], [1]))}', True),
    "max": ('report = {"v": max(kept, loss * 2)}', True),
    "min": ('report = {"v": min([kept, loss * 2])}', True),
    "copy.deepcopy": ('report = {"v": copy.deepcopy(kept)}', False),
    "copy.copy": ('report = {"v": copy.copy(kept)}', True),
}
METHOD_CASES: dict[str, tuple[str, bool]] = {
    "get": ('d = {"a": kept}\n    report = {"v": d.get("a")}', True),
    "pop": ('d = {"a": kept}\n    report = {"v": d.pop("a")}', True),
    "setdefault": ('d = {}\n    report = {"v": d.setdefault("a", kept)}', True),
    "update": ('report = {}\n    report.update({"v": kept})', True),
    "append": ('log = []\n    log.append(kept)\n    report = {"v": log}', True),
    "insert": ('log = []\n    log.insert(0, kept)\n    report = {"v": log}', True),
    "extend": ('log = []\n    log.extend([kept])\n    report = {"v": log}', True),
    "clear": ('log = [kept]\n    log.clear()\n    report = {"v": log}', False),
    "copy": ('d = {"a": kept}\n    report = d.copy()', True),
    "values": ('d = {"a": kept}\n    report = {"v": list(d.values())}', True),
    "items": ('d = {"a": kept}\n    report = {"v": list(d.items())}', True),
}


def _loss_function(lines: str) -> str:
    return (
        HEAD
        + f"def loss_func(x):\n    loss = x.sum()\n    kept = loss.detach()\n    {lines}\n    return loss, report\n"
    )


def _codes(text: str, enabled: bool, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, str]]:
    monkeypatch.setattr(triage, "ENABLED", enabled)
    return [(f.code, f.line, f.message) for f in check_source(text + FORWARD_STEP, "m.py")]


def test_every_row_has_a_case_and_a_doc() -> None:
    assert set(BUILTIN_CASES) == set(BUILTINS)
    assert set(METHOD_CASES) == set(CONTAINER_METHODS)
    assert all(row.doc for row in [*BUILTINS.values(), *CONTAINER_METHODS.values()])


@pytest.mark.parametrize(
    "table",
    [
        analysis_calls.GIVES,
        analysis_calls.UPDATES,
        triage_calls.FLAG_GIVES,
        triage_calls.STORAGE_GIVES,
        triage_calls.FLAG_UPDATES,
        triage_calls.STORAGE_UPDATES,
    ],
)
def test_every_row_has_a_transfer_in_both_interpreters(table: dict) -> None:
    """Each interpreter's transfer tables cover every member the rows use, and nothing else."""
    kind = type(next(iter(table)))
    used = {row.gives for row in [*BUILTINS.values(), *CONTAINER_METHODS.values()]} if kind is Gives else set()
    used |= {row.updates for row in CONTAINER_METHODS.values()} if kind is Updates else set()
    assert used <= set(table) == set(kind)
    assert all(callable(transfer) for transfer in table.values())


@pytest.mark.parametrize("name", sorted({**BUILTIN_CASES, **METHOD_CASES}))
def test_both_interpreters_handle_the_row(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    lines, aliases = BUILTIN_CASES[name] if name in BUILTIN_CASES else METHOD_CASES[name]
    text = _loss_function(lines)
    full = _codes(text, False, monkeypatch)
    assert bool(full) == aliases, full
    assert all(code == "FAL001" for code, _, _ in full)
    assert _codes(text, True, monkeypatch) == full


class _Tensor:
    """An object with an identity, standing for a tensor: what a row passes on is this very object."""


def _gives(name: str) -> object:
    """What the real builtin gives when called on containers holding `_Tensor` objects (`held`)."""
    held = _Tensor()
    calls = {
        "int": lambda: int(1.5),
        "float": lambda: float(2),
        "len": lambda: len([held]),
        "bool": lambda: bool(held),
        "dict": lambda: dict(v=held),
        "OrderedDict": lambda: collections.OrderedDict(v=held),
        "defaultdict": lambda: collections.defaultdict(list, v=held),
        "collections.OrderedDict": lambda: collections.OrderedDict(v=held),
        "collections.defaultdict": lambda: collections.defaultdict(list, v=held),
        "list": lambda: list((held,)),
        "tuple": lambda: tuple([held]),
        "set": lambda: set([held]),
        "zip": lambda: list(zip([held], [1], strict=True)),
        "max": lambda: max([held], [held]),
        "min": lambda: min([[held], [held]]),
        "copy.deepcopy": lambda: copy.deepcopy([held]),
        "copy.copy": lambda: copy.copy([held]),
    }
    return held, calls[name]()


def _holds(value: object, held: object) -> bool:
    """Whether `value` is `held` or holds it (by identity) in its entries or elements, at any depth."""
    if value is held:
        return True
    if isinstance(value, dict):
        return any(_holds(v, held) for v in value.values())
    if isinstance(value, (list, tuple, set)):
        return any(_holds(v, held) for v in value)
    return False


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_builtin_rows_are_true_of_python(name: str) -> None:
    held, given = _gives(name)
    row = BUILTINS[name]
    if row.gives is Gives.NUMBER:
        assert isinstance(given, (int, float, bool))
    elif row.gives is Gives.DEEP_COPY:
        assert not _holds(given, held)
    else:  # every other row passes the very object on (a set's too, though its elements are not followed)
        assert _holds(given, held)
    if row.gives is Gives.MAPPING:
        assert isinstance(given, dict)


@pytest.mark.parametrize("name", sorted(CONTAINER_METHODS))
def test_container_method_rows_are_true_of_python(name: str) -> None:
    row = CONTAINER_METHODS[name]
    held, other = _Tensor(), _Tensor()
    receiver: dict | list = [held] if name in ("append", "insert", "extend") else {"a": held}
    arguments: dict[str, tuple] = {
        "get": ("a",),
        "pop": ("a",),
        "setdefault": ("b", other),
        "update": ({"b": other},),
        "append": (other,),
        "insert": (0, other),
        "extend": ([other],),
        "clear": (),
        "copy": (),
        "values": (),
        "items": (),
    }
    before = copy.copy(receiver)
    given = getattr(receiver, name)(*arguments[name])
    if row.gives is Gives.NOTHING:
        assert given is None
    elif row.gives is Gives.ENTRY_OR_DEFAULT:
        assert given is held or given is other
    else:
        assert _holds(list(given) if row.gives is not Gives.RECEIVER else given, held)
    entries = receiver.values() if isinstance(receiver, dict) else receiver
    if row.updates in (Updates.ADDS_ARGUMENT, Updates.ADDS_ELEMENTS, Updates.ADDS_ENTRIES, Updates.ADDS_DEFAULT):
        assert any(e is other for e in entries)
    elif row.updates is Updates.REMOVES_ENTRY:
        assert len(receiver) == len(before) - 1
    elif row.updates is Updates.CLEARS:
        assert not receiver
    else:
        assert receiver == before


# ---- identity operands (`facts.tensor_ops.IDENTITY_OPERANDS`) ----------------------------------

_WRITES = [(f"loss.{m}({{}})", m) for m in IDENTITY_OPERANDS] + [
    (f"loss {op} {{}}", m) for op, m in AUGMENTED_METHODS.items()
]


@pytest.mark.parametrize("method", sorted(IDENTITY_OPERANDS))
def test_identity_operands_change_no_value_in_torch(method: str) -> None:
    torch = pytest.importorskip("torch")
    identity = IDENTITY_OPERANDS[method]
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.int64):
        if dtype is torch.int64 and method == "div_":
            continue  # true division of an integer tensor in place is refused by torch
        before = torch.tensor([0.5, -1.25, 3.0, 0.0]).to(dtype)
        for operand in {identity, float(identity)} if dtype.is_floating_point else {identity}:
            value = before.clone()
            assert getattr(value, method)(operand) is value and torch.equal(value, before)
            other = before.clone()
            getattr(other, method)(operand + 2)  # the row is no accident: another operand changes the values
            assert not torch.equal(other, before)


@pytest.mark.parametrize("operator", sorted(AUGMENTED_METHODS))
def test_augmented_operators_are_their_methods_in_torch(operator: str) -> None:
    torch = pytest.importorskip("torch")
    value = torch.tensor([0.5, -1.25, 3.0])
    kept, expected = value, value.clone()
    getattr(expected, AUGMENTED_METHODS[operator])(3.0)
    scope = {"value": value}
    exec(f"value {operator} 3.0", scope)
    assert scope["value"] is kept and torch.equal(kept, expected)


def test_only_a_number_literal_is_an_identity_operand() -> None:
    assert leaves_unchanged("mul_", 1) and leaves_unchanged("add_", 0.0)
    assert not leaves_unchanged("mul_", True) and not leaves_unchanged("mul_", None)
    assert not leaves_unchanged("mul_", 0) and not leaves_unchanged("clamp_", 0)


@pytest.mark.parametrize(("write", "method"), _WRITES, ids=[w.format("k") for w, _ in _WRITES])
def test_every_reader_honours_the_identity_operand(write: str, method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The analysis and the triage (FAL005 in the function) and the index (a caller's rescale) take
    a write of the identity operand for no write, and any other operand for one."""
    for operand, written in ((IDENTITY_OPERANDS[method], False), (7, True)):
        source = (
            "import torch\nKEPT = []\n\ndef loss_func(output_tensor):\n    loss = torch.sum(output_tensor)\n"
            f"    KEPT.append(loss.detach())\n    {write.format(operand)}\n    return loss * 1.0, {{}}\n"
        )
        for triaged in (True, False):
            monkeypatch.setattr(triage, "ENABLED", triaged)
            found = [f.code for f in check_source(source)]
            assert found == (["FAL005"] if written else []), (write, operand, triaged)
        statement = ast.parse(write.format(operand)).body[0]
        rescaling = method in ("mul_", "div_")
        assert rescaled_in_place([statement]) == ({"loss": 1} if written and rescaling else {})
