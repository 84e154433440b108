"""Session fixtures: one real PostgreSQL server per test session, a fresh database per test,
and an `engine` parameter that runs the same test body on DuckDB and on PostgreSQL."""
from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.common import duckdb_profile, postgres_profile, start_pg_server  # noqa: E402

# dbt writes logs and the package lock next to the project; keep them out of the user's way.
os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
# Spark binds loopback only (otherwise it picks a non-loopback interface); see tests/support/spark.py.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

# dbt's caches for processes that never install Python packages between invocations: the plugin
# scan and the Jinja parse of macro source text (a pure function of the text). The runner turns
# them on for its game days, dbt-tests-adapter's `project` fixture for its tests; on from the start
# here, so every in-process dbt invocation of the session runs the same way whatever the order.
from dbt_common.tests import enable_test_caching  # noqa: E402

enable_test_caching()

# The session keeps a few hundred thousand long-lived objects (dbt, Jinja, sqlglot, adapters) and
# each dbt invocation allocates and drops many more: with the default thresholds the collector
# rescans the old ones every few invocations. Collect the young generations less often and the
# oldest one rarely; the objects imported by collection time are left out of every scan.
gc.set_threshold(20_000, 50, 100)


def pytest_collection_finish(session):
    gc.collect()
    gc.freeze()


# Tests also call dbtRunner directly, outside DbtSession: undo dbt-adapters' growing flag list
# (see rerun_safety.dbt_invoke.trim_behavior_flags) before every test, as DbtSession does after
# every invocation; left to grow, it made late in-process invocations seconds slower.
from rerun_safety.dbt_invoke import trim_behavior_flags  # noqa: E402


def pytest_runtest_setup(item):
    trim_behavior_flags()


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


@pytest.fixture(scope="session")
def shop_gameday(tmp_path_factory):
    """`shop_gameday(engine, server)`: the game day of examples/shop on that engine (support.gameday.shop_gameday;
    `server` is the session's PostgreSQL server for "postgres", the Spark cluster for "spark_thrift"), run the
    first time a test asks for it and shared
    by every test of the session after that: test_gameday_shop checks its verdicts, test_report_browser its
    report.html."""
    from support.gameday import shop_gameday as run_shop_gameday

    runs: dict[str, dict] = {}

    def get(engine: str, server=None) -> dict:
        if engine not in runs:
            runs[engine] = run_shop_gameday(engine, tmp_path_factory.mktemp(f"shop_{engine}"), server)
        return runs[engine]

    return get


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


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """A standalone Spark cluster on loopback for the session (tests/support/spark_cluster.py): master, one
    worker and the Thrift server, started on first use and stopped at the end of the session."""
    from support.spark import require_spark
    from support.spark_cluster import start_spark_cluster

    require_spark()
    try:
        import pyhive  # noqa: F401  (dbt-spark's `thrift` method and the cluster's query())
    except ImportError:
        reason = "PyHive is not installed: pip install -e '.[spark]'"
        if os.environ.get("RERUN_SAFETY_REQUIRE_SPARK") == "1":
            pytest.fail(f"Spark is required here (RERUN_SAFETY_REQUIRE_SPARK=1): {reason}")
        pytest.skip(reason)
    from support.spark_cluster import check_stopped

    cluster = start_spark_cluster(tmp_path_factory.mktemp("spark_cluster"))
    try:
        yield cluster
        pids = [p for group in cluster.pids().values() for p in group]
    finally:
        cluster.stop()
    # stop() leaves no process behind: checked on the session's cluster (tests/test_spark_cluster.py
    # counts its processes while it runs) rather than on a second one, whose start costs ~30 s
    check_stopped(cluster, pids)


# ------------------------------------------------------------------ the payments fixture, shared by feature files
# (test_production_read_only, test_interrupts, test_postgres_roles_and_types, test_diff_filters, test_secrets):
# made once per session, on first use

@pytest.fixture(scope="session")
def duck(tmp_path_factory):
    return _payments_target("duckdb", tmp_path_factory.mktemp("rel_duck"))


@pytest.fixture(scope="session")
def pg(tmp_path_factory, pg_server):
    return _payments_target("postgres", tmp_path_factory.mktemp("rel_pg"), server=pg_server)


@pytest.fixture(scope="session")
def vacuum_server():
    """A server whose autovacuum visits every database each second and works slowly there (cost delay
    100 ms, limit 1), so that a worker is inside a fresh sandbox whenever it is dropped: the race a
    CREATEDB role lost 1 run in 3 with a short naptime happens on nearly every drop here."""
    server = start_pg_server("-c autovacuum_naptime=1 -c autovacuum_vacuum_cost_delay=100 "
                             "-c autovacuum_vacuum_cost_limit=1")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_payments(tmp_path_factory, pg_server):
    target = _payments_target("postgres", tmp_path_factory.mktemp("where_pg"), server=pg_server)
    conn = pg_server.connect(target.dbname)
    with conn.cursor() as cur:
        cur.execute("create sequence landing.counter")
        cur.execute("create function landing.bump() returns bigint language sql volatile "
                    "as 'select nextval(''landing.counter'')'")
    conn.close()
    return target


@pytest.fixture(scope="session")
def pg_off(tmp_path_factory, pg_server):
    """The payments fixture on PostgreSQL, in a database whose standard_conforming_strings is off."""
    target = _payments_target("postgres", tmp_path_factory.mktemp("round3_pg"), server=pg_server)
    conn = pg_server.connect()
    with conn.cursor() as cur:
        cur.execute(f'alter database "{target.dbname}" set standard_conforming_strings = off')
    conn.close()
    return target


def _payments_target(*args, **kwargs):
    from support.reliability import payments_target

    return payments_target(*args, **kwargs)
