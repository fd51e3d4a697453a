"""Where a project sets a host's setting (`facts.hosts.Setting`) with a literal, read from its code.

Megatron leaves a 3-tuple ``(loss, num_tokens, report)`` as it is when the model config's
``calculate_per_token_loss`` is on; transformers' ``Trainer.compute_loss`` multiplies the loss in place
by the world size when ``average_tokens_across_devices`` is. A project sets one with a literal:
``calculate_per_token_loss=True`` (a keyword, as to ``TransformerConfig``),
``config.calculate_per_token_loss = True``, ``kwargs["calculate_per_token_loss"] = True``, a dict
entry ``{"calculate_per_token_loss": True}``, or by requiring it (``assert cfg.calculate_per_token_loss``:
on); ``False`` in the same places sets it off.

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

from .files import project_root, python_files


def _value_set(node: ast.AST, name: str, forwards: dict[str, tuple[str, int]]) -> bool | None:
    """The literal ``node`` sets the setting ``name`` to (an assertion requires it on), or None;
    ``forwards``: the module's helpers that pass a parameter on as the setting (`_forwarding`)."""
    if isinstance(node, ast.Call):
        given = _forwarded_argument(node, forwards)
        return _literal(given) if given is not None else None
    if isinstance(node, ast.keyword):
        return _literal(node.value) if node.arg == name else None
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return _literal(node.value) if any(_named(t, name) for t in targets) else None
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values, strict=True):
            if k is not None and _named(k, name) and _literal(v) is not None:
                return _literal(v)
        return None
    if isinstance(node, ast.Assert):
        tests = (
            node.test.values if isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.And) else [node.test]
        )
        return True if any(_named(test, name) for test in tests) else None
    return None


def _literal(node: ast.AST | None) -> bool | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, bool) else None


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
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    found: dict[str, tuple[str, int]] = {}
    while True:
        added = False
        for function in functions:
            if function.name in found:
                continue
            positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
            own = set(positional) | {a.arg for a in function.args.kwonlyargs}
            for node in ast.walk(function):
                passed = None
                if isinstance(node, ast.keyword) and node.arg == name:
                    passed = node.value
                elif isinstance(node, ast.Call) and (onward := found.get(_callee(node))):
                    passed = next((k.value for k in node.keywords if k.arg == onward[0]), None)
                if isinstance(passed, ast.Name) and passed.id in own:
                    index = positional.index(passed.id) if passed.id in positional else -1
                    found[function.name] = (passed.id, index)
                    added = True
                    break
        if not added:
            return found


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


@functools.cache
def _settings(root: str, name: str) -> tuple[tuple[str, int, bool, bool], ...]:
    """Every place under ``root`` that sets ``name`` with a literal: (real path, line, the value, whether
    it holds for its own module only: a script or a test module). Read once per project and setting, only
    when a finding asks."""
    found = []
    word = name.encode()
    # Only a file whose text sets it with a literal (`name=True`, `name: bool = False`, `"name": True`,
    # `x["name"] = True`), asserts it or passes it a parameter (`name=per_token)`) is parsed: most files
    # naming it only pass it on from a config (`name=args.name`).
    literal = re.compile(
        rb"\b"
        + re.escape(word)
        + rb"['\"]?\]?\s*(?::[^=\n]*)?[:=]\s*(?:True|False|\w+\s*[,)\n])|assert\b[^\n]*\b"
        + re.escape(word)
    )
    for path in python_files(root):
        try:
            with open(path, "rb") as file:
                data = file.read()
            if word not in data or not literal.search(data):
                continue
            tree = ast.parse(data)
        except (OSError, SyntaxError, ValueError):
            continue  # `check` reports a file it cannot read or parse; here it sets nothing
        own_only = _is_script(tree) or _is_test_module(path)
        forwards = _forwarding(tree, name)
        # The lines naming it, and those calling a helper that passes it on.
        words = [re.escape(word), *(rb"\b" + re.escape(f.encode()) + rb"\s*\(" for f in forwards)]
        named = re.finditer(b"|".join(words), data)
        candidates = sorted({data.count(b"\n", 0, match.start()) + 1 for match in named})
        lines = _setting_lines(tree, name, candidates, forwards)
        found.extend((path, line, value, own_only) for line, value in lines)
    return tuple(found)


def _setting_lines(
    tree: ast.Module, name: str, candidates: list[int], forwards: dict[str, tuple[str, int]]
) -> list[tuple[int, bool]]:
    """The lines setting ``name`` with a literal, and to what, in the order of the text; only the
    nodes spanning one of the ``candidates`` (the lines naming it or calling a helper in ``forwards``)
    are looked into."""
    lines: list[tuple[int, bool]] = []
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


_DECLARING = re.compile(r"pyproject\.toml|setup\.py|setup\.cfg|requirements.*\.txt")


@functools.cache
def _declares(directory: str) -> bool:
    try:
        return any(_DECLARING.fullmatch(name) for name in os.listdir(directory))
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
    if path in ("-", "<string>"):
        return None
    top = project_root(path)
    root = scope_root(path)
    real = os.path.realpath(path)
    mine = os.path.relpath(real, root).replace(os.sep, "/")
    off = None
    for where, line, value, own_only in _settings(root, name):
        relative = os.path.relpath(where, root).replace(os.sep, "/")
        own = scope_root(where) == root  # a directory below declaring its own dependencies keeps its settings
        if where == real or (not own_only and own and _holds_for(relative, mine)):
            shown = os.path.relpath(where, top).replace(os.sep, "/")
            if value:
                return f"{shown}:{line}", True
            off = off or (f"{shown}:{line}", False)
    return off
