"""Skip, before libcst ever sees it, the code that provably cannot produce a finding.

libcst parses ~5k lines a second, CPython ~70k (to bytecode, ~250k): on a training repository,
where a few hundred lines out of half a million are loss functions, parsing everything with
libcst is nearly all of a cold run. The analysis stays the source of truth; this module only
decides which *units* it needs to see. A unit is a function or class-level method defined at
module or class level: the analysis runs each of those with an empty environment (closures get
theirs from the enclosing function, which is why nested functions are never units of their own),
and the only module-level context it reads is the import table.

Three filters, each an over-approximation of the analysis in `analysis.py`:

1. `compile()` the file (CPython rejects it: return None, the caller analyses everything and
   reports the error exactly as before).
2. Per unit, from its text, then its bytecode. The text must hold `return` or `lambda` and a way
   to make a dict (`{`, `[`, a mapping constructor's name); this costs nothing and needs no trust
   in the compiler. Then the bytecode: a finding needs a `return` of something that is not a constant
   (or a lambda) and a source of a dict container: a dict display or comprehension, a mapping
   constructor (`dict`, `OrderedDict`, `defaultdict` or an import alias of one), or a subscript
   store (which the analysis turns into a dict when the owner held a number or None).
3. Per surviving unit, from its CPython `ast`: a flow-insensitive pass mirroring how the analysis
   builds and moves containers (`_Flow`), asking whether some `return` (or lambda body) can be a
   2- or 3-element sequence whose last element is a dict.

The units that survive (and the module's imports) are handed to libcst alone, each line with the
number it has in the file, so columns are unchanged and lines map back. A unit nested in a class or
block gets an `if 1:` line above it (the analysis treats both the same: an empty environment).

Anything unexpected (a lambda at module level that may be a loss function, an import this module
cannot place, a reduced text CPython rejects) falls back to analysing the whole file.

When `analysis.py` learns a new way to make or move a container, `_Flow` must learn it too:
`tests/test_performance_equivalence.py` compares triage against the full analysis on the fixtures
and a generated corpus, and pins the analysis' expression handlers.
"""

from __future__ import annotations

import ast
import dataclasses
import dis
import re
import warnings
from collections.abc import Iterator
from types import CodeType

from .aliasing import MAPPING_CONSTRUCTORS, NUMBER_BUILTINS, NUMBER_METHODS

# Triage on/off: tests switch it off to compare against the full analysis.
ENABLED = True

_MAPPING_NAMES = frozenset(name.rpartition(".")[2] for name in MAPPING_CONSTRUCTORS)
_MUTATORS = frozenset({"update", "append", "insert", "extend", "setdefault"})

_OP = dis.opmap
_DICT_OPCODES = frozenset(
    _OP[name]
    for name in (
        "BUILD_MAP",
        "BUILD_CONST_KEY_MAP",
        "DICT_UPDATE",
        "DICT_MERGE",
        "MAP_ADD",
        "STORE_SUBSCR",
        "STORE_SLICE",
    )
    if name in _OP
)
_RETURN_VALUE = _OP["RETURN_VALUE"]
_LOAD_CONST = _OP["LOAD_CONST"]
_CACHE = _OP.get("CACHE", -1)
_EXTENDED_ARG = _OP["EXTENDED_ARG"]
_CO_OPTIMIZED = 0x1  # set on function code, not on class bodies or modules
_COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})

# Where the compiler may have dropped code: `def`/`lambda` (unreachable ones leave no code
# object) and tests it may fold. A test folds only if it is a literal (or built from literals):
# after a keyword that tests it (`if 0`, `while True`, `assert not __debug__`, `x if () else y`,
# `a and 0`), or left of `and`/`or` (`True or x`). Left out as never folded or harmless: a literal
# compared or called (`if "x" in y`, `if 0 < n`), a falsy last resort (`x or None`).
# Strings and comments count too, which only makes a unit look incomplete more often.
_FUNCTION_TOKEN = re.compile(r"(?:def|lambda)\b")
_STRING = r"[bBrRuUfF]{0,2}(?:\"[^\"\\\n]*\"|'[^'\\\n]*')"
_NOT_CONSTANT_AFTER = r"(?!\s*(?:in\b|not\s+in\b|is\b|[=!<>]=|[<>]|\.\s*[A-Za-z_]|\())"
_LITERAL = (
    rf"(?:(?:\d[\w.]*|\.\d[\w.]*|{_STRING}){_NOT_CONSTANT_AFTER}"
    r"|(?:True|False|None|__debug__)\b|\.\.\.|\(\s*\)|[bBrRuUfF]{0,2}[\"'](?![^\"'\n]*[\"']\s*(?:in\b|\.)))"
)
# Cheap triggers, each confirmed by the exact pattern below it.
_KEYWORD_TRIGGER = re.compile(
    r"(?:elif|if|while|assert|and|or|not)[\s(]*(?:not[\s(]+)*[-+~]?\s*(?:[\d.\"'(]|True|False|None|__|[bBrRuUfF]{1,2}[\"'])"
)
_KEYWORD_TEST = re.compile(
    rf"(?:(?:if|elif|while|assert|and)|or(?!\s*(?:None|False|0|\"\"|''|\(\s*\))\s*(?:[):,\]}}]|$|else\b))|(?<!\bis )not)"
    rf"\s*[(\s]*(?:not\b[(\s]*)*[-+~]?\s*{_LITERAL}",
    re.MULTILINE,
)
_AND_OR = re.compile(r"\b(?:and|or)\b")
_WORD_END = re.compile(r"[\w.]+\Z")
_CONSTANT_NAMES = frozenset({"True", "False", "None", "__debug__"})
_LEFT_LITERAL = re.compile(
    rf"(?:^|[(\[{{,:]|(?<![=!<>])=(?!=)|\b(?:return|in|else|yield|await|lambda|if|elif|while|assert|and|or)\b|(?<!\bis )\bnot\b)"
    rf"[(\s]*(?:not\b[(\s]*)*[-+~]?\s*(?:\d[\w.]*|{_STRING}|\(\s*\)|True|False|None|__debug__|\.\.\.)[)\s]*\Z",
    re.MULTILINE,
)
# `from collections import OrderedDict as OD`: found by its literal tail, which `re` searches fast.
_MAPPING_ALIAS = re.compile(r"ict[ \t]+as[ \t]+(\w+)")
# `import a.b as c`, `from a import (b as c, d)`: over strings and comments too (more names is safe).
# Found by the literal `import` (which `re` searches fast), then `from a` looked for before it.
_IMPORT = re.compile(r"import[ \t]+(\([^)]*\)|[^\n;]*)")
_FROM = re.compile(r"\bfrom[ \t]+([.\w]+)[ \t]+\Z")
_NAME_PATH = re.compile(r"[\w.]+")
# Where a module's own imports may hide from its bytecode: after a fold (`while True:` at module level).
_TOP_LEVEL_IMPORT = re.compile(r"^(?:import|from)\b", re.MULTILINE)
# Line ends that `str.splitlines` honours but Python's tokenizer does not.
_OTHER_LINE_ENDS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


@dataclasses.dataclass(frozen=True)
class Reduced:
    """What libcst must see of a file: the kept lines, and the line each of them is in the file."""

    text: str
    lines: tuple[int, ...]  # 1-based, one per line of `text`


NOTHING = Reduced("", ())  # no unit can have a finding: libcst need not see the file at all


def reduce_source(text: str) -> Reduced | None:
    """The units of `text` that may have a finding, with the module's imports; None: all of `text`."""
    if not ENABLED:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings (invalid escapes) are not ours to print
        try:
            module = compile(text, "<triage>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError):
            return None
    if "return" not in text and "lambda" not in text:
        return NOTHING
    mapping_names = _MAPPING_NAMES | _mapping_aliases(text.replace("\\\n", " "))
    lines = source_lines(text)
    imports: frozenset[tuple[str, str]] | None = None
    kept: list[tuple[int, int, int]] = []  # (first line, last line, column), 1-based lines
    spans: list[tuple[int, int]] = []
    try:
        for code, (first, last, column, end_column) in _units(module):
            spans.append((first, last))
            span = "".join(lines[first - 1 : last])
            if not _text_may_find(span, mapping_names):
                continue
            # The bytecode is trusted only where the compiler cannot have dropped code.
            if code.co_name.startswith("<"):
                # A lambda or comprehension at module or class level: only lambdas are functions
                # to the analysis, and one that may find cannot be cut out as a whole line: check all.
                lambdas = [c for c in _code_tree(code) if c.co_name == "<lambda>"]
                if any(_may_find(c, mapping_names) for c in lambdas) or not _complete(code, span):
                    imports = _imports(text) if imports is None else imports
                    expression = _expression(lines[first - 1 : last], column, end_column)
                    if _flow_may_find(expression, 0, imports):
                        return None
            elif _may_find(code, mapping_names) or not _complete(code, span):
                imports = _imports(text) if imports is None else imports
                if _flow_may_find(span, column, imports):
                    kept.append((first, last, column))
        module_imports = list(_module_imports(module, lines))
        if _dropped_at_top_level(text, lines, spans, module_imports):
            return None
        return _reduce(lines, kept, module_imports) if kept else NOTHING
    except _Unplaceable:
        return None


def source_lines(text: str) -> list[str]:
    """The lines of `text` as Python numbers them (only \\n, \\r\\n and \\r end one), with their ends."""
    if _OTHER_LINE_ENDS.search(text) is None:
        return text.splitlines(keepends=True)
    return _LINE.findall(text)


def _expression(lines: list[str], column: int, end_column: int) -> str:
    """The text of an expression from its lines and UTF-8 columns, parenthesised: it may span lines."""
    if len(lines) == 1:
        return "(" + lines[0].encode()[column:end_column].decode() + ")"
    middle = "".join(lines[1:-1])
    return "(" + lines[0].encode()[column:].decode() + middle + lines[-1].encode()[:end_column].decode() + ")"


def _text_may_find(span: str, mapping_names: frozenset[str]) -> bool:
    """A return (or lambda) and a way to make a dict: a display or comprehension, a subscript
    store (the analysis turns a number or None into a dict), a mapping constructor."""
    if "return" not in span and "lambda" not in span:
        return False
    return "{" in span or "[" in span or any(name in span for name in mapping_names)


# ---- units and their bytecode ---------------------------------------------------------


def _units(code: CodeType) -> Iterator[tuple[CodeType, tuple[int, int, int, int]]]:
    """Functions, lambdas and comprehensions made at module or class level, with the span of their
    statement (first line, last line) or expression (line, last line, UTF-8 start and end column)."""
    positions: list[tuple[int | None, int | None, int | None, int | None]] | None = None
    for index, const in enumerate(code.co_consts):
        if not isinstance(const, CodeType):
            continue
        if not const.co_flags & _CO_OPTIMIZED:  # a class body: its methods are units
            yield from _units(const)
            continue
        if positions is None:
            positions = list(code.co_positions())
        offset = _load_offset(code.co_code, index)
        if offset is None:
            raise _Unplaceable
        line, end_line, column, end_column = positions[offset // 2]
        if line is None or end_line is None or column is None or end_column is None:
            raise _Unplaceable
        # A decorated def starts at its first decorator: the code object's first line.
        yield const, (min(line, const.co_firstlineno), end_line, column, end_column)


class _Unplaceable(Exception):
    """A unit whose source span the bytecode does not give."""


def _load_offset(bytecode: bytes, index: int) -> int | None:
    """Offset of the `LOAD_CONST index` that loads a unit's code object."""
    low, high = index & 0xFF, index >> 8
    start = 0
    while True:
        at = bytecode.find(bytes((_LOAD_CONST, low)), start)
        if at < 0:
            return None
        extended = at >= 2 and bytecode[at - 2] == _EXTENDED_ARG
        if at % 2 == 0 and (bytecode[at - 1] == high if extended else high == 0):
            return at
        start = at + 1


def _code_tree(code: CodeType) -> Iterator[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _code_tree(const)


def _in_word(text: str, offset: int) -> bool:
    return offset > 0 and (text[offset - 1].isalnum() or text[offset - 1] == "_")


def _complete(unit: CodeType, span: str) -> bool:
    """Whether the unit's bytecode holds all of its code that the analysis reads.

    The compiler drops unreachable code; the analysis still reads two kinds of it: functions and
    lambdas there (it checks them on their own), and branches that only a constant test makes
    unreachable (`if False:`, `True or x`, code after `while True:`), which it follows like any
    other branch. The bytecode is complete if the text has no more `def`/`lambda` than the unit
    has function code objects, and no test that may fold.
    """
    if _has_fold(span):
        return False
    functions = sum(
        1 for code in _code_tree(unit) if code.co_flags & _CO_OPTIMIZED and code.co_name not in _COMPREHENSIONS
    )
    return _function_tokens(span) <= functions


def _function_tokens(text: str) -> int:
    return sum(1 for m in _FUNCTION_TOKEN.finditer(text) if not _in_word(text, m.start()))


def _has_fold(text: str) -> bool:
    for m in _KEYWORD_TRIGGER.finditer(text):
        if not _in_word(text, m.start()) and _KEYWORD_TEST.match(text, m.start()):
            return True
    for m in _AND_OR.finditer(text):
        before = text[max(0, m.start() - 120) : m.start()]
        tail = before.rstrip(" \t\r\n\\)")
        word = _WORD_END.search(tail)
        literal_end = tail[-1:] in ('"', "'", "(") or (
            word is not None and (word.group()[0] in "0123456789." or word.group() in _CONSTANT_NAMES)
        )
        if literal_end and _LEFT_LITERAL.search(before):
            return True
    return False


def _dropped_at_top_level(
    text: str, lines: list[str], spans: list[tuple[int, int]], module_imports: list[tuple[int, int]]
) -> bool:
    """Whether the compiler dropped, outside every unit, a function or an import the analysis reads
    (`if 0:` at module or class level, anything after a module-level `while True:`).

    The text outside the units is searched for `def`, `lambda` and column-0 imports; only when it
    holds more than the bytecode does the file's `ast` decide (they are mostly in comments).
    """
    covered = bytearray(len(lines) + 2)
    for first, last in spans:
        covered[first : last + 1] = b"\x01" * (last - first + 1)
    outside = "".join(line for number, line in enumerate(lines, start=1) if not covered[number])
    import_lines = {first for first, _ in module_imports}
    if not _function_tokens(outside) and len(_TOP_LEVEL_IMPORT.findall(outside)) <= len(import_lines):
        return False
    tree = ast.parse(text)
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if not covered[node.lineno]:
                return True
            continue  # a unit, or inside one: `_complete` answers for what it holds
        stack.extend(ast.iter_child_nodes(node))
    return any(isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno not in import_lines for node in tree.body)


def _may_find(unit: CodeType, mapping_names: frozenset[str]) -> bool:
    """A non-constant return (or a lambda) and a way to make a dict, anywhere in the unit."""
    returns = dicts = False
    for code in _code_tree(unit):
        bytecode = code.co_code
        if not dicts:
            dicts = bool(_DICT_OPCODES.intersection(bytecode[::2])) or not mapping_names.isdisjoint(code.co_names)
        if not returns:
            returns = _returns_non_constant(bytecode)
        if returns and dicts:
            return True
    return False


def _returns_non_constant(bytecode: bytes) -> bool:
    start = 0
    while True:
        at = bytecode.find(bytes((_RETURN_VALUE,)), start)
        if at < 0:
            return False
        start = at + 1
        if at % 2:
            continue
        previous = at - 2
        while previous >= 0 and bytecode[previous] == _CACHE:
            previous -= 2
        if previous < 0 or bytecode[previous] != _LOAD_CONST:
            return True


# ---- imports ----------------------------------------------------------------------------


def _imports(text: str) -> frozenset[tuple[str, str]]:
    """(local name, qualified name) for every import in the text, as `ModuleAnalysis._module_imports` reads them."""
    found = set()
    text = text.replace("\\\n", " ")
    for match in _IMPORT.finditer(text):
        if _in_word(text, match.start()):
            continue
        line_start = text.rfind("\n", 0, match.start()) + 1
        source = _FROM.search(text, line_start, match.start())
        for item in match.group(1).strip("() \t").split(","):
            parts = item.split()
            if not parts or not _NAME_PATH.fullmatch(parts[0]):
                continue
            full = parts[0]
            local = parts[2] if len(parts) >= 3 and parts[1] == "as" else None
            if source is not None:
                base = source.group(1).lstrip(".")
                found.add((local or full, f"{base}.{full}" if base else full))
            elif local is not None:
                found.add((local, full))
            else:
                head = full.split(".")[0]
                found.add((head, head))
    return frozenset(found)


def _mapping_aliases(text: str) -> frozenset[str]:
    return frozenset(
        m.group(1)
        for m in _MAPPING_ALIAS.finditer(text)
        if re.search(r"(?:^|[^\w])(?:d|OrderedD|defaultd)\Z", text[max(0, m.start() - 9) : m.start()])
    )


def _is_mapping(qualified: str) -> bool:
    return qualified in MAPPING_CONSTRUCTORS or qualified.rpartition(".")[2] in _MAPPING_NAMES


# ---- the container flow -----------------------------------------------------------------

# What a value may be, as bits. D: a dict container. S: a sequence container. H: a container
# holding a dict somewhere inside. M: no storage and no container (a number, None, a string, or
# the analysis' unknown `Val()`), which a subscript store turns into a dict.
D, S, H, M = 1, 2, 4, 8
ALL = D | S | H | M


def _elements(flags: int) -> int:
    """What indexing, iterating or unpacking a value with these flags may give."""
    out = M if flags & M else 0
    if flags & H:
        return ALL
    if flags & (D | S):
        out |= S | M
    return out


def _holding(flags: int) -> int:
    """The H bit of a container that holds a value with these flags."""
    return H if flags & (D | H) else 0


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _flow_may_find(segment: str, column: int, imports: frozenset[tuple[str, str]]) -> bool:
    try:
        tree = ast.parse("if 1:\n" + segment if column else segment)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    try:
        return _Flow(tree, imports).may_find()
    except RecursionError:
        return True


_BINDING_NODES = frozenset(
    {
        ast.Assign,
        ast.AnnAssign,
        ast.AugAssign,
        ast.For,
        ast.AsyncFor,
        ast.comprehension,
        ast.withitem,
        ast.NamedExpr,
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.ClassDef,
        ast.ExceptHandler,
        ast.arguments,
    }
)


def _is_mutation(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS


class _Flow:
    """Flow-insensitive: one set of flags per name (or dotted name) over the whole unit."""

    def __init__(self, tree: ast.AST, imports: frozenset[tuple[str, str]]) -> None:
        self.bindings: list[ast.AST] = []
        self.returns: list[ast.expr] = []
        stack: list[ast.AST] = [tree]
        while stack:  # ast.walk, without its generator-per-node overhead
            node = stack.pop()
            kind = type(node)
            if kind in _BINDING_NODES or (kind is ast.Call and _is_mutation(node)):
                self.bindings.append(node)
            if kind is ast.Return and node.value is not None:
                self.returns.append(node.value)
            elif kind is ast.Lambda:
                self.returns.append(node.body)
            for name in node._fields:
                value = getattr(node, name, None)
                if isinstance(value, ast.AST):
                    stack.append(value)
                elif isinstance(value, list):
                    stack.extend(item for item in value if isinstance(item, ast.AST))
        self.env: dict[str, int] = {}
        self.qualified: dict[str, set[str]] = {}
        for local, full in imports:
            self.qualified.setdefault(local, set()).add(full)

    def may_find(self) -> bool:
        if not self.returns:
            return False
        while True:
            before = dict(self.env)
            for node in self.bindings:
                self._statement(node)
            if self.env == before:
                break
        return any(self._returnable(value) for value in self.returns)

    def _returnable(self, value: ast.expr) -> bool:
        """Can this be `(backprop, report)` or `(backprop, n, report)` with `report` a dict?"""
        if isinstance(value, (ast.Tuple, ast.List)):
            elements = value.elts
            if any(isinstance(e, ast.Starred) for e in elements) or len(elements) not in (2, 3):
                return False
            return bool(self._eval(elements[-1]) & D)
        flags = self._eval(value)
        return bool(flags & S and flags & H)

    def _join(self, name: str, flags: int) -> None:
        old = self.env.get(name, 0)
        if flags | old != old:
            self.env[name] = old | flags

    def _statement(self, node: ast.AST) -> None:
        kind = type(node)
        if kind is ast.Assign:
            value = self._eval(node.value)
            for target in node.targets:
                self._bind(target, value)
        elif kind is ast.AnnAssign:
            if node.value is not None:
                self._bind(node.target, self._eval(node.value))
        elif kind is ast.AugAssign:
            current, value = self._eval(node.target), self._eval(node.value)
            new = M if current & M else 0
            if current & S and isinstance(node.op, ast.Add):
                new |= current | _holding(_elements(value))
            self._bind(node.target, new)
        elif kind in (ast.For, ast.AsyncFor, ast.comprehension):
            self._bind(node.target, _elements(self._eval(node.iter)))
        elif kind is ast.withitem:
            if node.optional_vars is not None:
                self._bind(node.optional_vars, self._eval(node.context_expr) & (D | S | H))
        elif kind is ast.NamedExpr:
            self._bind(node.target, self._eval(node.value))
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            self._join(node.name, M)
        elif kind is ast.ExceptHandler:
            if node.name:
                self._join(node.name, M)
        elif kind is ast.arguments:
            # An annotated parameter may be declared a number or a string (`n: int`).
            for arg in (*node.posonlyargs, *node.args, *node.kwonlyargs, node.vararg, node.kwarg):
                if arg is not None and arg.annotation is not None:
                    self._join(arg.arg, M)
        elif kind is ast.Call:
            owner = _dotted(node.func.value)
            if owner is not None and self.env.get(owner, 0) & (D | S):
                self._join(owner, _holding(self._arguments(node)))

    def _bind(self, target: ast.expr, flags: int) -> None:
        if isinstance(target, (ast.Name, ast.Attribute)):
            name = _dotted(target)
            if name is not None and flags:
                self._join(name, flags)
        elif isinstance(target, ast.Subscript):
            owner = _dotted(target.value)
            if owner is not None:
                current = self.env.get(owner, 0)
                if current & M:
                    self._join(owner, D | _holding(flags))
                if current & (D | S):
                    self._join(owner, _holding(flags))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._bind(element, _elements(flags))
        elif isinstance(target, ast.Starred):
            self._bind(target.value, S | _holding(_elements(flags)))

    def _qualified(self, node: ast.expr) -> set[str]:
        name = _dotted(node)
        if name is None:
            return set()
        head, _, rest = name.partition(".")
        return {f"{full}.{rest}" if rest else full for full in self.qualified.get(head, set()) | {head}}

    def _arguments(self, node: ast.Call) -> int:
        flags = 0
        for arg in node.args:
            flags |= self._eval(arg)
        for keyword in node.keywords:
            flags |= self._eval(keyword.value)
        return flags

    def _eval(self, node: ast.expr) -> int:
        kind = type(node)
        if kind is ast.Name:
            return self.env.get(node.id, 0) | (M if node.id in ("None", "True", "False") else 0)
        if kind is ast.Attribute:
            name = _dotted(node)
            if name is None:
                return 0
            torch = any(q.startswith("torch.") for q in self._qualified(node))
            return self.env.get(name, 0) | (M if torch else 0)
        if kind is ast.Constant or kind is ast.JoinedStr or kind is ast.Lambda:
            return M
        if kind is ast.Dict:
            flags = D
            for key, value in zip(node.keys, node.values, strict=True):
                flags |= _holding(self._eval(value) if key is not None else _elements(self._eval(value)))
            return flags
        if kind is ast.DictComp:
            return D | _holding(self._eval(node.value))
        if kind is ast.Tuple or kind is ast.List:
            flags = S
            for element in node.elts:
                flags |= _holding(self._eval(element))
            return flags
        if kind is ast.Starred:
            return _elements(self._eval(node.value))
        if kind is ast.ListComp or kind is ast.GeneratorExp:
            return S | _holding(self._eval(node.elt))
        if kind is ast.Subscript:
            return _elements(self._eval(node.value))
        if kind is ast.IfExp:
            return self._eval(node.body) | self._eval(node.orelse)
        if kind is ast.BoolOp:
            flags = 0
            for value in node.values:
                flags |= self._eval(value)
            return flags
        if kind is ast.NamedExpr:
            return self._eval(node.value)
        if kind is ast.UnaryOp:
            return M if isinstance(node.op, ast.Not) or self._eval(node.operand) & M else 0
        if kind is ast.BinOp:
            return M if self._eval(node.left) & M and self._eval(node.right) & M else 0
        if kind is ast.Call:
            return self._call(node)
        return 0  # a fresh tensor: comparisons, sets, awaits, ...

    def _call(self, node: ast.Call) -> int:
        arguments = self._arguments(node)
        flags = 0
        for name in self._qualified(node.func):
            if name in NUMBER_BUILTINS:
                flags |= M
            elif _is_mapping(name):
                flags |= D | _holding(arguments)
            elif name in ("list", "tuple"):
                flags |= S | _holding(_elements(arguments))
            elif name in ("max", "min"):
                flags |= arguments
            elif name == "copy.deepcopy":
                flags |= arguments | M
            elif name == "copy.copy":
                flags |= arguments & (D | S | H)
            elif name.startswith("torch."):
                flags |= arguments & M
        if isinstance(node.func, ast.Attribute):
            method, receiver = node.func.attr, self._eval(node.func.value)
            if receiver & (D | S):  # the analysis' container methods
                if method in ("get", "pop", "setdefault"):
                    flags |= _elements(receiver) | arguments | M
                elif method == "copy":
                    flags |= receiver
                elif method in ("values", "items"):
                    flags |= S | _holding(_elements(receiver))
                else:
                    flags |= M
            if method in NUMBER_METHODS or method == "tolist" or receiver & M:
                flags |= M
        return flags


# ---- the reduced text -------------------------------------------------------------------


def _reduce(
    lines: list[str], kept: list[tuple[int, int, int]], module_imports: list[tuple[int, int]]
) -> Reduced | None:
    owner = [0] * (len(lines) + 2)  # which kept span a line belongs to (1-based), -1: an import, 0: none
    for number, (first, last, _) in enumerate(sorted(kept), start=1):
        owner[first : last + 1] = [number] * (last - first + 1)
    for first, last in module_imports:
        if any(owner[first : last + 1]):
            return None
        owner[first : last + 1] = [-1] * (last - first + 1)
    headers: dict[int, str] = {}  # a free line above a nested unit: it opens the unit's block
    previous_column = None
    for number, (first, _, column) in enumerate(sorted(kept), start=1):
        follows_sibling = first > 1 and owner[first - 1] == number - 1 and previous_column == column
        if column and not follows_sibling:
            if first == 1 or owner[first - 1]:
                return None  # no free line above to open a block on
            headers[first - 1] = "if 1:" + _newline(lines[first - 2])
        previous_column = column
    out, numbers = [], []
    for number, line in enumerate(lines, start=1):
        if owner[number]:
            out.append(line)
        elif number in headers:
            out.append(headers[number])
        else:
            continue
        numbers.append(number)
    reduced = "".join(out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(reduced, "<triage>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError):
            return None
    return Reduced(reduced, tuple(numbers))


def _module_imports(module: CodeType, lines: list[str]) -> Iterator[tuple[int, int]]:
    """Spans of the import statements `_module_imports` reads: those directly in the module body."""
    import_name = _OP["IMPORT_NAME"]
    bytecode = module.co_code
    positions = None
    for at in range(0, len(bytecode), 2):
        if bytecode[at] != import_name:
            continue
        if positions is None:
            positions = list(module.co_positions())
        first, last, column, _ = positions[at // 2]
        if first is None or last is None or column is None:
            raise _Unplaceable
        before = lines[first - 1][:column]
        if before.strip() == "":
            if column == 0:
                yield first, last
            continue  # indented: inside an `if` or `try`, which the analysis does not read
        if not lines[first - 1].startswith(("import ", "from ")):
            raise _Unplaceable  # `x = 1; import y`: keep it simple, check the whole file
        yield first, last


def _newline(line: str) -> str:
    stripped = line.rstrip("\r\n")
    return line[len(stripped) :]
