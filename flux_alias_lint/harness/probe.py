"""Make a flagged loss function runnable on its own: its code, with stand-ins for what it does not define.

The probe is the function's own source (decorators dropped), executed in a namespace filled
by the safe part of its module's top level (moduletop.py). Every argument and every other
free name (closure variables, ``self``, names nothing defines) gets a stand-in of the kind
its use asks for (standins.py):

- ``tensor``: a non-leaf float tensor that requires grad, as Megatron passes the model
  output, so the loss has a gradient to compare before and after a fix;
- ``mapping``: a structured batch (``batch["tokens"]``, ``"logits" in output``, ``.get``);
- ``object``: a stub (``self``, ``args.seq_len``, ``self.strategy.compute(...)``, a helper);
- ``key``: a string, for a name used as a dict key (``{output_name: output}``);
- ``flag``: a stub whose truth is tried both ways (a parameter annotated ``bool``).

Use decides before an annotation does (``forward_out: Tensor`` indexed with ``["x_hat"]`` is a
mapping); an annotation decides for a parameter whose use does not (``compute_wer: bool``). A caller that knows
more (the analysis's call context: a ``MegatronLossReduction.forward(batch, forward_out)``,
a ``functools.partial``'s bound arguments) passes ``kinds`` to override both.

The flagged report entries are wrapped in ``__flux_mark__(key, entry)``, which records the
value each one produced, so a verdict knows whether the flagged value reached the report, and
copies it (``Execution.captures``), so a capture's value when it was made can be compared with
its value after whatever writes it.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import types
from collections.abc import Callable, Mapping
from typing import Any, Literal

import libcst as cst

from ..runner import time_limit
from ._deps import quiet, require_torch
from .captures import CaptureWatch
from .cpu import cuda_is_the_cpu
from .moduletop import Project, run_module_top
from .standins import (
    PROBE_FILENAME,
    Run,
    StandInMapping,
    Stub,
    StubType,
    instance_of,
    single_rank,
    stubs_as_numbers,
    undecidable_bools,
)

torch = require_torch()

Kind = Literal["tensor", "mapping", "object", "key", "flag", "optional"]

# Stand-in tensors are float32 with distinct positive values, in the first of these shapes the
# function runs with: [4] for a reduced loss, [2, 4] for code that reduces over `dim=1`, then a
# language model's [batch, sequence, vocabulary] logits with integer token ids (Run.tensor): a probe
# that fails on a tensor's rank or dtype tries the next.
SHAPES: tuple[tuple[int, ...], ...] = ((4,), (2, 4), (2, 4, 8))

# One execution longer than this is stopped: a loop the stand-ins keep going.
SECONDS_PER_EXECUTION = 5.0

_MAPPING_METHODS = frozenset({"get", "keys", "items", "values", "pop", "setdefault", "update"})
_MAPPING_TYPES = frozenset({"dict", "Dict", "Mapping", "MutableMapping", "DictConfig"})
_TENSOR_TYPES = frozenset({"Tensor", "torch.Tensor", "FloatTensor", "torch.FloatTensor"})
MARK = "__flux_mark__"


class ProbeError(Exception):
    """No runnable probe could be built; ``str()`` says why."""


class ProbeTimeout(Exception):
    """An execution ran longer than SECONDS_PER_EXECUTION."""


@dataclasses.dataclass
class Execution:
    """One call of the probe: what it returned or raised, and the path it took."""

    outputs: Any
    error: BaseException | None
    taken: tuple[bool, ...]  # answers to the undecidable branches, in order: replaying them replays the path
    bases: list[Any]  # the leaf tensors behind every stand-in tensor, in creation order
    marks: dict[int, list[Any]]  # flagged entry key → the values it produced
    captures: CaptureWatch  # the tensors they produced, as made, under str(key)
    roles: dict[str, str] = dataclasses.field(default_factory=dict)  # the layouts chosen for named stand-ins
    made: dict[str, str] = dataclasses.field(default_factory=dict)  # each named stand-in's layout, as made
    argument: Any = None  # what it got where Megatron passes the model's output (Probe.megatron_argument)
    raised_at: str = ""  # the function's own line it raised at (its innermost), if it raised
    asked: tuple[int, ...] = ()  # the function's own line each of ``taken`` was asked at
    raised_line: int = 0  # the number of the line ``raised_at`` shows

    def inputs(self) -> str:
        """The named stand-ins it was given, e.g. ``output_tensor [2, 4, 8] float32, labels [2, 4] int64``: the
        first eight, then how many more."""
        shown = [f"{name} {layout}" for name, layout in list(self.made.items())[:8]]
        more = len(self.made) - len(shown)
        return ", ".join(shown) + (f" and {more} more" if more else "")


class _Namespace(dict):
    """Module globals for the probe: a name it does not hold gets a stand-in on first use, per execution."""

    def __init__(self, kinds: Mapping[str, Kind], run: Run) -> None:
        super().__init__()
        self._kinds, self._run = kinds, run
        self._stand_ins: set[str] = set()

    def __missing__(self, name: str) -> Any:
        # A dict subclass as globals is asked before the builtins are: defer to them first.
        if hasattr(builtins, name):
            return getattr(builtins, name)
        self[name] = value = stand_in(self._kinds.get(name, "tensor"), name, self._run)
        self._stand_ins.add(name)
        return value

    def forget_stand_ins(self) -> None:
        """Each execution makes its own: one may have rescaled a tensor the last one handed out."""
        for name in self._stand_ins:
            del self[name]
        self._stand_ins.clear()


def stand_in(kind: Kind, name: str, run: Run) -> Any:
    if kind == "mapping":
        return StandInMapping(run)
    if kind in ("object", "flag"):
        return Stub(name, run)
    if kind == "key":
        return name
    if kind == "optional":  # compared with None: both tried, a tensor first
        return run.tensor(name) if run.choose() else None
    return run.tensor(name)


@dataclasses.dataclass
class Probe:
    func: Callable[..., Any]
    run: Run
    namespace: _Namespace
    positional: list[tuple[str, Kind]]
    keyword: list[tuple[str, Kind]]
    receiver: Callable[[Run], Any] | None = None  # makes `self` (or `cls`); None: it is a stub
    layouts: dict[str, str] = dataclasses.field(default_factory=dict)  # what use asks of named stand-ins
    code: str = ""  # the probe's source, as compiled: where an execution raised
    output: str | None = None  # the parameter Megatron fills with the model's output, where the hand-over says

    def _arguments(self) -> tuple[list[Any], dict[str, Any]]:
        args = [stand_in(kind, name, self.run) for name, kind in self.positional]
        if self.receiver is not None:
            args[0] = self.receiver(self.run)
        return args, {name: stand_in(kind, name, self.run) for name, kind in self.keyword}

    def megatron_argument(self) -> int | None:
        """Where Megatron passes the model's output, if a tensor: the parameter the forward step's hand-over
        leaves it (``output``: ``partial(loss_func, data=batch)`` is called with ``logits`` of ``loss_func(logits,
        data)``), else the last positional parameter (a ``partial(loss_func, mask)`` is called with it last); None
        if there is none."""
        names = [name for name, _kind in self.positional]
        index = names.index(self.output) if self.output in names else len(names) - 1
        if index < (1 if self.receiver is not None else 0) or self.positional[index][1] != "tensor":
            return None
        return index

    def execute(
        self, forced: tuple[bool, ...] = (), roles: Mapping[str, str] | None = None, model_output: Any = None
    ) -> Execution:
        """Call the function once with fresh stand-ins, answering its undecidable branches with ``forced`` first;
        ``roles``: the layout of named stand-ins (standins.ROLES), if not their own; ``model_output``: what
        Megatron passes it, in place of that argument's stand-in (made all the same, so the others keep their
        values)."""
        self.run.roles = dict(roles or {})
        self.run.start(forced)
        self.namespace.forget_stand_ins()
        marks: dict[int, list[Any]] = {}
        captures = CaptureWatch()

        def mark(key: int, value: Any) -> Any:
            marks.setdefault(key, []).append(value)
            captures.keep(str(key), value)
            return value

        self.namespace[MARK] = mark
        outputs, error, argument = None, None, None
        where = self.megatron_argument()
        try:
            args, kwargs = self._arguments()
            if where is not None:
                if model_output is not None:
                    args[where] = model_output
                argument = args[where]
            with (
                quiet(),
                single_rank(),
                undecidable_bools(self.run),
                cuda_is_the_cpu(),
                stubs_as_numbers(),
                _time_limit(),
            ):
                outputs = self.func(*args, **kwargs)
        except (Exception, SystemExit) as exc:  # the code raised with these stand-ins: the caller may try another path
            error = exc
        run = self.run
        return Execution(
            outputs,
            error,
            tuple(run.taken),
            list(run.bases),
            marks,
            captures,
            dict(run.roles),
            dict(run.made),
            argument,
            _raised_at(error, self.code),
            tuple(run.asked),
            _raised_line(error),
        )


def _raised_line(error: BaseException | None) -> int:
    """The number of the function's own line where ``error`` left it last (a helper it called may have raised)."""
    line = 0
    trace = error.__traceback__ if error is not None else None
    while trace is not None:
        if trace.tb_frame.f_code.co_filename == PROBE_FILENAME:
            line = trace.tb_lineno
        trace = trace.tb_next
    return line


def _raised_at(error: BaseException | None, code: str) -> str:
    """The function's own line, stripped, where ``error`` left it last (a helper it called may have raised)."""
    line = _raised_line(error)
    lines = code.splitlines()
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return text if len(text) <= 80 else text[:77] + "..."


def _time_limit() -> contextlib.AbstractContextManager[None]:
    return time_limit(SECONDS_PER_EXECUTION, lambda: ProbeTimeout(f"still running after {SECONDS_PER_EXECUTION:.0f} s"))


def _root(node: cst.BaseExpression) -> str | None:
    return node.value if isinstance(node, cst.Name) else None


def _string_like(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString))


def usage_kinds(function: cst.CSTNode) -> dict[str, Kind]:
    """The stand-in kind each name's use in ``function`` asks for; names used only as tensors are left out."""
    keys: set[str] = set()
    mappings: set[str] = set()
    objects: set[str] = set()
    indexed: list[tuple[str, str]] = []  # (mapping, name used as its key)
    renamed: list[tuple[str, str]] = []  # (new name, old name) for `new = old`
    iterated: list[tuple[str, str]] = []  # (element, container) for `for element in container`
    optional: set[str] = set()  # compared with None

    class Visitor(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            self._iterates(node.target, node.iter)

        def visit_CompFor(self, node: cst.CompFor) -> None:
            self._iterates(node.target, node.iter)

        def _iterates(self, target: cst.BaseExpression, container: cst.BaseExpression) -> None:
            element, name = _root(target), _root(container)
            if element and name:
                iterated.append((element, name))

        def visit_Assign(self, node: cst.Assign) -> None:
            old = _root(node.value)
            renamed.extend((t.target.value, old) for t in node.targets if old and isinstance(t.target, cst.Name))

        def visit_Subscript(self, node: cst.Subscript) -> None:
            name = _root(node.value)
            for element in node.slice:
                if name and isinstance(element.slice, cst.Index):
                    index = element.slice.value
                    if _string_like(index):
                        mappings.add(name)
                    elif isinstance(index, cst.Name):
                        indexed.append((name, index.value))

        def visit_DictElement(self, node: cst.DictElement) -> None:
            if isinstance(node.key, cst.Name):
                keys.add(node.key.value)

        def visit_Comparison(self, node: cst.Comparison) -> None:
            name = _root(node.left)
            left = node.left
            for target in node.comparisons:
                # `loss_name == "cross_entropy"`: a setting; as a stub, both answers are tried.
                if isinstance(target.operator, (cst.Equal, cst.NotEqual)):
                    for one, other in ((left, target.comparator), (target.comparator, left)):
                        if _root(one) and _string_like(other):
                            objects.add(one.value)
                left = target.comparator
            for target in node.comparisons:
                is_none = isinstance(target.comparator, cst.Name) and target.comparator.value == "None"
                if name and is_none and isinstance(target.operator, (cst.Is, cst.IsNot)):
                    optional.add(name)
            for target in node.comparisons:
                name = _root(target.comparator)
                if name and isinstance(target.operator, (cst.In, cst.NotIn)):
                    mappings.add(name)

        def visit_Attribute(self, node: cst.Attribute) -> None:
            name = _root(node.value)
            if name is None or hasattr(torch.Tensor, node.attr.value):
                return
            (mappings if node.attr.value in _MAPPING_METHODS else objects).add(name)

        def visit_Call(self, node: cst.Call) -> None:
            name = _root(node.func)
            if name:
                objects.add(name)
            for arg in node.args:  # `model(**inputs)`: a Trainer's batch of keyword inputs
                if arg.star == "**" and (unpacked := _root(arg.value)):
                    mappings.add(unpacked)

    function.visit(Visitor())
    keys.update(key for name, key in indexed if name in mappings)
    kinds: dict[str, Kind] = {name: "optional" for name in optional}
    kinds.update({name: "object" for name in objects})
    kinds.update({name: "mapping" for name in mappings})
    kinds.update({name: "key" for name in keys})
    for new, old in reversed(renamed):  # `outputs = forward_out`: forward_out is used as outputs is
        if new in kinds and old not in kinds:
            kinds[old] = kinds[new]
    for element, container in iterated:  # `for s in samples: s.example`: a stub iterates to stubs
        if kinds.get(element) in ("object", "mapping") and container not in kinds:
            kinds[container] = "object"
    return kinds


# Keyword arguments that take token ids: a gather's `index`, a loss's `target` or `labels`.
_ID_KEYWORDS = frozenset({"index", "target", "targets", "labels", "label"})


def usage_layouts(function: cst.CSTNode) -> dict[str, str]:
    """The layout (standins.ROLES) a name's use in ``function`` asks for, where it says: three indices
    (``logits[:, a:b, :]``) for logits, a slice's bound for a whole number, a ``target=`` for token ids."""
    layouts: dict[str, str] = {}
    truths: dict[str, str] = {}  # asked of names no other use gives a layout

    class Visitor(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> None:
            name = _root(node.value)
            if name and len(node.slice) == 3:
                layouts.setdefault(name, "logits")
            for element in node.slice:
                if isinstance(element.slice, cst.Slice):
                    for bound in (element.slice.lower, element.slice.upper):
                        for inner in _names_in(bound):
                            layouts.setdefault(inner, "count")

        def visit_Arg(self, node: cst.Arg) -> None:
            name = _root(node.value)
            if name and node.keyword is not None and node.keyword.value in _ID_KEYWORDS:
                layouts.setdefault(name, "ids")

        def visit_If(self, node: cst.If) -> None:
            _truths(node.test, truths)

        def visit_While(self, node: cst.While) -> None:
            _truths(node.test, truths)

        def visit_IfExp(self, node: cst.IfExp) -> None:
            _truths(node.test, truths)

    function.visit(Visitor())
    return {**truths, **layouts}


_MEMBERSHIP = (cst.In, cst.NotIn, cst.Is, cst.IsNot)


def _truths(test: cst.BaseExpression, layouts: dict[str, str]) -> None:
    """``if temperature != 1.0:``: a name compared with a number where a truth is asked is one number (a tensor
    of several values has no truth), so its layout is a scalar."""
    if isinstance(test, cst.BooleanOperation):
        _truths(test.left, layouts)
        _truths(test.right, layouts)
    elif isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        _truths(test.expression, layouts)
    elif isinstance(test, cst.Comparison):
        left = test.left
        for target in test.comparisons:
            for one, other in ((left, target.comparator), (target.comparator, left)):
                if (name := _root(one)) and _number(other) and not isinstance(target.operator, _MEMBERSHIP):
                    layouts.setdefault(name, "scalar")
            left = target.comparator


def _number(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float))


def callee_layouts(function: cst.CSTNode, namespace: Mapping[str, Any]) -> dict[str, str]:
    """Token ids for a name the function hands to one of the project's functions (defined by the module top) as
    a parameter named like them: ``logprobs(logits, sequences)`` into ``def logprobs(logits, target)``."""
    layouts: dict[str, str] = {}

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            callee = dict.get(namespace, _root(node.func) or "")
            if not isinstance(callee, types.FunctionType):
                return
            parameters = callee.__code__.co_varnames[: callee.__code__.co_argcount]
            for position, arg in enumerate(node.args):
                if arg.star:
                    return
                if arg.keyword:
                    parameter = arg.keyword.value
                else:
                    parameter = parameters[position] if position < len(parameters) else ""
                if (name := _root(arg.value)) and parameter in _ID_KEYWORDS:
                    layouts.setdefault(name, "ids")

    function.visit(Visitor())
    return layouts


def batch_items(function: cst.CSTNode) -> dict[str, str]:
    """The local each batch item is bound to, by its key: ``seq = data["sequences"]`` or
    ``data.get("sequences")`` gives ``{"seq": "sequences"}``, so the item gets the stand-in the local's use asks for."""
    found: dict[str, str] = {}

    class Visitor(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            key = _item_key(node.value)
            if key is not None and len(node.targets) == 1 and (local := _root(node.targets[0].target)):
                found.setdefault(local, key)

    function.visit(Visitor())
    return found


def _item_key(node: cst.BaseExpression) -> str | None:
    """The string key of ``m["key"]`` or ``m.get("key", ...)``."""
    index: cst.BaseExpression | None = None
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        index = node.slice[0].slice.value
    elif (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "get"
        and node.args
        and node.args[0].keyword is None
    ):
        index = node.args[0].value
    if isinstance(index, cst.SimpleString) and isinstance(value := index.evaluated_value, str):
        return value
    return None


def _names_in(node: cst.CSTNode | None) -> list[str]:
    found: list[str] = []

    class Collector(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.append(name.value)

    if node is not None:
        node.visit(Collector())
    return found


def _literals(function: cst.CSTNode) -> tuple[str, ...]:
    """The function's string constants that could be keys (``"pg_loss"``), in order."""
    found: dict[str, None] = {}

    class Visitor(cst.CSTVisitor):
        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            value = node.evaluated_value
            if isinstance(value, str) and value.isidentifier():
                found[value] = None

    function.visit(Visitor())
    return tuple(found)


def _annotation_kind(annotation: cst.Annotation | None) -> Kind | None:
    if annotation is None:
        return None
    node = annotation.annotation
    if isinstance(node, cst.Subscript):  # Dict[str, Tensor], Optional[...] is left to use
        node = node.value
    text = cst.Module(body=[]).code_for_node(node)
    if text in _MAPPING_TYPES or text.endswith((".Dict", ".Mapping")):
        return "mapping"
    if text in _TENSOR_TYPES:
        return "tensor"
    if text == "str":
        return "key"
    if text == "bool":
        return "flag"
    return None


def functions(module: cst.Module) -> list[cst.FunctionDef | cst.Lambda]:
    """Every function and lambda, in source order: the same index finds it again in the fixed module."""
    found: list[cst.FunctionDef | cst.Lambda] = []

    class Collector(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            found.append(node)

        def visit_Lambda(self, node: cst.Lambda) -> None:
            found.append(node)

    module.visit(Collector())
    return found


def _receiver(module: cst.Module, function: cst.CSTNode) -> cst.ClassDef | None:
    """The class of which ``function`` is a method taking ``self`` or ``cls`` first, if it is one."""
    if "staticmethod" in _decorators(function):
        return None
    found: list[cst.ClassDef] = []

    class Collector(cst.CSTVisitor):
        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            found.extend(node for stmt in node.body.body if stmt is function)

    module.visit(Collector())
    return found[0] if found else None


def _decorators(function: cst.CSTNode) -> set[str]:
    decorators = function.decorators if isinstance(function, cst.FunctionDef) else ()
    return {d.decorator.value for d in decorators if isinstance(d.decorator, cst.Name)}


class _Marker(cst.CSTTransformer):
    """Wraps each flagged entry ``e`` as ``__flux_mark__(key, e)``, first applying its fix if it has one."""

    def __init__(self, entries: Mapping[int, int], fixes: Mapping[int, tuple[str, str]]) -> None:
        self._entries, self._fixes = entries, fixes

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> Any:
        key = self._entries.get(id(original))
        if key is None or not isinstance(updated, cst.BaseExpression):
            return updated
        if id(original) in self._fixes:
            before, after = self._fixes[id(original)]
            updated = cst.parse_expression(before + cst.Module(body=[]).code_for_node(updated) + after)
        return cst.Call(cst.Name(MARK), [cst.Arg(cst.Integer(str(key))), cst.Arg(updated)])


def build_probe(
    module: cst.Module,
    function: cst.FunctionDef | cst.Lambda,
    shape: tuple[int, ...],
    entries: Mapping[int, int] | None = None,
    kinds: Mapping[str, Kind] | None = None,
    path: str = "",
    faithful: bool = False,
    fixes: Mapping[int, tuple[str, str]] | None = None,
    output: str | None = None,
) -> Probe:
    """A runnable version of ``function`` from ``module`` (the file ``path``), fed tensors of ``shape``.

    ``entries`` maps ``id()`` of flagged entry nodes to the keys their values are recorded
    under; ``kinds`` overrides the stand-in kind of parameters and free names (call context);
    ``fixes`` maps some of those ids to a finding's fix (text put before and after the entry), so the
    fixed entry's values are the ones recorded; ``output``: the parameter Megatron fills with the model's output
    (handover.py), if known.
    ``faithful``: run the project's own modules it imports (moduletop.py) and make ``self`` an
    instance of its own class; else both are stubs. ProbeError if the function cannot be defined.
    """
    used = {**usage_kinds(function), **(kinds or {})}
    run = Run(shape, _literals(function))
    run.mapping_names.update(name for name, kind in used.items() if kind == "mapping")
    namespace = _Namespace(used, run)
    namespace["__name__"] = "__flux_probe__"
    run_module_top(module, namespace, run, path, Project(run) if faithful else None)
    marked = function.visit(_Marker(entries or {}, fixes or {}))
    if isinstance(marked, cst.Lambda):
        code, name = f"__flux_probe__ = ({module.code_for_node(marked)})\n", "__flux_probe__"
    else:
        assert isinstance(marked, cst.FunctionDef)
        code = module.code_for_node(marked.with_changes(decorators=[], leading_lines=[]))
        name = marked.name.value
    try:
        exec(compile(code, PROBE_FILENAME, "exec"), namespace)
    except Exception as exc:
        raise ProbeError(f"the function does not run on its own ({type(exc).__name__}: {exc})") from None
    func = dict.__getitem__(namespace, name)

    params = function.params
    positional = [p for p in (*params.posonly_params, *params.params) if p.default is None]
    keyword = [p for p in params.kwonly_params if p.default is None]

    def kind_of(param: cst.Param) -> Kind:
        name = param.name.value
        given = (kinds or {}).get(name)
        return given or used.get(name) or _annotation_kind(param.annotation) or "tensor"

    signature = [(p.name.value, kind_of(p)) for p in positional]
    owner = _receiver(module, function) if signature else None
    receiver = None
    if owner is not None:
        signature[0] = (signature[0][0], "object")
        defined = dict.get(namespace, owner.name.value)
        if faithful and isinstance(defined, type) and not issubclass(defined, StubType):
            cls: type = defined
            receiver = (
                (lambda run: cls) if "classmethod" in _decorators(function) else (lambda run: instance_of(cls, run))
            )
    keywords = [(p.name.value, kind_of(p)) for p in keyword]
    layouts = {**callee_layouts(function, namespace), **usage_layouts(function)}
    for local, key in batch_items(function).items():
        if used.get(local) == "object":
            run.stub_items.add(key)
        if local in layouts:
            layouts.setdefault(key, layouts[local])
    return Probe(func, run, namespace, signature, keywords, receiver, layouts, code, output)
