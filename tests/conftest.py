"""Session fixtures: one real PostgreSQL server per test session, a fresh database per test,
and an `engine` parameter that runs the same test body on DuckDB and on PostgreSQL."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support import duckdb_profile, postgres_profile, start_pg_server  # noqa: E402

# dbt writes logs and the package lock next to the project; keep them out of the user's way.
os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")


@pytest.fixture(scope="session")
def pg_server():
    server = start_pg_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_database(pg_server):
    name = pg_server.create_database()
    try:
        yield name
    finally:
        pg_server.drop_database(name)


@pytest.fixture(params=["duckdb", "postgres"])
def engine(request):
    return request.param


@pytest.fixture
def target_output(engine, tmp_path, request):
    """A dbt profile output for the parameterised engine, pointing at a fresh database."""
    if engine == "duckdb":
        return duckdb_profile(tmp_path / "warehouse.duckdb")
    server = request.getfixturevalue("pg_server")
    dbname = request.getfixturevalue("pg_database")
    return postgres_profile(server, dbname)
