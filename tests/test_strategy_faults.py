"""partition_overwrite under faults, small version of benchmarks/strategy_faults.py: a Postgres
backend terminated mid-statement and a DuckDB dbt process SIGKILLed mid-statement leave the
table exactly as before or exactly as after the replacement."""
from __future__ import annotations

import sys

import pytest

from support.common import REPO_ROOT

sys.path[:0] = [str(REPO_ROOT / "benchmarks"), str(REPO_ROOT / "tests" / "strategy")]
from strategy_faults import run_trials  # noqa: E402


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_fault_mid_statement_leaves_before_or_after(engine, request, tmp_path, capsys):
    server = request.getfixturevalue("pg_server") if engine == "postgres" else None
    r = run_trials(engine, 3, tmp_path, server, log=lambda *_: None)
    with capsys.disabled():
        print(f"\n[strategy faults {engine}] {r}")
    assert r["PARTIAL"] == 0, r
    assert r["before"] + r["after"] == 3
    assert r["mid_statement"] >= 1, r  # at least one fault landed inside the statement
