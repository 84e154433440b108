"""Every engine's dialect by its dbt adapter type (imports sqlglot only, never an engine's client)."""
from __future__ import annotations

from .dialect import Dialect

ENGINES = ("duckdb", "postgres", "spark")


def dialect_for(name: str) -> Dialect:
    """The dialect of an engine by its dbt adapter type (a Dialect passes through); an adapter that
    is not one of ours gets the generic one (the lint reads any project; nothing runs there)."""
    if isinstance(name, Dialect):
        return name
    if name == ENGINES[0]:
        from .duckdb.dialect import DUCKDB

        return DUCKDB
    if name == ENGINES[1]:
        from .postgres.dialect import POSTGRES

        return POSTGRES
    if name == ENGINES[2]:
        from .spark.dialect import SPARK

        return SPARK
    return Dialect(name or "")
