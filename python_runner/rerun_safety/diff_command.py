"""`rerun-safety diff LEFT RIGHT`: open both sides read-only, compare them, render the result.

A side is `schema.table` in the profile's target (`db.schema.table` names another database on
the same PostgreSQL server), or `path/to/file.duckdb:schema.table`. DuckDB sides are attached
read-only to one in-memory connection; PostgreSQL sides use connections with
`default_transaction_read_only=on`, one per database; Spark sides (`type: spark`, method session
or thrift) are tables of the Spark catalog as it is, read through one connection that lets only
SELECT, DESCRIBE and SHOW through. Float columns are equal within a relative
tolerance (`--float-tolerance`, default `DEFAULT_FLOAT_TOLERANCE`, 0 for exact).
"""
from __future__ import annotations

import json
import logging
import re
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from .diff import DiffError, DiffResult, Side, compare, parse_where
from .errors import ConfigError, RerunSafetyError, printable
from .errors import first_line as _first_line

_DUCKDB_SUFFIXES = (".duckdb", ".db", ".ddb")


@dataclass(frozen=True)
class SideSpec:
    text: str
    engine: str  # duckdb | postgres | spark
    location: str  # DuckDB file path, PostgreSQL database name, "" on Spark
    catalog: str | None
    schema: str
    name: str

    @property
    def label(self) -> str:
        return self.text


@dataclass(frozen=True)
class DiffCommandResult:
    left: str
    right: str
    key: tuple[str, ...]
    diff: DiffResult
    all_columns: bool = False  # show the sampled rows of changed keys whole, not only what changed

    @property
    def identical(self) -> bool:
        return self.diff.identical and not self.diff.type_changes

    @property
    def exit_code(self) -> int:
        return 0 if self.identical else 1

    def to_dict(self) -> dict:
        d = self.diff
        keyed = d.keyed
        out = {
            "identical": self.identical,
            "left": self.left,
            "right": self.right,
            "key": list(self.key),
            "left_rows": d.reference_rows,
            "right_rows": d.rows,
            "only_left": d.missing_keys if keyed else d.missing_rows,
            "only_right": d.extra_keys if keyed else d.extra_rows,
            "changed": d.changed_keys if keyed else 0,
            "rows_only_left": d.missing_rows,
            "rows_only_right": d.extra_rows,
        }
        if keyed:
            out["duplicate_keys_left"] = d.reference_duplicate_keys
            out["duplicate_keys_right"] = d.duplicate_keys
        out["schema"] = d.schema_message
        out["type_changes"] = list(d.type_changes)
        out["differing_columns"] = list(d.differing_columns)
        if d.differing_partitions:
            out["differing_partitions"] = [{"partition": p, "left_rows": lc, "right_rows": rc}
                                           for p, lc, rc in d.differing_partitions]
        out["sample"] = [dict(r, _diff="only_left" if r["_diff"] == "missing" else "only_right") for r in d.sample]
        out["changed_sample"] = changed_sample(out["sample"], self.key)
        out["buckets"] = {"bucketing": d.bucketing, "buckets": d.buckets, "differing": d.buckets_differing}
        out["float_tolerance"] = d.float_tolerance
        return out


# ----------------------------------------------------------------------------- sides

def parse_side(text: str, target: dict | None, dialect_hint: str | None = None) -> SideSpec:
    """`file.duckdb:schema.table`, or `[db.]schema.table` in the profile's target."""
    path, sep, rel = text.rpartition(":")
    if sep and path and (path.lower().endswith(_DUCKDB_SUFFIXES) or Path(path).is_file()):
        file = Path(path).expanduser()
        if not file.is_file():
            raise ConfigError(f"side '{text}': DuckDB file {file} does not exist")
        catalog, schema, name = _parts(rel, "duckdb", text)
        if catalog is not None:
            raise ConfigError(f"side '{text}': give schema.table after the file name")
        return SideSpec(text, "duckdb", str(file.resolve()), None, schema or "main", name)
    if target is None:
        raise ConfigError(f"side '{text}' names no DuckDB file and no dbt profile was found: "
                          "pass --project-dir/--profiles-dir or use path/to/file.duckdb:schema.table")
    kind = target.get("type")
    catalog, schema, name = _parts(text, kind, text)
    default_schema = target.get("schema") or {"duckdb": "main", "spark": "default"}.get(kind, "public")
    if kind == "spark":
        # Spark has no level above the schema (its session catalog is `spark_catalog`)
        if catalog is not None and catalog.lower() != "spark_catalog":
            raise ConfigError(f"side '{text}': Spark tables are schema.table (no database above the schema)")
        return SideSpec(text, "spark", "", None, schema or default_schema, name)
    if kind not in ("duckdb", "postgres"):
        raise ConfigError(f"the profile's target is type '{kind}': diff reads duckdb, postgres and spark targets")
    if kind == "duckdb":
        path = str(target.get("path") or "")
        if not path or path == ":memory:" or path.startswith(("md:", "motherduck:")):
            raise ConfigError(f"the profile's DuckDB path '{path or ':memory:'}' is not a file")
        file = Path(path).expanduser()
        if not file.is_file():
            raise ConfigError(f"DuckDB file {file} (from the profile's path) does not exist")
        if catalog is not None and catalog != file.stem:
            raise ConfigError(f"side '{text}': database '{catalog}' is not the target's '{file.stem}'; "
                              "use path/to/file.duckdb:schema.table for another file")
        return SideSpec(text, "duckdb", str(file.resolve()), None, schema or default_schema, name)
    dbname = target.get("dbname") or target.get("database")
    return SideSpec(text, "postgres", catalog or dbname, None, schema or default_schema, name)


def _parts(rel: str, dialect: str, text: str) -> tuple[str | None, str | None, str]:
    try:
        table = exp.to_table(rel, dialect=dialect)
    except (ParseError, TokenError, ValueError):
        table = None
    if table is None or not isinstance(table, exp.Table) or not table.name or len(table.parts) > 3:
        raise ConfigError(f"side '{text}' is not schema.table or path/to/file.duckdb:schema.table")
    return (table.catalog or None), (table.db or None), table.name


def _load_target(project_dir: str | None, profiles_dir: str | None, target: str | None) -> dict:
    from .project import load_target_output, resolve_profiles_dir

    _, _, output = load_target_output(Path(project_dir or "."), resolve_profiles_dir(profiles_dir), target, {})
    return output


def _needs_profile(text: str) -> bool:
    path, sep, _ = text.rpartition(":")
    return not (sep and path and (path.lower().endswith(_DUCKDB_SUFFIXES) or Path(path).is_file()))


# ----------------------------------------------------------------------------- run

def parse_float_tolerance(value: str | float | None) -> float | None:
    """`--float-tolerance`: a number >= 0 and < 1 (None: the default)."""
    if value is None:
        return None
    try:
        tolerance = float(value)
    except (TypeError, ValueError):
        tolerance = float("nan")
    if not 0 <= tolerance < 1:  # also NaN
        raise ConfigError(f"--float-tolerance must be a relative tolerance >= 0 and < 1 (0 compares floats "
                          f"exactly), e.g. 1e-9; got '{value}'")
    return tolerance


def run_diff(left: str, right: str, *, key: tuple[str, ...] = (), partition_by: str | None = None,
             where: str | None = None, project_dir: str | None = None, profiles_dir: str | None = None,
             target: str | None = None, float_tolerance: str | float | None = None) -> DiffCommandResult:
    tolerance = parse_float_tolerance(float_tolerance)
    target_output = None
    if _needs_profile(left) or _needs_profile(right):
        target_output = _load_target(project_dir, profiles_dir, target)
    specs = [parse_side(left, target_output), parse_side(right, target_output)]
    engines = {s.engine for s in specs}
    if len(engines) != 1:
        names = {"duckdb": "a DuckDB", "postgres": "a PostgreSQL", "spark": "a Spark"}
        raise ConfigError(f"cannot compare {names[specs[0].engine]} relation with {names[specs[1].engine]} relation")
    engine = engines.pop()
    key = tuple(k for part in key for k in part.split(",") if k.strip()) if key else ()
    key = tuple(k.strip() for k in key)
    cond = parse_where(where, engine)
    with ExitStack() as stack:
        if engine == "duckdb":
            sides = _duckdb_sides(specs, cond, stack)
        elif engine == "spark":
            sides = _spark_sides(specs, cond, target_output or {}, stack)
        else:
            sides = _postgres_sides(specs, cond, target_output or {}, stack)
        try:
            result = compare(sides[0], sides[1], key=key, bucket_column=partition_by, strict=True,
                             float_tolerance=tolerance)
        except RerunSafetyError:
            raise
        except Exception as err:  # a database error: a bad column in --where, a permission, ...
            if not _is_db_error(err):
                raise
            raise DiffError(f"query failed: {_first_line(err)}") from None
    return DiffCommandResult(left, right, key, result)


def _is_db_error(err: Exception) -> bool:
    import duckdb
    import psycopg2

    return isinstance(err, (duckdb.Error, psycopg2.Error) + _spark_errors())


def _spark_errors() -> tuple[type, ...]:
    """Spark's error types (in-process Spark, the JVM bridge, PyHive/Thrift), those installed."""
    found: list[type] = []
    for module, name in (("pyspark.errors", "PySparkException"), ("py4j.protocol", "Py4JError"),
                         ("pyhive.exc", "Error"), ("thrift.Thrift", "TException")):
        try:
            found.append(getattr(__import__(module, fromlist=[name]), name))
        except (ImportError, AttributeError):
            pass
    return tuple(found)


def _duckdb_sides(specs: list[SideSpec], cond, stack: ExitStack) -> list[Side]:
    import duckdb

    from .sandbox.duckdb import DuckDBConnection

    con = DuckDBConnection(":memory:")
    stack.callback(con.close)
    con.execute("set enable_progress_bar = false")
    aliases: dict[str, str] = {}
    sides = []
    for spec in specs:
        if spec.location not in aliases:
            alias = f"rs_side_{len(aliases)}"
            try:
                con.execute(f"attach {exp.Literal.string(spec.location).sql('duckdb')} as "
                            f"{exp.to_identifier(alias, quoted=True).sql('duckdb')} (read_only)")
            except duckdb.Error as err:
                raise DiffError(f"cannot open {spec.location} read-only: {_first_line(err)}") from None
            aliases[spec.location] = alias
        table = exp.Table(this=exp.to_identifier(spec.name, quoted=True), db=exp.to_identifier(spec.schema, quoted=True),
                          catalog=exp.to_identifier(aliases[spec.location], quoted=True))
        sides.append(Side(con, table, cond, spec.text))
    return sides


def _refuse_volatile(con, cond) -> None:
    """--where may call only functions that PostgreSQL marks immutable or stable in this database
    (user-defined ones included): a volatile one could change settings or data."""
    from .diff.sql import where_functions

    names = sorted(set(where_functions(cond, "postgres"))) if cond is not None else []
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


def _postgres_sides(specs: list[SideSpec], cond, target: dict, stack: ExitStack) -> list[Side]:
    from .sandbox.postgres import _CONNECT_KEYS, PgConnection
    from .secrets import password_of

    params = {k: target[k] for k in _CONNECT_KEYS if target.get(k) not in (None, "")}
    if password_of(target) is not None:
        params["password"] = password_of(target)  # `password:` or dbt-postgres's `pass:`
    cons: dict[str, PgConnection] = {}
    sides = []
    for spec in specs:
        if spec.location not in cons:
            # every statement in a READ ONLY transaction (see PgConnection)
            con = PgConnection(params, spec.location, read_only=True)
            stack.callback(con.close)
            cons[spec.location] = con
            _refuse_volatile(con, cond)
        table = exp.Table(this=exp.to_identifier(spec.name, quoted=True), db=exp.to_identifier(spec.schema, quoted=True))
        sides.append(Side(cons[spec.location], table, cond, spec.text))
    return sides


_SPARK_READS = re.compile(r"\s*(select|with|describe|show)\b", re.IGNORECASE)
# the one session setting the diff changes for a query and puts back (diff/rows.py)
_SPARK_SETTING = re.compile(r"(set|reset) spark\.sql\.constraintPropagation\.enabled(=(true|false))?")

# Spark functions a filter never needs: calls into Java, raised errors, and values that change
# from one read to the next (the checksums and the re-read of differing buckets must agree).
_SPARK_UNSAFE = {"reflect", "java_method", "try_reflect", "raise_error", "assert_true", "randn", "shuffle",
                 "monotonically_increasing_id", "spark_partition_id", "input_file_name", "input_file_block_start",
                 "input_file_block_length", "current_timestamp", "now", "localtimestamp", "current_date",
                 "unix_timestamp", "curdate"}


class _ReadOnlySparkBackend:
    """A Spark backend that runs only reads: the diff never creates, alters or drops anything."""

    def __init__(self, backend):
        self._backend = backend

    def run(self, sql: str):
        if not (_SPARK_READS.match(sql) or _SPARK_SETTING.fullmatch(sql)):
            raise DiffError(f"refusing a statement that is not a read on Spark: {sql.strip()[:60]}")
        return self._backend.run(sql)

    def close(self) -> None:
        self._backend.close()


def _derby_metastore(params: dict) -> Path | None:
    """The embedded Derby metastore an in-process Spark would open, or None (another metastore)."""
    url = params.get("spark.hadoop.javax.jdo.option.ConnectionURL")
    if url is None:
        return Path("metastore_db").resolve()  # Hive's default: the working directory
    m = re.match(r"jdbc:derby:(?:;databaseName=)?([^;]+)", str(url))
    return Path(m.group(1)).expanduser().resolve() if m else None


def _spark_session_running() -> bool:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return False
    return SparkSession.getActiveSession() is not None


def _spark_sides(specs: list[SideSpec], cond, target: dict, stack: ExitStack) -> list[Side]:
    from .sandbox.spark import SparkConnection, make_backend

    if str(target.get("method") or "") == "session":
        params = {str(k): str(v) for k, v in (target.get("server_side_parameters") or {}).items()}
        if params.get("spark.sql.catalogImplementation", "").strip().lower() == "in-memory":
            # no metastore: the tables are those of a Spark session this process runs already
            if not _spark_session_running():
                raise ConfigError("the Spark target's catalog is in-memory (spark.sql.catalogImplementation): a new "
                                  "Spark session would have no tables to compare; use a Hive metastore or method thrift")
        elif (metastore := _derby_metastore(params)) is not None and not metastore.is_dir():
            # Hive would create an empty catalog there: nothing to compare, and a folder left behind
            raise ConfigError(f"no Spark catalog at {metastore}: method session reads the Hive metastore of the "
                              "working directory (as dbt-spark does); run from the dbt project's folder or set "
                              "spark.hadoop.javax.jdo.option.ConnectionURL in server_side_parameters")
    _quiet_spark_errors(stack)
    backend = _ReadOnlySparkBackend(make_backend(target))
    stack.callback(backend.close)
    con = SparkConnection(backend, None, set())
    if cond is not None:
        _refuse_spark_functions(con, cond)
    return [Side(con, exp.Table(this=exp.to_identifier(s.name, quoted=True), db=exp.to_identifier(s.schema, quoted=True)),
                 cond, s.text) for s in specs]


def _quiet_spark_errors(stack: ExitStack) -> None:
    """pyspark 4 logs every failed query's error with its JVM stack to stderr; the diff reports
    it as one line (`query failed: ...`), so those loggers are silenced while it runs."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:
        return
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logger = PySparkLogger.getLogger(name)
        stack.callback(logger.setLevel, logger.level)
        logger.setLevel(logging.CRITICAL)


def _refuse_spark_functions(con, cond) -> None:
    """--where may call Spark's built-in functions that only compute a value; not a user function
    of the catalog (a Hive UDF may do anything)."""
    from .diff.sql import where_functions

    names = sorted(set(where_functions(cond, "spark")))
    bad = [n for n in names if n in _SPARK_UNSAFE]
    if not bad and names:
        users = {str(r[0]).lower().rsplit(".", 1)[-1] for r in con.fetchall("show user functions")}
        bad = [n for n in names if n in users]
    if bad:
        raise DiffError(f"--where may not call {bad[0]}(): a filter reads rows; it cannot call Java, raise errors, "
                        "use values that change between reads or call the catalog's own functions")


# ----------------------------------------------------------------------------- renderers

def _key_of(row: dict, key: tuple[str, ...]) -> tuple:
    return tuple(repr(row.get(k)) for k in key)


def changed_sample(sample: list[dict], key: tuple[str, ...]) -> list[dict]:
    """The sampled keys present on both sides, once each: the key, then each column whose value
    differs as [left, right]."""
    if not key:
        return []
    left = {_key_of(r, key): r for r in sample if r["_diff"] == "only_left"}
    out = []
    for r in sample:
        other = left.get(_key_of(r, key)) if r["_diff"] == "only_right" else None
        if other is None:
            continue
        cols = {c: [other.get(c), r.get(c)] for c in r if c != "_diff" and c not in key and other.get(c) != r.get(c)}
        out.append({"key": {k: r.get(k) for k in key}, "columns": cols})
    return out


def _rows_to_show(result: DiffCommandResult, d: dict) -> list[dict]:
    """Sampled rows shown whole: those of keys only on one side (every row with --all-columns)."""
    if result.all_columns or not d["changed_sample"]:
        return d["sample"]
    changed = {tuple(repr(v) for v in c["key"].values()) for c in d["changed_sample"]}
    return [r for r in d["sample"] if _key_of(r, result.key) not in changed]


def _keyed(values: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in values.items())


def render_json(result: DiffCommandResult) -> str:
    return json.dumps(result.to_dict(), indent=2, default=str)


def _summary_lines(result: DiffCommandResult) -> list[tuple[str, str]]:
    d = result.to_dict()
    unit = "keys" if result.key else "rows"
    lines = [("left rows", f"{d['left_rows']:,}"), ("right rows", f"{d['right_rows']:,}"),
             (f"only left ({unit})", f"{d['only_left']:,}"), (f"only right ({unit})", f"{d['only_right']:,}")]
    if result.key:
        lines += [("changed keys", f"{d['changed']:,}"),
                  ("duplicate keys left", f"{d['duplicate_keys_left']:,}"),
                  ("duplicate keys right", f"{d['duplicate_keys_right']:,}"),
                  ("rows only left", f"{d['rows_only_left']:,}"), ("rows only right", f"{d['rows_only_right']:,}")]
    if d["schema"]:
        lines.append(("schema", d["schema"]))
    if d["type_changes"]:
        lines.append(("type changes", "; ".join(d["type_changes"])))
    if d["differing_columns"]:
        lines.append(("differing columns", ", ".join(d["differing_columns"])))
    return lines


def render_text(result: DiffCommandResult) -> str:
    head = "identical" if result.identical else "DIFFERENT"
    out = [f"{result.left} vs {result.right}: {head}"]
    width = max(len(k) for k, _ in _summary_lines(result))
    out += [f"  {k:<{width}}  {v}" for k, v in _summary_lines(result)]
    d = result.to_dict()
    for p in d.get("differing_partitions", [])[:20]:
        out.append(f"  partition {p['partition']}: left {p['left_rows']:,}, right {p['right_rows']:,}")
    if d["changed_sample"]:
        out.append("  changed keys (sample; left -> right):")
        for c in d["changed_sample"]:
            changes = "; ".join(f"{col} {lv!r} -> {rv!r}" for col, (lv, rv) in c["columns"].items())
            out.append(f"    {_keyed(c['key'])}: {changes}")
    rows = _rows_to_show(result, d)
    if rows:
        out.append("  sample:")
        for row in rows:
            side = row["_diff"]
            body = ", ".join(f"{k}={v!r}" for k, v in row.items() if k != "_diff")
            out.append(f"    {side:<10} {body}")
    return printable("\n".join(out))


def _md_cell(value) -> str:
    from .report.markdown import md

    return md(value)


def render_md(result: DiffCommandResult) -> str:
    """A pull-request comment: every name and value escaped as the game day's report.md escapes them."""
    from .report.markdown import md_code

    head = "identical" if result.identical else "**different**"
    out = [f"### `{md_code(result.left)}` vs `{md_code(result.right)}`: {head}", "", "| | |", "|---|---:|"]
    out += [f"| {_md_cell(k)} | {_md_cell(v)} |" for k, v in _summary_lines(result)]
    d = result.to_dict()
    if d["changed_sample"]:
        out += ["", "| key | column | left | right |", "|---|---|---|---|"]
        for c in d["changed_sample"]:
            for col, (lv, rv) in c["columns"].items():
                out.append(f"| {_md_cell(_keyed(c['key']))} | {_md_cell(col)} | {_md_cell(lv)} | {_md_cell(rv)} |")
    rows = _rows_to_show(result, d)
    if rows:
        cols = [k for k in rows[0] if k != "_diff"]
        out += ["", "| side | " + " | ".join(_md_cell(c) for c in cols) + " |",
                "|---|" + "---|" * len(cols)]
        for row in rows:
            out.append(f"| {row['_diff']} | " + " | ".join(_md_cell(row.get(c)) for c in cols) + " |")
    return "\n".join(out)


RENDERERS = {"text": render_text, "json": render_json, "md": render_md}

__all__ = ["DiffCommandResult", "RENDERERS", "parse_float_tolerance", "parse_side", "run_diff"]
