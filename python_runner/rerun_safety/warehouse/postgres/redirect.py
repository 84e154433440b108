"""What a PostgreSQL sandbox run's connections and statements become: connections to the user's database
open the sandbox instead, three-part names that start with the user's database point at the sandbox,
and statements that would write a file on the server are refused."""
from __future__ import annotations

import contextlib
from typing import Iterator

import psycopg2

from ...errors import SandboxError


@contextlib.contextmanager
def connections_to(user_db: str, sandbox_db: str) -> Iterator[None]:
    """Within the block, every connection this process opens to the user's database (dbt's,
    through psycopg2.connect) opens the sandbox database instead. dbt keeps the user's name for
    everything it renders; a connection can never reach the user's database during the block."""
    import dbt.adapters.postgres.connections as dbt_pg

    if getattr(dbt_pg, "psycopg2", None) is not psycopg2:
        raise SandboxError("dbt-postgres does not connect through psycopg2.connect here: refusing to run it "
                           "against a sandbox whose connections could not be redirected")
    original = psycopg2.connect

    def connect(*args, **kwargs):
        if args or "dsn" in kwargs:
            raise SandboxError("a connection string reached psycopg2 during a sandbox run: refused")
        if kwargs.get("dbname", kwargs.get("database")) == user_db:
            kwargs.pop("database", None)
            kwargs["dbname"] = sandbox_db
        return original(**kwargs)

    psycopg2.connect = connect
    try:
        yield
    finally:
        psycopg2.connect = original


REFUSED_PREFIX = "refused in the sandbox: "
_SERVER_FILE_FUNCTIONS = ("lo_export", "pg_file_write", "pg_file_rename", "pg_file_unlink")


def refuse_server_files(sql: str) -> str:
    """`sql`, unless it writes a file on the database server or runs a program there (a hook's
    `copy (...) to '/exports/x.csv'`, `copy ... to program`, lo_export, adminpack's pg_file_write):
    then an error, which fails the model in the sandbox and is judged a side effect of its hook
    (verdict.failed_result). A superuser's sandbox run would otherwise rewrite the server's file."""
    low = sql.lower()
    if "copy" not in low and not any(f in low for f in _SERVER_FILE_FUNCTIONS):
        return sql
    from dbt_common.exceptions import DbtRuntimeError
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.tokens import TokenType

    try:
        tokens = Dialect.get_or_raise("postgres").tokenize(sql)
    except Exception:  # noqa: BLE001 - a statement we cannot read is not sent
        raise DbtRuntimeError(f"{REFUSED_PREFIX}a statement the sandbox cannot read (it may write a server file)") \
            from None
    in_copy = False
    for i, tok in enumerate(tokens):
        text = tok.text.lower()
        if tok.token_type == TokenType.SEMICOLON:
            in_copy = False
        elif tok.token_type == TokenType.COPY or (tok.token_type == TokenType.VAR and text == "copy"):
            in_copy = True
        elif in_copy and text == "to" and i + 1 < len(tokens):
            target = tokens[i + 1]
            if target.token_type == TokenType.STRING:
                raise DbtRuntimeError(f'{REFUSED_PREFIX}the statement writes the server file "{target.text}" '
                                      "(COPY ... TO a file)")
            if target.text.lower() == "program":
                raise DbtRuntimeError(f"{REFUSED_PREFIX}the statement runs a program on the server (COPY ... TO PROGRAM)")
        elif text in _SERVER_FILE_FUNCTIONS and i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN:
            raise DbtRuntimeError(f"{REFUSED_PREFIX}the statement writes a server file ({text}())")
    return sql


def map_database(sql: str, user_db: str, sandbox_db: str) -> str:
    """`sql` with each three-part (or longer) name that starts with the user's database pointed at
    the sandbox database, which is where the statement runs (PostgreSQL refuses a database part
    other than the current one). Works on tokens: strings, comments and other names stay as they
    are, so a model that writes the database name into its rows still writes the user's."""
    if user_db.lower() not in sql.lower():
        return sql
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.tokens import TokenType

    try:
        tokens = Dialect.get_or_raise("postgres").tokenize(sql)
    except Exception:  # noqa: BLE001 - sent as it is: PostgreSQL then refuses the foreign name
        return sql
    names = (TokenType.IDENTIFIER, TokenType.VAR)
    replacement = '"{}"'.format(sandbox_db.replace('"', '""'))
    edits = []
    for i, tok in enumerate(tokens[:-3]):
        if tok.token_type not in names or (i and tokens[i - 1].token_type == TokenType.DOT):
            continue
        if not (tokens[i + 1].token_type == TokenType.DOT and tokens[i + 3].token_type == TokenType.DOT):
            continue
        quoted = tok.token_type == TokenType.IDENTIFIER
        if (tok.text == user_db) if quoted else (tok.text.lower() == user_db):
            edits.append((tok.start, tok.end))
    if not edits:
        return sql
    parts, pos = [], 0
    for start, end in edits:
        parts += [sql[pos:start], replacement]
        pos = end + 1
    parts.append(sql[pos:])
    return "".join(parts)
