"""Stress checks: tests that repeat what another test already proves, under load (several game days of a
role without superuser side by side on a server whose autovacuum races every drop). They are marked
`stress` and left out of the suite, which proves each behaviour once; run them here before a release,
or after a change to sandbox creation and cleanup.

    .venv/bin/python benchmarks/stress.py [pytest options...]

Prints pytest's summary and each test's time; the exit code is pytest's.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(extra: list[str]) -> int:
    return subprocess.call([sys.executable, "-m", "pytest", "-m", "stress", "--durations=0", "tests", *extra],
                           cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
