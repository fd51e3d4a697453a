"""Where a project turns on Megatron's ``calculate_per_token_loss``, read from its code.

Megatron leaves a 3-tuple ``(loss, num_tokens, report)`` as it is when the model config's
``calculate_per_token_loss`` is on, so whether a 3-tuple finding can move depends on it. A project
turns it on with a literal: ``calculate_per_token_loss=True`` (a keyword, as to ``TransformerConfig``),
``config.calculate_per_token_loss = True``, ``kwargs["calculate_per_token_loss"] = True``, a dict
entry ``{"calculate_per_token_loss": True}``, or by requiring it (``assert cfg.calculate_per_token_loss``).

A setting under an ``if`` counts only where the condition is about the setting (a default filled in:
``if "calculate_per_token_loss" not in kwargs:``); under ``if cp_size > 1:`` it is not the project's. Where a setting holds: in a script (a
module with an ``if __name__ == "__main__":`` guard, such as one example's ``pretrain_*.py``), that
script only; in a module under a directory of examples, tests, scripts, tools or recipes, the modules beside it (one example's
``model.py`` sets it for that example); else the project's top-level package it is in (``src/`` skipped).
"""

from __future__ import annotations

import ast
import functools
import os
import re

from ..index.files import project_root, python_files

NAME = "calculate_per_token_loss"


def _sets_it(node: ast.AST) -> bool:
    """Whether ``node`` turns the setting on with a literal, or requires it."""
    if isinstance(node, ast.keyword):
        return node.arg == NAME and _true(node.value)
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return node.value is not None and _true(node.value) and any(_named(t) for t in targets)
    if isinstance(node, ast.Dict):
        return any(_named(k) and _true(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None)
    if isinstance(node, ast.Assert):
        tests = (
            node.test.values if isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.And) else [node.test]
        )
        return any(_named(test) for test in tests)
    return False


def _true(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _named(node: ast.AST | None) -> bool:
    """``calculate_per_token_loss``, ``x.calculate_per_token_loss`` or ``x["calculate_per_token_loss"]``."""
    if isinstance(node, ast.Name):
        return node.id == NAME
    if isinstance(node, ast.Attribute):
        return node.attr == NAME
    if isinstance(node, ast.Subscript):
        return _named(node.slice)
    return isinstance(node, ast.Constant) and node.value == NAME


def _is_script(tree: ast.Module) -> bool:
    return any(
        isinstance(stmt, ast.If)
        and isinstance(stmt.test, ast.Compare)
        and isinstance(stmt.test.left, ast.Name)
        and stmt.test.left.id == "__name__"
        for stmt in tree.body
    )


@functools.cache
def _settings(root: str) -> tuple[tuple[str, int, bool], ...]:
    """Every place under ``root`` that turns the setting on: (real path, line, whether the file is a script)."""
    found = []
    for path in python_files(root):
        try:
            with open(path, "rb") as file:
                data = file.read()
            if NAME.encode() not in data:
                continue
            tree = ast.parse(data)
        except (OSError, SyntaxError, ValueError):
            continue  # `check` reports a file it cannot read or parse; here it sets nothing
        script = _is_script(tree)
        found.extend((path, line, script) for line in _setting_lines(tree))
    return tuple(found)


def _setting_lines(tree: ast.Module) -> list[int]:
    lines: list[int] = []

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            # Under a condition a setting counts only where the condition is about the setting itself
            # (`if "calculate_per_token_loss" not in kwargs:` fills in a default); `if cp_size > 1:` decides it.
            if any(_named(child) for child in ast.walk(node.test)):
                self.generic_visit(node)

        def generic_visit(self, node: ast.AST) -> None:
            if _sets_it(node):
                lines.append(getattr(node, "lineno", 0))
            super().generic_visit(node)

    Visitor().visit(tree)
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


def per_token_setting(path: str) -> str | None:
    """Where the project of ``path`` turns ``calculate_per_token_loss`` on for it (``file:line``), or None."""
    if path == "-":
        return None
    root = project_root(path)
    real = os.path.realpath(path)
    mine = os.path.relpath(real, root).replace(os.sep, "/")
    for where, line, script in _settings(root):
        relative = os.path.relpath(where, root).replace(os.sep, "/")
        if where == real or (not script and _holds_for(relative, mine)):
            return f"{relative}:{line}"
    return None
