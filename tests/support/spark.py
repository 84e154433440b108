"""Spark for the tests: one in-process Spark (dbt-spark `method: session`) per test session.

pyspark keeps one SparkSession per process, and the first one fixes the warehouse folder and the
catalog. Every Spark test of a pytest process therefore shares one root folder, made on first use
and removed at exit; tests keep apart by schema names. dbt invocations, runner connections and game
days in this process all use it.

The in-process session keeps its catalog in memory (`spark.sql.catalogImplementation=in-memory`):
nothing outside this process reads it, and without the Hive metastore's embedded Derby database a
game day's catalog statements cost about a third less (the example's game day: 389 -> 280 s). The
Hive metastore is what the cluster's Thrift server uses (tests/support/spark_cluster.py): every test that
goes through `method: thrift` runs on it, the example's whole game day included.

Spark tests are skipped where pyspark or Java is missing, unless RERUN_SAFETY_REQUIRE_SPARK=1 (CI),
where they fail instead.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

_ROOT: Path | None = None


def spark_missing() -> str | None:
    """Why Spark cannot run here, or None."""
    try:
        import pyspark  # noqa: F401
        import dbt.adapters.spark  # noqa: F401
    except ImportError as err:
        return f"the spark extra is not installed ({err.name}): pip install -e '.[spark]'"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime (Debian: apt-get install openjdk-17-jre-headless)"
    return None


def require_spark() -> None:
    reason = spark_missing()
    if reason is None:
        return
    if os.environ.get("RERUN_SAFETY_REQUIRE_SPARK") == "1":
        pytest.fail(f"Spark is required here (RERUN_SAFETY_REQUIRE_SPARK=1): {reason}")
    pytest.skip(reason)


def spark_root() -> Path:
    """The process's Spark folder: warehouse/ (tables) and metastore_db/ (the catalog)."""
    global _ROOT
    if _ROOT is None:
        _ROOT = Path(tempfile.mkdtemp(prefix="rerun_safety_spark_"))
        atexit.register(shutil.rmtree, _ROOT, ignore_errors=True)
    return _ROOT


def session_parameters() -> dict:
    root = spark_root()
    return {
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        # derby.log goes to the Derby home, not into the working directory; the serial collector:
        # a test session's Spark is a couple of GB that G1's concurrent threads kept scanning
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={root} -XX:+UseSerialGC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.catalogImplementation": "in-memory",  # see the module's docstring
    }


def spark_profile(schema: str, **extra) -> dict:
    """A dbt-spark `method: session` profile output in the process's Spark."""
    out = {"type": "spark", "method": "session", "host": "localhost", "schema": schema, "threads": 1,
           "server_side_parameters": session_parameters()}
    out.update(extra)
    return out


def spark_session():
    """The process's SparkSession (started with the same parameters dbt-spark would use)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName("rerun_safety tests").enableHiveSupport()
    for key, value in session_parameters().items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def spark_query(sql: str) -> list[tuple]:
    """Rows of a statement run in the process's Spark ([] for one without rows)."""
    df = spark_session().sql(sql)
    return [tuple(r) for r in df.collect()]


def unique_schema(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


USER_CATALOG = """
import sys
from pathlib import Path
from pyspark.sql import SparkSession
root = Path(sys.argv[1])
spark = (SparkSession.builder.enableHiveSupport()
         .config("spark.sql.warehouse.dir", str(root / "warehouse"))
         .config("spark.hadoop.javax.jdo.option.ConnectionURL", "jdbc:derby:;databaseName=metastore_db;create=true")
         .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={root} -XX:+UseSerialGC")
         .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC").getOrCreate())
spark.sql("create database raw")
# 7,999 events, one every 61 s from 2026-03-01 00:01:01 to 2026-03-06 15:32:19
spark.sql("create table raw.events using parquet as select id as event_id, "
          "timestamp'2026-03-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id * 61) as event_time "
          "from range(1, 8000)")
spark.stop()
"""

CONFINED_MODELS = {
    "sources.yml": """
        version: 2
        sources:
          - name: raw
            tables:
              - name: events
                config:
                  event_time: event_time
        """,
    # re-reads a day on every run and appends it again
    "ev_append.sql": """
        {{ config(materialized='incremental', incremental_strategy='append') }}
        select event_id, event_time from {{ source('raw', 'events') }}
        {% if is_incremental() %}
        where event_time >= (select max(event_time) - interval '1 day' from {{ this }})
        {% endif %}
        """,
    # right by its data (a day's partition replaced), but its hook exports the table into the user's folder
    "ev_exported.sql": """
        {{ config(materialized='incremental', incremental_strategy='insert_overwrite', partition_by=['event_day'],
                  post_hook="insert overwrite directory '" ~ var('outside') ~ "/export' using parquet select * from "
                            ~ this) }}
        select event_id, event_time, cast(event_time as date) as event_day from {{ source('raw', 'events') }}
        {% if is_incremental() %}
        where event_time >= (select max(event_day) from {{ this }})
        {% endif %}
        """,
}


def confined_session_project(tmp: Path) -> tuple[Path, Path]:
    """A user's Spark catalog made by a Spark process of their own (an embedded Derby metastore and a warehouse
    folder under tmp/user: raw.events, 7,999 events) and a dbt project on it with `method: session`
    (tmp/project): an append over a day's lookback (duplicates) and a model whose post-hook exports itself
    into the folder the var `outside` names. Returns (the user's folder, the project)."""
    import json
    import subprocess
    import sys
    import textwrap

    user = tmp / "user"
    user.mkdir()
    made = subprocess.run([sys.executable, "-c", USER_CATALOG, str(user)], capture_output=True, text=True, cwd=user)
    assert made.returncode == 0, made.stderr[-2000:]
    project = tmp / "project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: confined_spark\nversion: '1.0'\nconfig-version: 2\n"
                                             "profile: confined_spark\nmodels:\n  confined_spark:\n"
                                             "    +materialized: view\n    +file_format: parquet\n")
    for name, text in CONFINED_MODELS.items():
        (project / "models" / name).write_text(textwrap.dedent(text).lstrip())
    # as the user runs dbt: the metastore's folder relative to derby.system.home
    parameters = {"spark.sql.warehouse.dir": str(user / "warehouse"),
                  "spark.hadoop.javax.jdo.option.ConnectionURL": "jdbc:derby:;databaseName=metastore_db;create=true",
                  "spark.driver.extraJavaOptions": f"-Dderby.system.home={user} -XX:+UseSerialGC",
                  "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                  "spark.sql.session.timeZone": "UTC"}
    (project / "profiles.yml").write_text(json.dumps({"confined_spark": {"target": "dev", "outputs": {"dev": {
        "type": "spark", "method": "session", "host": "localhost", "schema": "analytics",
        "server_side_parameters": parameters}}}}))
    return user, project
