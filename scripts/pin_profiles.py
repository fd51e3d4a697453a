#!/usr/bin/env python3
"""Pin each built-in Megatron profile to the megatron-core releases it models.

For every release in VERSIONS_DIR/<version>/ (made with ``--install``), a subprocess imports
that release instead of the installed one and reports which built-in profiles agree with it
on the whole case matrix of ``flux_alias_lint.harness.pinning``. A release passes when
exactly one profile agrees: the one that lists it in ``pinned_to``.

    python scripts/pin_profiles.py --install          # pip install the pinned releases first
    python scripts/pin_profiles.py [VERSION ...]      # check all (or some) installed releases
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
from pathlib import Path

DEFAULT_DIR = Path(os.environ.get("FLUX_MEGATRON_VERSIONS", "/work/megatron-versions"))
# megatron-core up to 0.8 imports pkg_resources, which setuptools dropped in 81.
COMPAT = "_compat"


def pinned_releases() -> dict[str, str]:
    """release -> the profile pinned to it."""
    from flux_alias_lint.harness.profiles import PROFILES

    return {release: profile.name for profile in PROFILES.values() for release in profile.pinned_to}


def install(versions_dir: Path, releases: list[str]) -> None:
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target"]
    if not (versions_dir / COMPAT).exists():
        subprocess.run([*pip, str(versions_dir / COMPAT), "setuptools<81"], check=True)
    for release in releases:
        if not (versions_dir / release).exists():
            subprocess.run([*pip, str(versions_dir / release), f"megatron-core=={release}"], check=True)


def check_release(versions_dir: Path, release: str) -> dict[str, object]:
    """Run the worker against one release; its JSON answer, or the error it died with."""
    path = os.pathsep.join([str(versions_dir / release), str(versions_dir / COMPAT), os.environ.get("PYTHONPATH", "")])
    run = subprocess.run(
        [sys.executable, "-W", "ignore", __file__, "--worker"],
        env={**os.environ, "PYTHONPATH": path},
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if run.returncode != 0:
        return {"release": release, "error": run.stderr.strip().splitlines()[-1:]}
    return {"release": release, **json.loads(run.stdout)}


def worker() -> None:
    from flux_alias_lint.harness.megatron import installed_megatron_version
    from flux_alias_lint.harness.pinning import matching_profiles

    print(json.dumps({"imported": installed_megatron_version(), "matching": matching_profiles()}))


def pin(versions_dir: Path, releases: list[str]) -> list[dict[str, object]]:
    """Check ``releases`` in parallel; each result says whether it matched only its own profile."""
    expected = pinned_releases()
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        results = list(pool.map(lambda release: check_release(versions_dir, release), releases))
    for result in results:
        want = expected.get(str(result["release"]))
        result["expected"] = want
        result["ok"] = result.get("matching") == [want] and result.get("imported") == result["release"]
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("releases", nargs="*", help="default: every pinned release found in the versions dir")
    parser.add_argument("--versions-dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--install", action="store_true", help="pip install missing pinned releases first")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker()
        return 0
    releases = args.releases or list(pinned_releases())
    if args.install:
        install(args.versions_dir, releases)
    releases = [release for release in releases if (args.versions_dir / release).exists()]
    if not releases:
        print(
            f"no megatron-core release installed under {args.versions_dir}; run with --install",
            file=sys.stderr,
        )
        return 2
    results = pin(args.versions_dir, releases)
    for result in results:
        found = result.get("matching", result.get("error"))
        print(
            f"{'ok  ' if result['ok'] else 'FAIL'} megatron-core {result['release']:<8} "
            f"profile {result['expected']!s:<6} matched by {found}"
        )
    return 0 if all(result["ok"] for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
