"""Closing a PyHive (Spark Thrift) connection without waiting forever: used by dbt's connections
during the runner's invocations (dbt_invoke) and by the Spark sandboxes' own (warehouse/spark/backends)."""
from __future__ import annotations

from typing import Any, Callable

from .errors import first_line as _first_line

CLOSE_TIMEOUT_S = 20.0


def thrift_socket(connection: Any) -> Any:
    """The TSocket under a PyHive connection's transport (SASL or buffered), or None."""
    trans = getattr(connection, "_transport", None)
    for _ in range(4):
        if trans is None or hasattr(trans, "setTimeout"):
            return trans
        trans = getattr(trans, "_trans", None) or getattr(trans, "_TBufferedTransport__trans", None)
    return None


def close_hive_connection(connection: Any, timeout: float = CLOSE_TIMEOUT_S, close: Callable[[], None] | None = None,
                          tolerate: Callable[[Exception], bool] = lambda err: True) -> str | None:
    """Close a PyHive connection (`close`: what closes it, by default its own close()), waiting at
    most `timeout` seconds for the server's answer.

    The pyspark distribution's Thrift server sometimes fails to tear a session down (no Hive LLAP
    jars: NoClassDefFoundError ...LlapSigner$Signable); it then answers CloseSession with an error,
    or not at all, and a client waiting for that answer waits forever. A failure that `tolerate`
    accepts closes the socket and returns the error's first line (others are raised); None after a
    clean close."""
    sock = thrift_socket(connection)
    if sock is not None:
        sock.setTimeout(timeout * 1000)
    try:
        (close or connection.close)()
        return None
    except Exception as err:  # noqa: BLE001 - the session is gone either way
        if not tolerate(err):
            raise
        if sock is not None:
            try:
                sock.close()
            except Exception:  # noqa: BLE001
                pass
        return _first_line(err) or type(err).__name__
