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
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from .diff import DiffError, DiffResult, Side, compare, parse_where
from .errors import ConfigError, RerunSafetyError, printable
from .errors import first_line as _first_line
from .warehouse.dialects import dialect_for
from .warehouse.engines import database_errors, reader_for

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
    kind = str(target.get("type") or "")
    reader = reader_for(kind)
    catalog, schema, name = _parts(text, dialect_for(kind), text)
    location = reader.location(target, catalog, text)
    return SideSpec(text, kind, location, None, schema or target.get("schema") or dialect_for(kind).default_schema, name)


def _parts(rel: str, dialect: str, text: str) -> tuple[str | None, str | None, str]:
    try:
        table = exp.to_table(rel, dialect=dialect)
    except (ParseError, TokenError, ValueError):
        table = None
    if table is None or not isinstance(table, exp.Table) or not table.name or len(table.parts) > 3:
        raise ConfigError(f"side '{text}' is not schema.table or path/to/file.duckdb:schema.table")
    return (table.catalog or None), (table.db or None), table.name


def _load_target(project_dir: str | None, profiles_dir: str | None, target: str | None) -> dict:
    from .profiles import load_target_output, resolve_profiles_dir

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
        a, b = (dialect_for(s.engine).display_name for s in specs)
        raise ConfigError(f"cannot compare a {a} relation with a {b} relation")
    engine = engines.pop()
    key = tuple(k for part in key for k in part.split(",") if k.strip()) if key else ()
    key = tuple(k.strip() for k in key)
    cond = parse_where(where, dialect_for(engine))
    with ExitStack() as stack:
        opened = reader_for(engine).open_sides([(s.location, s.schema, s.name) for s in specs], cond,
                                               target_output or {}, stack)
        sides = [Side(con, table, cond, spec.text) for (con, table), spec in zip(opened, specs)]
        try:
            result = compare(sides[0], sides[1], key=key, bucket_column=partition_by, strict=True,
                             float_tolerance=tolerance)
        except RerunSafetyError:
            raise
        except Exception as err:  # a database error: a bad column in --where, a permission, ...
            if not isinstance(err, database_errors()):
                raise
            raise DiffError(f"query failed: {_first_line(err)}") from None
    return DiffCommandResult(left, right, key, result)


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
