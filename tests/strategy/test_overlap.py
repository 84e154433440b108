"""Two runs of the same model at once, on a real PostgreSQL server: two `dbt run` processes of the same
batch, the first held open after its writes (its post-hook waits on an advisory lock this test holds)
until the second has started and is blocked or done; then the first commits and both end.

The models read raw.events (7,000 rows, 1,000 a day over days 1-7). A build of days 1-4, then the two
overlapping runs of days 1-7, each re-reading the three days before the newest it has (days 2-7 in
both: neither sees the other's rows when it starts). Every row must be there once: 7,000 rows.
- dbt's delete+insert and merge (unique_key, no unique index): the second run cannot see the first's
  uncommitted rows of days 5-7 and writes them again (delete+insert: days 2-7 twice, 6,000 duplicated;
  merge: days 5-7 twice, 3,000);
- the same with `rerun_safety.serialize_runs()` as a pre-hook, and `partition_overwrite` (which takes the
  same lock itself): the second run waits for the first's commit and replaces what it wrote: 7,000;
- `partition_overwrite` with lock_timeout='1s': the second run fails after a second with one sentence,
  writing nothing; the first's rows stay, once.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from support.common import REPO_ROOT, postgres_profile
from support.gameday import dbt_deps

HOLD = 7_301_955  # the advisory lock the first run's post-hook waits on
BIN = Path(sys.executable).parent

WINDOW = ("select * from {{ source('raw', 'events') }} where day <= {{ var('until') }}\n"
          "{% if is_incremental() %} and day > (select max(day) - 3 from {{ this }}){% endif %}\n")
HOLD_HOOK = f"{{% if var('hold', false) %}}select pg_advisory_lock_shared({HOLD}){{% endif %}}"


def _model(config: str) -> str:
    return f"{{{{ config(materialized='incremental', {config}, post_hook=\"{HOLD_HOOK}\") }}}}\n{WINDOW}"


MODELS = {
    "ev_delete_insert": _model("incremental_strategy='delete+insert', unique_key='event_id'"),
    "ev_merge": _model("incremental_strategy='merge', unique_key='event_id'"),
    "ev_delete_insert_serialised": _model("incremental_strategy='delete+insert', unique_key='event_id', "
                                          "pre_hook='{{ rerun_safety.serialize_runs() }}'"),
    "ev_merge_serialised": _model("incremental_strategy='merge', unique_key='event_id', "
                                  "pre_hook='{{ rerun_safety.serialize_runs() }}'"),
    "ev_partition_overwrite": _model("incremental_strategy='partition_overwrite', partition_key='day'"),
}
TIMED_OUT = {"ev_po_timeout": _model("incremental_strategy='partition_overwrite', partition_key='day', "
                                     "lock_timeout='1s'")}


def _project(root: Path, pg_server, dbname: str, models: dict[str, str]) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "macros").mkdir()
    (root / "macros" / "shim.sql").write_text(
        (REPO_ROOT / "integration_tests" / "macros" / "get_incremental_partition_overwrite_sql.sql").read_text())
    for name, sql in models.items():
        (root / "models" / f"{name}.sql").write_text(sql)
    (root / "models" / "sources.yml").write_text(yaml.safe_dump(
        {"version": 2, "sources": [{"name": "raw", "schema": "raw", "tables": [{"name": "events"}]}]}))
    (root / "dbt_project.yml").write_text(yaml.safe_dump({
        "name": "overlap", "version": "1.0", "config-version": 2, "profile": "overlap"}))
    (root / "packages.yml").write_text(yaml.safe_dump({"packages": [{"local": str(REPO_ROOT)}]}))
    (root / "profiles.yml").write_text(yaml.safe_dump({"overlap": {"target": "dev", "outputs": {
        "dev": postgres_profile(pg_server, dbname, schema="analytics", threads=len(models))}}}))
    dbt_deps(root, root)
    return root


def _dbt(project: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "dbt"), *args, "--project-dir", str(project), "--profiles-dir", str(project),
                             "--no-write-json", "--log-level-file", "none"], cwd=project, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS":
                                                                       "false"})


def _overlapping_runs(project: Path, connect, models: list[str], waiting: int) -> tuple[subprocess.Popen, ...]:
    """The first run held after its writes, the second started; the hold released once `waiting` of the
    second's statements wait for a lock (or it ended). Returns both processes, ended."""
    holder = connect()
    holder.autocommit = True
    holder.cursor().execute(f"select pg_advisory_lock({HOLD})")
    args = ("run", "--select", *models, "--vars")
    first = _dbt(project, *args, "{until: 7, hold: true}")
    watch = connect()
    watch.autocommit = True  # pg_stat_activity is read afresh by each statement outside a transaction
    cur = watch.cursor()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # every model of the first run at its hold
        cur.execute("select count(*) from pg_stat_activity where wait_event = 'advisory' "
                    f"and query like '%pg_advisory_lock_shared({HOLD})%'")
        if cur.fetchone()[0] == len(models):
            break
        assert first.poll() is None, first.stdout.read()
        time.sleep(0.1)
    second = _dbt(project, *args, "{until: 7}")
    while time.monotonic() < deadline and second.poll() is None:
        cur.execute("select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
                    f"and query not like '%pg_advisory_lock_shared({HOLD})%'")
        if cur.fetchone()[0] >= waiting:
            break
        time.sleep(0.1)
    watch.close()
    holder.cursor().execute(f"select pg_advisory_unlock({HOLD})")
    holder.close()
    for p in (first, second):
        p.wait(timeout=120)
    return first, second


def _counts(connect, models) -> dict[str, tuple[int, int]]:
    with connect() as conn:
        cur = conn.cursor()
        out = {}
        for name in models:
            cur.execute(f'select count(*), count(distinct event_id) from analytics."{name}"')
            out[name] = cur.fetchone()
        return out


@pytest.fixture(scope="module")
def overlap_db(pg_server):
    import psycopg2

    dbname = pg_server.create_database("overlap")
    with psycopg2.connect(pg_server.dsn(dbname)) as conn:
        conn.cursor().execute("create schema raw; create table raw.events as select i as event_id, "
                              "(i - 1) / 1000 + 1 as day, i % 97 as amount from generate_series(1, 7000) i")
    return dbname, lambda: psycopg2.connect(pg_server.dsn(dbname))


def test_two_overlapping_runs_double_dbts_strategies_and_not_a_serialised_one(pg_server, overlap_db, tmp_path):
    dbname, connect = overlap_db
    project = _project(tmp_path / "overlap", pg_server, dbname, MODELS)
    build = _dbt(project, "build", "--vars", "{until: 4}")
    out = build.communicate()[0]
    assert build.returncode == 0, out
    assert set(_counts(connect, MODELS).values()) == {(4000, 4000)}
    # all five second runs wait: the unserialised ones on the first's row locks, the others on the run lock
    first, second = _overlapping_runs(project, connect, list(MODELS), waiting=len(MODELS))
    assert (first.returncode, second.returncode) == (0, 0), first.stdout.read() + second.stdout.read()
    assert _counts(connect, MODELS) == {
        "ev_delete_insert": (13000, 7000), "ev_merge": (10000, 7000), "ev_delete_insert_serialised": (7000, 7000),
        "ev_merge_serialised": (7000, 7000), "ev_partition_overwrite": (7000, 7000)}


def test_a_run_that_waits_longer_than_lock_timeout_fails_in_one_line_and_writes_nothing(pg_server, overlap_db,
                                                                                       tmp_path):
    dbname, connect = overlap_db
    project = _project(tmp_path / "timeout", pg_server, dbname, TIMED_OUT)
    build = _dbt(project, "build", "--vars", "{until: 4}")
    assert build.wait() == 0, build.stdout.read()
    started = time.monotonic()
    first, second = _overlapping_runs(project, connect, list(TIMED_OUT), waiting=99)  # held until it ends
    waited = time.monotonic() - started
    out = second.stdout.read()
    assert (first.returncode, second.returncode) == (0, 1), first.stdout.read() + out
    message = ("model 'ev_po_timeout': another run of \"" + dbname + "\".\"analytics\".\"ev_po_timeout\" held its "
               "run lock for longer than lock_timeout (1s); nothing was written. Run it again once that run has "
               "ended, or raise lock_timeout.")
    assert [line for line in out.splitlines() if message in line], out
    assert waited < 60
    assert _counts(connect, TIMED_OUT) == {"ev_po_timeout": (7000, 7000)}
