"""The command line: `flux-alias-lint check PATH...`, `verify PATH...`, `explain FILE:LINE` and `rule CODE`."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import glob
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__
from .cache import CACHE_DIR_NAME, Cache, project_reached
from .config import (
    Config,
    ConfigError,
    Resolver,
    check_selectors,
    parse_config_options,
    parse_target_version,
    selection_for,
    split_codes,
)
from .discover import DEFAULT_EXCLUDE, Excluder, discover
from .finding import ERROR, Finding
from .gitignore import GitIgnore
from .index.files import real_path, run_given
from .index.reach import ESCAPES, Reaches
from .output import FORMATTERS, format_fixes, format_statistics, summary
from .parallel import check_files, default_jobs
from .progress import phase, progress_wanted, run_summary, track
from .rules import RULES, UNCHECKED
from .runner import (
    DEFAULT_TIMEOUT,
    FileResult,
    Limits,
    Mode,
    decided_by,
    lint_source,
    step_in,
    unchecked,
    write_fix,
)
from .selection import UNREACHED_MODES, Layer, Selection
from .source import DEFAULT_MAX_FILE_SIZE, SourceError, decode, read_bytes

if TYPE_CHECKING:
    from .harness.verify import Settings as Scenario
    from .harness.verify import Verdict

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERNAL = 3  # `verify` only, as pytest's: an exception escaped the harness (a bug in flux-alias-lint)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader went away (`| head`)


def _patterns(value: str) -> tuple[str, ...]:
    return tuple(p for p in value.split(",") if p)


def _add_file_options(command: argparse.ArgumentParser) -> None:
    """Selection and discovery options shared by `check` and `verify`. Repeated flags add up, as in ruff."""
    command.add_argument(
        "--unreached",
        choices=UNREACHED_MODES,
        help="findings in functions nothing is known to rescale: warn (print as warnings, which do not fail "
        "the run; the default), error (fail on them too) or ignore (hide them)",
    )
    command.add_argument(
        "--select",
        action="extend",
        type=split_codes,
        metavar="CODES",
        help="codes or prefixes to report, instead of the config's",
    )
    command.add_argument(
        "--extend-select",
        action="extend",
        type=split_codes,
        metavar="CODES",
        default=[],
        help="codes or prefixes to add",
    )
    command.add_argument(
        "--ignore", action="extend", type=split_codes, metavar="CODES", default=[], help="codes or prefixes to skip"
    )
    command.add_argument(
        "--target-version",
        type=parse_target_version,
        metavar="pyXY",
        help="the oldest Python the code supports (default: the config's, else [project] requires-python)",
    )
    command.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="FILE|KEY=VALUE",
        help="a pyproject.toml (or TOML file) to use for every path, or a setting on top of the config's "
        "(e.g. 'select = [\"FAL001\"]'); repeatable, as in ruff",
    )
    command.add_argument("--exclude", action="extend", type=_patterns, metavar="PATTERNS", help="replace the excludes")
    command.add_argument(
        "--extend-exclude", action="extend", type=_patterns, metavar="PATTERNS", default=[], help="add excludes"
    )
    command.add_argument("--force-exclude", action="store_true", help="apply excludes to files named explicitly too")
    command.add_argument(
        "--no-respect-gitignore", dest="respect_gitignore", action="store_false", help="check files git ignores too"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flux-alias-lint",
        description="Find loss-function reports that share storage with the tensor Megatron rescales in place.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"flux-alias-lint {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = commands.add_parser("check", help="check files and directories (recursively, *.py)", allow_abbrev=False)
    check.set_defaults(command_parser=check)
    check.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (default: .); - for stdin")
    fix_group = check.add_mutually_exclusive_group()
    fix_group.add_argument("--fix", action="store_true", help="insert .clone() where it is needed")
    fix_group.add_argument("--diff", action="store_true", help="print the fixes as a unified diff; write nothing")
    _add_file_options(check)
    check.add_argument(
        "--output-format",
        "--format",
        choices=sorted(FORMATTERS),
        default="text",
        dest="output_format",
        help="text (= concise): one line per finding; full: with the source line and a caret, as ruff's",
    )
    check.add_argument("-o", "--output-file", metavar="FILE", help="write the report to FILE instead of stdout")
    check.add_argument("-e", "--exit-zero", action="store_true", help="exit 0 even if there are findings")
    check.add_argument(
        "--exit-non-zero-on-fix", action="store_true", help="with --fix: exit 1 if a file was changed (pre-commit)"
    )
    check.add_argument("-q", "--quiet", action="store_true", help="print findings only, no summary")
    check.add_argument("--statistics", action="store_true", help="print counts per rule instead of findings")
    check.add_argument("--show-fixes", action="store_true", help="with --fix: list what was fixed, per file and rule")
    check.add_argument("--stdin-filename", metavar="PATH", help="read the source from stdin and report it as PATH")
    check.add_argument("-j", "--jobs", type=_positive, metavar="N", help="worker processes (default: all cores)")
    check.add_argument("-n", "--no-cache", action="store_true", help="neither read nor write the results cache")
    check.add_argument(
        "--add-noqa", action="store_true", help="add a `# noqa: FALxxx` to each line with a finding, as ruff's"
    )
    check.add_argument(
        "--show-settings", action="store_true", help="print the settings the first file is checked with, and exit"
    )
    check.add_argument(
        "--timeout",
        type=_non_negative(float),
        metavar="SECONDS",
        help="a safety net: a file still being checked after this long fails the run (exit 2), never a "
        "finding; the analysis itself stops at a count of its work, the same on any machine "
        f"(default: file-timeout in the config, else {DEFAULT_TIMEOUT:g}: none)",
    )
    check.add_argument(
        "--max-file-size",
        type=_non_negative(int),
        metavar="BYTES",
        help="larger files are skipped with an error "
        f"(default: max-file-size in the config, else {DEFAULT_MAX_FILE_SIZE})",
    )
    check.add_argument(
        "--cache-dir",
        metavar="DIR",
        help=f"where the cache lives (default: {CACHE_DIR_NAME} beside the pyproject.toml with the settings, "
        "else in the current directory)",
    )

    verify = commands.add_parser(
        "verify",
        help="confirm each finding by running it through Megatron's rescale, before and after its fix "
        "(needs the harness extra: torch and megatron-core)",
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit status, as a test runner's:\n"
        "  0  every finding was run and confirmed (or there were none)\n"
        "  1  a finding is unconfirmed or could not be run (its line says why, or what input it needed)\n"
        "  2  a usage error: a bad option, a path that cannot be read, the harness not installed\n"
        "  3  an internal error: the harness itself raised (one line names the file and the exception)",
    )
    verify.set_defaults(command_parser=verify)
    verify.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (default: .); - for stdin")
    verify.add_argument(
        "--profile",
        default="installed",
        help="Megatron release to model: installed (default), latest, or a release such as 0.12",
    )
    verify.add_argument("--num-microbatches", type=_positive, default=2, metavar="N")
    verify.add_argument("--cp-group-size", type=_positive, default=1, metavar="N")
    verify.add_argument(
        "--calculate-per-token-loss",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="model Megatron's calculate_per_token_loss on (a 3-tuple is then not rescaled) or off; "
        "default: as the project sets it with a literal (calculate_per_token_loss=True, an assertion), else off",
    )
    verify.add_argument("--output-format", "--format", choices=("text", "json"), default="text", dest="output_format")
    verify.add_argument(
        "--stdin-filename",
        metavar="PATH",
        help="read the source from stdin as the file PATH (its project, its settings)",
    )
    _add_file_options(verify)

    server = commands.add_parser(
        "server", help="run the language server on stdin/stdout (needs the server extra: pygls)", allow_abbrev=False
    )
    server.set_defaults(command_parser=server)
    server.add_argument(
        "--debounce",
        type=_non_negative(float),
        default=0.3,
        metavar="SECONDS",
        help="while a document is edited, lint it once it has not changed for this long (default: 0.3)",
    )

    explain = commands.add_parser(
        "explain",
        help="print how the function of the finding at FILE:LINE reaches a host that rescales its loss, "
        "or where its value is lost",
        allow_abbrev=False,
    )
    explain.set_defaults(command_parser=explain)
    explain.add_argument("target", metavar="FILE:LINE", help="a line with a finding")
    _add_file_options(explain)

    graph = commands.add_parser(
        "callgraph",
        help="print the project's resolved call graph (as PyCG's micro-benchmark reads it)",
        allow_abbrev=False,
    )
    graph.set_defaults(command_parser=graph)
    graph.add_argument("path", metavar="PATH", help="the project's directory: its modules are named from there")
    graph.add_argument("--output-format", choices=("pycg",), default="pycg", help="pycg (default): a JSON object")

    rule = commands.add_parser("rule", help="print a rule's documentation", allow_abbrev=False)
    rule.set_defaults(command_parser=rule)
    rule.add_argument("code", nargs="?", help="a code or name: FAL001, detached-alias-in-report; omit to list all")
    rule.add_argument("--all", action="store_true", help="print the documentation of every rule")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The entry point. Ctrl-C exits 130 and a closed stdout (`| head`) exits quietly, without a traceback."""
    previous = _exit_on_interrupt()
    if previous is not None:
        _RUNNING.set()
    try:
        return _main(argv)
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that raises nothing either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except OSError:
        if _working_directory_exists():
            raise
        # Relative paths, the config and the cache all hang off it: nothing can be answered.
        print("flux-alias-lint: error: the working directory no longer exists (removed?)", file=sys.stderr)
        return EXIT_ERROR
    finally:
        _RUNNING.clear()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _working_directory_exists() -> bool:
    try:
        os.getcwd()
    except FileNotFoundError:
        return False
    return True


def _exit_on_interrupt() -> signal.Handlers | None:
    """On Ctrl-C the parent ends its workers and leaves at once. Workers never see the signal (they
    block it, see `_workers_ignore_interrupts`): one gone mid-read would take a queue lock with it
    and hang the pool, and each would print a traceback. Nothing unwinds: the report comes at the
    end, so there is nothing to flush, and `--fix` interrupted leaves at most a temporary file, since
    the rename is what replaces a file."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupted(signum: int, frame: object) -> None:
        for pid in _children():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        os._exit(EXIT_INTERRUPTED)

    return signal.signal(signal.SIGINT, interrupted)


def _workers_ignore_interrupts() -> None:
    if _RUNNING.is_set():  # a worker forked during a run
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


_RUNNING = threading.Event()  # main() is running (in the main thread, with the handler above)
os.register_at_fork(after_in_child=_workers_ignore_interrupts)


def _children() -> set[int]:
    """This process's children. multiprocessing's list misses a worker forked a moment ago (one the
    signal may have missed too), so Linux's own list is asked as well."""
    multiprocessing = sys.modules.get("multiprocessing")  # not imported: no worker was started
    pids = {w.pid for w in multiprocessing.active_children() if w.pid} if multiprocessing else set()
    for listing in glob.glob("/proc/self/task/*/children"):
        with contextlib.suppress(OSError), open(listing) as handle:
            pids.update(int(pid) for pid in handle.read().split())
    return pids


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):
        parser.print_help(sys.stderr)  # as ruff: no command, the help, and the exit code of a usage error
        return EXIT_ERROR
    args, extra = parser.parse_known_args(argv)
    if extra:  # argparse leaves these to the top-level parser, whose usage is not the one that helps
        args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "rule":
        if args.all and args.code:
            args.command_parser.error("--all prints every rule: it cannot be combined with a rule")
        return _rule(args.code, args.all)
    if args.command == "callgraph":
        with run_given([args.path]):
            return _callgraph(args.path)
    if args.command == "server":
        try:
            from .server import serve
        except ImportError as exc:
            print(
                f"flux-alias-lint: error: the server needs pygls ({exc}): "
                "pip install '/path/to/flux-alias-lint[server]' (a clone of flux-alias-lint, or its wheel)",
                file=sys.stderr,
            )
            return EXIT_ERROR
        return serve(args.debounce)
    try:
        with run_given(_given(args)):
            if args.command == "explain":
                from .explain import explain

                return explain(args.target, _Settings(args).selection)
            return _verify(args) if args.command == "verify" else _check(args)
    except ConfigError as exc:
        print(f"flux-alias-lint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _given(args: argparse.Namespace) -> list[str]:
    """The paths the command line gives: the project of a file no marker places (`index/files.py`).
    Stdin stands for the file it is named after."""
    if args.command == "explain":
        return [args.target.rpartition(":")[0]]
    if args.paths in ([], ["-"]):
        return [args.stdin_filename] if args.stdin_filename else [] if args.paths else ["."]
    return args.paths


def _callgraph(path: str) -> int:
    from .index.callgraph import call_graph  # the index's modules: not loaded by a warm check

    if not os.path.isdir(path):
        print(f"flux-alias-lint: error: {path}: not a directory", file=sys.stderr)
        return EXIT_ERROR
    unread: list[str] = []
    graph = call_graph(path, unread)
    for name in unread:  # the graph is still printed, without them
        print(f"flux-alias-lint: error: {name}: cannot be read or parsed as Python: left out", file=sys.stderr)
    print(json.dumps(graph, indent=2))
    return EXIT_ERROR if unread else EXIT_CLEAN


def _rule(code: str | None, every: bool = False) -> int:
    """`rule CODE` or `rule NAME`: its documentation; `rule --all`: every rule's; `rule`: a table."""
    if every:
        print("\n".join(f"# {rule.code} ({rule.name})\n\n{rule.doc}" for rule in RULES.values()), end="")
        return EXIT_CLEAN
    if code is None:
        for rule in RULES.values():
            print(f"{rule.code}  {rule.name:40}  {rule.summary}")
        return EXIT_CLEAN
    rule = RULES.get(code.upper()) or next((r for r in RULES.values() if r.name == code.lower()), None)
    if rule is None:
        known = ", ".join(f"{r.code} ({r.name})" for r in RULES.values())
        print(f"flux-alias-lint: error: unknown rule {code!r}; known: {known}", file=sys.stderr)
        return EXIT_ERROR
    print(f"# {rule.code} ({rule.name})\n\n{rule.doc}", end="")
    return EXIT_CLEAN


class _Settings:
    """Per-file settings: the nearest config's selection and excludes, with the command line on top."""

    def __init__(self, args: argparse.Namespace) -> None:
        for option in ("select", "extend_select", "ignore"):
            check_selectors(getattr(args, option) or (), where=f"--{option.replace('_', '-')}")
        self.args = args
        self.cwd = Path.cwd().resolve()
        self.config_file, self.overrides = parse_config_options(args.config)
        self.config = Resolver(self.config_file, self.cwd, self.overrides)
        # Where the cache goes is where it would go without --config FILE (a file kept elsewhere).
        self._cache_roots = Resolver(None, self.cwd) if self.config_file else self.config
        self._cli = Layer(args.select, tuple(args.extend_select), tuple(args.ignore))
        self._excluders: dict[Config, Excluder] = {}
        self._excluder_in: dict[Path, Excluder] = {}  # by the directory walked
        self._selections: dict[tuple[Config, tuple[str, ...]], Selection] = {}

    def selection(self, path: str) -> Selection:
        config = self.config(path)
        key = (config, config.ignored_for(path))
        if key not in self._selections:
            self._selections[key] = selection_for(
                config, path, self._cli, self.args.target_version, self.args.unreached
            )
        return self._selections[key]

    def excluded(self, path: Path) -> bool:
        return self._excluder(path)(path)

    def excluded_in(self, directory: Path, name: str, entry: os.DirEntry[str] | None = None) -> bool:
        """`excluded(directory / name)`, for the entries of a walk (`entry`: see `Excluder.excluded_in`)."""
        excluder = self._excluder_in.get(directory)
        if excluder is None:  # the entries of a directory share its config: looked up once
            excluder = self._excluder_in[directory] = self._excluder(os.path.join(directory, name))
        return excluder.excluded_in(directory, name, entry)

    def _excluder(self, path: Path | str) -> Excluder:
        config = self.config(path)
        excluder = self._excluders.get(config)
        if excluder is None:
            args = self.args
            patterns = next(p for p in (args.exclude, config.exclude, DEFAULT_EXCLUDE) if p is not None)
            patterns = (*patterns, *config.extend_exclude, *args.extend_exclude)
            excluder = self._excluders[config] = Excluder(patterns, config.root or self.cwd)
        return excluder

    def cache_dir(self, path: str) -> Path:
        """Next to the pyproject.toml that configures the file, else the working directory, like ruff."""
        if self.args.cache_dir:
            return Path(self.args.cache_dir)
        return (self._cache_roots(path).root or self.cwd) / CACHE_DIR_NAME

    def limits(self, path: str) -> Limits:
        """The time and size limits for `path`: the command line's, else its config's."""
        config = self.config(path)
        timeout = config.file_timeout if self.args.timeout is None else self.args.timeout
        return Limits(timeout, config.max_file_size if self.args.max_file_size is None else self.args.max_file_size)

    def files(self) -> tuple[list[str], list[str]]:
        gitignore = GitIgnore() if self.args.respect_gitignore else None
        return discover(self.args.paths, self.excluded, self.args.force_exclude, gitignore, self.excluded_in)


def _mode(args: argparse.Namespace) -> Mode:
    return Mode.FIX if args.fix else Mode.DIFF if args.diff else Mode.CHECK


def _check(args: argparse.Namespace) -> int:
    started = time.monotonic()
    usage = args.command_parser.error
    stdin = args.stdin = args.paths == ["-"] or (not args.paths and args.stdin_filename is not None)
    if "-" in args.paths and len(args.paths) > 1:
        usage("`-` (read stdin) cannot be combined with other paths")
    if args.stdin_filename is not None and not stdin:
        usage("--stdin-filename names the source read from stdin; it cannot be combined with paths")
    if args.add_noqa and (args.fix or args.diff or stdin):
        usage("--add-noqa edits files in place: it cannot be combined with --fix, --diff or stdin")
    if args.exit_non_zero_on_fix and not args.fix:
        print("flux-alias-lint: warning: --exit-non-zero-on-fix has no effect without --fix", file=sys.stderr)
    if args.statistics and args.output_format not in ("text", "json"):
        usage(
            "--statistics prints a text or json table; it cannot be combined with --output-format " + args.output_format
        )
    args.paths = args.paths or ["."]
    settings = _Settings(args)
    if args.show_settings:
        return _show_settings(settings)
    if stdin:
        results, errors = [_check_stdin(args, settings)], []
    else:
        files, errors = settings.files()
        if not files and not errors:
            print("flux-alias-lint: warning: No Python files found under the given path(s)", file=sys.stderr)
        index_cache = None if args.no_cache or not files else settings.cache_dir(files[0])
        drawn = not args.quiet and progress_wanted(sys.stderr)
        with phase("Indexing the project: who rescales each loss function...") if drawn else contextlib.nullcontext():
            reached = project_reached(files, index_cache, args.jobs or default_jobs())
        pending = _check_grouped(files, settings, _mode(args), reached)
        if drawn:
            pending = track(pending, len(files))
        by_path = dict(pending)
        results = [by_path[path] for path in files]
        if not args.add_noqa:  # which never edits a file that was not named
            results += _decided_elsewhere(files, settings, reached)
    if args.add_noqa:
        return _add_noqa(results, errors)
    code = _report(args, results, errors, settings)
    if (args.fix or args.diff) and not stdin and not args.quiet:
        unchecked = len(errors) + sum(r.error is not None for r in results)
        sys.stderr.write(run_summary(results, unchecked, time.monotonic() - started, diff=args.diff))
    return code


def _show_settings(settings: _Settings) -> int:
    """`--show-settings`, as ruff's: the settings the first file found is checked with."""
    files, errors = settings.files()
    if not files:
        raise ConfigError(errors[0] if errors else "--show-settings: no Python file found under the given path(s)")
    path = files[0]
    config, selection = settings.config(path), settings.selection(path)
    args = settings.args
    target = selection.target_version
    rows = {
        "settings path": str(config.source.resolve()) if config.source else "none (the defaults)",
        "select": [code for code in RULES if selection.enabled(code)],
        "per-file-ignores": dict(config.per_file_ignores),
        "exclude": [*(args.exclude or config.exclude or DEFAULT_EXCLUDE), *config.extend_exclude, *args.extend_exclude],
        "target-version": f"py3{target[1]}" if target else None,
        "unreached": args.unreached or config.unreached,
        "file-timeout": config.file_timeout if args.timeout is None else args.timeout,
        "max-file-size": config.max_file_size if args.max_file_size is None else args.max_file_size,
        "cache-dir": str(settings.cache_dir(path)),
    }
    print(f"Resolved settings for: {json.dumps(os.path.abspath(path))}")
    for key, value in rows.items():
        print(f"{key} = {json.dumps(value)}")
    return EXIT_CLEAN


def _add_noqa(results: list[FileResult], errors: list[str]) -> int:
    """`--add-noqa`, as ruff's: a `# noqa: CODE` on each line with a finding (none on a file that
    does not parse), written in place; exit 0 unless something could not be checked or written."""
    from .noqa import add_noqa

    added = 0
    errors = errors + [r.error for r in results if r.error]
    for result in results:
        found = [(f.line, f.end_line, f.code) for f in result.findings if f.code != UNCHECKED]
        if not found:
            continue
        try:
            original = read_bytes(result.path)
            source = decode(original, result.path)
            text, changed = add_noqa(source.text, found)
            write_fix(source, original, text)
        except SourceError as exc:
            errors.append(str(exc))
            continue
        added += changed
    for line in errors:
        print(f"flux-alias-lint: error: {line}", file=sys.stderr)
    print(f"Added {added} noqa directive{'' if added == 1 else 's'}.", file=sys.stderr)
    return EXIT_ERROR if errors else EXIT_CLEAN


def _check_grouped(
    files: list[str], settings: _Settings, mode: Mode, reached: Mapping[str, Reaches]
) -> Iterator[tuple[str, FileResult]]:
    """Files with the same selection and cache go through `check_files` together; `reached`: see `check_files`."""
    groups: dict[tuple[Selection, Path, Limits], list[str]] = {}
    for path in files:
        groups.setdefault((settings.selection(path), settings.cache_dir(path), settings.limits(path)), []).append(path)
    args = settings.args
    for (selection, cache_dir, limits), paths in groups.items():
        cache = None if args.no_cache else Cache(cache_dir, selection)
        checked = check_files(paths, selection, mode, jobs=args.jobs, cache=cache, reached=reached, limits=limits)
        yield from zip(paths, checked, strict=True)


def _decided_elsewhere(files: list[str], settings: _Settings, reached: Mapping[str, Reaches]) -> list[FileResult]:
    """For a run on named files (pre-commit's, on the changed ones): the findings of the project's
    other files whose chain passes through a named file (`decided_by`), each file introduced by a
    note saying which named file decides its verdict. With `--fix` (`--diff`) such a file is fixed
    (shown) as the named ones are, whole: the hook that fixes a commit fixes what the commit makes
    errors. Files the run excludes (the config's excludes, what git ignores) stay out."""
    args = settings.args
    named = {real_path(f) for f in files if f in args.paths and not os.path.isdir(f)}
    if not named:
        return []
    checked = {real_path(f) for f in files}
    shown = os.path.abspath if all(os.path.isabs(f) for f in files if real_path(f) in named) else os.path.relpath
    gitignore = GitIgnore() if args.respect_gitignore else None
    others = [
        shown(path)
        for path in decided_by(named, reached)
        if path not in checked
        and not settings.excluded(Path(path))
        and not (gitignore and gitignore.ignored_here_or_above(Path(path), is_dir=False))
    ]

    def decided(result: FileResult) -> list[Finding]:
        # An `escapes` chain is where a warning's value is lost, not a verdict the named file decides.
        return [f for f in result.findings if f.context != ESCAPES and step_in(f, named)]

    found = {path: decided(result) for path, result in _check_grouped(others, settings, Mode.CHECK, reached)}
    found = {path: findings for path, findings in found.items() if findings}
    mode = _mode(args)
    fixed = dict(_check_grouped(list(found), settings, mode, reached)) if mode is not Mode.CHECK else {}
    results = []
    for path, findings in found.items():
        result = fixed.get(path)
        result = FileResult(path, findings) if result is None else dataclasses.replace(result, findings=decided(result))
        if not args.quiet:
            step = step_in(findings[0], named)
            done = "fixed" if result.changed and args.fix else "reported"
            print(
                f"flux-alias-lint: note: {path} is {done} too: its verdict is decided in {step.path}:{step.line} "
                f"({step.what})",
                file=sys.stderr,
            )
        results.append(result)
    return results


def _verify(args: argparse.Namespace) -> int:
    args.stdin = args.paths == ["-"] or (not args.paths and args.stdin_filename is not None)
    args.paths = args.paths or ["."]
    if "-" in args.paths and len(args.paths) > 1:
        raise ConfigError("`-` (read stdin) cannot be combined with other paths")
    if args.stdin_filename is not None and not args.stdin:
        raise ConfigError("--stdin-filename names the source read from stdin; it cannot be combined with paths")
    settings = _Settings(args)
    try:
        from .harness.verify import Settings

        per_token = args.calculate_per_token_loss
        flag = {True: "--calculate-per-token-loss", False: "--no-calculate-per-token-loss", None: ""}[per_token]
        scenario = Settings(args.profile, args.num_microbatches, args.cp_group_size, per_token, flag)
        scenario.validate()
    except ImportError as exc:  # HarnessUnavailableError names what to install
        print(f"flux-alias-lint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    internal: list[str] = []
    try:
        status = _verify_files(args, settings, scenario, internal)
    except BrokenPipeError:
        raise  # the reader went away: main() leaves quietly
    except Exception as exc:  # a bug of ours outside any one file: one line, not a traceback
        internal.append(_one_line(exc))
        status = EXIT_INTERNAL
    for line in internal:
        print(f"flux-alias-lint: internal error: {line} (a bug in flux-alias-lint; please report it)", file=sys.stderr)
    return EXIT_INTERNAL if internal else status


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _verify_files(args: argparse.Namespace, settings: _Settings, scenario: Scenario, internal: list[str]) -> int:
    """Verify every file; an exception escaping the harness on one file is noted in ``internal`` (that file's
    findings are left out) and the others still run."""
    from .harness.verify import verify_file
    from .index.project import ProjectIndex

    if args.stdin:
        return _verify_stdin(args, settings, scenario)
    files, errors = settings.files()
    index = ProjectIndex.for_paths(files)
    reached = index.reached_by_path()  # the findings `check` reports, with their context
    schedules = index.schedules_by_path()  # the project's own schedule each is handed to, which `check` read
    if files:  # `check` first, in parallel: only files with findings are probed
        groups: dict[Selection, list[str]] = {}
        for path in files:
            groups.setdefault(settings.selection(path), []).append(path)
        results = [r for sel, paths in groups.items() for r in check_files(paths, sel, Mode.CHECK, reached=reached)]
        files = [r.path for r in results if r.findings]
        errors += [r.error for r in results if r.error]
    verdicts = []
    for path in files:
        try:
            real = os.path.realpath(path)
            found, error = verify_file(path, settings.selection(path), scenario, reached.get(real), schedules.get(real))
        except BrokenPipeError:
            raise
        except Exception as exc:
            internal.append(f"{path}: {_one_line(exc)}")
            continue
        verdicts.extend(found)
        if error:
            errors.append(error)
    return _verdicts_reported(args, scenario, verdicts, errors)


def _verify_stdin(args: argparse.Namespace, settings: _Settings, scenario: Scenario) -> int:
    """`verify` of stdin's text, standing for the file --stdin-filename names as `check` has it
    (its project indexed as `verify FILE` indexes it); without a name, the evidence in the text alone."""
    from .harness.verify import verify_file
    from .index.project import ProjectIndex, reaches_of_text

    path = args.stdin_filename or "-"
    data = sys.stdin.buffer.read()
    reaches, schedules = None, None
    if args.stdin_filename is not None:  # the file's project, indexed as `verify FILE` has it (no cache)
        index = ProjectIndex.for_paths([path])
        schedules = index.schedules_by_path().get(os.path.realpath(path))
        with contextlib.suppress(SourceError):  # verify_file reports why the text cannot be checked
            reaches = reaches_of_text(path, decode(data, path).text, index.reached_by_path())
    selection = settings.selection(path if args.stdin_filename else "stdin.py")
    verdicts, error = verify_file(path, selection, scenario, reaches, schedules, data)
    return _verdicts_reported(args, scenario, verdicts, [error] if error else [])


def _verdicts_reported(args: argparse.Namespace, scenario: Scenario, verdicts: list[Verdict], errors: list[str]) -> int:
    from .harness.verify import print_verdicts

    for line in errors:
        print(f"flux-alias-lint: error: {line}", file=sys.stderr)
    print_verdicts(verdicts, scenario, args.output_format)
    if errors:
        return EXIT_ERROR
    return EXIT_CLEAN if all(v.confirmed for v in verdicts) else EXIT_FINDINGS


def _positive(value: str) -> int:
    number = _number(int, value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def _non_negative(kind: Callable[[str], float]) -> Callable[[str], float]:
    def parse(value: str) -> float:
        number = _number(kind, value)
        if number < 0:
            raise argparse.ArgumentTypeError("must not be negative")
        return number

    return parse


def _number(kind: Callable[[str], float], value: str) -> float:
    """`value` as an int or float; argparse would name the parsing function in its message."""
    try:
        return kind(value)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{value!r} is not {what}") from None


def _check_stdin(args: argparse.Namespace, settings: _Settings) -> FileResult:
    path = args.stdin_filename or "-"
    selection = settings.selection(path if args.stdin_filename else "stdin.py")
    try:
        data = sys.stdin.buffer.read()
    except OSError as exc:
        return unchecked(SourceError(path, f"cannot read stdin: {exc.strerror or exc}"), selection)
    try:
        source = decode(data, path)
        cache = None if args.no_cache or path == "-" else settings.cache_dir(path)
        reaches = _stdin_reaches(args.stdin_filename, source.text, cache, args.jobs or default_jobs())
        result, text = lint_source(source, selection, _mode(args), reaches)
        fixed = source.encode(text)
    except SourceError as exc:
        result, fixed = unchecked(exc, selection), data
    if args.fix:
        sys.stdout.buffer.write(fixed)  # an editor replaces the buffer with this: unchanged if unfixable
        sys.stdout.flush()
    return result


def _stdin_reaches(path: str | None, text: str, cache: Path | None, jobs: int = 1) -> Reaches | None:
    """Who rescales the loss of each function of stdin's text, standing for the file `path` (the
    --stdin-filename): that file's answer in the index of its project, as `check FILE` has it (and the
    text's own evidence where it is not the saved file's). None without a name: the text alone."""
    if path is None:
        return None
    from .index.project import reaches_of_text

    return reaches_of_text(path, text, project_reached([path], cache, jobs))


def _report(args: argparse.Namespace, results: list[FileResult], errors: list[str], settings: _Settings) -> int:
    findings = sorted(f for r in results for f in r.findings)
    errors = errors + [r.error for r in results if r.error]
    warnings = [r.warning for r in results if r.warning]
    for line in errors:
        print(f"flux-alias-lint: error: {line}", file=sys.stderr)
    for line in warnings:
        print(f"flux-alias-lint: warning: {line}", file=sys.stderr)
    if args.diff:
        report = "".join(r.diff for r in results)
    elif args.statistics:
        report = format_statistics(findings, args.output_format)
    else:
        report = FORMATTERS[args.output_format](findings)
        fixes = format_fixes([(r.path, r.fixed_codes) for r in results]) if args.show_fixes and args.fix else ""
        text = args.output_format in ("text", "concise", "full")
        if text and fixes:
            report += ("\n" if report else "") + fixes
        if text and not args.quiet:
            report += summary(findings, sum(r.fixed for r in results), len(errors), len(warnings), fixing=args.fix)
    if args.output_file:
        try:
            Path(args.output_file).write_text(report, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{args.output_file}: cannot write the report: {exc.strerror or exc}") from None
    else:
        # With --fix on stdin, stdout carries the fixed source: the report goes to stderr.
        out = sys.stderr if args.fix and args.stdin else sys.stdout
        out.write(report)
        out.flush()
    if errors:
        return EXIT_ERROR
    if args.diff:
        return EXIT_FINDINGS if any(r.changed for r in results) and not args.exit_zero else EXIT_CLEAN
    if args.fix and args.exit_non_zero_on_fix and any(r.changed for r in results):
        return EXIT_FINDINGS
    if any(f.severity == ERROR for f in findings) and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN
