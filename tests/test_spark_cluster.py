"""The standalone Spark cluster of tests/support/spark_cluster.py is real and usable as a team would use it:
the Thrift server's queries run on the worker's executor, dbt-spark `method: thrift` builds an
`insert_overwrite` model run after run, two dbt processes work against it at once, and stop()
leaves no process behind (checked when the session's cluster stops, conftest's spark_cluster; nor
does a start that fails)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from support.spark import require_spark, unique_schema
from support.spark_cluster import SparkClusterError, cmdline, processes_mentioning, start_spark_cluster

pytestmark = pytest.mark.slow

DBT = str(Path(sys.executable).with_name("dbt"))

MODEL = """\
{{ config(materialized='incremental', incremental_strategy='insert_overwrite',
          partition_by=['day_num'], file_format='parquet') }}
select cast(r.id as int) as row_id, cast({{ var('batch') }} as int) as batch, d.day_num
from range({{ var('per_day') }}) r
cross join (select explode(sequence({{ var('first_day') }}, {{ var('last_day') }})) as day_num) d
"""

# Holds the model for a few seconds inside the Thrift server, so two dbt runs overlap.
SLOW_PRE_HOOK = "select reflect('java.lang.Thread', 'sleep', cast({{ var('sleep_ms', 0) }} as bigint))"


def _write_project(folder: Path, cluster, schema: str) -> Path:
    (folder / "models").mkdir(parents=True)
    (folder / "dbt_project.yml").write_text(yaml.safe_dump({
        "name": "cluster_check", "version": "1.0", "config-version": 2, "profile": "cluster_check",
        "model-paths": ["models"],
        "models": {"cluster_check": {"+pre-hook": SLOW_PRE_HOOK}},
    }))
    (folder / "models" / "events.sql").write_text(MODEL)
    (folder / "profiles.yml").write_text(yaml.safe_dump({
        "cluster_check": {"target": "cluster", "outputs": {"cluster": cluster.profile(schema)}},
    }))
    return folder


def _dbt_run_args(project: Path, **variables) -> list[str]:
    return [DBT, "run", "--project-dir", str(project), "--profiles-dir", str(project),
            "--target-path", str(project / "target"), "--log-path", str(project / "logs"),
            "--vars", json.dumps(variables)]


def _dbt_env() -> dict:
    return {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1"}


def _dbt_run(project: Path, **variables) -> dict:
    proc = subprocess.run(_dbt_run_args(project, **variables), capture_output=True, text=True,
                          env=_dbt_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return json.loads((project / "target" / "run_results.json").read_text())


def _partition_counts(cluster, schema: str) -> dict[int, int]:
    rows = cluster.query(f"select day_num, count(*) from {schema}.events group by day_num order by day_num")
    return {int(day): int(n) for day, n in rows}


def test_cluster_came_up_within_the_deadline(spark_cluster):
    print(f"\nSpark cluster up in {spark_cluster.started_in:.1f} s "
          f"(master {spark_cluster.master_url}, Thrift server {spark_cluster.host}:{spark_cluster.port})")
    assert 0 < spark_cluster.started_in < 180
    assert spark_cluster.query("select 1 + 1, current_timezone()") == [(2, "UTC")]


def test_thrift_server_runs_its_queries_on_the_workers_executor(spark_cluster):
    assert spark_cluster.query("set spark.master") == [("spark.master", spark_cluster.master_url)]
    assert spark_cluster.query("set spark.sql.shuffle.partitions") == [("spark.sql.shuffle.partitions", "2")]

    state = spark_cluster.master_state()
    assert state["url"] == spark_cluster.master_url
    workers = [w for w in state["workers"] if w["state"] == "ALIVE"]
    assert len(workers) == 1
    worker = workers[0]
    assert (worker["host"], worker["cores"], worker["coresused"], worker["memory"], worker["memoryused"]) == \
        ("127.0.0.1", 2, 2, 1024, 512)
    apps = state["activeapps"]
    assert [(a["name"], a["cores"], a["memoryperexecutor"]) for a in apps] == \
        [("rerun_safety Thrift server", 2, 512)]

    # The executor is a child process of the worker (in its process group), for this application.
    executors = [p for p in spark_cluster.pids()["worker"] if "CoarseGrainedExecutorBackend" in cmdline(p)]
    assert len(executors) == 1
    assert apps[0]["id"] in cmdline(executors[0])

    # A query with tasks (two shuffle partitions) runs there: the executor's own log records them.
    executor_log = next((spark_cluster.root / "worker" / apps[0]["id"]).glob("*/stderr"))
    finished_before = executor_log.read_text().count("Finished task")
    assert spark_cluster.query(
        "select count(*), sum(id), count(distinct id % 7) from range(0, 200000, 1, 4)"
    ) == [(200000, 19999900000, 7)]
    assert executor_log.read_text().count("Finished task") >= finished_before + 4


def test_dbt_thrift_insert_overwrite_reruns_converge(spark_cluster, tmp_path):
    schema = unique_schema("cluster")
    project = _write_project(tmp_path / "project", spark_cluster, schema)

    first = _dbt_run(project, batch=1, first_day=1, last_day=3, per_day=4)
    assert [r["status"] for r in first["results"]] == ["success"]
    assert _partition_counts(spark_cluster, schema) == {1: 4, 2: 4, 3: 4}

    # Days 3-5 again with more rows: day 3 is replaced, 4 and 5 are added, 1 and 2 are kept.
    second = _dbt_run(project, batch=2, first_day=3, last_day=5, per_day=6)
    assert [r["status"] for r in second["results"]] == ["success"]
    assert _partition_counts(spark_cluster, schema) == {1: 4, 2: 4, 3: 6, 4: 6, 5: 6}
    assert spark_cluster.query(f"select batch, count(*) from {schema}.events group by batch order by batch") == \
        [(1, 8), (2, 18)]

    # The same run again converges: partition overwrite, not append.
    _dbt_run(project, batch=2, first_day=3, last_day=5, per_day=6)
    assert spark_cluster.query(f"select count(*), count(distinct row_id, day_num) from {schema}.events") == \
        [(26, 26)]
    described = dict((r[0], r[1]) for r in spark_cluster.query(f"describe table extended {schema}.events"))
    assert described["Provider"] == "parquet"
    assert Path(described["Location"].removeprefix("file:")).is_relative_to(spark_cluster.root / "warehouse")


def test_two_dbt_processes_at_once(spark_cluster, tmp_path):
    # One more client holds a session open (with a temporary view) for the whole time.
    held = spark_cluster.connect()
    try:
        cur = held.cursor()
        cur.execute("create temporary view held_view as select 7 as x")

        schemas = [unique_schema("cluster_a"), unique_schema("cluster_b")]
        projects = [_write_project(tmp_path / f"p{i}", spark_cluster, s) for i, s in enumerate(schemas)]
        procs = [subprocess.Popen(_dbt_run_args(p, batch=i + 1, first_day=1, last_day=2 + i, per_day=10,
                                                sleep_ms=6000),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_dbt_env())
                 for i, p in enumerate(projects)]
        outputs = [p.communicate(timeout=300)[0] for p in procs]
        for proc, out in zip(procs, outputs):
            assert proc.returncode == 0, out[-4000:]

        assert _partition_counts(spark_cluster, schemas[0]) == {1: 10, 2: 10}
        assert _partition_counts(spark_cluster, schemas[1]) == {1: 10, 2: 10, 3: 10}

        # Both models were inside the Thrift server at the same time.
        spans = []
        for project in projects:
            result = json.loads((project / "target" / "run_results.json").read_text())["results"][0]
            execute = next(t for t in result["timing"] if t["name"] == "execute")
            spans.append(tuple(datetime.fromisoformat(execute[k].replace("Z", "+00:00"))
                               for k in ("started_at", "completed_at")))
        overlap = (min(spans[0][1], spans[1][1]) - max(spans[0][0], spans[1][0])).total_seconds()
        assert overlap > 0, f"the two runs did not overlap: {spans}"

        cur.execute("select x from held_view")
        assert cur.fetchall() == [(7,)]
    finally:
        held.close()


def test_four_jvms_in_three_process_groups(spark_cluster):
    """Master, worker, Thrift server and the worker's executor, each naming the cluster's folder (so
    that the check after stop(), in the session fixture's teardown, sees them all)."""
    before = spark_cluster.pids()
    pids = [p for group in before.values() for p in group]
    java = [p for p in pids if cmdline(p).split(" ")[0].endswith("java")]
    assert sorted(before) == ["master", "thriftserver", "worker"]
    assert len(java) == 4
    assert set(java) <= set(processes_mentioning(str(spark_cluster.root)))
    print(f"\ncluster up in {spark_cluster.started_in:.1f} s; PIDs {before}")


def test_failed_start_raises_with_the_log_and_stops_everything(tmp_path):
    require_spark()
    root = tmp_path / "too_slow"
    with pytest.raises(SparkClusterError) as caught:
        start_spark_cluster(root, timeout=3)
    message = str(caught.value)
    assert message.startswith("Spark cluster did not start: ")
    assert "within 3 s" in message
    assert f"--- last lines of {root.resolve() / 'logs'}" in message
    time.sleep(0.5)
    assert processes_mentioning(str(root.resolve())) == []


def test_the_stop_check_sees_a_process_left_behind(tmp_path):
    """check_stopped (run when the session's cluster stops) fails on a process that outlived stop()."""
    from types import SimpleNamespace

    from support.spark_cluster import check_stopped

    left = subprocess.Popen(["sleep", "30", str(tmp_path)])
    try:
        cluster = SimpleNamespace(root=tmp_path, host="127.0.0.1", port=9, stop=lambda: None,
                                  pids=lambda: {"master": [], "worker": [], "thriftserver": []})
        with pytest.raises(AssertionError) as caught:
            check_stopped(cluster, [left.pid])
        assert str(left.pid) in str(caught.value)
    finally:
        left.kill()
        left.wait()
