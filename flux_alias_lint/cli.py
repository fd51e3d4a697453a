"""The command line: `flux-alias-lint check PATH...`, `verify PATH...` and `rule CODE`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from . import __version__
from .cache import CACHE_DIR_NAME, Cache
from .config import UNREACHED_CHOICES, Config, ConfigError, load_config, split_codes
from .discover import DEFAULT_EXCLUDE, Excluder, discover
from .gitignore import GitIgnore
from .output import FORMATTERS, format_statistics, summary
from .parallel import check_files
from .progress import progress_wanted, run_summary, track
from .project import UNREACHED, ProjectIndex
from .rules import RULES
from .runner import FileResult, Mode, lint_source
from .selection import Selection
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
        "--unreached",
        choices=UNREACHED_CHOICES,
        help="warn: findings in functions nothing is known to rescale print but do not fail the run (default: error)",
    )
    check.add_argument(
        "--exit-non-zero-on-fix", action="store_true", help="with --fix: exit 1 if a file was changed (pre-commit)"
    )
    check.add_argument("-q", "--quiet", action="store_true", help="print findings only, no summary")
    check.add_argument("--statistics", action="store_true", help="print counts per rule instead of findings")
    check.add_argument("--config", metavar="FILE", help="pyproject.toml (or a TOML file) to read settings from")
    check.add_argument("--exclude", type=lambda v: tuple(p for p in v.split(",") if p), help="replace the excludes")
    check.add_argument("--extend-exclude", type=lambda v: tuple(p for p in v.split(",") if p), default=())
    check.add_argument("--force-exclude", action="store_true", help="apply excludes to files named explicitly too")
    check.add_argument(
        "--no-respect-gitignore", dest="respect_gitignore", action="store_false", help="check files git ignores too"
    )
    check.add_argument("--stdin-filename", metavar="PATH", help="the path to report for source read from stdin")
    check.add_argument("-j", "--jobs", type=_positive, metavar="N", help="worker processes (default: all cores)")
    check.add_argument("--no-cache", action="store_true", help="neither read nor write the results cache")
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
    )
    verify.add_argument("paths", nargs="*", default=["."], metavar="PATH", help="files or directories")
    verify.add_argument(
        "--profile",
        default="installed",
        help="Megatron release to model: installed (default), latest, or a release such as 0.12",
    )
    verify.add_argument("--num-microbatches", type=int, default=2)
    verify.add_argument("--cp-group-size", type=int, default=1)
    verify.add_argument("--format", choices=("text", "json"), default="text", dest="output_format")
    for name, help_text in (("--select", "codes or prefixes to verify"), ("--ignore", "codes or prefixes to skip")):
        verify.add_argument(name, type=split_codes, default=None if name == "--select" else (), help=help_text)
    verify.add_argument("--config", metavar="FILE")
    verify.add_argument("--exclude", type=lambda v: tuple(p for p in v.split(",") if p))
    verify.add_argument("--extend-exclude", type=lambda v: tuple(p for p in v.split(",") if p), default=())
    verify.add_argument("--force-exclude", action="store_true")
    verify.add_argument("--no-respect-gitignore", dest="respect_gitignore", action="store_false")

    rule = commands.add_parser("rule", help="print a rule's documentation")
    rule.add_argument("code", nargs="?", help="e.g. FAL001; omit to list all rules")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "rule":
        return _rule(args.code)
    try:
        return _verify(args) if args.command == "verify" else _check(args)
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


def _config(args: argparse.Namespace) -> Config:
    stdin = args.paths == ["-"]
    stdin_name = getattr(args, "stdin_filename", None)
    start = Path(stdin_name if stdin and stdin_name else (args.paths[0] if args.paths else "."))
    return load_config(args.config, start if start.exists() else Path.cwd())


def _files(args: argparse.Namespace, config: Config) -> tuple[list[str], list[str]]:
    patterns = next(p for p in (args.exclude, config.exclude, DEFAULT_EXCLUDE) if p is not None)
    excluder = Excluder((*patterns, *config.extend_exclude, *args.extend_exclude), config.root or Path.cwd().resolve())
    gitignore = GitIgnore() if args.respect_gitignore else None
    return discover(args.paths, excluder, args.force_exclude, gitignore)


def _check(args: argparse.Namespace) -> int:
    started = time.monotonic()
    if "-" in args.paths and len(args.paths) > 1:
        raise ConfigError("`-` (read stdin) cannot be combined with other paths")
    if args.statistics and args.output_format != "text":
        raise ConfigError("--statistics prints a text table; it cannot be combined with --format")
    config = _config(args)
    selection = _selection(args, config)
    stdin = args.paths == ["-"]
    if stdin:
        results, errors = [_check_stdin(args, selection)], []
    else:
        files, errors = _files(args, config)
        index = ProjectIndex.for_paths(files)
        cache = None if args.no_cache else Cache(_cache_dir(args, config), selection)
        pending: Iterable[FileResult] = check_files(
            files, selection, _mode(args), jobs=args.jobs, cache=cache, reached=index.reached_by_path()
        )
        if not args.quiet and progress_wanted(sys.stderr):
            pending = track(pending, len(files))
        results = list(pending)
    code = _report(args, results, errors, args.unreached or config.unreached)
    if (args.fix or args.diff) and not stdin and not args.quiet:
        unchecked = len(errors) + sum(r.error is not None for r in results)
        sys.stderr.write(run_summary(results, unchecked, time.monotonic() - started, diff=args.diff))
    return code


def _verify(args: argparse.Namespace) -> int:
    config = _config(args)
    selection = _selection(args, config)
    files, errors = _files(args, config)
    try:
        from .harness.verify import Settings, verify_file
    except ImportError as exc:  # HarnessUnavailableError names what to install
        print(f"flux-alias-lint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    settings = Settings(args.profile, args.num_microbatches, args.cp_group_size)
    verdicts = []
    for path in files:
        found, error = verify_file(path, selection, settings)
        verdicts.extend(found)
        if error:
            errors.append(error)
    for line in errors:
        print(f"flux-alias-lint: error: {line}", file=sys.stderr)
    if args.output_format == "json":
        print(json.dumps([v.to_dict() for v in verdicts], indent=2))
    else:
        for verdict in verdicts:
            print(verdict.line())
        confirmed = sum(v.confirmed for v in verdicts)
        print(f"{len(verdicts)} finding(s): {confirmed} confirmed, {len(verdicts) - confirmed} unconfirmed.")
    if errors:
        return EXIT_ERROR
    return EXIT_CLEAN if all(v.confirmed for v in verdicts) else EXIT_FINDINGS


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def _cache_dir(args: argparse.Namespace, config: Config) -> Path:
    """Next to the pyproject.toml that configured the run, else the working directory, like ruff."""
    if args.cache_dir:
        return Path(args.cache_dir)
    return (config.root or Path.cwd()) / CACHE_DIR_NAME


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


def _report(args: argparse.Namespace, results: list[FileResult], errors: list[str], unreached: str) -> int:
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
        return EXIT_FINDINGS if any(r.changed for r in results) and not args.exit_zero else EXIT_CLEAN
    if args.fix and args.exit_non_zero_on_fix and any(r.changed for r in results):
        return EXIT_FINDINGS
    failing = [f for f in findings if f.context != UNREACHED or unreached == "error"]
    if failing and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN
