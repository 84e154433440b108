"""The diff's read-only PostgreSQL: one connection per database, every statement in a READ ONLY
transaction, and a filter that may call no volatile function of that database."""
from __future__ import annotations

from contextlib import ExitStack
from typing import Sequence

from sqlglot import exp

from ...errors import DiffError
from ..base import Connection
from ..dialect import functions_called
from .connection import connect_params


def errors() -> tuple[type, ...]:
    import psycopg2

    return (psycopg2.Error,)


def location(target: dict, catalog: str | None, text: str) -> str:
    """The database a side `[db.]schema.table` of the profile's target is in."""
    return catalog or target.get("dbname") or target.get("database")


def _refuse_volatile(con, cond) -> None:
    """--where may call only functions that PostgreSQL marks immutable or stable in this database
    (user-defined ones included): a volatile one could change settings or data."""
    names = sorted(set(functions_called(cond, "postgres"))) if cond is not None else []
    if not names:
        return
    with con.raw.cursor() as cur:
        cur.execute("select distinct lower(proname) from pg_proc where lower(proname) = any(%s) "
                    "and provolatile = 'v' order by 1", [names])
        volatile = [r[0] for r in cur.fetchall()]
    con.raw.commit()
    if volatile:
        raise DiffError(f"--where may not call {volatile[0]}(): a volatile function (a filter reads rows; it "
                        "cannot change settings or data)")


def target_columns(output: dict) -> list[tuple]:
    """(schema, table, column, type) of every relation of the profile's database, read only; types
    outside pg_catalog (enums, domains, extensions) as text: they do not exist in a scratch database."""
    from .connection import PgConnection

    params = {"connect_timeout": 10, **connect_params(output)}
    with PgConnection(params, output.get("dbname") or output.get("database"), read_only=True) as con:
        return con.fetchall(
            "select n.nspname, c.relname, a.attname, case when tn.nspname = 'pg_catalog' "
            "then format_type(a.atttypid, a.atttypmod) else 'text' end "
            "from pg_attribute a join pg_class c on c.oid = a.attrelid "
            "join pg_namespace n on n.oid = c.relnamespace join pg_type t on t.oid = a.atttypid "
            "join pg_namespace tn on tn.oid = t.typnamespace "
            "where a.attnum > 0 and not a.attisdropped and c.relkind in ('r', 'v', 'm', 'p', 'f') "
            "and n.nspname not in ('pg_catalog', 'information_schema') order by 1, 2, a.attnum")


def open_sides(places: Sequence[tuple[str, str, str]], cond, target: dict,
               stack: ExitStack) -> list[tuple[Connection, exp.Table]]:
    """(connection, table) of each (database, schema, name), read-only."""
    from .connection import PgConnection

    params = connect_params(target)
    cons: dict[str, PgConnection] = {}
    out = []
    for database, schema, name in places:
        if database not in cons:
            # every statement in a READ ONLY transaction (see PgConnection)
            con = PgConnection(params, database, read_only=True)
            stack.callback(con.close)
            cons[database] = con
            _refuse_volatile(con, cond)
        out.append((cons[database], exp.Table(this=exp.to_identifier(name, quoted=True),
                                              db=exp.to_identifier(schema, quoted=True))))
    return out
