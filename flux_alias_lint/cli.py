"""The command line: `flux-alias-lint check PATH...` and `flux-alias-lint rule CODE`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .config import Config, ConfigError, load_config, split_codes
from .discover import DEFAULT_EXCLUDE, Excluder, discover
from .lint import Selection
from .output import FORMATTERS, format_statistics, summary
from .rules import RULES
from .runner import FileResult, Mode, lint_source, process_file
from .source import SourceError, decode

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flux-alias-lint",
        description="Find loss-function reports that share storage with the tensor Megatron rescales in place.",
    )
    parser.add_argument("--version", action="version", version=f"flux-alias-lint {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = commands.add_parser("check", help="check files and directories (recursively, *.py)")
    check.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or directories; - for stdin")
    fix_group = check.add_mutually_exclusive_group()
    fix_group.add_argument("--fix", action="store_true", help="insert .clone() where it is needed")
    fix_group.add_argument("--diff", action="store_true", help="print the fixes as a unified diff; write nothing")
    check.add_argument("--select", type=split_codes, help="comma-separated codes or prefixes to report")
    check.add_argument("--ignore", type=split_codes, default=(), help="comma-separated codes or prefixes to skip")
    check.add_argument("--format", choices=sorted(FORMATTERS), default="text", dest="output_format")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even if there are findings")
    check.add_argument(
        "--exit-non-zero-on-fix", action="store_true", help="with --fix: exit 1 if a file was changed (pre-commit)"
    )
    check.add_argument("-q", "--quiet", action="store_true", help="print findings only, no summary")
    check.add_argument("--statistics", action="store_true", help="print counts per rule instead of findings")
    check.add_argument("--config", metavar="FILE", help="pyproject.toml (or a TOML file) to read settings from")
    check.add_argument("--exclude", type=lambda v: tuple(p for p in v.split(",") if p), help="replace the excludes")
    check.add_argument("--extend-exclude", type=lambda v: tuple(p for p in v.split(",") if p), default=())
    check.add_argument("--force-exclude", action="store_true", help="apply excludes to files named explicitly too")
    check.add_argument("--stdin-filename", metavar="PATH", help="the path to report for source read from stdin")

    rule = commands.add_parser("rule", help="print a rule's documentation")
    rule.add_argument("code", nargs="?", help="e.g. FAL001; omit to list all rules")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "rule":
        return _rule(args.code)
    try:
        return _check(args)
    except ConfigError as exc:
        print(f"flux-alias-lint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _rule(code: str | None) -> int:
    if code is None:
        for rule in RULES.values():
            print(f"{rule.code}  {rule.name:40}  {rule.summary}")
        return EXIT_CLEAN
    rule = RULES.get(code.upper())
    if rule is None:
        print(f"flux-alias-lint: error: unknown rule {code!r}; known: {', '.join(RULES)}", file=sys.stderr)
        return EXIT_ERROR
    print(f"# {rule.code} ({rule.name})\n\n{rule.doc}", end="")
    return EXIT_CLEAN


def _selection(args: argparse.Namespace, config: Config) -> Selection:
    select = args.select or config.select
    ignore = tuple(config.ignore) + tuple(args.ignore)
    for code in (*select, *ignore):
        if not any(known.startswith(code) for known in RULES):
            raise ConfigError(f"unknown rule selector {code!r}; known rules: {', '.join(RULES)}")
    return Selection(tuple(select), ignore)


def _mode(args: argparse.Namespace) -> Mode:
    return Mode.FIX if args.fix else Mode.DIFF if args.diff else Mode.CHECK


def _check(args: argparse.Namespace) -> int:
    stdin = args.paths == ["-"]
    start = Path(args.stdin_filename if stdin and args.stdin_filename else (args.paths[0] if args.paths else "."))
    config = load_config(args.config, start if start.exists() else Path.cwd())
    selection = _selection(args, config)
    if stdin:
        results, errors = [_check_stdin(args, selection)], []
    else:
        patterns = next(p for p in (args.exclude, config.exclude, DEFAULT_EXCLUDE) if p is not None)
        excluder = Excluder(
            (*patterns, *config.extend_exclude, *args.extend_exclude), config.root or Path.cwd().resolve()
        )
        files, errors = discover(args.paths, excluder, args.force_exclude)
        results = [process_file(path, selection, _mode(args)) for path in files]
    return _report(args, results, errors)


def _check_stdin(args: argparse.Namespace, selection: Selection) -> FileResult:
    path = args.stdin_filename or "-"
    try:
        source = decode(sys.stdin.buffer.read(), path)
        result, text = lint_source(source, selection, _mode(args))
    except SourceError as exc:
        return FileResult(path, error=str(exc))
    except OSError as exc:
        return FileResult(path, error=f"{path}: cannot read stdin: {exc.strerror or exc}")
    if args.fix:
        sys.stdout.buffer.write(source.encode(text))  # an editor replaces the buffer with this
        sys.stdout.flush()
    return result


def _report(args: argparse.Namespace, results: list[FileResult], errors: list[str]) -> int:
    # With --fix on stdin, stdout carries the fixed source: everything else goes to stderr.
    out = sys.stderr if args.fix and args.paths == ["-"] else sys.stdout
    findings = sorted(f for r in results for f in r.findings)
    errors = errors + [r.error for r in results if r.error]
    for line in errors:
        print(f"flux-alias-lint: error: {line}", file=sys.stderr)
    if args.diff:
        out.write("".join(r.diff for r in results))
    elif args.statistics:
        out.write(format_statistics(findings))
    else:
        out.write(FORMATTERS[args.output_format](findings))
        if args.output_format == "text" and not args.quiet:
            out.write(summary(findings, sum(r.fixed for r in results), len(errors)))
    out.flush()
    if errors:
        return EXIT_ERROR
    if args.diff:
        return EXIT_FINDINGS if any(r.changed for r in results) else EXIT_CLEAN
    if args.fix and args.exit_non_zero_on_fix and any(r.changed for r in results):
        return EXIT_FINDINGS
    if findings and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN
