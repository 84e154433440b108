"""What `lint --with-data` costs, side by side in one run, on DuckDB and PostgreSQL.

    .venv/bin/python benchmarks/lint_with_data.py [--rows 1000000]

A project of one timed source (`loaded_at_field` beside `config: {event_time: ...}`) holding --rows events,
each loaded up to two days after it happened, and two incremental models over it (one window shorter than
that lateness). Printed per engine: the lateness query alone (what --with-data adds; the target: under 5 s
at 1M rows), the whole lint without and with --with-data, and the finding.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.common import duckdb_profile, postgres_profile, start_pg_server, write_profiles  # noqa: E402
from test_lint_with_data import _project  # noqa: E402

BIN = Path(sys.executable).parent
EVENTS = ("create table raw.events as select i as event_id, timestamp '2026-01-01' + i * interval '1 second' as event_time, "
          "timestamp '2026-01-01' + i * interval '1 second' + (i % 49) * interval '1 hour' as loaded_at from {rows}")


def lint(project: Path, *extra: str) -> tuple[float, dict]:
    started = time.perf_counter()
    proc = subprocess.run([str(BIN / "rerun-safety"), "lint", "--project-dir", str(project), "--profiles-dir",
                           str(project), "--format", "json", "--batch-size", "hour", *extra],
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        sys.exit(f"lint {' '.join(extra)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return seconds, json.loads(proc.stdout)


def measure(engine: str, project: Path, rows: int) -> None:
    without, _ = lint(project)
    with_data, doc = lint(project, "--with-data")
    found = [f["message"].split(": a row loaded")[0] for f in doc["findings"] if f["rule"] == "window-shorter-than-lateness"]
    print(f"{engine:<9} {rows:>10,} rows  lateness query {doc['timings']['with_data']:6.2f} s   "
          f"lint {without:6.2f} s -> {with_data:6.2f} s with --with-data (x{with_data / without:.2f})")
    for message in found:
        print(f"          {message}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        import duckdb

        project = _project(Path(tmp) / "duckdb")
        path = Path(tmp) / "late.duckdb"
        with closing(duckdb.connect(str(path))) as con:
            con.execute("create schema raw")
            con.execute(EVENTS.format(rows=f"range({args.rows}) t(i)"))
        write_profiles(project, "late", duckdb_profile(path))
        measure("duckdb", project, args.rows)

        server = start_pg_server()
        try:
            db = server.create_database("late")
            with closing(server.connect(db)) as con, con.cursor() as cur:
                cur.execute("create schema raw")
                cur.execute(EVENTS.format(rows=f"generate_series(0, {args.rows - 1}) as t(i)"))
                cur.execute("analyze raw.events")
                con.commit()
            project = _project(Path(tmp) / "postgres")
            write_profiles(project, "late", postgres_profile(server, db))
            measure("postgres", project, args.rows)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
