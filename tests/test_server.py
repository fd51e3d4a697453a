"""`flux-alias-lint server` end to end: a real LSP client (pytest-lsp) talking to the server over stdio."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from lsprotocol.converters import get_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

ROOT = Path(__file__).resolve().parents[1]
SEED = (ROOT / "fixtures" / "FAL001" / "seed.py").read_text()
SEED_FIXED = SEED.replace("loss_sum.detach(), sample_count", "loss_sum.detach().clone(), sample_count")
LOSS = 'def loss_func(output):\n    loss = output.sum()\n    return loss, {"loss": loss.detach()}\n'
TRAIN = (
    "from loss import loss_func\n\n\n"
    "def forward_step(data_iterator, model):\n"
    "    return model(next(data_iterator)), loss_func\n"
)
HANG_GUARD = 120  # seconds: a server that never answers fails the test instead of hanging the suite


class Published:
    """Every publishDiagnostics the client received, in order, and a way to wait for the next."""

    def __init__(self) -> None:
        self.seen: list[types.PublishDiagnosticsParams] = []
        self._arrived = asyncio.Event()

    def __call__(self, params: types.PublishDiagnosticsParams) -> None:
        self.seen.append(params)
        self._arrived.set()

    async def wait(
        self, match: Callable[[types.PublishDiagnosticsParams], bool], since: int = 0
    ) -> list[types.Diagnostic]:
        """The diagnostics of the first publication from `since` on that `match`es."""
        async with asyncio.timeout(HANG_GUARD):
            while True:
                found = [p for p in self.seen[since:] if match(p)]
                if found:
                    return list(found[0].diagnostics)
                self._arrived.clear()  # no await since the look: nothing set in between is lost
                await self._arrived.wait()

    def of(self, uri: str, version: int | None = None, since: int = 0) -> asyncio.Future[list[types.Diagnostic]]:
        return asyncio.ensure_future(
            self.wait(lambda p: p.uri == uri and (version is None or p.version == version), since)
        )


def _client() -> LanguageClient:
    client = LanguageClient(converter_factory=get_converter)
    client.published = Published()  # type: ignore[attr-defined]
    register_lsp_features(
        client, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: client.published}
    )  # type: ignore[attr-defined]
    return client


def _config(debounce: str) -> ClientServerConfig:
    return ClientServerConfig(
        server_command=[sys.executable, "-m", "flux_alias_lint", "server", "--debounce", debounce],
        client_factory=_client,
        server_env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


async def _start(client: LanguageClient, project: Path) -> AsyncIterator[None]:
    (project / "pyproject.toml").write_text("[tool.flux-alias-lint]\n")
    await client.initialize_session(
        types.InitializeParams(capabilities=client_capabilities("visual-studio-code"), root_uri=project.as_uri())
    )
    yield
    await client.shutdown_session()


@pytest_lsp.fixture(config=_config("0"))
async def client(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[None]:
    async for _ in _start(lsp_client, tmp_path):
        yield


@pytest_lsp.fixture(config=_config("1000"))
async def slow_client(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[None]:
    """A debounce no test outlives: a change alone is never linted."""
    async for _ in _start(lsp_client, tmp_path):
        yield


def _open(client: LanguageClient, path: Path, text: str) -> str:
    path.write_text(text)
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text)))
    return uri


def _change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version, uri),
            [types.TextDocumentContentChangeWholeDocument(text)],
        )
    )


def _apply(text: str, edit: types.WorkspaceEdit) -> str:
    """Apply a one-document edit as a client would (ASCII text: UTF-16 units are characters)."""
    (change,) = edit.document_changes
    lines = text.splitlines(keepends=True)

    def offset(position: types.Position) -> int:
        return sum(len(line) for line in lines[: position.line]) + position.character

    for text_edit in sorted(change.edits, key=lambda e: offset(e.range.start), reverse=True):
        start, end = offset(text_edit.range.start), offset(text_edit.range.end)
        text = text[:start] + text_edit.new_text + text[end:]
    return text


async def _actions(
    client: LanguageClient, uri: str, diagnostics: list[types.Diagnostic], only: list[str] | None = None
) -> list[types.CodeAction]:
    whole = types.Range(types.Position(0, 0), types.Position(0, 0))
    params = types.CodeActionParams(
        types.TextDocumentIdentifier(uri), whole, types.CodeActionContext(diagnostics, only=only)
    )
    return list(await client.text_document_code_action_async(params) or [])


@pytest.mark.asyncio
async def test_seed_diagnostic_and_its_quick_fix(client: LanguageClient, tmp_path: Path) -> None:
    uri = _open(client, tmp_path / "seed.py", SEED)
    (diagnostic,) = await client.published.of(uri, 1)
    assert diagnostic.code == "FAL001" and diagnostic.source == "flux-alias-lint"
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert diagnostic.range == types.Range(types.Position(16, 39), types.Position(16, 56))
    assert diagnostic.message.endswith("[megatron via seed.py:10]")  # as `check` run in the project names it
    assert [info.location.range.start.line for info in diagnostic.related_information] == [18, 9]

    actions = await _actions(client, uri, [diagnostic])
    fix = next(a for a in actions if a.is_preferred)
    assert fix.title == "flux-alias-lint (FAL001): add `.clone()`"
    fixed = _apply(SEED, fix.edit)
    assert fixed == SEED_FIXED
    published = client.published.of(uri, 2)
    _change(client, uri, 2, fixed)
    assert await published == []


@pytest.mark.asyncio
async def test_suppress_with_noqa(client: LanguageClient, tmp_path: Path) -> None:
    uri = _open(client, tmp_path / "loss.py", LOSS)
    (diagnostic,) = await client.published.of(uri, 1)
    (noqa,) = [a for a in await _actions(client, uri, [diagnostic]) if "noqa" in a.title]
    suppressed = _apply(LOSS, noqa.edit)
    assert suppressed == LOSS.replace("detach()}\n", "detach()}  # noqa: FAL001\n")
    published = client.published.of(uri, 2)
    _change(client, uri, 2, suppressed)
    assert await published == []


@pytest.mark.asyncio
async def test_fix_all_source_action(client: LanguageClient, tmp_path: Path) -> None:
    uri = _open(client, tmp_path / "seed.py", SEED)
    await client.published.of(uri, 1)
    (action,) = await _actions(client, uri, [], only=["source.fixAll"])
    assert action.kind == "source.fixAll.flux-alias-lint"
    assert _apply(SEED, action.edit) == SEED_FIXED
    assert await _actions(client, uri, [], only=["source.organizeImports"]) == []


@pytest.mark.asyncio
async def test_syntax_error_is_one_diagnostic(client: LanguageClient, tmp_path: Path) -> None:
    uri = _open(client, tmp_path / "broken.py", "def f(:\n")
    (diagnostic,) = await client.published.of(uri, 1)
    assert diagnostic.code == "FAL000" and diagnostic.range.start == types.Position(0, 6)
    assert [a.title for a in await _actions(client, uri, [diagnostic])] == []
    # The server is still there: the fixed text is linted.
    published = client.published.of(uri, 2)
    _change(client, uri, 2, LOSS)
    (diagnostic,) = await published
    assert diagnostic.code == "FAL001"


@pytest.mark.asyncio
async def test_saving_a_file_refreshes_the_project_context(client: LanguageClient, tmp_path: Path) -> None:
    loss = _open(client, tmp_path / "loss.py", LOSS)
    (before,) = await client.published.of(loss, 1)
    assert before.message.endswith("[unreached, warning]")
    assert before.severity == types.DiagnosticSeverity.Warning
    since = len(client.published.seen)
    train = tmp_path / "train.py"
    _open(client, train, "")  # written and opened, but nothing hands loss_func to Megatron yet
    train.write_text(TRAIN)
    _change(client, train.as_uri(), 2, TRAIN)
    republished = client.published.of(loss, 1, since)
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(train.as_uri())))
    (after,) = await republished
    assert after.message.endswith("[megatron via train.py:4]")
    assert after.related_information[-1].location.uri == train.as_uri()


@pytest.mark.asyncio
async def test_messages_name_files_as_check_in_the_project_does(client: LanguageClient, tmp_path: Path) -> None:
    """The server runs wherever the editor started it (here: this checkout, outside the project);
    its messages name the project's files as `check` run in the project does, relative to it."""
    assert not Path.cwd().is_relative_to(tmp_path)
    caller = tmp_path / "caller.py"
    caller.write_text(
        "from loss import loss_func\n\n\ndef evaluate(output, n):\n"
        "    loss, report = loss_func(output)\n    loss /= n\n    return report\n"
    )
    (diagnostic,) = await client.published.of(_open(client, tmp_path / "loss.py", LOSS), 1)
    assert "the caller at caller.py:6 rescales it in place" in diagnostic.message, diagnostic.message
    assert diagnostic.message.endswith("[in-place-caller via caller.py:6]"), diagnostic.message
    assert str(tmp_path) not in diagnostic.message
    assert diagnostic.related_information[-1].location.uri == caller.as_uri()


@pytest.mark.asyncio
async def test_changes_wait_for_the_debounce(slow_client: LanguageClient, tmp_path: Path) -> None:
    client = slow_client
    uri = _open(client, tmp_path / "loss.py", LOSS)
    assert len(await client.published.of(uri, 1)) == 1
    clean = LOSS.replace("loss.detach()", "loss.item()")
    _change(client, uri, 2, LOSS + "\n")
    _change(client, uri, 3, clean)
    published = client.published.of(uri, 3)
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri)))
    assert await published == []
    # Versions 2 and 3 were waiting out the debounce; the save linted the document at once.
    assert [p.version for p in client.published.seen if p.uri == uri] == [1, 3]
