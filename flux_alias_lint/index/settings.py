"""Where a project sets a host's setting (`facts.hosts.Setting`) with a literal, or computes it, read from its code.

Megatron leaves a 3-tuple ``(loss, num_tokens, report)`` as it is when the model config's
``calculate_per_token_loss`` is on; transformers' ``Trainer.compute_loss`` multiplies the loss in place
by the world size when ``average_tokens_across_devices`` is. A project sets one with a literal:
``calculate_per_token_loss=True`` (a keyword, as to ``TransformerConfig``),
``config.calculate_per_token_loss = True``, ``kwargs["calculate_per_token_loss"] = True``, a dict
entry ``{"calculate_per_token_loss": True}``, or by requiring it (``assert cfg.calculate_per_token_loss``:
on); ``False`` in the same places sets it off. An expression computing a truth in the same places computes it
(``calculate_per_token_loss=args.x if args.x is not None else True``, ``= not args.no_per_token``, a default
filled in by ``if cfg.calculate_per_token_loss is None: cfg.calculate_per_token_loss = task == "lm"``): which
value a run gets is not in the code (`computed`); a bare name or attribute only passes on a value set elsewhere.

A setting under an ``if`` counts only where the condition is about the setting (a default filled in:
``if "calculate_per_token_loss" not in kwargs:``); under ``if cp_size > 1:`` it is not the project's. A
helper's parameter passed on as the setting (``def make_config(per_token): return
TransformerConfig(calculate_per_token_loss=per_token)``) is set where a call of the same module gives it a
literal (``make_config(per_token=True)``), through any number of such helpers. Where a setting holds: in a
script (a module with an ``if __name__ == "__main__":`` guard, such as one example's ``pretrain_*.py``) or a
test module (``test_*.py``, ``*_test.py``: each test sets up its own run), that module only; in another
module under a directory of examples, tests, scripts, tools or recipes, the modules beside it (one example's
``model.py`` sets it for that example); else the project's top-level package it is in (``src/`` skipped).
"""

from __future__ import annotations

import ast
import bisect
import functools
import os
import re
from collections.abc import Iterator

from ..facts.projects import declares_a_project
from ..source import SourceError, read_bytes
from .files import project_root, python_files

# What a line sets a setting to: on, off, or COMPUTED (an expression: which value a run gets is not in the code).
COMPUTED = "computed"
Value = bool | int | str


def _value_set(node: ast.AST, name: str, forwards: dict[str, tuple[str, int]]) -> Value | None:
    """The literal ``node`` sets the setting ``name`` to (an assertion requires it on), COMPUTED where it sets it
    to an expression computing a truth, or None; ``forwards``: the module's helpers that pass a parameter on as
    the setting (`_forwarding`)."""
    if isinstance(node, ast.Call):
        given = _forwarded_argument(node, forwards)
        return _given(given) if given is not None else None
    if isinstance(node, ast.keyword):
        return _given(node.value) if node.arg == name else None
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return _given(node.value) if any(_named(t, name) for t in targets) else None
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values, strict=True):
            if k is not None and _named(k, name) and _given(v) is not None:
                return _given(v)
        return None
    if isinstance(node, ast.Assert):
        tests = (
            node.test.values if isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.And) else [node.test]
        )
        return True if any(_named(test, name) for test in tests) else None
    return None


def _literal(node: ast.AST | None) -> bool | int | None:
    """A literal `True`/`False`, or a whole number (a factor: `gradient_accumulation_steps=1`)."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, bool | int) else None


def _given(node: ast.AST | None) -> Value | None:
    """A literal's value; COMPUTED for an expression computing a truth (a conditional, a comparison, `not`,
    `and`/`or`), whose value depends on the run; None for anything else (a name passing a value on)."""
    literal = _literal(node)
    if literal is not None:
        return literal
    computing = isinstance(node, (ast.IfExp, ast.BoolOp, ast.Compare))
    return COMPUTED if computing or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)) else None


def _named(node: ast.AST | None, name: str) -> bool:
    """``name``, ``x.name`` or ``x["name"]``."""
    if isinstance(node, ast.Name):
        return node.id == name
    if isinstance(node, ast.Attribute):
        return node.attr == name
    if isinstance(node, ast.Subscript):
        return _named(node.slice, name)
    return isinstance(node, ast.Constant) and node.value == name


def _forwarded_argument(call: ast.Call, forwards: dict[str, tuple[str, int]]) -> ast.expr | None:
    """What ``call`` of a helper in ``forwards`` passes as the parameter it hands on as the setting, if anything:
    the keyword, or a plain function's positional argument."""
    forwarded = forwards.get(_callee(call))
    if forwarded is None:
        return None
    parameter, position = forwarded
    given = next((k.value for k in call.keywords if k.arg == parameter), None)
    positional = isinstance(call.func, ast.Name) and not any(isinstance(a, ast.Starred) for a in call.args)
    if given is None and positional and 0 <= position < len(call.args):
        given = call.args[position]
    return given


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _forwarding(tree: ast.Module, name: str) -> dict[str, tuple[str, int]]:
    """The module's functions that pass one of their parameters on as the setting ``name``: function name →
    (that parameter, its position among the positional ones, -1 for keyword-only), found to a fixed point so a
    helper calling a helper counts (``get_model(per_token_loss)`` → ``get_spec(per_token_loss=per_token_loss)``
    → ``TransformerConfig(calculate_per_token_loss=per_token_loss)``)."""
    nodes = list(ast.walk(tree))
    if not any(type(n) is ast.keyword and n.arg == name and type(n.value) is ast.Name for n in nodes):
        return {}  # no parameter is passed on as the setting: nothing forwards it
    functions = [n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    names = {function.name for function in functions}
    # Each function's nodes that can pass a parameter on, in walk order (the setting's keywords, the calls of
    # the module's functions), found once: the fixed point below goes over these alone, round after round.
    passing = [(function, [n for n in ast.walk(function) if _may_pass(n, name, names)]) for function in functions]
    found: dict[str, tuple[str, int]] = {}
    while True:
        added = False
        for function, candidates in passing:
            if function.name in found:
                continue
            positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
            own = set(positional) | {a.arg for a in function.args.kwonlyargs}
            for node in candidates:
                passed = None
                if isinstance(node, ast.keyword):
                    passed = node.value
                elif onward := found.get(_callee(node)):
                    passed = next((k.value for k in node.keywords if k.arg == onward[0]), None)
                if isinstance(passed, ast.Name) and passed.id in own:
                    index = positional.index(passed.id) if passed.id in positional else -1
                    found[function.name] = (passed.id, index)
                    added = True
                    break
        if not added:
            return found


def _may_pass(node: ast.AST, name: str, functions: set[str]) -> bool:
    """A keyword setting ``name``, or a call of one of the module's ``functions``."""
    kind = type(node)
    return (kind is ast.keyword and node.arg == name) or (kind is ast.Call and _callee(node) in functions)


def _is_test_module(path: str) -> bool:
    """pytest's default test files: ``test_*.py`` and ``*_test.py``."""
    base = os.path.basename(path)
    return base.startswith("test_") or base.endswith("_test.py")


def _is_script(tree: ast.Module) -> bool:
    return any(
        isinstance(stmt, ast.If)
        and isinstance(stmt.test, ast.Compare)
        and isinstance(stmt.test.left, ast.Name)
        and stmt.test.left.id == "__name__"
        for stmt in tree.body
    )


def _patterns(name: str) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """Two byte gates: a text that may set ``name`` with a literal (`name=True`, `name: bool = False`,
    `"name": True`, `x["name"] = True`), compute it (`name = (a == b)`, `name=not x`, `name=x if y else z`),
    assert it or pass it a parameter (`name=per_token)`), and one that may give it a bare name (`name=x`: a
    helper passing a parameter on as the setting)."""
    word = re.escape(name.encode())
    computed = rb"\(|[^\n]*?(?:\b(?:if|not|and|or|is)\b|[=!<>]=)"
    literal = re.compile(
        rb"\b"
        + word
        + rb"['\"]?\]?\s*(?::[^=\n]*)?[:=]\s*(?:True|False|\w+\s*[,)\n]|"
        + computed
        + rb")|assert\b[^\n]*\b"
        + word
    )
    passed_on = re.compile(rb"\b" + word + rb"\s*=[\s(]*(?!(?:True|False|None)\b)[A-Za-z_]\w*\s*[,)\n]")
    return literal, passed_on


def _module_settings(path: str, name: str, data: bytes) -> tuple[tuple[int, Value, bool], ...]:
    """The lines of the module ``path`` (its text ``data``) setting ``name`` with a literal or computing it: (line,
    the value or COMPUTED, whether it holds for this module only: a script or a test module)."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return ()  # `check` reports a file it cannot parse; here it sets nothing
    own_only = _is_script(tree) or _is_test_module(path)
    forwards = _forwarding(tree, name) if _patterns(name)[1].search(data) else {}
    # The lines naming it, and those calling a helper that passes it on.
    word = name.encode()
    words = [re.escape(word), *(rb"\b" + re.escape(f.encode()) + rb"\s*\(" for f in forwards)]
    named = re.finditer(b"|".join(words), data)
    candidates = sorted({data.count(b"\n", 0, match.start()) + 1 for match in named})
    return tuple((line, value, own_only) for line, value in _setting_lines(tree, name, candidates, forwards))


@functools.cache
def _settings(root: str, name: str) -> tuple[tuple[str, tuple[tuple[int, Value, bool], ...] | None], ...]:
    """Every module under ``root`` that may set ``name`` with a literal or compute it, with its settings (`_module_settings`);
    None for a test module, whose settings hold for itself alone: it is read only when it is the module checked
    (`setting`), never for the others. Read once per project and setting, only when a finding asks."""
    found = []
    word = name.encode()
    literal = _patterns(name)[0]
    for path in python_files(root):
        try:
            with open(path, "rb") as file:
                data = file.read()
        except OSError:
            continue  # `check` reports a file it cannot read; here it sets nothing
        if word not in data or not literal.search(data):
            continue  # most files naming it only pass it on from a config (`name=args.name`)
        found.append((path, None if _is_test_module(path) else _module_settings(path, name, data)))
    return tuple(found)


GIVEN = "given"  # a value of any kind, a name passing one on too


@functools.cache
def _givings(root: str, name: str) -> tuple[tuple[str, tuple[tuple[int, Value, bool], ...] | None], ...]:
    """Every module under ``root`` giving ``name`` any value (`_module_givings`), as `_settings` lists them."""
    found = []
    word = name.encode()
    gate = re.compile(rb"\b" + re.escape(word) + rb"['\"]?\]?\s*(?::[^=\n]*)?[:=](?!=)")
    for path in python_files(root):
        try:
            with open(path, "rb") as file:
                data = file.read()
        except OSError:
            continue
        if word in data and gate.search(data):
            found.append((path, None if _is_test_module(path) else _module_givings(path, name, data)))
    return tuple(found)


def _module_givings(path: str, name: str, data: bytes) -> tuple[tuple[int, Value, bool], ...]:
    """The lines of the module ``path`` giving ``name`` a value other than None: a keyword, an assignment to it
    (``x.name = v``, ``x["name"] = v``) or a dict's entry (``{"name": v}``)."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return ()
    own_only = _is_script(tree) or _is_test_module(path)
    lines = []
    for node in ast.walk(tree):
        values: list[ast.AST | None] = []
        if isinstance(node, ast.keyword) and node.arg == name:
            values = [node.value]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            values = [node.value] if any(_named(t, name) for t in targets) else []
        elif isinstance(node, ast.Dict):
            values = [v for k, v in zip(node.keys, node.values, strict=True) if k is not None and _named(k, name)]
        for value in values:
            if value is not None and not (isinstance(value, ast.Constant) and value.value is None):
                lines.append((value.lineno, GIVEN, own_only))
    return tuple(sorted(lines))


def _setting_lines(
    tree: ast.Module, name: str, candidates: list[int], forwards: dict[str, tuple[str, int]]
) -> list[tuple[int, Value]]:
    """The lines setting ``name`` with a literal or computing it, and to what, in the order of the text; only the
    nodes spanning one of the ``candidates`` (the lines naming it or calling a helper in ``forwards``)
    are looked into."""
    lines: list[tuple[int, Value]] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        start = getattr(node, "lineno", None)
        if start is not None:
            at = bisect.bisect_left(candidates, start)
            if at == len(candidates) or candidates[at] > (getattr(node, "end_lineno", None) or start):
                continue  # no line of it names the setting
        # Under a condition a setting counts only where the condition is about the setting itself
        # (`if "calculate_per_token_loss" not in kwargs:` fills in a default); `if cp_size > 1:` decides it.
        if isinstance(node, ast.If) and not any(_named(child, name) for child in ast.walk(node.test)):
            continue
        value = _value_set(node, name, forwards)
        if value is not None:
            given = _forwarded_argument(node, forwards) if isinstance(node, ast.Call) else None
            lines.append((given.lineno if given is not None else start or 0, value))
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return lines


# A directory named like these holds examples, tests or recipes: each one's settings are its own.
_LOCAL_DIRECTORY = re.compile(r"example|test|script|tool|recipe")


def _holds_for(relative: str, mine: str) -> bool:
    """Whether a setting in the module ``relative`` (not a script) holds for the module ``mine`` (both relative
    to the root): in an examples, tests or recipes directory, for the modules beside it; else for its package."""
    directories = relative.split("/")[:-1]
    if any(_LOCAL_DIRECTORY.search(part) for part in directories):
        return mine.split("/")[:-1] == directories
    top = directories[:2] if directories[:1] == ["src"] else directories[:1]
    return mine.startswith("".join(f"{part}/" for part in top))


@functools.cache
def _declares(directory: str) -> bool:
    try:
        return declares_a_project(os.listdir(directory))
    except OSError:
        return False


def scope_root(path: str) -> str:
    """The directory whose files' settings hold for ``path``: the nearest at or above it declaring its
    own dependencies (a project of its own: an example with its requirements.txt), up to the project's root."""
    root = project_root(path)
    directory = os.path.dirname(os.path.realpath(path))
    while directory != root and directory.startswith(root + os.sep) and not _declares(directory):
        directory = os.path.dirname(directory)
    return directory if directory.startswith(root) else root


def setting(path: str, name: str) -> tuple[str, bool] | None:
    """Where the project of ``path`` sets ``name`` for it (``file:line``, relative to the project's root)
    and to what: the first place setting it on, else the first setting it off; None where nothing does.
    Only the files under `scope_root` are read, and of them those not in a project of their own below it."""
    held = list(_held(path, name))
    on = next((where for where, value in held if value is True), None)
    if on is not None:
        return on, True
    return next(((where, False) for where, value in held if value is False), None)


def computed(path: str, name: str) -> str | None:
    """Where the project of ``path`` computes ``name`` for it (``file:line``, as `setting` says it): the first
    expression setting it that holds for ``path``; None where none does."""
    return next((where for where, value in _held(path, name) if value == COMPUTED), None)


def given(path: str, name: str) -> str | None:
    """Where the project of ``path`` gives ``name`` any value for it (``file:line``, as `setting` says it), a name
    passing one on too (``Accelerator(gradient_accumulation_steps=every)``); None where nothing does, and so the
    host's own default holds."""
    return next((where for where, _ in _held(path, name, givings=True)), None)


def _held(path: str, name: str, givings: bool = False) -> Iterator[tuple[str, Value]]:
    """Each place setting ``name`` that holds for ``path`` (``file:line``) and its value, in the order read
    (``givings``: each place giving it any value, `_givings`)."""
    if path in ("-", "<string>"):
        return
    read, of_module = (_givings, _module_givings) if givings else (_settings, _module_settings)
    top = project_root(path)
    root = scope_root(path)
    real = os.path.realpath(path)
    mine = os.path.relpath(real, root).replace(os.sep, "/")
    for where, read_lines in read(root, name):
        lines = read_lines
        if lines is None:  # a test module: its settings hold for itself alone
            if where != real:
                continue
            try:
                lines = of_module(where, name, read_bytes(where))
            except SourceError:
                continue
        relative = os.path.relpath(where, root).replace(os.sep, "/")
        own = scope_root(where) == root  # a directory below declaring its own dependencies keeps its settings
        for line, value, own_only in lines:
            if where == real or (not own_only and own and _holds_for(relative, mine)):
                yield f"{os.path.relpath(where, top).replace(os.sep, '/')}:{line}", value


def numbers(path: str, name: str) -> tuple[tuple[str, int], ...]:
    """Every whole number the project of ``path`` sets ``name`` to for it (``TrainingArguments(...,
    gradient_accumulation_steps=1)``), and where."""
    return tuple((where, value) for where, value in _held(path, name) if type(value) is int)
