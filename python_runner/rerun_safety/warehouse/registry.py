"""The one table of engines: dbt's adapter type -> its `Adapter` (adapter.py). Adding an engine is one
class in its folder and one entry here (tests register a fake one with `register`)."""
from __future__ import annotations

from .adapter import Adapter
from .duckdb import DuckDB
from .postgres import Postgres
from .spark import Spark

ADAPTERS: dict[str, Adapter] = {a.name: a for a in (DuckDB(), Postgres(), Spark())}


def adapter(name: str) -> Adapter | None:
    """The engine of a dbt adapter type (None: not one of ours)."""
    return ADAPTERS.get(name)


def names() -> tuple[str, ...]:
    return tuple(ADAPTERS)


def refusals(message: str) -> list:
    """What the message says was refused, in every engine's words (refusals.find)."""
    from .refusals import find

    return find(message, [a.dialect.refusal_words() for a in ADAPTERS.values()])


def register(one: Adapter) -> None:
    ADAPTERS[one.name] = one


def unregister(name: str) -> None:
    ADAPTERS.pop(name, None)
