"""The diff's read-only Spark: the catalog as it is, through one connection that lets only SELECT,
DESCRIBE and SHOW through, and a filter that calls only built-in functions that compute a value."""
from __future__ import annotations

import logging
import re
from contextlib import ExitStack
from pathlib import Path
from typing import Sequence

from sqlglot import exp

from ...errors import ConfigError, DiffError
from ..base import Connection
from ..dialect import functions_called

_READS = re.compile(r"\s*(select|with|describe|show)\b", re.IGNORECASE)
# the one session setting the diff changes for a query and puts back (diff/rows.py)
_SETTING = re.compile(r"(set|reset) spark\.sql\.constraintPropagation\.enabled(=(true|false))?")

# Functions a filter never needs: calls into Java, raised errors, and values that change from one
# read to the next (the checksums and the re-read of differing buckets must agree).
_UNSAFE = {"reflect", "java_method", "try_reflect", "raise_error", "assert_true", "randn", "shuffle",
           "monotonically_increasing_id", "spark_partition_id", "input_file_name", "input_file_block_start",
           "input_file_block_length", "current_timestamp", "now", "localtimestamp", "current_date",
           "unix_timestamp", "curdate"}


def errors() -> tuple[type, ...]:
    """Spark's error types (in-process Spark, the JVM bridge, PyHive/Thrift), those installed."""
    found: list[type] = []
    for module, name in (("pyspark.errors", "PySparkException"), ("py4j.protocol", "Py4JError"),
                         ("pyhive.exc", "Error"), ("thrift.Thrift", "TException")):
        try:
            found.append(getattr(__import__(module, fromlist=[name]), name))
        except (ImportError, AttributeError):
            pass
    return tuple(found)


def location(target: dict, catalog: str | None, text: str) -> str:
    """Spark has no level above the schema (its session catalog is `spark_catalog`)."""
    if catalog is not None and catalog.lower() != "spark_catalog":
        raise ConfigError(f"side '{text}': Spark tables are schema.table (no database above the schema)")
    return ""


def target_columns(output: dict) -> list[tuple]:
    """The lint reads no Spark catalog (its scratch is DuckDB or PostgreSQL)."""
    return []


class _ReadOnlyBackend:
    """A Spark backend that runs only reads: the diff never creates, alters or drops anything."""

    def __init__(self, backend):
        self._backend = backend

    def run(self, sql: str):
        if not (_READS.match(sql) or _SETTING.fullmatch(sql)):
            raise DiffError(f"refusing a statement that is not a read on Spark: {sql.strip()[:60]}")
        return self._backend.run(sql)

    def close(self) -> None:
        self._backend.close()


def _derby_metastore(params: dict) -> Path | None:
    """The embedded Derby metastore an in-process Spark would open, or None (another metastore)."""
    url = params.get("spark.hadoop.javax.jdo.option.ConnectionURL")
    if url is None:
        return Path("metastore_db").resolve()  # Hive's default: the working directory
    m = re.match(r"jdbc:derby:(?:;databaseName=)?([^;]+)", str(url))
    return Path(m.group(1)).expanduser().resolve() if m else None


def _session_running() -> bool:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return False
    return SparkSession.getActiveSession() is not None


def open_sides(places: Sequence[tuple[str, str, str]], cond, target: dict,
               stack: ExitStack) -> list[tuple[Connection, exp.Table]]:
    """(connection, table) of each ("", schema, name), read-only."""
    from .engine import SparkConnection, make_backend

    if str(target.get("method") or "") == "session":
        params = {str(k): str(v) for k, v in (target.get("server_side_parameters") or {}).items()}
        if params.get("spark.sql.catalogImplementation", "").strip().lower() == "in-memory":
            # no metastore: the tables are those of a Spark session this process runs already
            if not _session_running():
                raise ConfigError("the Spark target's catalog is in-memory (spark.sql.catalogImplementation): a new "
                                  "Spark session would have no tables to compare; use a Hive metastore or method thrift")
        elif (metastore := _derby_metastore(params)) is not None and not metastore.is_dir():
            # Hive would create an empty catalog there: nothing to compare, and a folder left behind
            raise ConfigError(f"no Spark catalog at {metastore}: method session reads the Hive metastore of the "
                              "working directory (as dbt-spark does); run from the dbt project's folder or set "
                              "spark.hadoop.javax.jdo.option.ConnectionURL in server_side_parameters")
    _quiet_errors(stack)
    backend = _ReadOnlyBackend(make_backend(target))
    stack.callback(backend.close)
    con = SparkConnection(backend, None, set())
    if cond is not None:
        _refuse_functions(con, cond)
    return [(con, exp.Table(this=exp.to_identifier(name, quoted=True), db=exp.to_identifier(schema, quoted=True)))
            for _, schema, name in places]


def _quiet_errors(stack: ExitStack) -> None:
    """pyspark 4 logs every failed query's error with its JVM stack to stderr; the diff reports
    it as one line (`query failed: ...`), so those loggers are silenced while it runs."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:
        return
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logger = PySparkLogger.getLogger(name)
        stack.callback(logger.setLevel, logger.level)
        logger.setLevel(logging.CRITICAL)


def _refuse_functions(con, cond) -> None:
    """--where may call Spark's built-in functions that only compute a value; not a user function
    of the catalog (a Hive UDF may do anything)."""
    names = sorted(set(functions_called(cond, "spark")))
    bad = [n for n in names if n in _UNSAFE]
    if not bad and names:
        users = {str(r[0]).lower().rsplit(".", 1)[-1] for r in con.fetchall("show user functions")}
        bad = [n for n in names if n in users]
    if bad:
        raise DiffError(f"--where may not call {bad[0]}(): a filter reads rows; it cannot call Java, raise errors, "
                        "use values that change between reads or call the catalog's own functions")
