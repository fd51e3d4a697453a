"""Differential fuzzing: the checker's verdict against what Megatron's in-place rescale really does.

`generate` writes a Megatron loss function from a grammar of operations that alias the loss
(detach, `.data`, views, conversions that return `self`, in-place ops) or copy it (clone, item,
arithmetic, `torch.cat`, conversions to another dtype), through assignment chains, rebinding,
branches, loops and report dicts nested with tuples and lists, returned as a 2- or 3-tuple.
`compare` checks it statically (which report leaves are flagged) and at run time (which report
leaves move when megatron-core's own `forward_step_calc_loss` rescales the loss in place, over
every combination of branch flags and loop counts, since the checker joins all of them), then
applies the fix and checks no leaf moves any more while the loss and its gradient are unchanged.

Captures (FAL005) too: statements keep a detach or conversion (or, as a negative, a copy) of an
expression in a container that outlives the call (a module-level list, dict or namespace, a
parameter's default dict, an attribute of `self` in a method), and in-place writes scale their
operand by 2 or 3, so whatever they change visibly moves. `compare` watches every tensor kept there
and in the report (`harness.captures.CaptureWatch`, tracing the generated code) and checks that the
FAL005 findings name exactly the places whose kept value moved: by the time the call returns (a
write in the function), or after the rescale where a `forward_step` hands the function to Megatron.

The grammar keeps the static verdict well-defined: a conversion to another dtype is generated
only where the checker knows the dtype (`torch.sum(x, dtype=torch.float32)`, or after a
conversion), because on an unknown dtype `.double()` is correctly a "may alias" (FAL004) that
a float32 run can never confirm.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from flux_alias_lint.analysis.values import render_path
from flux_alias_lint.harness import megatron_rescale
from flux_alias_lint.harness.captures import CaptureWatch
from flux_alias_lint.lint import check_source, fix_source
from flux_alias_lint.rules import CAPTURE_CODE

Shape = tuple[int, ...]
SCALAR: Shape = ()
ONE: Shape = (1,)
TWO: Shape = (2,)
NUM_MICROBATCHES, CP_GROUP_SIZE = 2, 3  # unequal: on the 2-tuple path equal values cancel out

# (spelling, target dtype) of conversions; on a tensor already of that dtype they return `self`.
CONVERSIONS: tuple[tuple[str, str], ...] = (
    ("{}.float()", "float32"),
    ("{}.to(torch.float32)", "float32"),
    ("{}.type(torch.float32)", "float32"),
    ("{}.double()", "float64"),
    ("{}.to(torch.float64)", "float64"),
    ("{}.half()", "float16"),
    ("{}.bfloat16()", "bfloat16"),
    ("{}.to(torch.bfloat16)", "bfloat16"),
)
# Conversions that never change dtype: `self` on a contiguous CPU tensor.
SAME_DTYPE_CONVERSIONS = ("{}.cpu()", "{}.contiguous()", '{}.to("cpu")', "torch.as_tensor({})", "_passed({})")
# Helpers of the generated module: the checker follows calls of them through their summaries.
HELPERS = (
    "def _detached(x):\n    return x.detach()\n\n\n"
    "def _passed(x):\n    return x\n\n\n"
    "def _copied(x):\n    return x.detach().clone()\n\n\n"
)
DETACHES = ("{}.detach()", "{}.data", "torch.detach({})", "_detached({})")
VIEWS: dict[Shape, tuple[tuple[str, Shape], ...]] = {
    SCALAR: (
        ("{}.view(1)", ONE),
        ("{}.reshape(1)", ONE),
        ("{}.view(-1)", ONE),
        ("{}.unsqueeze(0)", ONE),
        ("{}[None]", ONE),
        ("{}.flatten()", ONE),
        ("{}[...]", SCALAR),
        ("{}.squeeze()", SCALAR),
        ("{}.view_as({})", SCALAR),
    ),
    ONE: (("{}[0]", SCALAR), ("{}[-1]", SCALAR), ("{}.squeeze(0)", SCALAR), ("{}[:]", ONE), ("{}.reshape(-1)", ONE)),
    TWO: (
        ("{}[0]", SCALAR),
        ("{}[1]", SCALAR),
        ("{}[-1]", SCALAR),
        ("{}[-2]", SCALAR),
        ("{}[:]", TWO),
        ("{}.view(2)", TWO),
        ("{}.flatten()", TWO),
    ),
}
# In-place writes scale by more than 1, so a capture they reach visibly changes (and none cancels another).
INPLACE = ("{}.mul_(2.0)", "{}.mul_(3.0)")
INPLACE_STATEMENTS = (*INPLACE, "{} *= 2.0", "{} *= 3.0")
# What a capture keeps: a detach or a conversion to the same dtype (`.data` and views share on purpose).
KEEPERS = ("{}.detach()", "torch.detach({})", "_detached({})", "{}.cpu()", "{}.contiguous()", '{}.to("cpu")')
# Where a capture keeps it, per style: a module-level function or a method of a `SimpleNamespace` class.
CAPTURE_TARGETS = {
    "module": ("HISTORY.append({})", 'METRICS["{key}"] = {}', 'store["{key}"] = {}', "STATE.{attr} = {}"),
    "method": ("self.log.append({})", 'self.metrics["{key}"] = {}', "self.{attr} = {}"),
}
CAPTURE_ROOTS = frozenset({"HISTORY", "METRICS", "STATE", "store", "self"})
FILENAME = "<generated>"


@dataclasses.dataclass(frozen=True)
class Tensor:
    """A tensor variable as the generator knows it: the checker's view of its dtype and the truth."""

    shape: Shape
    dtype: str  # the real dtype
    known: bool  # whether the checker knows the dtype (it then always equals `dtype`)
    length_known: bool = False  # whether the checker knows the length, which `x[-1]` needs


@dataclasses.dataclass(frozen=True)
class Expr:
    code: str
    value: Tensor | None  # None: a Python number


class Draw:
    """The choices a generator makes; Hypothesis's `data.draw` or a seeded `random.Random`."""

    def __init__(self, choose: Callable[[Sequence[Any]], Any], integer: Callable[[int, int], int]) -> None:
        self.choose = choose
        self.integer = integer

    def chance(self, percent: int) -> bool:
        return self.integer(0, 99) < percent


class _Generator:
    def __init__(self, draw: Draw) -> None:
        self.draw = draw
        self.lines: list[str] = []
        self.tensors: dict[str, Tensor] = {}
        self.numbers: list[str] = []
        self.names = itertools.count()
        self.keys = itertools.count()
        self.flags = 0
        self.loops = 0
        self.report_started = False
        self.captures = draw.choose(("none", "module", "method"))  # see CAPTURE_TARGETS
        self.megatron = self.captures == "module" and draw.chance(50)  # a forward_step hands it to Megatron

    # ---- expressions ------------------------------------------------------------------

    def alias_of(self, code: str, t: Tensor) -> Expr:
        """An expression sharing storage with `code` (dtype-changing conversions excepted)."""
        kind = self.draw.choose(("detach", "view", "conversion", "same", "inplace"))
        if kind == "detach":
            return Expr(self.draw.choose(DETACHES).format(code), t)
        if kind == "view":
            # Without a known length the checker rightly takes x[-1] as possibly any row.
            views = [v for v in VIEWS[t.shape] if t.length_known or t.shape != TWO or "[-" not in v[0]]
            spelling, shape = self.draw.choose(views)
            return Expr(spelling.format(code, code), Tensor(shape, t.dtype, t.known))
        if kind == "conversion":
            return self.conversion_of(code, t)
        if kind == "same":
            return Expr(self.draw.choose(SAME_DTYPE_CONVERSIONS).format(code), t)
        return Expr(self.draw.choose(INPLACE).format(code), t)

    def conversion_of(self, code: str, t: Tensor) -> Expr:
        allowed = [c for c in CONVERSIONS if t.known or c[1] == t.dtype]  # see the module docstring
        spelling, target = self.draw.choose(allowed)
        copies = t.known and target != t.dtype
        return Expr(spelling.format(code), Tensor(t.shape, target, t.known or copies, t.length_known and not copies))

    def kept_value(self) -> str:
        """What a capture keeps: a detach or conversion of an expression, or a copy of one."""
        expr = self.tensor_expr()
        if expr.value is None:  # a number: nothing kept can move
            return expr.code
        if self.draw.chance(30):
            return self.copy_of(expr.code, expr.value).code
        if self.draw.chance(30):
            return self.conversion_of(expr.code, expr.value).code
        return self.draw.choose(KEEPERS).format(expr.code)

    def copy_of(self, code: str, t: Tensor) -> Expr:
        t = dataclasses.replace(t, length_known=False)
        options: list[Expr] = [
            Expr(f"{code}.clone()", t),
            Expr(f"{code}.detach().clone()", t),
            Expr(f"({code} * 1.0)", Tensor(t.shape, t.dtype, False)),
            Expr(f"({code} + 0.0)", Tensor(t.shape, t.dtype, False)),
            Expr(f"(-{code})", Tensor(t.shape, t.dtype, False)),
            Expr(f"torch.cat([{code}.reshape(-1)])", Tensor(t.shape or ONE, t.dtype, False)),
            Expr(f"copy.deepcopy({code}.detach())", t),
            Expr(f"_copied({code})", t),
        ]
        if t.shape != TWO:
            options += [Expr(f"{code}.item()", None), Expr(f"float({code})", None)]
        return self.draw.choose(options)

    def tensor_expr(self) -> Expr:
        """An expression over the variables: a name, or a chain of aliases and copies of one."""
        name = self.draw.choose(sorted(self.tensors))
        expr = Expr(name, self.tensors[name])
        for _ in range(self.draw.integer(0, 2)):
            assert expr.value is not None
            copy = self.draw.chance(30)
            expr = self.copy_of(expr.code, expr.value) if copy else self.alias_of(expr.code, expr.value)
            if expr.value is None:
                break
        return expr

    def report_value(self, depth: int) -> str:
        kind = self.draw.integer(0, 9) if depth < 3 else 0
        if kind <= 5:
            if self.numbers and self.draw.chance(10):
                return self.draw.choose(self.numbers)
            return self.tensor_expr().code
        items = [self.report_value(depth + 1) for _ in range(self.draw.integer(1, 3))]
        if kind <= 7:
            return "{" + ", ".join(f'"k{next(self.keys)}": {v}' for v in items) + "}"
        if kind == 8:
            return "(" + ", ".join(items) + ",)"
        return "[" + ", ".join(items) + "]"

    # ---- statements -------------------------------------------------------------------

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def new_name(self) -> str:
        return f"t{next(self.names)}"

    def statement(self, indent: int, nested: bool) -> None:
        """One statement; `nested` (in a branch or loop body): keep every variable's shape and dtype."""
        kinds = ("assign", "assign", "rebind_loss", "inplace", "report", "chain", "tuple")
        kind = self.draw.choose((*kinds, "capture", "capture") if self.captures != "none" else kinds)
        if kind == "capture":
            target = self.draw.choose(CAPTURE_TARGETS[self.captures])
            key = next(self.keys)
            self.emit(indent, target.format(self.kept_value(), key=f"k{key}", attr=f"a{key}"))
        elif kind == "rebind_loss":
            loss = self.tensors["loss"]
            # In a loop body the checker sees the next iteration start from this rebinding too:
            # keep what it knows of the dtype unchanged there, as `reassign` does.
            choices = ("loss.clone()",) if nested and loss.known else ("loss * 2.0", "loss + 1.0", "loss.clone()")
            spelling = self.draw.choose(choices)
            self.emit(indent, f"loss = {spelling}")
            self.tensors["loss"] = dataclasses.replace(loss, known=loss.known and spelling == "loss.clone()")
        elif kind == "inplace":
            name = self.draw.choose(sorted(self.tensors))
            self.emit(indent, self.draw.choose(INPLACE_STATEMENTS).format(name))
        elif kind == "report" and self.report_started:
            if self.draw.chance(70):
                self.emit(indent, f'report["k{next(self.keys)}"] = {self.report_value(1)}')
            else:
                self.emit(indent, f"report.update(k{next(self.keys)}={self.report_value(1)})")
        elif nested:
            self.reassign(indent)
        elif kind == "chain":
            expr = self.tensor_expr()
            a, b = self.new_name(), self.new_name()
            self.emit(indent, f"{a} = {b} = {expr.code}")
            self.bind(a, expr)
            self.bind(b, expr)
        elif kind == "tuple":
            first, second = self.tensor_expr(), self.tensor_expr()
            a, b = self.new_name(), self.new_name()
            self.emit(indent, f"{a}, {b} = {first.code}, {second.code}")
            self.bind(a, first)
            self.bind(b, second)
        else:
            expr = self.tensor_expr()
            others = sorted(set(self.tensors) - {"loss"})
            name = self.draw.choose(others) if others and self.draw.chance(30) else self.new_name()
            self.emit(indent, f"{name} = {expr.code}")
            self.bind(name, expr)

    def reassign(self, indent: int) -> None:
        """Rebind an existing variable to a value of the same shape and dtype, with the checker
        knowing as much about it as before: in a loop the rebinding reaches the body's earlier
        statements on the next iteration, where the generator already chose by the old knowledge."""
        others = sorted(set(self.tensors) - {"loss"})
        if not others:
            self.emit(indent, "loss = loss * 2.0")
            self.tensors["loss"] = dataclasses.replace(self.tensors["loss"], known=False)
            return
        name = self.draw.choose(others)
        target = self.tensors[name]
        for _ in range(20):
            expr = self.tensor_expr()
            if expr.value == target:
                self.emit(indent, f"{name} = {expr.code}")
                return
        self.emit(indent, f"{name} = {name}")

    def bind(self, name: str, expr: Expr) -> None:
        if expr.value is None:
            self.tensors.pop(name, None)
            self.numbers.append(name)
        else:
            self.tensors[name] = expr.value
            if name in self.numbers:
                self.numbers.remove(name)

    def block(self, indent: int) -> None:
        for _ in range(self.draw.integer(1, 2)):
            self.statement(indent, nested=True)

    def body(self) -> None:
        for _ in range(self.draw.integer(0, 6)):
            if not self.report_started and self.draw.chance(15):
                self.emit(1, "report = {}")
                self.report_started = True
            control = self.draw.integer(0, 9)
            if control == 0 and self.flags < 2:
                self.emit(1, f"if FLAGS[{self.flags}]:")
                self.flags += 1
                self.block(2)
                if self.draw.chance(50):
                    self.emit(1, "else:")
                    self.block(2)
            elif control == 1 and self.loops < 1:
                self.emit(1, "for _ in range(N):")
                self.loops += 1
                self.block(2)
            else:
                self.statement(1, nested=False)

    def function(self) -> str:
        self.emit(
            0,
            "def loss_func(output_tensor, store={}):" if self.captures == "module" else "def loss_func(output_tensor):",
        )
        start = self.draw.choose(("sum", "typed_sum", "mean", "stacked"))
        if start == "stacked":
            self.emit(1, "v = torch.stack([output_tensor.sum(), output_tensor.mean()])")
            self.tensors["v"] = Tensor(TWO, "float32", False, length_known=True)
            self.emit(1, f"loss = v[{self.draw.choose((0, 1, -1, -2))}]")
        elif start == "typed_sum":
            self.emit(1, "loss = torch.sum(output_tensor, dtype=torch.float32)")
        else:
            self.emit(1, f"loss = output_tensor.{start}()")
        self.tensors["loss"] = Tensor(SCALAR, "float32", start == "typed_sum")
        self.body()
        if self.report_started:
            self.emit(1, f'report["k{next(self.keys)}"] = {self.report_value(1)}')
        else:
            self.emit(1, f"report = {self._report_dict()}")
        if self.draw.chance(40):
            self.emit(1, "num_tokens = torch.tensor(4.0)")
            returned = "loss, num_tokens, report"
        else:
            returned = "loss, report"
        if self.draw.chance(20):
            self.emit(1, f"outputs = ({returned})")
            self.emit(1, "return outputs")
        else:
            self.emit(1, f"return {returned}")
        if self.captures == "method":
            self.lines[0] = "def loss_func(self, output_tensor):"
            self.lines = [
                "class Trainer(types.SimpleNamespace):",
                *("    " + line for line in self.lines),
                "",
                "",
                "loss_func = Trainer(log=[], metrics={}).loss_func",
            ]
        if self.megatron:
            self.lines += ["", "", "def forward_step(data_iterator, model):"]
            self.lines += ["    return model(next(data_iterator)), loss_func"]
        return "\n".join(self.lines) + "\n"

    def _report_dict(self) -> str:
        items = [self.report_value(1) for _ in range(self.draw.integer(1, 3))]
        if self.draw.chance(20):
            return "dict(" + ", ".join(f"k{next(self.keys)}={v}" for v in items) + ")"
        return "{" + ", ".join(f'"k{next(self.keys)}": {v}' for v in items) + "}"


MODULE_TOP = (
    "import copy\nimport types\n\nimport torch\n\nHISTORY = []\nMETRICS = {}\nSTATE = types.SimpleNamespace()\n\n\n"
)


def generate(draw: Draw) -> tuple[str, int, int]:
    """(module source, number of branch flags, number of loops) of one generated loss function."""
    gen = _Generator(draw)
    function = gen.function()
    return MODULE_TOP + HELPERS + function, gen.flags, gen.loops


# ---------------------------------------------------------------- runtime truth


def _leaves(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, path + (key,))
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from _leaves(item, path + (index,))
    else:
        yield render_path(path), value


@dataclasses.dataclass(frozen=True)
class Run:
    moved: frozenset[str]  # report leaves the rescale changed
    loss: torch.Tensor | str  # the rescaled backprop tensor, or the error
    grad: torch.Tensor | str  # d(rescaled loss)/d(input), or the error
    captured: frozenset[str] = frozenset()  # kept tensors that moved (FAL005's truth), by where they are kept
    # Report entries a write in the function moved that do not share the returned loss: FAL005 flags those it sees
    # written through another name (`v.mul_()` after `report["k"] = loss.detach()`, `loss = v[0]`) and leaves the
    # report's own updates alone; either is right.
    may_capture: frozenset[str] = frozenset()


def _root(where: str) -> str:
    return re.match(r"\w+", where)[0]  # type: ignore[index]


def _shares_storage(entry: Any, loss: Any) -> bool:
    """Whether a report entry is over the returned loss' memory (an entry not found there: assumed so)."""
    if not (isinstance(entry, torch.Tensor) and isinstance(loss, torch.Tensor)):
        return entry is None
    return entry.untyped_storage().data_ptr() == loss.untyped_storage().data_ptr()


def _run_once(loss_func: Callable[[torch.Tensor], Any], megatron: bool) -> Run:
    """`megatron`: a forward step hands the function to Megatron, so the rescale is one of its captures' writers."""
    base = torch.linspace(0.5, 2.0, 4, requires_grad=True)
    watch = CaptureWatch()
    try:
        with watch.tracing(FILENAME):
            outputs = loss_func(base * 1.0)  # not a leaf: Megatron rescales it in place
        at_return = watch.moved()
        before = {p: v.detach().clone() for p, v in _leaves(outputs[-1]) if isinstance(v, torch.Tensor)}
        loss, report = megatron_rescale(
            outputs, num_microbatches=NUM_MICROBATCHES, cp_group_size=CP_GROUP_SIZE, profile="installed"
        )
    except Exception as exc:  # the same failure before and after the fix is fine
        return Run(frozenset(), f"{type(exc).__name__}: {exc}", "")
    # The report's entries count as captures only for writes in the function (the rescale's are FAL001-FAL004):
    # one sharing the returned loss' storage must be flagged; any other that moved may be (issue 46: a write
    # through another name to storage the entry shares), or be the report being updated (issue 34).
    entries = dict(_leaves(outputs[-1]))
    captured = {
        where
        for where in at_return
        if _root(where) in CAPTURE_ROOTS
        or (_root(where) == "report" and _shares_storage(entries.get(where), outputs[0]))
    }
    may_capture = {where for where in at_return if _root(where) == "report"} - captured
    if megatron:
        captured |= {where for where in watch.moved() if _root(where) in CAPTURE_ROOTS}
    after = dict(_leaves(report))
    moved = frozenset(p for p, v in before.items() if not torch.equal(after[p].detach(), v))
    try:
        loss.backward()
        grad: torch.Tensor | str = base.grad.clone() if base.grad is not None else "no grad"
    except RuntimeError as exc:
        grad = f"{type(exc).__name__}: {exc}"
    return Run(moved, loss.detach().clone(), grad, frozenset(captured), frozenset(may_capture))


def run_all(source: str, flags: int, loops: int) -> list[Run]:
    """One run per combination of branch flags and loop counts, each in a fresh module (fresh containers)."""
    code = compile(source, FILENAME, "exec")
    runs = []
    for combo in itertools.product(*[(False, True)] * flags, *[(0, 1, 2)] * loops):
        namespace: dict[str, Any] = {"__name__": "generated"}
        exec(code, namespace)
        namespace["FLAGS"], namespace["N"] = combo[:flags], (combo[flags] if loops else 0)
        runs.append(_run_once(namespace["loss_func"], "forward_step" in namespace))
    return runs


def _same(a: torch.Tensor | str, b: torch.Tensor | str) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return a.dtype == b.dtype and torch.equal(a, b)


def _names(place: str, where: str) -> bool:
    """Whether a finding's place (`HISTORY[...]`: any index) names where a kept tensor was watched (`HISTORY[0]`)."""
    return re.fullmatch(re.escape(place).replace(re.escape("[...]"), r"\[[^\]]+\]"), where) is not None


@dataclasses.dataclass(frozen=True)
class Verdict:
    source: str
    flagged: frozenset[str]
    moved: frozenset[str]
    problems: tuple[str, ...]  # empty: the checker and the fix agree with Megatron
    captures: frozenset[str] = frozenset()  # FAL005's places
    captured: frozenset[str] = frozenset()  # where kept tensors moved

    def __str__(self) -> str:
        return "\n".join(
            [
                *self.problems,
                f"flagged: {sorted(self.flagged)}",
                f"moved:   {sorted(self.moved)}",
                f"captures flagged: {sorted(self.captures)}",
                f"captures moved:   {sorted(self.captured)}",
                self.source,
            ]
        )


def compare(source: str, flags: int, loops: int) -> Verdict:
    findings = check_source(source)
    # The report's entries against Megatron's rescale (FAL001-FAL004); FAL005 against the watched captures.
    flagged = frozenset(f.report_path for f in findings if f.code != CAPTURE_CODE)
    captures = frozenset(f.report_path for f in findings if f.code == CAPTURE_CODE)
    runs = run_all(source, flags, loops)
    moved = frozenset().union(*(r.moved for r in runs))
    captured = frozenset().union(*(r.captured for r in runs))
    may_capture = frozenset().union(*(r.may_capture for r in runs))
    problems = []
    if flagged != moved:
        problems.append(
            f"checker disagrees: false positives {sorted(flagged - moved)}, missed {sorted(moved - flagged)}"
        )
    false_captures = sorted(p for p in captures if not any(_names(p, w) for w in captured | may_capture))
    missed_captures = sorted(w for w in captured if not any(_names(p, w) for p in captures))
    if false_captures or missed_captures:
        problems.append(f"captures disagree: false positives {false_captures}, missed {missed_captures}")
    fixed = source
    for _ in range(3):  # a fix nested inside another waits for the next pass
        fixed, previous = fix_source(fixed), fixed
        if fixed == previous:
            break
    if fixed != source:
        remaining = check_source(fixed)
        if remaining:
            problems.append(f"after the fix still flagged: {[f.report_path for f in remaining]}")
        for before, after in zip(runs, run_all(fixed, flags, loops), strict=True):
            if after.moved:
                problems.append(f"after the fix the report still moves: {sorted(after.moved)}")
            if after.captured:
                problems.append(f"after the fix kept values still move: {sorted(after.captured)}")
            if not (_same(before.loss, after.loss) and _same(before.grad, after.grad)):
                problems.append("the fix changed the loss or its gradient")
    if problems:
        problems.append(f"fixed source:\n{fixed}")
    return Verdict(source, flagged, moved, tuple(problems), captures, captured)
