"""DbtSession over many invocations in one process, on a real PostgreSQL server."""
from __future__ import annotations

import yaml

from support.common import postgres_profile, write_profiles
from rerun_safety.dbt_invoke import DbtSession


def test_invocations_leave_dbt_adapters_flag_list_as_it_was(pg_server, pg_database, tmp_path):
    # Each PostgreSQL adapter dbt creates extends dbt-adapters' module-level flag list in place;
    # without trimming, the list grows by the adapter's flags on every invocation.
    from dbt.adapters.base.impl import DEFAULT_BASE_BEHAVIOR_FLAGS as flags

    project = tmp_path / "p"
    (project / "models").mkdir(parents=True)
    (project / "models" / "m.sql").write_text("select 1 as id")
    (project / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "p", "version": "1.0", "config-version": 2, "profile": "p"}))
    write_profiles(project, "p", postgres_profile(pg_server, pg_database))
    session = DbtSession(project, project, None, tmp_path / "work")
    session.parse()
    sizes = []
    for _ in range(4):
        res = session.invoke(["run"])
        assert res.success, res.error
        sizes.append(len(flags))
    names = [f["name"] for f in flags]
    assert len(names) == len(set(names))
    assert sizes == [sizes[0]] * 4
    assert [n.status for n in res.nodes] == ["success"]


def test_a_thrift_server_failing_to_close_a_session_does_not_fail_the_model():
    """The pyspark distribution's Thrift server sometimes answers CloseSession with an error while it
    drops the session anyway; during our dbt invocations on Spark that close is tolerated, any other
    close error is raised, and the patch ends with the invocation."""
    import pytest

    pytest.importorskip("pyhive")
    from dbt.adapters.spark.connections import PyhiveConnectionWrapper
    from pyhive.exc import OperationalError

    from rerun_safety.warehouse.dialects import dialect_for

    class Handle:
        def __init__(self, message: str):
            self.message, self.closed = message, 0

        def close(self):
            self.closed += 1
            raise OperationalError(self.message)

    server_side = "TCloseSessionResp(status=TStatus(statusCode=3, infoMessages=['*java.lang.RuntimeException:" \
                  "java.lang.NoClassDefFoundError: org/apache/hadoop/hive/llap/security/LlapSigner$Signable'])"
    original = PyhiveConnectionWrapper.close
    with dialect_for("spark").dbt_session():
        handle = Handle(server_side)
        PyhiveConnectionWrapper(handle).close()  # tolerated
        assert handle.closed == 1
        with pytest.raises(OperationalError, match="connection reset"):
            PyhiveConnectionWrapper(Handle("connection reset")).close()
    assert PyhiveConnectionWrapper.close is original
    with pytest.raises(OperationalError, match="TCloseSessionResp"):
        PyhiveConnectionWrapper(Handle(server_side)).close()  # outside our invocations: as dbt-spark does
    with dialect_for("postgres").dbt_session():
        assert PyhiveConnectionWrapper.close is original


def test_a_thrift_close_without_answer_ends_within_the_timeout(monkeypatch):
    """The same server sometimes never answers CloseSession (seen as a game day hung for good in
    `dbt seed`'s last close): the close waits CLOSE_TIMEOUT_S at most, in our dbt invocations and in
    the runner's own connections. Here a real socket whose peer reads and never answers."""
    import socket
    import threading
    import time

    import pytest

    pytest.importorskip("pyhive")
    from dbt.adapters.spark.connections import PyhiveConnectionWrapper
    from pyhive import hive
    from TCLIService import TCLIService, ttypes
    from thrift.protocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport

    from rerun_safety import thrift
    from rerun_safety.warehouse.dialects import dialect_for

    server = socket.create_server(("127.0.0.1", 0))
    peers = []
    threading.Thread(target=lambda: peers.append(server.accept()), daemon=True).start()

    def silent_connection():
        sock = TSocket.TSocket("127.0.0.1", server.getsockname()[1])
        con = hive.Connection.__new__(hive.Connection)
        con._transport = TTransport.TBufferedTransport(sock)
        con._transport.open()
        con._client = TCLIService.Client(TBinaryProtocol.TBinaryProtocol(con._transport))
        con._sessionHandle = ttypes.TSessionHandle(
            sessionId=ttypes.THandleIdentifier(guid=b"0" * 16, secret=b"0" * 16))
        return con

    try:
        started = time.monotonic()
        error = thrift.close_hive_connection(silent_connection(), timeout=1.0)
        assert 0.9 < time.monotonic() - started < 5 and "timeout" in error.lower()

        monkeypatch.setattr(thrift, "CLOSE_TIMEOUT_S", 1.0)
        with dialect_for("spark").dbt_session():
            started = time.monotonic()
            PyhiveConnectionWrapper(silent_connection()).close()  # logged, not raised
            assert time.monotonic() - started < 5
    finally:
        server.close()
        for peer, _ in peers:
            peer.close()


def test_ephemeral_models_are_inlined_in_every_invocation_of_a_reused_manifest(tmp_path):
    # dbt marks a model's ephemeral CTEs as injected in the manifest it compiles into; a second
    # invocation on the same manifest skipped the injection and failed on "__dbt__cte__eph".
    import duckdb

    from support.common import duckdb_profile

    project = tmp_path / "p"
    (project / "models").mkdir(parents=True)
    (project / "models" / "eph.sql").write_text("{{ config(materialized='ephemeral') }}\nselect 1 as id union all select 2")
    (project / "models" / "eph2.sql").write_text("{{ config(materialized='ephemeral') }}\nselect * from {{ ref('eph') }}")
    (project / "models" / "m.sql").write_text("select count(*) as n from {{ ref('eph2') }}")
    (project / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "p", "version": "1.0", "config-version": 2, "profile": "p"}))
    write_profiles(project, "p", duckdb_profile(tmp_path / "p.duckdb"))
    session = DbtSession(project, project, None, tmp_path / "work")
    session.parse()
    for _ in range(3):
        res = session.invoke(["run", "--select", "m"])
        assert res.success, res.error
        assert [n.status for n in res.nodes] == ["success"]
    from rerun_safety.warehouse.duckdb.session import release_duckdb

    release_duckdb()
    assert duckdb.connect(str(tmp_path / "p.duckdb")).execute("select n from main.m").fetchone() == (2,)


def test_map_database_points_three_part_names_at_the_sandbox_and_nothing_else():
    from rerun_safety.warehouse.postgres.engine import map_database

    sql = ('select \'"prod".analytics.t\' as s, "prod"."analytics"."t".a, prod.col, x.prod, '
           'md5(\'prod.analytics\') from prod.raw.events e join "prod".information_schema."columns" c on 1=1 '
           '-- "prod".a.b\n where "Prod".a.b = 1')
    out = map_database(sql, "prod", "rerun_safety_sbx_1_replay")
    assert out == ('select \'"prod".analytics.t\' as s, "rerun_safety_sbx_1_replay"."analytics"."t".a, prod.col, x.prod, '
                   'md5(\'prod.analytics\') from "rerun_safety_sbx_1_replay".raw.events e join '
                   '"rerun_safety_sbx_1_replay".information_schema."columns" c on 1=1 -- "prod".a.b\n where "Prod".a.b = 1')
    assert map_database("select 1", "prod", "x") == "select 1"


def test_a_sandbox_run_on_postgres_sees_the_users_database_name(pg_server, pg_database, tmp_path):
    # Connector packages write target.database into rows and hash it into keys: in a sandbox dbt must
    # render the user's name while its connections and statements go to the sandbox database.
    from rerun_safety.warehouse.postgres.engine import connections_to, map_database

    sandbox = pg_server.create_database("sbx")
    project = tmp_path / "p"
    (project / "models").mkdir(parents=True)
    (project / "models" / "m.sql").write_text(
        "select '{{ target.database }}' as source_relation, md5('{{ this.database }}') as k, "
        "(select count(*) from {{ this.database }}.information_schema.schemata) > 0 as seen")
    (project / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "p", "version": "1.0", "config-version": 2, "profile": "p"}))
    write_profiles(project, "p", postgres_profile(pg_server, pg_database))
    session = DbtSession(project, project, None, tmp_path / "work")
    session.parse()
    res = session.invoke(["run"], dialect="postgres", rewrite_sql=lambda sql: map_database(sql, pg_database, sandbox),
                         context=connections_to(pg_database, sandbox))
    assert res.success, res.error
    con = pg_server.connect(sandbox)
    try:
        with con.cursor() as cur:
            cur.execute("select source_relation, k = md5(%s), seen from public.m", [pg_database])
            assert cur.fetchall() == [(pg_database, True, True)]
    finally:
        con.close()
    con = pg_server.connect(pg_database)
    try:
        with con.cursor() as cur:
            cur.execute("select to_regclass('public.m')")
            assert cur.fetchone() == (None,)  # nothing reached the user's database
    finally:
        con.close()


def test_a_failing_microbatch_batch_carries_dbts_cause(tmp_path):
    # dbt's result for a microbatch model reads "ERROR"; the cause is only in the batch's exception
    from support.common import duckdb_profile

    project = tmp_path / "mb"
    (project / "models").mkdir(parents=True)
    (project / "models" / "src.sql").write_text("{{ config(event_time='ts') }}\nselect 1 as id, timestamp '2025-01-01 10:00' as ts")
    (project / "models" / "mb.sql").write_text(
        "{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='ts', "
        "batch_size='day', begin='2025-01-01', unique_key='id') }}\nselect * from {{ ref('src') }}")
    (project / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "mb", "version": "1.0", "config-version": 2, "profile": "p"}))
    write_profiles(project, "p", duckdb_profile(tmp_path / "mb.duckdb"))
    session = DbtSession(project, project, None, tmp_path / "work")
    session.parse()
    res = session.invoke(["run", "--event-time-start", "2025-01-01", "--event-time-end", "2025-01-03"])
    node = res.node("model.mb.mb")
    assert node is not None and node.status in ("error", "partial success")
    assert "microbatch incremental strategy does not support 'unique_key'" in node.message
    assert "> in macro" not in node.message
    assert "does not support 'unique_key'" in res.error


def _slow_project(tmp_path, engine: str, pg_server=None, pg_database=None):
    from support.common import duckdb_profile

    project = tmp_path / "slow"
    (project / "models").mkdir(parents=True)
    slow = ("select sum((a.range * 31 + b.range) % 7) as n from range(200000) a, range(200000) b" if engine == "duckdb"
            else "select pg_sleep(600) is null as slept")  # minutes, unless stopped
    (project / "models" / "slow.sql").write_text("{{ config(materialized='table') }}\n" + slow)
    (project / "models" / "quick.sql").write_text("select 1 as id")
    (project / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "slow", "version": "1.0", "config-version": 2, "profile": "slow"}))
    write_profiles(project, "slow", duckdb_profile(tmp_path / "slow.duckdb") if engine == "duckdb"
                   else postgres_profile(pg_server, pg_database))
    return project


def test_a_statement_past_the_limit_is_stopped_and_the_model_says_why(tmp_path, request):
    """A statement far longer than any of the reference build (a snapshot whose unique_key is not
    unique multiplies its rows at every run) is stopped at the limit on DuckDB (interrupt) and on
    PostgreSQL (cancel); the other models run, and the statements are timed when no limit is set."""
    import time

    from rerun_safety.dbt_invoke import STOPPED_MARKER, StatementWatch

    for engine in ("duckdb", "postgres"):
        extra = (request.getfixturevalue("pg_server"), request.getfixturevalue("pg_database")) \
            if engine == "postgres" else ()
        project = _slow_project(tmp_path / engine, engine, *extra)
        session = DbtSession(project, project, None, tmp_path / engine / "work")
        session.parse()
        watch = StatementWatch()
        res = session.invoke(["run", "--select", "quick"], watch=watch)
        assert res.success and 0 < watch.longest_s < 5, (engine, watch)
        watch.limit_s = 2.0
        started = time.monotonic()
        res = session.invoke(["run"], watch=watch)
        took = time.monotonic() - started
        status = {n.unique_id: n.status for n in res.nodes}
        assert status == {"model.slow.slow": "error", "model.slow.quick": "success"}, (engine, status)
        message = next(n.message for n in res.nodes if n.unique_id == "model.slow.slow")
        assert f"{STOPPED_MARKER} after 2 s" in message and "unique_key is not unique" in message, message
        assert took < 60, (engine, took)  # the statement alone runs for minutes


def test_a_sandbox_database_in_a_dbt_error_reads_as_the_users_database():
    """PostgreSQL names the relation it could not find with the sandbox database's name; the
    report shows the user's, as the same error in production would (the caret, which no longer
    points right, goes; a line without the name keeps its caret)."""
    from rerun_safety.dbt_invoke import _whole_message

    text = ("Database Error in model incremental_orders (models/incremental_orders.sql)\n"
            '  relation "main.incremental_orders" does not exist\n'
            '  LINE 18:     from "rerun_safety_sbx_73696dde2e5b_reference"."main"."i...\n'
            "                    ^\n"
            "  LINE 3: select x\n"
            "                 ^\n"
            "  compiled code at /tmp/rerun_safety_sbx_73696dde2e5b/reference/target/run/x.sql\n")
    assert _whole_message(text, "analytics").splitlines() == [
        "Database Error in model incremental_orders (models/incremental_orders.sql)",
        '  relation "main.incremental_orders" does not exist',
        '  LINE 18:     from "analytics"."main"."i...',
        "  LINE 3: select x",
        "                 ^"]
    # without a user database (a DuckDB file's sandbox has the user's name already) nothing changes
    assert "rerun_safety_sbx_73696dde2e5b_reference" in _whole_message(text, None)


def test_the_users_partial_parse_state_is_copied_and_still_sees_what_changed_since(tmp_path):
    """dbt's partial_parse.msgpack from the user's last run is copied into our target folder (theirs is
    never written), and a model changed after that run is read as it is now: dbt checks the files."""
    import hashlib
    import subprocess
    import sys
    from pathlib import Path

    from rerun_safety.project import Project

    project = tmp_path / "p"
    (project / "models").mkdir(parents=True)
    (project / "models" / "m.sql").write_text("select 1 as id")
    (project / "models" / "n.sql").write_text("select id from {{ ref('m') }}")
    (project / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "p", "version": "1.0", "config-version": 2, "profile": "p"}))
    write_profiles(project, "p", {"type": "duckdb", "path": str(tmp_path / "p.duckdb"), "schema": "main"})
    dbt = Path(sys.executable).parent / "dbt"
    done = subprocess.run([str(dbt), "parse", "--project-dir", str(project), "--profiles-dir", str(project)],
                          capture_output=True, text=True, cwd=project)
    assert done.returncode == 0, done.stdout
    state = project / "target" / "partial_parse.msgpack"
    before = hashlib.sha256(state.read_bytes()).hexdigest()
    (project / "models" / "m.sql").write_text("select 2 as id, 'x' as tag")  # changed after the user's parse
    p = Project(project, str(project), None, None, tmp_path / "work")
    assert (tmp_path / "work" / "dbt_target" / "partial_parse.msgpack").is_file()
    import json

    # dbt parsed only the changed file (a full parse reads both models)
    perf = json.loads((tmp_path / "work" / "dbt_target" / "perf_info.json").read_text())
    assert (perf["is_partial_parse_enabled"], perf["parsed_path_count"]) == (True, 1)
    assert p.manifest.nodes["model.p.m"].raw_code == "select 2 as id, 'x' as tag"
    assert p.manifest.nodes["model.p.n"].depends_on.nodes == ["model.p.m"]
    assert hashlib.sha256(state.read_bytes()).hexdigest() == before  # the user's file as it was
    assert p.session.target is None  # the profile's own target: naming it would set dbt's state aside
