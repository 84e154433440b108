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
