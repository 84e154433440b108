"""A connection to one PostgreSQL database: statements one at a time, read-only where asked."""
from __future__ import annotations

from typing import Any, Sequence

import psycopg2
import sqlglot
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from ...errors import SandboxError
from ...secrets import password_of
from ..base import Connection
from .dialect import POSTGRES

CONNECT_KEYS = ("host", "port", "user", "password", "sslmode", "sslcert", "sslkey", "sslrootcert",
                "connect_timeout", "keepalives_idle")


def connect_params(target: dict) -> dict:
    """psycopg2's connection parameters of a profile output (the database apart)."""
    params = {k: target[k] for k in CONNECT_KEYS if target.get(k) not in (None, "")}
    if password_of(target) is not None:
        params["password"] = password_of(target)  # `password:` or dbt-postgres's `pass:`
    return params


def _one_statement(text: str) -> None:
    """psycopg2 sends a query in the simple protocol, which runs every statement in it: a read-only
    connection sends one (read as the server reads it, standard_conforming_strings being on) or none."""
    try:
        tokens = sqlglot.tokenize(text, read="postgres")
    except TokenError:
        raise SandboxError("refusing to send a query that cannot be read as one statement") from None
    if any(t.token_type == TokenType.SEMICOLON for t in tokens):
        raise SandboxError("refusing to send more than one statement on a read-only connection")


class PgConnection(Connection):
    dialect = POSTGRES

    def __init__(self, params: dict, dbname: str, read_only: bool = False):
        """`read_only`: every statement runs in a transaction that psycopg2 opens with BEGIN READ
        ONLY, so that no session setting (set_config('default_transaction_read_only', 'off', ...)
        in a filter, say) can make a later statement writable; the session default is on too."""
        # The runner's SQL (sqlglot's, and a diff's --where re-emitted by it) writes a backslash in a
        # '...' literal as itself: the server must read it so whatever the database's or role's setting
        # (off, a backslash escapes the quote after it and a filter's literal could end early).
        options = "-c standard_conforming_strings=on"
        opts = {"options": f"{options} -c default_transaction_read_only=on" if read_only else options}
        try:
            self._con = psycopg2.connect(dbname=dbname, **params, **opts)
        except psycopg2.OperationalError as err:
            raise SandboxError(f"cannot connect to PostgreSQL database '{dbname}': "
                               f"{str(err).strip().splitlines()[0]}") from None
        self.read_only = read_only
        if read_only:
            self._con.set_session(readonly=True, autocommit=False)
        else:
            self._con.autocommit = True

    @property
    def raw(self):
        return self._con

    def _run(self, sql, params: Sequence[Any] | None, fetch):
        text = self.sql(sql)
        if self.read_only:
            _one_statement(text)
        try:
            with self._con.cursor() as cur:
                cur.execute(text, params)
                out = fetch(cur)
        except BaseException:
            if self.read_only and not self._con.closed:
                self._con.rollback()
            raise
        if self.read_only:
            self._con.commit()  # one read-only transaction per statement: never idle in one
        return out

    def execute(self, sql, params: Sequence[Any] | None = None) -> None:
        self._touched(sql)
        self._run(sql, params, lambda cur: None)

    def fetchall(self, sql) -> list[tuple]:
        return self._run(sql, None, lambda cur: cur.fetchall())

    def fetch_dicts(self, sql) -> list[dict]:
        return self._run(sql, None, lambda cur: [dict(zip([d[0] for d in cur.description], row))
                                                 for row in cur.fetchall()])

    def close(self) -> None:
        self._con.close()
