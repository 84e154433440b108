"""Spark backends: how a statement reaches Spark, as dbt-spark's two methods do.

`method: session` is the SparkSession of this process (shared with dbt's invocations); `method:
thrift` is a cluster's Thrift server through PyHive, whose CloseSession may never be answered (the
close waits a bounded time).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from ...errors import ConfigError, SandboxError
from ...errors import first_line as _first_line
from ...thrift import CLOSE_TIMEOUT_S, close_hive_connection, thrift_socket  # noqa: F401


class Backend:
    """Runs one Spark SQL statement; returns (column names, rows)."""

    def run(self, sql: str) -> tuple[list[str], list[tuple]]:
        raise NotImplementedError

    def close(self) -> None: ...


def _quiet_query_context_logs() -> None:
    """pyspark (4.x) logs every SQL error it raises to stderr, the JVM's stack included (its query
    context loggers), before the one line the runner says for the same error."""
    import warnings

    # pyspark's import-time notice about pandas 3, on stderr at every run
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # pyspark 3.5 has no such loggers
        return
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


class SessionBackend(Backend):
    """The SparkSession of this process, built as dbt-spark's `method: session` builds it (so that
    dbt's invocations and the runner share it)."""

    def __init__(self, parameters: dict):
        try:
            from pyspark.sql import SparkSession
        except ImportError:
            raise ConfigError("the Spark target needs pyspark: pip install 'rerun-safety[spark]'") from None
        _quiet_query_context_logs()
        builder = SparkSession.builder.enableHiveSupport()
        for key, value in parameters.items():
            builder = builder.config(str(key), str(value))
        try:
            self.spark = builder.getOrCreate()
        except Exception as err:  # noqa: BLE001 - no JVM, a port in use: one line
            raise SandboxError(f"cannot start Spark (method: session): {_first_line(err)}") from None

    def run(self, sql: str) -> tuple[list[str], list[tuple]]:
        df = self.spark.sql(sql)
        rows = df.collect()
        return list(df.columns), [tuple(r) for r in rows]


class ThriftBackend(Backend):
    """A Spark Thrift server (a cluster's), through PyHive as dbt-spark's `method: thrift`."""

    def __init__(self, output: dict):
        try:
            from pyhive import hive
        except ImportError:
            raise ConfigError("the Spark thrift target needs PyHive: pip install 'rerun-safety[spark]'") from None
        for key in ("host", "port"):
            if not output.get(key):
                raise ConfigError(f"the Spark thrift target has no {key}")
        params = {k: output[k] for k in ("auth", "kerberos_service_name", "password") if output.get(k)}
        try:
            self._con = hive.connect(host=str(output["host"]), port=int(output["port"]),
                                     username=output.get("user") or None,
                                     configuration={str(k): str(v) for k, v in
                                                    (output.get("server_side_parameters") or {}).items()},
                                     **params)
        except Exception as err:  # noqa: BLE001 - refused, timed out, bad auth: one line
            raise SandboxError(f"cannot connect to the Spark Thrift server {output['host']}:{output['port']}: "
                               f"{_first_line(err)}") from None

    def run(self, sql: str) -> tuple[list[str], list[tuple]]:
        cur = self._con.cursor()
        try:
            cur.execute(sql)
            if cur.description is None:
                return [], []
            names = [d[0].split(".")[-1] for d in cur.description]
            return names, [tuple(r) for r in cur.fetchall()]
        finally:
            cur.close()

    def close(self) -> None:
        close_hive_connection(self._con)


def make_backend(output: dict) -> Backend:
    method = str(output.get("method") or "")
    if method == "session":
        params = {str(k): str(v) for k, v in (output.get("server_side_parameters") or {}).items()}
        return SessionBackend(params)
    if method == "thrift":
        return ThriftBackend(output)
    raise ConfigError(f"Spark method '{method or '(none)'}' is not supported by the game day "
                      "(supported: session, thrift)")
