"""Evidence of a third-party host (`facts/hosts.py`) receiving a loss function's return value whole.

Each is a bare returned loss the host rescales in place (`Reach(..., whole_return=True)`, so FAL005
reports the captures at `return loss`), under the host's own context:
- a `transformers` (or TRL) `Trainer` subclass's `compute_loss` override: what it returns goes to
  `Trainer.training_step` (`transformers-training-step`; the base `compute_loss`'s multiplication
  by the world size comes before the override's own captures, so it is not this row's);
- a `compute_loss_func=` passed to a `...Trainer(...)` call: the base `Trainer.compute_loss`
  multiplies what it returns (`transformers-compute-loss`, then `training_step`, `index/releases.py`);
- the `forward` of a model handed to a `Trainer(model=...)`: the base `Trainer.compute_loss` takes its
  `outputs["loss"]` (`Reach.entry`) or `outputs[0]` as the loss, which the models' writes after it reach;
- `loss = f(...)` (or `f(...)` itself, or the first of `loss, metrics = f(...)`: then the pair's first, not a bare
  return) handed to `accelerator.backward(loss)` (`accelerate-backward`), unless `loss`
  is bound to another tensor on the way (`loss = loss.mean()`; a view of it, `loss.reshape(1)`, is still it);
- a Composer `ComposerModel` (or `HuggingFaceModel`) subclass's `loss` method: a bare loss (`composer`), or the `'total'` entry of a
  returned dict (`composer-total`: the row's `entry`, which the analysis matches to the captures of that entry).
  A `loss_fn` handed to Composer's `ComposerClassifier` is what its `loss` returns: a dict's `'total'` only.
Whether the release the project runs does it is decided when a finding is made (`index/releases.py`).
"""

from __future__ import annotations

import ast
import bisect
from collections.abc import Sequence
from typing import NamedTuple

from ..facts.hosts import LOSS_KWARGS_ATTRIBUTE, LOSS_KWARGS_STATE
from .host_models import Write, writes
from .nodes import aliases_itself, body_walk, dotted, is_self_attribute, last_name
from .reach import COMPOSER, COMPOSER_TOTAL, Reach, Step
from .registries import _LOADERS
from .resolve import Resolver
from .symbols import Symbols

# What a file must hold for any of these (plain substring tests: most files have none): an override
# of `compute_loss` in a `...Trainer` subclass, a `compute_loss_func=`, a Composer model, a call of
# `accelerator.backward(` (any receiver named so).
_WORDS = (
    (b"def compute_loss(", b"Trainer"),
    (b"compute_loss_func",),
    (b"ComposerModel",),
    (b"HuggingFaceModel",),
    (b"ComposerClassifier",),
    (b"ccelerator.backward(",),
    (b"Trainer(", b"model"),  # a model handed to a Trainer: its `forward`'s loss is the base compute_loss's
)
# Composer's model base classes a project's model derives (`HuggingFaceModel` and `ComposerClassifier` derive
# `ComposerModel`: llm-foundry's).
_COMPOSER_MODELS = ("ComposerModel", "HuggingFaceModel", "ComposerClassifier")
# Composer's model whose `loss` returns what its `loss_fn` returns, unchanged (`return self._loss_fn(outputs,
# targets, *args, **kwargs)`, composer/models/tasks/classification.py).
_COMPOSER_CLASSIFIER = "ComposerClassifier"
_TRAINER_PACKAGES = ("transformers", "trl")
_COMPUTE_LOSS = "compute_loss"
_OVERRIDE = ("override", _COMPUTE_LOSS)  # what the project's `compute_loss` returns to the host


# What a function must hold for a hand-off in its body: `...Trainer(`, `compute_loss_func`,
# `accelerator.backward(`; in a Trainer's subclass `super().__init__(` too. Most functions of a file the
# gate lets through hold none (NeMo's `trainer: Trainer` parameters are no call).
_CALL_WORDS = (b"Trainer(", b"compute_loss_func", b"backward(")
_INIT_WORDS = (b"__init__(",)
_LOSS_FN_WORDS = (b"loss_fn",)  # `ComposerClassifier(..., loss_fn=f)`, `super().__init__(..., loss_fn=f)`


def hosted(data: bytes) -> bool:
    """Whether a file's text may hold a third-party host's evidence."""
    return any(all(word in data for word in words) for words in _WORDS)


class HandOffLines(NamedTuple):
    """The lines of a file that may hold a hand-off, in order: the functions to search for one."""

    calls: list[int]  # `_CALL_WORDS`
    inits: list[int]  # `_INIT_WORDS`: a hand-off only in a Trainer's subclass
    loss_fns: list[int]  # `_LOSS_FN_WORDS`


def hand_off_lines(data: bytes) -> HandOffLines:
    if b"\r" in data:  # Python's line numbers count a bare `\r` as a line's end too
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return HandOffLines(_lines(data, _CALL_WORDS), _lines(data, _INIT_WORDS), _lines(data, _LOSS_FN_WORDS))


def _lines(data: bytes, words: tuple[bytes, ...]) -> list[int]:
    """The lines holding one of `words`, in order."""
    offsets = sorted(at for word in words if word in data for at in _occurrences(data, word))
    lines: list[int] = []
    line, counted = 1, 0
    for at in offsets:  # the newlines between one occurrence and the next, counted once
        line += data.count(b"\n", counted, at)
        counted = at
        if not lines or lines[-1] != line:
            lines.append(line)
    return lines


def _occurrences(data: bytes, word: bytes) -> list[int]:
    found, at = [], data.find(word)
    while at != -1:
        found.append(at)
        at = data.find(word, at + 1)
    return found


def _holds(lines: Sequence[int], node: ast.AST) -> bool:
    """Whether one of `lines` is within `node`'s."""
    at = bisect.bisect_left(lines, node.lineno)  # type: ignore[attr-defined]
    return at < len(lines) and lines[at] <= (node.end_lineno or node.lineno)  # type: ignore[attr-defined]


class HostEvidence(Resolver):
    """The functions whose bare returned loss a third-party host rescales in place."""

    def _host_evidence(self, module: Symbols, lines: HandOffLines) -> None:
        """`lines`: `hand_off_lines` of the module's text; a function holding none hands nothing over."""
        trainers: dict[int, bool] = {}  # `_derives` of each class, asked once
        for scope, function in module.scoped:
            cls = scope[-1] if scope and isinstance(scope[-1], ast.ClassDef) else None
            if cls is not None and id(cls) not in trainers:
                trainers[id(cls)] = self._derives(module, cls, _TRAINER_PACKAGES)
            if cls is not None and function in cls.body and trainers[id(cls)]:
                # What transformers' Trainer does with what this override returns, as its models run it.
                for write in self._trainer_writes(module, cls):
                    if write.origin == ("override", function.name):
                        what = f"its loss is returned by {cls.name}.{function.name} to {write.said}"
                        self._reach(module.path, function, self._host(module, function, write.context, what))
            if (
                cls is not None
                and function.name == "loss"
                and any(self._derives(module, cls, ("composer",), base) for base in _COMPOSER_MODELS)
            ):
                what = f"its loss is returned by {cls.name}.loss to Composer's Trainer._train_microbatch"
                self._reach(module.path, function, self._host(module, function, COMPOSER, what))
                what = f"its dict of losses is returned by {cls.name}.loss to Composer's Trainer._train_microbatch"
                self._reach(module.path, function, self._host(module, function, COMPOSER_TOTAL, what))
            if _holds(lines.calls, function) or (
                cls is not None and trainers[id(cls)] and _holds(lines.inits, function)
            ):
                self._handed_to_hosts(module, [*scope, function], function)
        self._handed_to_hosts(module, [], module.tree)
        self._composer_loss_fns(module, lines.loss_fns)

    def _composer_loss_fns(self, module: Symbols, lines: Sequence[int]) -> None:
        """`ComposerClassifier(module, loss_fn=f)` (or `super().__init__(..., loss_fn=f)` in a subclass of
        it): the classifier's `loss` returns what `f` returns to Composer's trainer unchanged. `loss_fn`
        came with 0.9, whose trainer sums a bare loss into a new tensor: only a dict's `'total'` (0.10+)."""
        for scope, function in [*module.scoped, ([], module.tree)]:
            if function is not module.tree and not _holds(lines, function):
                continue
            inner = [] if function is module.tree else [*scope, function]
            for node in body_walk(function):
                if not isinstance(node, ast.Call) or not any(k.arg == "loss_fn" for k in node.keywords):
                    continue
                name = last_name(node.func)
                if name == _COMPOSER_CLASSIFIER:
                    handed_to = self._from_composer(module, node.func)
                else:
                    cls = next((s for s in reversed(inner) if isinstance(s, ast.ClassDef)), None)
                    handed_to = (
                        name == "__init__"
                        and _of_super(node.func)
                        and cls is not None
                        and self._derives(module, cls, ("composer",), _COMPOSER_CLASSIFIER)
                    )
                if handed_to:
                    handed = next(k.value for k in node.keywords if k.arg == "loss_fn")
                    what = (
                        f"passed as loss_fn to {_COMPOSER_CLASSIFIER}, whose loss returns its dict of losses"
                        " to Composer's Trainer._train_microbatch"
                    )
                    self._handed(module, inner, handed, COMPOSER_TOTAL, self._step(module, node, what))

    def _from_composer(self, module: Symbols, func: ast.expr) -> bool:
        """Whether `func` (`Name`, `alias.Name`) is imported from Composer (in any branch of the module)."""
        head = dotted(func)
        if head is None:
            return False
        targets = module.branch_imports.get(head.partition(".")[0], ())
        return any(target.split(".")[0] == "composer" for target in targets)

    def _host(self, module: Symbols, node: ast.AST, context: str, what: str) -> Reach:
        return Reach(context, (self._step(module, node, what),), whole_return=True)

    def _handed_to_hosts(self, module: Symbols, scope: list[ast.AST], function: ast.AST) -> None:
        """`Trainer(..., compute_loss_func=f)` and `accelerator.backward(loss)` in one function's body."""
        nodes = list(body_walk(function))
        assigned: dict[str, list[ast.Assign]] = {}  # `loss = ...`, and `loss, metrics = ...` (the pair's first)
        for node in nodes:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                name = _first_name(node.targets[0])
                if name is not None:
                    assigned.setdefault(name, []).append(node)
        blocks = _blocks(function)
        for node in nodes:
            if (
                isinstance(node, ast.Assign)
                and any(is_self_attribute(t) and t.attr == "compute_loss_func" for t in node.targets)
                and self._in_trainer(module, scope)
            ):  # the base `Trainer.compute_loss` calls `self.compute_loss_func` (LLaMA-Factory's trainers)
                for write in self._handed_func_writes(module, _enclosing(scope)):
                    what = f"stored as self.compute_loss_func, which reaches {write.said}"
                    self._handed(module, scope, node.value, write.context, self._step(module, node, what))
            if not isinstance(node, ast.Call):
                continue
            name = last_name(node.func) or ""
            # `Trainer(...)`, or `super().__init__(...)` in a subclass of one (TRL's `SFTTrainer`)
            own = name == "__init__" and _of_super(node.func) and self._in_trainer(module, scope)
            trainer = name.endswith("Trainer") or own
            if trainer:
                self._models_handed(module, scope, node, name, own)
            for keyword in node.keywords:
                if keyword.arg == "compute_loss_func" and trainer:
                    cls = _enclosing(scope)
                    receiver = (module, cls) if own and cls else self._trainer_class(module, node.func)
                    self._handed_as_compute_loss_func(module, scope, node, keyword.value, name, receiver)
                elif keyword.arg is None and isinstance(keyword.value, ast.Name):
                    # `trainer_cls(**kwargs)` after `kwargs["compute_loss_func"] = f` in the same function
                    # (axolotl's builders): the key names the Trainer's parameter, whatever the callee's name
                    for value in _entries(nodes, keyword.value.id, "compute_loss_func"):
                        self._handed_as_compute_loss_func(module, scope, node, value, name, None)
            if name == "backward" and _accelerator(node.func) and len(node.args) == 1:
                loss = node.args[0]
                written = [w for w in writes("accelerate", "Accelerator.backward") if w.origin == ("parameter", "loss")]
                if not written:
                    continue
                context = written[0].context
                what = f"its loss is handed to accelerator.backward: {written[0].said}"
                if isinstance(loss, ast.Call):
                    self._handed(module, scope, loss.func, context, self._step(module, node, what))
                elif isinstance(loss, ast.Name):
                    for assign in assigned.get(loss.id, []):
                        if (
                            isinstance(assign.value, ast.Call)
                            and assign.lineno < node.lineno
                            and not _rebound(assign, node, nodes, blocks)
                        ):
                            whole = isinstance(assign.targets[0], ast.Name)
                            said = "its loss is" if whole else "its (loss, report) is unpacked into"
                            step = self._step(module, assign, f"{said} {loss.id}, handed to accelerator.backward")
                            self._handed(
                                module,
                                scope,
                                assign.value.func,
                                context,
                                step,
                                self._step(module, node, what),
                                whole=whole,
                            )

    def _models_handed(self, module: Symbols, scope: list[ast.AST], call: ast.Call, name: str, own: bool) -> None:
        """`Trainer(model=m, ...)` (its first positional, `model_init=f` too), or `super().__init__(m, ...)` in a
        subclass of one: the base `Trainer.compute_loss` calls `m(**inputs)` and takes its `forward`'s
        `outputs["loss"]` (a dict, a `ModelOutput`) or `outputs[0]` (a tuple) as the loss, which the writes of
        transformers' models under the project's Trainer class reach. Not where a `compute_loss_func` is handed
        too (its loss is the loss then)."""
        if any(k.arg == "compute_loss_func" for k in call.keywords):
            return
        cls = _enclosing(scope)
        receiver = (module, cls) if own and cls is not None else self._trainer_class(module, call.func)
        if receiver is not None and not self._derives(*receiver, _TRAINER_PACKAGES):
            return
        if receiver is None and not _imported_from(module, call.func, _TRAINER_PACKAGES, "Trainer"):
            return  # Lightning's `Trainer(...)`, or one the index does not know
        written = self._trainer_writes(*receiver) if receiver else writes("transformers", "Trainer.training_step")
        # An override of `compute_loss` returning the model's own output's loss (`model(**inputs).loss`): what the host
        # writes after it is that forward's entry, as under the base `compute_loss`.
        returned = self._returns_forward(*receiver) if receiver else []
        written = [w for w in written if w.origin[0] == "forward" or (returned and w.origin == _OVERRIDE)]
        if not written:
            return
        given = next((k.value for k in call.keywords if k.arg == "model"), call.args[0] if call.args else None)
        classes = self._model_classes(module, scope, given) if given is not None else []
        init = next((k.value for k in call.keywords if k.arg == "model_init"), None)
        if init is not None:
            classes += self._made_by(module, scope, init, 0)
        for class_module, model in classes:
            for forward_module, forward in self._inherited(class_module, model, "forward", 0):
                assert isinstance(forward, ast.FunctionDef | ast.AsyncFunctionDef)
                accepts = self._accepts_loss_kwargs(class_module, model, forward)
                for write in written:
                    if LOSS_KWARGS_STATE in write.guards and not accepts:
                        continue  # the Trainer's `model_accepts_loss_kwargs` is off for this model
                    handed = self._step(module, call, f"{model.name} is handed as the model to {name}")
                    steps = tuple(self._step(module, call, write.model.said(step)) for step in write.steps)
                    # `outputs["loss"]`: that entry of a returned dict; `outputs[0]`: a tuple's first element
                    for taken, through in [(write.origin[1], ())] if write.origin[0] == "forward" else returned:
                        entry = "" if taken == "0" else taken
                        reach = Reach(write.context, (handed, *through, *steps), whole_return=bool(entry), entry=entry)
                        self._reach(forward_module.path, forward, reach)

    def _returns_forward(self, module: Symbols, cls: ast.ClassDef) -> list[tuple[str, tuple[Step, ...]]]:
        """What the `compute_loss` override of the Trainer class `cls` (or of its nearest project base having one)
        returns of the model it is handed, where it does not call the base one: `model(**inputs).loss`,
        `outputs["loss"]`, `outputs[0]` (`outputs = model(**inputs)`), each as (the entry, the step of its return)."""
        for owner, klass in ((module, cls), *self._bases(module, cls, 0)):
            method = next((m for m in klass.body if isinstance(m, ast.FunctionDef) and m.name == _COMPUTE_LOSS), None)
            if method is None:
                continue
            if len(method.args.args) < 2 or any(
                isinstance(n, ast.Call) and _of_super(n.func) and last_name(n.func) == _COMPUTE_LOSS
                for n in ast.walk(method)
            ):
                return []
            model = method.args.args[1].arg
            bound: dict[str, list[ast.expr]] = {}
            for node in body_walk(method):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    bound.setdefault(node.targets[0].id, []).append(node.value)
            found = []
            for node in body_walk(method):
                if isinstance(node, ast.Return) and node.value is not None:
                    for entry in sorted(_entries_of(node.value, model, bound, 0)):
                        what = f"{klass.name}.{_COMPUTE_LOSS} returns the model's output's {entry or '[0]'} as its loss"
                        found.append((entry, (self._step(owner, node, what),)))
            return found
        return []

    def _accepts_loss_kwargs(
        self, module: Symbols, cls: ast.ClassDef, forward: ast.FunctionDef | ast.AsyncFunctionDef
    ) -> bool:
        """transformers' `Trainer.__init__` on a model of `cls` (`facts.hosts.LOSS_KWARGS_ATTRIBUTE`): its class attribute
        `accepts_loss_kwargs` (its own or a project base's, nearest first) where it has one, a literal; else whether
        its `forward` takes `**kwargs`. An attribute set to anything else may be on."""
        for _, klass in ((module, cls), *self._bases(module, cls, 0)):
            for stmt in klass.body:
                targets = (
                    stmt.targets
                    if isinstance(stmt, ast.Assign)
                    else [stmt.target]
                    if isinstance(stmt, ast.AnnAssign)
                    else []
                )
                if any(isinstance(t, ast.Name) and t.id == LOSS_KWARGS_ATTRIBUTE for t in targets):
                    value = stmt.value
                    return not (isinstance(value, ast.Constant) and value.value in (False, None, 0))
        return forward.args.kwarg is not None

    def _model_classes(
        self, module: Symbols, scope: list[ast.AST], node: ast.expr, depth: int = 0
    ) -> list[tuple[Symbols, ast.ClassDef]]:
        """The classes of the project `node` is an instance of, `Class.from_pretrained(...)` too."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _LOADERS:
            return self._classes(module, node.func.value)
        if isinstance(node, ast.Name) and depth < 2:
            _, values = self._named(module, scope, node.id, at=node)
            loaded = [
                c for v in values if isinstance(v, ast.Call) for c in self._model_classes(module, scope, v, depth + 1)
            ]
            if loaded:
                return loaded
        return self._instance_of(module, scope, node, 0)

    def _handed_as_compute_loss_func(
        self,
        module: Symbols,
        scope: list[ast.AST],
        call: ast.Call,
        value: ast.expr,
        name: str,
        receiver: tuple[Symbols, ast.ClassDef] | None,
    ) -> None:
        """`receiver`: the project's Trainer class given it (None: transformers' own, or one not known)."""
        for write in self._handed_func_writes(*(receiver or (module, None))):
            what = f"passed as compute_loss_func to {name}, which reaches {write.said}"
            self._handed(module, scope, value, write.context, self._step(module, call, what))

    def _handed_func_writes(self, module: Symbols, cls: ast.ClassDef | None) -> list[Write]:
        """The writes of transformers' Trainer on what a `compute_loss_func` returns, the Trainer being `cls` (a
        project class, its overrides replacing the host's methods) or transformers' own (None)."""
        found = (
            self._trainer_writes(module, cls) if cls is not None else writes("transformers", "Trainer.training_step")
        )
        return [w for w in found if w.origin == ("attribute", "compute_loss_func")]

    def _trainer_writes(self, module: Symbols, cls: ast.ClassDef) -> list[Write]:
        """The in-place writes transformers' Trainer makes under the project class `cls`: its methods, and those
        of its bases in the project, nearest first, override the model's (each calling `super()`'s or not)."""
        overrides: dict[str, bool] = {}
        for _, klass in ((module, cls), *self._bases(module, cls, 0)):
            for method in klass.body:
                if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) and method.name not in overrides:
                    overrides[method.name] = any(
                        isinstance(n, ast.Call) and _of_super(n.func) and last_name(n.func) == method.name
                        for n in ast.walk(method)
                    )
        return writes("transformers", "Trainer.training_step", overrides)

    def _trainer_class(self, module: Symbols, func: ast.expr) -> tuple[Symbols, ast.ClassDef] | None:
        """The project class a `...Trainer(...)` call makes, if the project defines it."""
        found = self._classes(module, func)
        return found[0] if found else None

    def _in_trainer(self, module: Symbols, scope: list[ast.AST]) -> bool:
        """Whether the innermost class of `scope` derives a `...Trainer` of transformers or TRL."""
        cls = _enclosing(scope)
        return cls is not None and self._derives(module, cls, _TRAINER_PACKAGES)

    def _handed(
        self, module: Symbols, scope: list[ast.AST], node: ast.expr, context: str, *steps: Step, whole: bool = True
    ) -> None:
        """The functions `node` calls hand the host their bare loss (`whole`), or the first of their pair."""
        for value in self._values(module, scope, node):
            self._reach(value.module.path, value.function, Reach(context, (*value.steps, *steps), whole_return=whole))

    def _derives(self, module: Symbols, cls: ast.ClassDef, packages: tuple[str, ...], suffix: str = "Trainer") -> bool:
        """Whether `cls`, or a base class of it in the project, names a base `...{suffix}` imported from one
        of `packages`: under any of the module-level imports binding its name, those under `try:`/`except
        ImportError:` or `if version...: else:` too (ms-swift's `GKDTrainer`), whatever the local name."""
        return any(
            _imported_from(owner, base, packages, suffix)
            for owner, klass in ((module, cls), *self._bases(module, cls, 0))
            for base in klass.bases
        )


def _imported_from(module: Symbols, node: ast.expr, packages: tuple[str, ...], suffix: str) -> bool:
    """Whether `node` (`Trainer`, `transformers.Trainer`) names a `...{suffix}` one of `packages` defines, under any
    of the module-level imports binding its head."""
    chain = dotted(node)
    if chain is None:
        return False
    head, _, rest = chain.partition(".")
    for target in module.branch_imports.get(head, ()):
        full = f"{target}.{rest}" if rest else target
        if full.split(".")[0] in packages and full.rpartition(".")[2].endswith(suffix):
            return True
    return False


def _entries_of(node: ast.expr, model: str, bound: dict[str, list[ast.expr]], depth: int) -> set[str]:
    """The entries of `model(...)`'s output `node` is (`.loss`, `["loss"]`: "loss"; `[0]`: "0"), through the names
    bound to them (`outputs = model(**inputs)`, `loss = outputs.loss`) and `(loss, outputs) if return_outputs else
    loss`."""
    if depth > 3:
        return set()
    if isinstance(node, ast.IfExp):
        return _entries_of(node.body, model, bound, depth + 1) | _entries_of(node.orelse, model, bound, depth + 1)
    if isinstance(node, ast.Tuple) and node.elts:  # `(loss, outputs)`: the host takes the first
        return _entries_of(node.elts[0], model, bound, depth + 1)
    if isinstance(node, ast.Name):
        return {e for value in bound.get(node.id, ()) for e in _entries_of(value, model, bound, depth + 1)}
    if isinstance(node, ast.Attribute):
        holder, entry = node.value, node.attr
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        holder, entry = node.value, str(node.slice.value)
    else:
        return set()
    if entry not in ("loss", "0") or not _output_of(holder, model, bound):
        return set()
    return {entry}


def _output_of(node: ast.expr, model: str, bound: dict[str, list[ast.expr]]) -> bool:
    """`model(...)`, or a name bound to it only."""
    if isinstance(node, ast.Name) and node.id in bound:
        return all(_output_of(value, model, {}) for value in bound[node.id])
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == model


def _enclosing(scope: list[ast.AST]) -> ast.ClassDef | None:
    """The innermost class of `scope`."""
    return next((s for s in reversed(scope) if isinstance(s, ast.ClassDef)), None)


def _of_super(func: ast.expr) -> bool:
    """`super().name`."""
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "super"
    )


def _entries(nodes: list[ast.AST], name: str, key: str) -> list[ast.expr]:
    """What `nodes` store as `name[key]` (`kwargs["compute_loss_func"] = f`)."""
    return [
        node.value
        for node in nodes
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Name)
        and target.value.id == name
        and isinstance(target.slice, ast.Constant)
        and target.slice.value == key
    ]


def _blocks(function: ast.AST) -> dict[int, tuple[int, ...]]:
    """For each statement of `function`'s own body: the statement lists it runs in, its own first, then
    those of the statements holding it (a list's `id`)."""
    found: dict[int, tuple[int, ...]] = {}
    pending: list[tuple[list[ast.stmt], tuple[int, ...]]] = []
    if isinstance(getattr(function, "body", None), list):
        pending.append((function.body, ()))
    while pending:
        body, outer = pending.pop()
        chain = (id(body), *outer)
        for stmt in body:
            found[id(stmt)] = chain
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            inner = [getattr(stmt, field, None) for field in ("body", "orelse", "finalbody")]
            inner += [handler.body for handler in getattr(stmt, "handlers", ())]
            inner += [case.body for case in getattr(stmt, "cases", ())]
            pending += [(block, chain) for block in inner if isinstance(block, list) and block]
    return found


def _rebound(assign: ast.Assign, use: ast.AST, nodes: list[ast.AST], blocks: dict[int, tuple[int, ...]]) -> bool:
    """Whether the name `assign` binds is bound again to another tensor on every path from it to `use`: by a
    statement after it, before `use`, in its own statement list or one holding it (`loss = loss.mean()`);
    not by a view or detached alias of itself (`loss = loss.view(-1)`, which the host's write reaches too)."""
    name = _first_name(assign.targets[0])
    holding = set(blocks.get(id(assign), ()))
    for node in nodes:
        if not (isinstance(node, (ast.Assign, ast.AnnAssign)) and assign.lineno < node.lineno < use.lineno):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if not any(isinstance(t, ast.Name) and t.id == name for t in targets):
            continue
        chain = blocks.get(id(node))
        if chain and chain[0] in holding and not aliases_itself(node.value, name):
            return True
    return False


def _first_name(target: ast.expr) -> str | None:
    """The name `target` binds to a call's loss: `loss` of `loss = f(...)` or of `loss, metrics = f(...)`."""
    if isinstance(target, ast.Tuple) and len(target.elts) in (2, 3):
        target = target.elts[0]
    return target.id if isinstance(target, ast.Name) else None


def _accelerator(func: ast.expr) -> bool:
    """`accelerator.backward`, `self.accelerator.backward`: a receiver named like an `Accelerator`."""
    receiver = func.value if isinstance(func, ast.Attribute) else None
    return receiver is not None and "accelerator" in (last_name(receiver) or "").lower()
