"""The simulated clock: clock reads in SQL become reads of the sandbox's clock row, and dbt's own
context (run_started_at, modules.datetime, a microbatch model's default end) runs at that time.
Checked on real dbt runs against DuckDB and PostgreSQL."""
from __future__ import annotations

import datetime as dt
import textwrap

import pytest

from support.common import duckdb_profile, postgres_profile, write_profiles
from rerun_safety import clock
from rerun_safety.dbt_invoke import DbtSession


@pytest.mark.parametrize("dialect", ["duckdb", "postgres"])
def test_rewrite_replaces_clock_reads_and_nothing_else(dialect):
    sql = ("select current_date - 14 as d, CURRENT_TIMESTAMP(3) as t, now() as n, localtimestamp as l, "
           "'now()' as s, \"now\" as q, x.now() as m, today() as y, timeofday() as z "
           "from t where d >= current_date - interval '14 days' -- now()")
    new, used, kept = clock.rewrite(sql, dialect)
    assert new == ("select rerun_safety_clock.rs_date() - 14 as d, rerun_safety_clock.rs_timestamptz() as t, "
                   "rerun_safety_clock.rs_timestamptz() as n, rerun_safety_clock.rs_timestamp() as l, "
                   "'now()' as s, \"now\" as q, x.now() as m, rerun_safety_clock.rs_date() as y, timeofday() as z "
                   "from t where d >= rerun_safety_clock.rs_date() - interval '14 days' -- now()")
    assert used == ("current_date", "current_timestamp", "now()", "localtimestamp", "today()")
    assert kept == ("timeofday()",)
    plain = "select known, unknown from t"
    assert clock.rewrite(plain, dialect) == (plain, (), ())


def test_python_clock_reads():
    code = "import datetime\ndef model(dbt, s):\n    t = datetime.datetime.now()\n    d = date.today()\n    return df"
    assert clock.python_clock_reads(code) == ("datetime.datetime.now", "date.today")
    assert clock.python_clock_reads("def model(dbt, s):\n    return dbt.ref('x')") == ()


MODEL = textwrap.dedent("""\
    {{ config(materialized='table') }}
    select cast(current_date as varchar(10)) as sql_date,
           cast(now() as varchar(40)) as sql_now,
           '{{ run_started_at.strftime("%Y-%m-%d %H:%M") }}' as run_started,
           '{{ modules.datetime.datetime.now().strftime("%Y-%m-%d %H:%M") }}' as jinja_now,
           '{{ modules.datetime.date.today().isoformat() }}' as jinja_today
    """)
VIEW = "{{ config(materialized='view') }}\nselect cast(current_date as varchar(10)) as view_date\n"


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_dbt_runs_at_the_simulated_time(engine, tmp_path, request):
    project = tmp_path / "clock_project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: clock_project\nversion: '1.0'\nconfig-version: 2\n"
                                             "profile: clock\nmodel-paths: ['models']\n")
    (project / "models" / "when.sql").write_text(MODEL)
    (project / "models" / "when_view.sql").write_text(VIEW)
    if engine == "duckdb":
        output = duckdb_profile(tmp_path / "clock.duckdb")
    else:
        server = request.getfixturevalue("pg_server")
        output = postgres_profile(server, request.getfixturevalue("pg_database"), timezone="UTC")
    write_profiles(project, "clock", output)
    session = DbtSession(project, project, None, tmp_path / "work")
    session.parse()
    when = dt.datetime(2024, 2, 29, 23, 30)

    def connect():
        if engine == "duckdb":
            from rerun_safety.warehouse.duckdb.engine import DuckDBConnection
            return DuckDBConnection(str(tmp_path / "clock.duckdb"))
        from rerun_safety.warehouse.postgres.engine import PgConnection
        return PgConnection({k: output[k] for k in ("host", "port", "user", "password")}, output["dbname"])

    con = connect()
    try:
        for statement in clock.setup_sql(con.dialect):
            con.execute(statement)
        con.execute(clock.set_sql(when, con.dialect))
    finally:
        con.close()
    res = session.invoke(["run"], clock=when, dialect=engine)
    assert res.success, res.error
    assert {node for node, used, _ in res.clock_reads if used} == {"model.clock_project.when",
                                                                  "model.clock_project.when_view"}
    schema = output["schema"]
    con = connect()
    try:
        row = con.fetchone(f"select sql_date, sql_now, run_started, jinja_now, jinja_today from {schema}.when")
        assert row[0] == "2024-02-29"
        assert row[1].startswith("2024-02-29 23:30:00")
        assert row[2:] == ("2024-02-29 23:30", "2024-02-29 23:30", "2024-02-29")
        # a view reads the clock when it is queried, as it would read the real one
        assert con.fetchone(f"select view_date from {schema}.when_view")[0] == "2024-02-29"
        con.execute(clock.set_sql(dt.datetime(2024, 3, 2, 8), con.dialect))
        assert con.fetchone(f"select view_date from {schema}.when_view")[0] == "2024-03-02"
    finally:
        con.close()
    # outside the block dbt sees the real time again
    res = session.invoke(["run", "--select", "when"])
    assert res.success
    con = connect()
    try:
        assert con.fetchone(f"select run_started from {schema}.when")[0][:4] == str(dt.datetime.now().year)
    finally:
        con.close()


def test_the_frozen_clock_gives_name_stamps_digits_of_their_own():
    # dbt-duckdb names a Python incremental model's temp table <model>__dbt_tmp + strftime of now()
    # down to the microsecond: two runs at one simulated time must not get the same name.
    when = dt.datetime(2025, 6, 8, 0, 0)
    frozen = clock._FrozenClock(when)
    now = frozen.datetime.now()
    assert now == when and frozen.datetime.utcnow() == when and frozen.date.today() == when.date()
    assert now.strftime("%Y-%m-%d %H:%M:%S.%f") == "2025-06-08 00:00:00.000000"
    assert now.isoformat() == "2025-06-08T00:00:00"
    stamps = {frozen.datetime.now().strftime("%Y%m%d%H%M%S%f") for _ in range(50)}
    assert len(stamps) == 50 and all(s.startswith("20250608000000") for s in stamps)
    assert frozen.datetime.now(dt.timezone.utc) == when.replace(tzinfo=dt.timezone.utc)
