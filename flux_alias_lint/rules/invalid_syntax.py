"""FAL000: a file the checker could not read, decode or parse, and so did not check."""

from __future__ import annotations

import dataclasses
import re

from ..finding import ERROR, Finding
from ..source import SourceError
from ._base import Rule

# Where a reason says the problem is: "syntax error at 3:7: ...", "(byte 0xe9 on line 2)".
_AT = re.compile(r" at (\d+):(\d+)")
_ON_LINE = re.compile(r" on line (\d+)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class InvalidSyntaxRule(Rule):
    def finding(self, error: SourceError) -> Finding:
        """The file's one finding, at the place the reason names (else its start), the reason its message.
        No context: whoever calls the file's functions, nothing in it was checked, so it is always an error."""
        at, on_line = _AT.search(error.reason), _ON_LINE.search(error.reason)
        line, column = (int(at[1]), int(at[2])) if at else (int(on_line[1]), 1) if on_line else (1, 1)
        message = _AT.sub("", error.reason, count=1)
        return Finding(
            error.path, line, column, line, column, self.code, message, fixable=False, context="", severity=ERROR
        )


RULE = InvalidSyntaxRule(
    code="FAL000",
    name="invalid-syntax",
    summary="the file could not be read, decoded or parsed, so it was not checked",
    flags="a file that cannot be read, decoded or parsed",
    fix="",
    doc="""\
## What it does
Reports a file the checker could not analyse: a syntax error (Python 2 code, or syntax newer
than the project's target version), bytes that are not valid in the file's encoding, NUL bytes,
a file that cannot be read, or nesting too deep to parse safely. The message says which.

## Why is this bad?
Nothing in the file was checked, so a loss function in it may alias the backprop tensor
unnoticed. Like ruff's `invalid-syntax`, it is a finding in every output format (so CI sees
it) and `--exit-zero` applies to it.

## Example
```python
print "step", step  # Python 2
```

## Fix
Fix the file, or exclude it (`extend-exclude`). It is reported whatever `select` says; only an
`ignore` or `per-file-ignores` entry naming `FAL000` exactly turns it off.
""",
)
