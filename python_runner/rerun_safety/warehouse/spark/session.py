"""dbt-spark's sessions during the runner's invocations (Dialect.dbt_session of Spark)."""
from __future__ import annotations

import contextlib
import logging


@contextlib.contextmanager
def tolerant_thrift_close():
    """dbt closes its connection after every model. A Spark Thrift server built without Hive's LLAP
    jars (the pyspark distribution's) sometimes fails to tear a session down (NoClassDefFoundError:
    ...LlapSigner$Signable; the session is dropped anyway) and answers CloseSession with that error,
    or never answers: dbt would fail the model whose statements all succeeded, or wait forever.
    During our invocations the close waits at most CLOSE_TIMEOUT_S for the answer, and a close that
    fails is logged, not raised (close_hive_connection)."""
    try:
        from dbt.adapters.spark.connections import PyhiveConnectionWrapper
    except ImportError:
        yield
        return
    from ...thrift import CLOSE_TIMEOUT_S, close_hive_connection

    original = PyhiveConnectionWrapper.close

    def tolerated(err: Exception) -> bool:  # CloseSession's error answer, or none (a timeout)
        return "TCloseSessionResp" in str(err) or type(err).__name__ == "TTransportException"

    def close(self) -> None:
        # the timeout bounds the cursor's close and the session's
        failed = close_hive_connection(getattr(self, "handle", None), CLOSE_TIMEOUT_S, close=lambda: original(self),
                                       tolerate=tolerated)
        if failed:
            logging.getLogger("rerun_safety").debug("Spark Thrift server failed to close a session: %s", failed)

    PyhiveConnectionWrapper.close = close
    try:
        yield
    finally:
        PyhiveConnectionWrapper.close = original
