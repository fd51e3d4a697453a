"""`flux-alias-lint server`: a language server that reports findings as you type and fixes them.

Diagnostics are published when a document is opened or saved, and `debounce` seconds after the
last of a burst of changes; each carries its rule, severity and context (the steps to the call that
rescales the loss are its related locations). Code actions: a finding's `.clone()` fix (the edit
`check --fix` makes), `# noqa: FALxxx` on its line, and `source.fixAll.flux-alias-lint`.

Context from other files comes from the project index, built as `check` builds it (and cached
where `check` caches it) and rebuilt when a file of the project is saved; the open document's own
evidence is read from its current text.

Only `flux-alias-lint server` imports this module: pygls is the optional `server` extra.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from lsprotocol import types
from pygls import uris
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from . import __version__
from .cache import CACHE_DIR_NAME, project_reached
from .config import ConfigError, Resolver, selection_for
from .finding import Finding
from .index.files import folders_given, project_root
from .index.project import reaches_of_text
from .index.reach import Reaches, shown
from .lint import check_text, fix_text
from .noqa import comment_lines, noqa_line, with_noqa
from .output import context_note
from .rules import UNCHECKED
from .runner import unchecked
from .selection import Selection
from .source import SourceError, SourceFile

NAME = "flux-alias-lint"
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.{NAME}"  # source.fixAll.flux-alias-lint
DEFAULT_DEBOUNCE = 0.3  # seconds without a change before a document being edited is linted
SEVERITY = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning}

Reached = Mapping[str, Reaches]  # the project index: real path -> def line -> who rescales its loss
T = TypeVar("T")


class FluxServer(LanguageServer):
    def __init__(self, debounce: float = DEFAULT_DEBOUNCE) -> None:
        super().__init__(NAME, __version__)
        self.debounce = debounce
        # One worker thread: the work is CPU-bound (more threads would share one GIL), and the
        # config loader's cache is not made for concurrent use.
        self.worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=NAME)
        self.pending: dict[str, asyncio.Task[None]] = {}  # uri -> its next lint
        self.indexes: dict[str, asyncio.Future[Reached]] = {}  # project root -> its index
        self.published: dict[str, tuple[int | None, list[Finding]]] = {}  # uri -> (version, findings)

    async def run(self, function: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.worker, function, *args)

    def given_workspace(self) -> None:
        """The workspace's folders are what a command line's paths are to `check`: the project of a
        file no marker places (`index/files.py`). Asked again when the client opens and on each save."""
        folders = [uris.to_fs_path(folder.uri) for folder in self.workspace.folders.values()]
        folders_given(f for f in (self.workspace.root_path, *folders) if f)

    async def index(self, path: str) -> Reached:
        """The index of the project `path` is in, built once until a file of it is saved."""
        root = project_root(path)
        future = self.indexes.get(root)
        if future is None or (future.done() and future.exception() is not None):
            future = self.indexes[root] = asyncio.ensure_future(self.run(project_index, path))
        return await future

    def schedule(self, uri: str, delay: float) -> None:
        """Lint `uri` after `delay` seconds, instead of any lint of it still waiting."""
        waiting = self.pending.pop(uri, None)
        if waiting is not None:
            waiting.cancel()

        async def later() -> None:
            await asyncio.sleep(delay)
            await self.lint(uri)

        self.pending[uri] = asyncio.ensure_future(later())

    async def lint(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        version, text, path = document.version, document.source, document.path
        if path is None:
            return  # not a file (an unsaved buffer): no project, no config to lint it with
        try:
            findings = await self.run(lint_document, path, text, await self.index(path))
        except ConfigError as exc:
            self.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"{NAME}: {exc}"))
            return
        if uri not in self.workspace.text_documents or self.workspace.get_text_document(uri).version != version:
            return  # closed or changed meanwhile: the lint scheduled since then publishes
        self.published[uri] = (version, findings)
        lines = split_lines(text)
        root = project_root(path)
        diagnostics = [diagnostic(document, lines, f, version, root) for f in findings]
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, diagnostics, version))


def project_index(path: str) -> Reached:
    """`check`'s project index for the project `path` is in, with its cache where `check` keeps it."""
    root = Path(project_root(path))
    config = Resolver(None, root)(path)
    return project_reached([path], (config.root or root) / CACHE_DIR_NAME)


def _selection(path: str) -> Selection:
    return selection_for(Resolver(None, Path(project_root(path)))(path), path)


def lint_document(path: str, text: str, reached: Reached) -> list[Finding]:
    """What `check` reports for the text, with the severity its config's `unreached` gives (hidden
    where it says "ignore"); a document that does not parse is one FAL000."""
    source, selection = SourceFile(path, text, "utf-8"), _selection(path)
    try:
        found = check_text(source, selection, reaches=reaches_of_text(path, text, reached))[0]
    except SourceError as exc:
        return unchecked(exc, selection).findings
    except RecursionError:
        return unchecked(SourceError(path, "too deeply nested to analyse"), selection).findings
    return found


def fix_document(path: str, text: str, reached: Reached) -> str:
    """What `check --fix` writes for the text; the text itself if it cannot be fixed."""
    source = SourceFile(path, text, "utf-8")
    try:
        return fix_text(source, _selection(path), reaches_of_text(path, text, reached)).text
    except (SourceError, RecursionError):
        return text


def split_lines(text: str) -> list[str]:
    """The lines as LSP (and Python's tokenizer) count them; `str.splitlines` also splits on \\f and \\u2028."""
    return re.split(r"\r\n|\r|\n", text)


def _position(document: TextDocument, lines: Sequence[str], line: int, column: int) -> types.Position:
    """A 1-based line and code-point column as the client counts (UTF-16 unless negotiated)."""
    return document.position_codec.position_to_client_units(lines, types.Position(line - 1, column - 1))


def diagnostic(
    document: TextDocument, lines: Sequence[str], finding: Finding, version: int | None, root: str
) -> types.Diagnostic:
    """`root`: the project's (`project_root`): the message names files as `check` run there does."""
    start = _position(document, lines, finding.line, finding.column)
    end = _position(document, lines, finding.end_line, finding.end_column)
    data: dict[str, object] = {"version": version}
    if finding.fixable:  # the two insertions `--fix` makes, at the ends of the flagged expression
        data["fix"] = [[start.line, start.character, finding.fix_before], [end.line, end.character, finding.fix_after]]
    related = [
        types.DiagnosticRelatedInformation(
            types.Location(
                Path(os.path.abspath(step.path)).as_uri(), types.Range(*[types.Position(step.line - 1, 0)] * 2)
            ),
            step.what,
        )
        for step in finding.reached_by
    ]
    named = as_check_shows(finding, root)
    return types.Diagnostic(
        range=types.Range(start, end),
        message=named.message + context_note(named),
        severity=SEVERITY[finding.severity],
        code=finding.code,
        source=NAME,
        related_information=related or None,
        data=data,
    )


def as_check_shows(finding: Finding, root: str) -> Finding:
    """The finding with the files of its chain, in its steps and its message, named relative to the
    project's `root`, as `check` run from there names them. The index names them from this
    process's working directory, the editor's, which may be anywhere; a file outside the root keeps
    its absolute path."""
    message, steps = finding.message, []
    for step in finding.reached_by:
        absolute = os.path.abspath(step.path)
        relative = os.path.relpath(absolute, root)
        if relative.startswith(os.pardir):
            relative = absolute
        for written in (absolute, shown(absolute)):  # the message names it as the index did (`shown`)
            pattern = rf"(?<![^\s(\[]){re.escape(written)}:{step.line}\b"  # a whole path, not the tail of one
            message = re.sub(pattern, lambda _, named=f"{relative}:{step.line}": named, message)
        steps.append(dataclasses.replace(step, path=relative))
    return dataclasses.replace(finding, message=message, reached_by=tuple(steps))


def _wanted(only: Sequence[str] | None, kind: str) -> bool:
    """Whether the client asked for actions of `kind` (`only` lists kinds and their parents)."""
    return only is None or any(kind == k or kind.startswith(k + ".") for k in only)


def _edit(document: TextDocument, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
    """`edits` to the document as it is now: a client drops them if it has changed since."""
    identifier = types.OptionalVersionedTextDocumentIdentifier(document.uri, document.version)
    return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(identifier, edits)])


def _quick_fixes(document: TextDocument, diagnostics: Sequence[types.Diagnostic]) -> list[types.CodeAction]:
    lines = split_lines(document.source)
    commentable: set[int] | None = None
    actions = []
    for d in diagnostics:
        data = d.data
        if d.source != NAME or not isinstance(data, dict) or data.get("version") != document.version:
            continue  # another tool's, or published for an older text
        if data.get("fix"):
            edits = [types.TextEdit(types.Range(*[types.Position(ln, ch)] * 2), text) for ln, ch, text in data["fix"]]
            suffix = data["fix"][1][2].lstrip(")")
            actions.append(
                types.CodeAction(
                    f"{NAME} ({d.code}): add `{suffix}`",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[d],
                    is_preferred=True,
                    edit=_edit(document, [e for e in edits if e.new_text]),
                )
            )
        if d.code == UNCHECKED:
            continue  # a file that does not parse has nothing to suppress
        commentable = comment_lines(document.source) if commentable is None else commentable
        line = noqa_line(d.range.start.line + 1, d.range.end.line + 1, commentable)
        if line is not None:
            old = lines[line - 1]
            end = document.position_codec.position_to_client_units(lines, types.Position(line - 1, len(old)))
            replace = types.TextEdit(types.Range(types.Position(line - 1, 0), end), with_noqa(old, [str(d.code)]))
            actions.append(
                types.CodeAction(
                    f"{NAME} ({d.code}): suppress with `# noqa: {d.code}`",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[d],
                    edit=_edit(document, [replace]),
                )
            )
    return actions


def create_server(debounce: float = DEFAULT_DEBOUNCE) -> FluxServer:
    server = FluxServer(debounce)

    @server.feature(types.INITIALIZED)
    def initialized(ls: FluxServer, params: types.InitializedParams) -> None:
        ls.given_workspace()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: FluxServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: FluxServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, ls.debounce)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: FluxServer, params: types.DidSaveTextDocumentParams) -> None:
        # The saved text may hand a loss function to Megatron (or stop): rebuild the project's
        # index and relint every open document of the project against it.
        ls.given_workspace()  # and a marker added meanwhile is seen
        root = project_root(ls.workspace.get_text_document(params.text_document.uri).path)
        ls.indexes.pop(root, None)
        for uri, document in ls.workspace.text_documents.items():
            if document.path is not None and project_root(document.path) == root:
                ls.schedule(uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: FluxServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        waiting = ls.pending.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        ls.published.pop(uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, []))

    kinds = [types.CodeActionKind.QuickFix, FIX_ALL]

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(code_action_kinds=kinds))
    async def code_action(ls: FluxServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        document = ls.workspace.get_text_document(params.text_document.uri)
        only = params.context.only
        actions = _quick_fixes(document, params.context.diagnostics) if _wanted(only, "quickfix") else []
        version, findings = ls.published.get(document.uri, (None, []))
        if _wanted(only, FIX_ALL) and version == document.version and any(f.fixable for f in findings):
            text = document.source
            fixed = await ls.run(fix_document, document.path, text, await ls.index(document.path))
            if fixed != text:
                lines = split_lines(text)
                end = document.position_codec.position_to_client_units(
                    lines, types.Position(len(lines) - 1, len(lines[-1]))
                )
                whole = types.TextEdit(types.Range(types.Position(0, 0), end), fixed)
                actions.append(types.CodeAction(f"{NAME}: fix all", kind=FIX_ALL, edit=_edit(document, [whole])))
        return actions

    return server


def serve(debounce: float = DEFAULT_DEBOUNCE) -> int:
    """Run the server on stdin and stdout until the client says exit."""
    create_server(debounce).start_io()
    return 0
