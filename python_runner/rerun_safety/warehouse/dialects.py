"""Every engine's dialect by its dbt adapter type (imports sqlglot only, never an engine's client)."""
from __future__ import annotations

from .dialect import Dialect
from .registry import adapter
from .registry import names as engines  # noqa: F401 - the adapter types the runner works on (registry.ADAPTERS)


def dialect_for(name: str) -> Dialect:
    """The dialect of an engine by its dbt adapter type (a Dialect passes through); an adapter that
    is not one of ours gets the generic one (the lint reads any project; nothing runs there)."""
    if isinstance(name, Dialect):
        return name
    found = adapter(name or "")
    return found.dialect if found is not None else Dialect(name or "")
