"""dbt-duckdb's open database between invocations."""
from __future__ import annotations


def release_duckdb() -> None:
    """Close the DuckDB database that dbt-duckdb keeps open between invocations.

    Sandbox profiles set `keep_open: true`: dbt-duckdb then opens a sandbox's database once and
    keeps it (in a class attribute) across invocations with the same credentials, instead of
    opening and checkpointing it for every connection (~30 ms + ~40 ms each; a game day makes
    hundreds). The runner's own connections to that file share the open instance. Call this
    before a sandbox file is copied or removed, so no handle of dbt's outlives it.
    """
    import sys

    module = sys.modules.get("dbt.adapters.duckdb.connections")
    if module is None:
        return
    manager = module.DuckDBConnectionManager
    with manager._LOCK:
        env = manager._ENV
        manager._ENV = None
        if env is not None:
            try:
                env.close()
            except Exception:  # noqa: BLE001 - closing a database that is already gone
                pass
