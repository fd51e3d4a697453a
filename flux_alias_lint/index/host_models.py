"""The hosts as code: a model of each host's own code path and release range (`flux_alias_lint/hosts/*.pyi`, read
as text, never imported), and the in-place writes that code makes, under a project's classes, on what they hand it.

A model is Python: module constants (`DISTRIBUTION`, `RELEASES`, `MEASURED`: the release whose file the line
numbers are of, `FILE`), the defaults of the settings its guards read (a `TrainingArguments` class of `name = value`,
each with its line in the release's file of that class; a host class's own `name = value`: a parameter of its
`__init__` it stores, as `Accelerator(gradient_accumulation_steps=1)`) and the host's classes with the statements that matter,
each ending with its line in that release (`# 3605`); a method's `def` line also names the context of the writes in it (facts/hosts.py's
row). A small interpreter walks a host method the way the release runs it: `x = self.m(...)` runs the
model's `m` unless the project's class overrides it (then `x` is the override's return, and, where the
override calls `super().m`, what the model's `m` returns too); `x = self.attr(...)` is a callable the project
handed over (`compute_loss_func`); `model(**inputs)` is the model's `forward`; `x *= self.a.b` is an in-place
write on every origin of `x`, its factor the setting `b`; `if` runs both branches, the settings (`self.args.b`) and
states of the host (`self.model_accepts_loss_kwargs`) its test reads the guards of the writes in them, any one of
them possibly enough (`a and (b or c)`: the reader of a write decides which hold for its origin). A parameter of the entry
method is an origin too (the `loss` handed to `Accelerator.backward`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import os
import re
from collections.abc import Mapping

# Where a value a host writes in place came from: ("override", method): what the project's override returns;
# ("attribute", name): what a callable the project handed over returns; ("forward", entry): the model's output
# (or its entry); ("parameter", name): what the project hands the entry method.
Origin = tuple[str, str]
_DEPTH = 4
_SETTINGS = "TrainingArguments"  # the class of a model holding only the defaults of the settings
_LINE = re.compile(r"#\s*(\d+)(?:\s+([\w-]+))?\s*$")


@dataclasses.dataclass(frozen=True)
class ModelStep:
    """One statement of a host model: the method, its line in the release's file, the statement."""

    method: str  # "Trainer.training_step"
    line: int
    text: str


@dataclasses.dataclass(frozen=True)
class Model:
    name: str  # the file's stem: "transformers-4.46.0"
    distribution: str
    releases: str  # a PEP 440 specifier set
    measured: str  # the release the lines are of
    file: str
    classes: Mapping[str, Mapping[str, ast.FunctionDef]]
    contexts: Mapping[str, str]  # method → the context of the writes in it
    lines: tuple[str, ...]
    defaults: Mapping[str, tuple[object, int]] = dataclasses.field(default_factory=dict)  # setting → (value, line)
    owners: Mapping[str, str] = dataclasses.field(default_factory=dict)  # setting → the class whose default it is

    def on_by_default(self, write: Write) -> bool:
        """Whether every setting `write` is under is on unless the project sets it (no default: on)."""
        return all(self.defaults.get(guard, (True, 0))[0] for guard in write.guards)

    def said(self, step: ModelStep) -> str:
        """ "Trainer.training_step, transformers 4.46.0 trainer.py:3605: loss *= self.args.gradient_accumulation_steps"."""
        return f"{step.method}, {self.distribution} {self.measured} {self.file}:{step.line}: {step.text}"

    def step(self, method: str, node: ast.stmt) -> ModelStep:
        text = self.lines[node.lineno - 1]
        match = _LINE.search(text)
        assert match is not None, f"{self.name}.pyi:{node.lineno}: no release line"
        return ModelStep(method, int(match[1]), text[: match.start()].strip())


@dataclasses.dataclass(frozen=True)
class Write:
    """An in-place write of a host's code on a value from `origin`, and the steps of the model to it."""

    model: Model
    origin: Origin
    context: str
    factor: str  # the setting the operand reads: "gradient_accumulation_steps"
    guards: tuple[str, ...]  # the settings and host states it is under
    steps: tuple[ModelStep, ...]

    @property
    def said(self) -> str:
        return self.model.said(self.steps[-1])


def _constant(tree: ast.Module, name: str) -> str:
    for stmt in tree.body:
        named = isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
        if named and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            return stmt.value.value
    raise ValueError(f"no {name} = '...'")


def _read(name: str, text: str) -> Model:
    tree = ast.parse(text)
    lines = tuple(text.splitlines())
    classes: dict[str, dict[str, ast.FunctionDef]] = {}
    contexts: dict[str, str] = {}
    defaults: dict[str, tuple[object, int]] = {}
    owners: dict[str, str] = {}
    for stmt in tree.body:
        if not isinstance(stmt, ast.ClassDef):
            continue
        for field in stmt.body:
            if isinstance(field, ast.Assign):  # a setting's default, with its line in the release
                match = _LINE.search(lines[field.lineno - 1])
                assert isinstance(field.value, ast.Constant) and match, field.lineno
                defaults[ast.unparse(field.targets[0])] = (field.value.value, int(match[1]))
                owners[ast.unparse(field.targets[0])] = stmt.name
        if stmt.name != _SETTINGS:
            methods = {m.name: m for m in stmt.body if isinstance(m, ast.FunctionDef)}
            classes[stmt.name] = methods
            for method in methods.values():
                header = lines[method.lineno - 1 : method.body[0].lineno - 1]  # a formatter may wrap the `def`
                for match in filter(None, map(_LINE.search, header)):
                    if match[2]:
                        contexts[f"{stmt.name}.{method.name}"] = match[2]
    return Model(
        name,
        _constant(tree, "DISTRIBUTION"),
        _constant(tree, "RELEASES"),
        _constant(tree, "MEASURED"),
        _constant(tree, "FILE"),
        classes,
        contexts,
        lines,
        defaults,
        owners,
    )


@functools.cache
def models() -> tuple[Model, ...]:
    """Every host model shipped, newest release first within a distribution."""
    # Read beside the package by path, not through importlib.resources: every run reads the models (facts/hosts.py
    # takes the rows' releases from them), and importlib.resources would load tempfile into a warm run.
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hosts")
    found = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".pyi"):
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                found.append(_read(name.removesuffix(".pyi"), handle.read()))
    return tuple(sorted(found, key=lambda m: (m.distribution, [-int(p) for p in re.findall(r"\d+", m.measured)])))


Values = frozenset[tuple[Origin, tuple[ModelStep, ...]]]


class _Run:
    """One walk of a model class's methods under a project class's overrides (name → whether it calls super)."""

    def __init__(self, model: Model, cls: str, overrides: Mapping[str, bool]) -> None:
        self.model, self.cls, self.overrides = model, cls, overrides
        self.writes: list[Write] = []

    def method(self, name: str, depth: int, parameters: tuple[str, ...] = ()) -> Values:
        function = self.model.classes[self.cls][name]
        env: dict[str, Values] = {p: frozenset({(("parameter", p), ())}) for p in parameters}
        returned: set = set()
        self._block(function.body, env, f"{self.cls}.{name}", (), depth, returned)
        return frozenset(returned)

    def _block(
        self,
        body: list[ast.stmt],
        env: dict[str, Values],
        method: str,
        guards: tuple[str, ...],
        depth: int,
        returned: set,
    ) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                env[stmt.targets[0].id] = self._value(stmt.value, env, method, stmt, depth)
            elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                step = self.model.step(method, stmt)
                factor = stmt.value.attr if isinstance(stmt.value, ast.Attribute) else ast.unparse(stmt.value)
                context = self.model.contexts.get(method, "")
                for origin, steps in sorted(env.get(stmt.target.id, frozenset()), key=_order):
                    self.writes.append(Write(self.model, origin, context, factor, guards, (*steps, step)))
            elif isinstance(stmt, ast.If):
                settings = tuple(
                    n.attr
                    for n in ast.walk(stmt.test)
                    if isinstance(n, ast.Attribute) and (_of_args(n.value) or _of_self(n) and n.attr != "args")
                )
                branches = []
                for branch in (stmt.body, stmt.orelse):
                    inner = dict(env)
                    self._block(branch, inner, method, (*guards, *settings), depth, returned)
                    branches.append(inner)
                for name in {*branches[0], *branches[1]}:
                    env[name] = branches[0].get(name, frozenset()) | branches[1].get(name, frozenset())
            elif isinstance(stmt, ast.Return) and stmt.value is not None:
                returned.update(self._value(stmt.value, env, method, stmt, depth))

    def _value(self, node: ast.expr, env: dict[str, Values], method: str, stmt: ast.stmt, depth: int) -> Values:
        if isinstance(node, ast.Name):
            return env.get(node.id, frozenset())
        if isinstance(node, ast.IfExp):
            return self._value(node.body, env, method, stmt, depth) | self._value(node.orelse, env, method, stmt, depth)
        if isinstance(node, ast.Tuple) and node.elts:  # `(loss, outputs)`: the host takes the first
            return self._value(node.elts[0], env, method, stmt, depth)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            base = self._value(node.value, env, method, stmt, depth)
            entry = str(node.slice.value)
            return frozenset(((kind, entry), steps) for (kind, _), steps in base if kind == "forward")
        if not isinstance(node, ast.Call):
            return frozenset()  # a new tensor (`loss / k`, `loss.detach()`)
        func = node.func
        if isinstance(func, ast.Name):  # `model(**inputs)`: the model's forward
            return frozenset({(("forward", ""), (self.model.step(method, stmt),))})
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"):
            return frozenset()
        name = func.attr
        step = self.model.step(method, stmt)
        if name not in self.model.classes[self.cls]:
            return frozenset({(("attribute", name), (step,))})
        found: set = set()
        if name in self.overrides:
            found.add((("override", name), (step,)))
        if (name not in self.overrides or self.overrides[name]) and depth < _DEPTH:
            found.update((origin, (*steps, step)) for origin, steps in self.method(name, depth + 1))
        return frozenset(found)


def _order(value: tuple[Origin, tuple[ModelStep, ...]]) -> tuple[Origin, list[int]]:
    """Writes in one order, run after run (a set's order is not)."""
    return value[0], [step.line for step in value[1]]


def _of_self(node: ast.Attribute) -> bool:
    """`self.x`: a state of the host object a guard reads (`self.model_accepts_loss_kwargs`)."""
    return isinstance(node.value, ast.Name) and node.value.id == "self"


def _of_args(node: ast.expr) -> bool:
    """`self.args`: the settings object a host reads."""
    return isinstance(node, ast.Attribute) and node.attr == "args" and isinstance(node.value, ast.Name)


def writes(distribution: str, entry: str, overrides: Mapping[str, bool] = {}) -> list[Write]:  # noqa: B006
    """The in-place writes every model of `distribution` makes when its host runs `entry` ("Trainer.training_step";
    the project calls it, or the host's own loop does) on an instance of a project class overriding `overrides`
    (method → whether the override calls `super()`'s). An overridden entry runs only where it calls super."""
    cls, _, method = entry.partition(".")
    found = []
    for model in models():
        if model.distribution != distribution or method not in model.classes.get(cls, {}):
            continue
        if method in overrides and not overrides[method]:
            continue
        run = _Run(model, cls, overrides)
        function = model.classes[cls][method]
        run.method(method, 0, tuple(a.arg for a in function.args.args[1:]))
        found += run.writes
    return found


def factors(context: str) -> set[str]:
    """The settings the writes of `context`'s methods multiply or divide by, in any model."""
    found = set()
    for model in models():
        for method, said in model.contexts.items():
            if said != context:
                continue
            cls, _, name = method.partition(".")
            for node in ast.walk(model.classes[cls][name]):
                if isinstance(node, ast.AugAssign) and isinstance(node.value, ast.Attribute):
                    found.add(node.value.attr)
    return found


@functools.cache
def _handed_writes() -> dict[str, tuple[str, Write]]:
    """A host method writing in place the parameter it is handed, by its name: (its class, named in lowercase
    as a receiver is: `accelerator`, and the write)."""
    found: dict[str, tuple[str, Write]] = {}
    for model in models():
        for write in own_writes(model):
            cls, _, method = write.steps[-1].method.partition(".")
            if write.origin[0] == "parameter" and method not in found:
                found[method] = (cls.lower(), write)
    return found


def handed_methods() -> frozenset[str]:
    """The names of the host methods writing in place what they are handed (`backward`)."""
    return frozenset(_handed_writes())


def handed_write(method: str, receiver: str) -> Write | None:
    """The in-place write a host makes on what `receiver.method(x)` hands it (`accelerator.backward(loss)`: a
    receiver named like the host's class), in any release of a model; None for any other call."""
    found = _handed_writes().get(method)
    return found[1] if found is not None and found[0] in receiver.rpartition(".")[2].lower() else None


def own_writes(model: Model) -> list[Write]:
    """The writes of each method of `model` naming a context, run alone (the project overriding nothing)."""
    found = []
    for method in model.contexts:
        cls, _, name = method.partition(".")
        run = _Run(model, cls, {})
        run.method(name, 0, tuple(a.arg for a in model.classes[cls][name].args.args[1:]))
        found += run.writes
    return found


def releases(context: str, origin: Origin | None = None, by_default: bool = False) -> tuple[str, ...]:
    """The release ranges of the models whose `context` methods write in place: on what `origin` is (any, if None),
    with every setting it is under on by default where `by_default`. Adjacent ranges joined (`joined`)."""
    return joined(
        tuple(
            model.releases
            for model in models()
            if any(
                write.context == context
                and origin in (None, write.origin)
                and (not by_default or model.on_by_default(write))
                for write in own_writes(model)
            )
        )
    )


def joined(ranges: tuple[str, ...]) -> tuple[str, ...]:
    """`(">=4.49.0,<4.54.0", ">=4.54.0")` as `(">=4.49.0",)`: a range ending where another begins, joined to it."""
    found: list[str] = []
    for each in sorted(ranges, key=lambda r: [int(p) for p in re.findall(r"\d+", r.split(",")[0])]):
        lower, _, upper = found[-1].partition(",") if found else ("", "", "")
        if found and upper == "<" + each.split(",")[0].removeprefix(">="):
            found[-1] = lower + each.removeprefix(each.split(",")[0])
        else:
            found.append(each)
    return tuple(found)


def default(context: str, setting: str) -> object | None:
    """The value `setting` has in every model whose `context` methods write in place, where each says it and the
    project does not set it (`Accelerator(...)` without `gradient_accumulation_steps`: 1); None otherwise."""
    found = {
        model.defaults.get(setting, (None, 0))[0]
        for model in models()
        if any(write.context == context for write in own_writes(model))
    }
    return found.pop() if len(found) == 1 else None


def always_under(context: str, setting: str) -> bool:
    """Whether every write of `context`, in every model, is under `setting`: set off, it stops them all."""
    found = [write for model in models() for write in own_writes(model) if write.context == context]
    return bool(found) and all(setting in write.guards for write in found)
