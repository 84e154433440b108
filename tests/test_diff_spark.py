"""`rerun-safety diff` on Spark tables, with the same answers as on DuckDB for the same rows.

Every table is built from one Python list of rows on both engines; the Spark side is the test
process's in-process Spark (dbt-spark `method: session`), read through a profile like a user's.
One test runs against a standalone cluster's Thrift server (`method: thrift`).
"""
from __future__ import annotations

import json

import duckdb
import pytest
import yaml
from click.testing import CliRunner

from support.spark import require_spark, spark_profile, spark_query, unique_schema
from support.common import write_profiles
from rerun_safety.cli import main

COLUMNS = "id int, a int, b string, c string, f double"
N = None

# keyed: 1 same; 2 changed (a); 3 only left; 4 twice on the right; 5 float moved within the
# tolerance; 6 float moved beyond it; 7 only right
KEYED_LEFT = [(1, 10, "x", N, 1.5), (2, 20, "y", N, 2.5), (3, N, "z", N, 0.1), (4, 40, N, "w", 100.0),
              (5, 50, "v", N, 1e6), (6, 60, "u", N, 3.0)]
KEYED_RIGHT = [(1, 10, "x", N, 1.5), (2, 21, "y", N, 2.5), (4, 40, N, "w", 100.0), (4, 40, N, "w", 100.0),
               (5, 50, "v", N, 1e6 * (1 + 1e-12)), (6, 60, "u", N, 3.0 * (1 + 1e-6)), (7, 70, "t", N, N)]
KEYED = {"identical": False, "left_rows": 6, "right_rows": 7, "only_left": 1, "only_right": 1, "changed": 2,
         "duplicate_keys_left": 0, "duplicate_keys_right": 1, "rows_only_left": 3, "rows_only_right": 4}

# no key: NULLs in several columns ((NULL, 1) is not (1, NULL), in ints and in strings), a row
# twice on one side, a float within the tolerance
LOOSE_LEFT = [(N, 1, "x", N, 1.0), (1, N, "x", N, 1.0), (N, N, N, N, N), (2, 2, "p", N, N), (2, 2, "p", N, N),
              (4, 4, "s", N, 2.0)]
LOOSE_RIGHT = [(1, N, "x", N, 1.0), (1, N, "x", N, 1.0), (N, N, N, N, N), (2, 2, "p", N, N), (4, 4, N, "s", 2.0),
               (4, 4, "s", N, 2.0 * (1 + 1e-12))]
UNKEYED = {"identical": False, "left_rows": 6, "right_rows": 6, "only_left": 2, "only_right": 2, "changed": 0}
UNKEYED_EXACT = {**UNKEYED, "only_left": 3, "only_right": 3}  # --float-tolerance 0: the moved float differs

TABLES = {"kl": KEYED_LEFT, "kr": KEYED_RIGHT, "ul": LOOSE_LEFT, "ur": LOOSE_RIGHT, "same": KEYED_LEFT}


def _literal(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, float):
        return f"cast('{v!r}' as double)"
    return repr(v) if isinstance(v, int) else "'" + v.replace("'", "''") + "'"


def _values(rows) -> str:
    return ", ".join("(" + ", ".join(_literal(v) for v in r) + ")" for r in rows)


def _select(rows) -> str:
    """The rows as a query with COLUMNS' names and types (one statement per table on Spark)."""
    cols = ", ".join(f"cast(col{i + 1} as {c.split()[1]}) as {c.split()[0]}" for i, c in enumerate(COLUMNS.split(", ")))
    return f"select {cols} from values {_values(rows)}"


def _project(tmp_path, output: dict) -> list[str]:
    project = tmp_path / "proj"
    project.mkdir(exist_ok=True)
    (project / "dbt_project.yml").write_text(yaml.safe_dump({"name": "p", "profile": "p", "version": "1"}))
    write_profiles(project, "p", output)
    return ["--project-dir", str(project), "--profiles-dir", str(project)]


@pytest.fixture(scope="module")
def spark_tables(tmp_path_factory):
    """The tables on Spark (schema `schema`) and in a DuckDB file, and the CLI arguments of both."""
    require_spark()
    tmp = tmp_path_factory.mktemp("diff_spark")
    schema = unique_schema("diff")
    spark_query(f"create database {schema}")
    path = tmp / "w.duckdb"
    con = duckdb.connect(str(path))
    try:
        for name, rows in TABLES.items():
            spark_query(f"create table {schema}.{name} using parquet as {_select(rows)}")
            con.execute(f"create table {name} ({COLUMNS.replace('string', 'varchar')})")
            con.execute(f"insert into {name} values {_values(rows)}")
    finally:
        con.close()
    before = set(spark_query(f"show tables in {schema}"))
    yield {"schema": schema, "args": _project(tmp, spark_profile(schema)), "duckdb": str(path)}
    # the diff read the catalog and created nothing in it
    assert set(spark_query(f"show tables in {schema}")) == before
    spark_query(f"drop database {schema} cascade")


def _run(args: list[str]) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["diff", *args])
    return res.exit_code, res.output


def _both(env: dict, left: str, right: str, *extra: str) -> tuple[dict, dict]:
    """The JSON answer on Spark (sides `schema.table`) and on DuckDB; each with its exit code."""
    out = []
    for sides in ([f"{env['schema']}.{left}", right], [f"{env['duckdb']}:main.{left}", f"{env['duckdb']}:main.{right}"]):
        code, text = _run([*sides, "--format", "json", *extra, *env["args"]])
        assert code in (0, 1), text
        out.append({"exit": code, **json.loads(text)})
    return out[0], out[1]


def row_counts(d: dict, fields: dict) -> dict:
    return {k: d[k] for k in fields}


def test_identical(spark_tables):
    # the right side is a bare name: the target's schema
    spark, duck = _both(spark_tables, "kl", "same", "--key", "id")
    assert (spark["exit"], duck["exit"]) == (0, 0)
    assert row_counts(spark, KEYED) == row_counts(duck, KEYED) == {**dict.fromkeys(KEYED, 0), "identical": True,
                                                             "left_rows": 6, "right_rows": 6}
    assert spark["buckets"]["buckets"] == 1  # one checksum scan decided it


def test_keyed_differences(spark_tables):
    spark, duck = _both(spark_tables, "kl", "kr", "--key", "id")
    assert row_counts(spark, KEYED) == row_counts(duck, KEYED) == KEYED
    assert spark["exit"] == duck["exit"] == 1
    assert spark["differing_columns"] == duck["differing_columns"] == ["a", "f"]
    assert sorted(r["id"] for r in spark["sample"]) == sorted(r["id"] for r in duck["sample"]) == [2, 2, 3, 4, 6, 6, 7]


@pytest.mark.parametrize("extra, expected", [((), UNKEYED), (("--float-tolerance", "0"), UNKEYED_EXACT)])
def test_unkeyed_multisets_with_nulls_and_floats(spark_tables, extra, expected):
    spark, duck = _both(spark_tables, "ul", "ur", *extra)
    assert row_counts(spark, expected) == row_counts(duck, expected) == expected
    assert spark["rows_only_left"] == expected["only_left"]
    rows = [sorted(repr((r["id"], r["a"], r["b"], r["c"])) for r in d["sample"] if r["_diff"] == "only_left")
            for d in (spark, duck)]
    assert rows[0] == rows[1] and len(rows[0]) == expected["only_left"]


def test_text_output_and_partitions(spark_tables):
    s = spark_tables["schema"]
    code, text = _run([f"{s}.kl", f"{s}.kr", "--key", "id", "--partition-by", "a", *spark_tables["args"]])
    assert code == 1 and text.splitlines()[0] == f"{s}.kl vs {s}.kr: DIFFERENT"
    assert "  partition 20: left 1, right 0" in text and "  partition 21: left 0, right 1" in text


@pytest.mark.parametrize("args, message", [
    (["{s}.kl", "{s}.nope"], "relation {s}.nope does not exist"),
    (["kl", "kr", "--where", "nope > 1"], "query failed: [UNRESOLVED_COLUMN"),
    (["kl", "kr", "--where", "reflect('java.lang.System', 'exit', 1) is null"], "may not call reflect()"),
    (["kl", "kr", "--where", "a > 1; drop table kl"], "without semicolons"),
    (["x.y.kl", "kr"], "no database above the schema"),
])
def test_bad_input_exits_2_with_one_line(spark_tables, args, message):
    s = spark_tables["schema"]
    code, text = _run([a.format(s=s) for a in args] + spark_tables["args"])
    lines = [line for line in text.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and message.format(s=s) in lines[0], text


def test_where_filters_both_sides(spark_tables):
    spark, duck = _both(spark_tables, "kl", "kr", "--key", "id", "--where", "id <= 2 or id = 5")
    assert row_counts(spark, KEYED) == row_counts(duck, KEYED)
    assert (spark["left_rows"], spark["right_rows"], spark["changed"], spark["only_left"]) == (3, 3, 1, 0)


# 3,000 rows over many buckets (range buckets of the key, or of a column without one): every 97th
# row changed (31, same count in its bucket), every 250th missing (12), 40 ids added, every 300th
# row twice on the right (10); the row values as SQL over `range(3000)` (column `id` on both engines)
_MANY = ("select id, cast(id % 7 as int) as a, concat('s', cast(id % 13 as string)) as b, "
         "cast(null as string) as c, cast(id as double) / 3 as f from range(3000)")
_MANY_RIGHT = ("select id, case when id % 97 = 5 then a + 1 else a end as a, b, c, f from many_l "
               "where id % 250 <> 7 union all select id + 10000, a, b, c, f from many_l where id < 40 "
               "union all select * from many_l where id % 300 = 11")
MANY_KEYED = {"identical": False, "left_rows": 3000, "right_rows": 3038, "only_left": 12, "only_right": 40,
              "changed": 31, "duplicate_keys_left": 0, "duplicate_keys_right": 10, "rows_only_left": 43,
              "rows_only_right": 81}


def test_many_buckets_give_duckdbs_answers(spark_tables):
    """Differences spread over many buckets (a changed row keeps its bucket's row count): the same
    counts as DuckDB, keyed and not, and five sample rows of each side, each a row that differs."""
    s = spark_tables["schema"]
    con = duckdb.connect(spark_tables["duckdb"])
    try:
        duck_many = _MANY.replace("select id,", "select range as id,").replace("string", "varchar")
        con.execute(f"create table many_l as {duck_many}")
        con.execute(f"create table many_r as {_MANY_RIGHT}")
    finally:
        con.close()
    spark_query(f"create table {s}.many_l using parquet as {_MANY}")
    spark_query(f"create table {s}.many_r using parquet as {_MANY_RIGHT.replace('many_l', f'{s}.many_l')}")
    try:
        spark, duck = _both(spark_tables, "many_l", "many_r", "--key", "id")
        assert row_counts(spark, MANY_KEYED) == row_counts(duck, MANY_KEYED) == MANY_KEYED
        assert spark["buckets"]["bucketing"] == "range" and spark["buckets"]["differing"] > 20
        left = {r[0]: r for r in spark_query(f"select * from {s}.many_l")}
        right = {r[0] for r in spark_query(f"select id from {s}.many_r where id % 97 = 5 or id >= 10000 "
                                           f"or id % 300 = 11")}
        for side, ids in (("only_left", {i for i in left if i % 250 == 7 or i % 97 == 5}), ("only_right", right)):
            picked = [r["id"] for r in spark["sample"] if r["_diff"] == side]
            # five picked on each side, and the other side's row of a sampled changed key
            assert 5 <= len(picked) <= 10 and set(picked) <= ids, (side, picked)
        spark, duck = _both(spark_tables, "many_l", "many_r")
        assert (spark["only_left"], spark["only_right"]) == (duck["only_left"], duck["only_right"]) == (43, 81)
    finally:
        for t in ("many_l", "many_r"):
            spark_query(f"drop table {s}.{t}")


def _wide(n_float: int = 30, n_text: int = 20, n_int: int = 16) -> str:
    cols = [f"cast(id * {i + 1} as double) / 7 as d{i}" for i in range(n_float)]
    cols += [f"concat('s', cast(id % {i + 3} as string)) as s{i}" for i in range(n_text)]
    cols += [f"cast(id % {i + 5} as int) as n{i}" for i in range(n_int)]
    return f"select id, {', '.join(cols)} from range(100)"


def test_a_wide_model_that_differs_everywhere(spark_tables):
    """67 columns (30 floats), every row changed: the group step's plan stays small enough for a
    default Spark driver (1 GB heap); a game day's summary over a duplicated input looks like this."""
    s = spark_tables["schema"]
    con = duckdb.connect(spark_tables["duckdb"])
    try:
        duck_wide = _wide().replace("select id,", "select range as id,").replace("string", "varchar")
        con.execute(f"create table wide_l as {duck_wide}")
        con.execute("create table wide_r as select * replace (d3 + 1 as d3, n2 + 1 as n2) from wide_l")
    finally:
        con.close()
    spark_query(f"create table {s}.wide_l using parquet as {_wide()}")
    spark_query(f"create table {s}.wide_r using parquet as select id, "
                + ", ".join("d3 + 1 as d3" if c == "d3" else "n2 + 1 as n2" if c == "n2" else c
                            for c in [f"d{i}" for i in range(30)] + [f"s{i}" for i in range(20)]
                            + [f"n{i}" for i in range(16)]) + f" from {s}.wide_l")
    try:
        for key in (("--key", "id"), ()):
            spark, duck = _both(spark_tables, "wide_l", "wide_r", *key)
            fields = ("identical", "left_rows", "right_rows", "only_left", "only_right", "changed")
            assert row_counts(spark, fields) == row_counts(duck, fields)
            assert (spark["left_rows"], spark["only_left"] + spark["changed"]) == (100, 100)
        assert len([r for r in spark["sample"] if r["_diff"] == "only_left"]) == 5
    finally:
        for t in ("wide_l", "wide_r"):
            spark_query(f"drop table {s}.{t}")


@pytest.mark.slow
def test_thrift_server(spark_cluster, tmp_path):
    """The same keyed diff through a cluster's Thrift server (PyHive), as dbt-spark `method: thrift`."""
    schema = unique_schema("diff_thrift")
    spark_cluster.query(f"create database {schema}")
    try:
        for name in ("kl", "kr"):
            spark_cluster.query(f"create table {schema}.{name} using parquet as {_select(TABLES[name])}")
        args = _project(tmp_path, spark_cluster.profile(schema))
        code, text = _run(["kl", "kr", "--key", "id", "--format", "json", *args])
        assert code == 1, text
        assert row_counts(json.loads(text), KEYED) == KEYED
        code, text = _run(["kl", "missing", *args])
        assert code == 2 and len(text.strip().splitlines()) == 1 and "does not exist" in text
        assert {r[1] for r in spark_cluster.query(f"show tables in {schema}")} == {"kl", "kr"}
    finally:
        spark_cluster.query(f"drop database {schema} cascade")



def test_a_spark_sql_error_is_not_logged_with_the_jvm_stack():
    """pyspark 4 logs every SQL error with the JVM's stack to stderr (a JSON line from its
    SQLQueryContextLogger before the runner's own one line); the runner's Spark backend quiets it."""
    import logging

    require_spark()
    pytest.importorskip("pyspark.logger")
    from pyspark.logger import PySparkLogger

    from support.spark import session_parameters
    from rerun_safety.warehouse.spark.engine import SessionBackend

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    log = PySparkLogger.getLogger("SQLQueryContextLogger")
    log.addHandler(handler)
    try:
        backend = SessionBackend(session_parameters())
        with pytest.raises(Exception, match="UNRESOLVED_COLUMN"):
            backend.run("select no_such_column from range(1)")
    finally:
        log.removeHandler(handler)
    assert records == []


def test_a_connection_lists_a_database_once_until_it_writes(spark_tables):
    """The game day asks for every model's kind and columns (each SHOW or DESCRIBE costs Spark
    ~0.1 s): a connection lists a database once and describes a table once, and forgets both as
    soon as it runs anything but a read."""
    from support.spark import session_parameters
    from rerun_safety.warehouse.spark.engine import SessionBackend, SparkConnection

    class Recording(SessionBackend):
        def __init__(self):
            super().__init__(session_parameters())
            self.statements: list[str] = []

        def run(self, sql):
            self.statements.append(sql)
            return super().run(sql)

    s = spark_tables["schema"]
    backend = Recording()
    con = SparkConnection(backend, None, set())
    assert [con.relation_kind(s, t) for t in ("kl", "KR", "ul", "nope")] == ["table", "table", "table", None]
    assert [q.split(" in ")[0] for q in backend.statements] == ["show tables", "show views"]
    assert con.columns(s, "kl") == con.columns(s, "kl") != []
    assert len(backend.statements) == 3
    try:
        con.execute(f"create view {s}.rs_cache_v as select id from {s}.kl")  # a write: listings are read again
        assert con.relation_kind(s, "rs_cache_v") == "view" and con.relation_kind(s, "kl") == "table"
        assert len(backend.statements) == 6
        con.fetchall(f"select count(*) from {s}.kl")  # a read keeps them
        assert con.relation_kind(s, "ul") == "table" and len(backend.statements) == 7
    finally:
        spark_query(f"drop view if exists {s}.rs_cache_v")


@pytest.mark.parametrize("parameters, message", [
    ({"spark.sql.catalogImplementation": "in-memory"},
     "the Spark target's catalog is in-memory (spark.sql.catalogImplementation): a new Spark session would have "
     "no tables to compare; use a Hive metastore or method thrift"),
    ({"spark.hadoop.javax.jdo.option.ConnectionURL": "jdbc:derby:;databaseName=/nonexistent/metastore_db;create=true"},
     "no Spark catalog at /nonexistent/metastore_db: method session reads the Hive metastore of the working "
     "directory (as dbt-spark does)"),
])
def test_a_session_without_a_catalog_to_read_is_one_line(tmp_path, parameters, message):
    """A new process (no Spark running in it) whose session target could only open an empty catalog:
    one line and exit code 2, before any Spark starts; nothing written."""
    import subprocess
    import sys

    require_spark()
    output = {"type": "spark", "method": "session", "host": "localhost", "schema": "s", "threads": 1,
              "server_side_parameters": parameters}
    args = _project(tmp_path, output)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    proc = subprocess.run([sys.executable, "-m", "rerun_safety.cli", "diff", "s.a", "s.b", *args],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rerun-safety: error: {message}"), proc.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no metastore_db, no derby.log, no spark-warehouse
