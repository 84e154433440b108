"""The diff's read-only DuckDB: every side's file attached read-only to one in-memory connection."""
from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Sequence

from sqlglot import exp

from ...errors import ConfigError, DiffError, first_line
from ..base import Connection


def errors() -> tuple[type, ...]:
    import duckdb

    return (duckdb.Error,)


def location(target: dict, catalog: str | None, text: str) -> str:
    """The file a side `[db.]schema.table` of the profile's target is in."""
    path = str(target.get("path") or "")
    if not path or path == ":memory:" or path.startswith(("md:", "motherduck:")):
        raise ConfigError(f"the profile's DuckDB path '{path or ':memory:'}' is not a file")
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"DuckDB file {file} (from the profile's path) does not exist")
    if catalog is not None and catalog != file.stem:
        raise ConfigError(f"side '{text}': database '{catalog}' is not the target's '{file.stem}'; "
                          "use path/to/file.duckdb:schema.table for another file")
    return str(file.resolve())


def target_columns(output: dict) -> list[tuple]:
    """(schema, table, column, type) of every relation of the profile's file and the files it
    attaches, read only ([] when the file does not exist)."""
    import duckdb

    path = str(output.get("path") or "")
    if not path or path == ":memory:" or path.startswith("md:") or not Path(path).exists():
        return []
    con = duckdb.connect(path, read_only=True)
    try:
        for att in output.get("attach") or []:
            apath = str(att.get("path") or "")
            if apath and Path(apath).exists():
                alias = att.get("alias") or Path(apath).stem
                con.execute(f"attach if not exists ? as {exp.to_identifier(str(alias), quoted=True).sql('duckdb')} "
                            "(read_only)", [apath])
        return con.execute("select table_schema, table_name, column_name, data_type from information_schema.columns "
                           "order by table_catalog, table_schema, table_name, ordinal_position").fetchall()
    finally:
        con.close()


def open_sides(places: Sequence[tuple[str, str, str]], cond, target: dict,
               stack: ExitStack) -> list[tuple[Connection, exp.Table]]:
    """(connection, table) of each (file, schema, name), read-only."""
    import duckdb

    from .engine import DuckDBConnection

    con = DuckDBConnection(":memory:")
    stack.callback(con.close)
    con.execute("set enable_progress_bar = false")
    aliases: dict[str, str] = {}
    out = []
    for file, schema, name in places:
        if file not in aliases:
            alias = f"rs_side_{len(aliases)}"
            try:
                con.execute(f"attach {exp.Literal.string(file).sql('duckdb')} as "
                            f"{exp.to_identifier(alias, quoted=True).sql('duckdb')} (read_only)")
            except duckdb.Error as err:
                raise DiffError(f"cannot open {file} read-only: {first_line(err)}") from None
            aliases[file] = alias
        out.append((con, exp.Table(this=exp.to_identifier(name, quoted=True), db=exp.to_identifier(schema, quoted=True),
                                   catalog=exp.to_identifier(aliases[file], quoted=True))))
    return out
