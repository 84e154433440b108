"""The diff engine and `rerun-safety diff`, on DuckDB and on a real PostgreSQL server."""
from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path

import duckdb
import pytest
import yaml
from click.testing import CliRunner

from support.common import engine_connection, postgres_profile, write_profiles
from rerun_safety import diff as diffmod
from rerun_safety.cli import main
from rerun_safety.diff import Side, compare, diff_relations
from rerun_safety.diff_command import run_diff
from rerun_safety.warehouse.base import table
from rerun_safety.warehouse.duckdb.engine import DuckDBConnection
from rerun_safety.warehouse.postgres.engine import PgConnection


class Env:
    """Tables in one database of the parameterised engine, and the CLI arguments to reach them."""

    def __init__(self, engine: str, tmp_path: Path, request):
        self.engine = engine
        self.tmp = tmp_path
        if engine == "duckdb":
            self.path = tmp_path / "w.duckdb"
            duckdb.connect(str(self.path)).close()
            self.args: list[str] = []
        else:
            self.server = request.getfixturevalue("pg_server")
            self.db = request.getfixturevalue("pg_database")
            project = tmp_path / "proj"
            project.mkdir()
            (project / "dbt_project.yml").write_text(yaml.safe_dump({"name": "p", "profile": "p", "version": "1"}))
            write_profiles(project, "p", postgres_profile(self.server, self.db))
            self.args = ["--project-dir", str(project), "--profiles-dir", str(project)]

    def sql(self, *statements: str) -> None:
        if self.engine == "duckdb":
            con = duckdb.connect(str(self.path))
            try:
                for s in statements:
                    con.execute(s)
            finally:
                con.close()
        else:
            con = self.server.connect(self.db)
            try:
                with con.cursor() as cur:
                    for s in statements:
                        cur.execute(s)
            finally:
                con.close()

    def side(self, name: str) -> str:
        schema = "main" if self.engine == "duckdb" else "public"
        return f"{self.path}:{schema}.{name}" if self.engine == "duckdb" else f"{schema}.{name}"

    def cli(self, left: str, right: str, *extra: str):
        res = CliRunner().invoke(main, ["diff", self.side(left), self.side(right), *extra, *self.args])
        return res

    def json(self, left: str, right: str, *extra: str) -> tuple[int, dict]:
        res = self.cli(left, right, "--format", "json", *extra)
        assert res.exit_code in (0, 1), res.output
        return res.exit_code, json.loads(res.output)


@pytest.fixture
def env(engine, tmp_path, request):
    return Env(engine, tmp_path, request)


def _values(rows) -> str:
    return ", ".join("(" + ", ".join("null" if v is None else repr(v) for v in r) + ")" for r in rows)


def make(env: Env, name: str, rows, cols="id int, v int") -> None:
    stmts = [f"create table {name} ({cols})"]
    if rows:
        stmts.append(f"insert into {name} values {_values(rows)}")
    env.sql(*stmts)


def test_identical(env):
    make(env, "a", [(i, i % 3) for i in range(50)])
    make(env, "b", [(i, i % 3) for i in reversed(range(50))])
    for extra in ((), ("--key", "id"), ("--partition-by", "v")):
        code, out = env.json("a", "b", *extra)
        assert code == 0
        assert (out["identical"], out["left_rows"], out["right_rows"], out["only_left"], out["only_right"],
                out["changed"]) == (True, 50, 50, 0, 0, 0)


def test_duplicates_are_differences(env):
    make(env, "a", [(1, 0), (1, 0), (2, 0)], "id int, v int")
    make(env, "b", [(1, 0), (2, 0), (2, 0)], "id int, v int")
    code, out = env.json("a", "b")
    assert code == 1
    assert (out["identical"], out["left_rows"], out["right_rows"], out["only_left"], out["only_right"],
            out["changed"]) == (False, 3, 3, 1, 1, 0)
    code, out = env.json("a", "b", "--key", "id")
    assert code == 1
    assert (out["only_left"], out["only_right"], out["changed"], out["duplicate_keys_left"],
            out["duplicate_keys_right"], out["rows_only_left"], out["rows_only_right"]) == (0, 0, 0, 1, 1, 1, 1)
    assert env.cli("a", "b").exit_code == 1


def test_keyed_changes_nulls_and_samples(env):
    make(env, "a", [(1, 10), (2, 20), (3, None), (None, 5), (5, 50)])
    make(env, "b", [(1, 10), (2, 21), (3, 0), (None, 5), (6, 60), (6, 60)])
    code, out = env.json("a", "b", "--key", "id")
    assert code == 1
    assert (out["left_rows"], out["right_rows"], out["only_left"], out["only_right"], out["changed"],
            out["duplicate_keys_left"], out["duplicate_keys_right"]) == (5, 6, 1, 1, 2, 0, 1)
    assert (out["rows_only_left"], out["rows_only_right"]) == (3, 4)
    assert out["differing_columns"] == ["v"]
    only_left = sorted(r["id"] for r in out["sample"] if r["_diff"] == "only_left")
    assert only_left == [2, 3, 5]
    # NULL is a value: a NULL key matches a NULL key, NULL differs from 0
    code, out = env.json("a", "b")
    assert (out["only_left"], out["only_right"], out["changed"]) == (3, 4, 0)


def test_where_and_partitions(env):
    make(env, "a", [(i, i % 4) for i in range(40)])
    make(env, "b", [(i, i % 4) for i in range(40)] + [(100, 3), (101, 3)])
    code, out = env.json("a", "b", "--where", "v < 3")
    assert (code, out["left_rows"], out["right_rows"], out["identical"]) == (0, 30, 30, True)
    code, out = env.json("a", "b", "--partition-by", "v")
    assert code == 1
    assert out["differing_partitions"] == [{"partition": "3", "left_rows": 10, "right_rows": 12}]
    assert (out["only_left"], out["only_right"]) == (0, 2)


def test_schema_and_type_differences(env):
    make(env, "a", [(1, 1)], "id int, v int")
    make(env, "b", [(1, 1)], "id int, w int")
    code, out = env.json("a", "b")
    assert code == 1 and out["schema"] == "columns differ: +w -v"
    make(env, "c", [(1, 1)], "id int, v bigint")
    code, out = env.json("a", "c")
    assert code == 1 and out["only_left"] == 0 and out["only_right"] == 0
    assert [t.split(":")[0] for t in out["type_changes"]] == ["v"]


def test_float_exactness(env):
    make(env, "a", [(1, 0.30000000000000004), (2, 0.0)], "id int, x double precision")
    make(env, "b", [(1, 0.3), (2, -0.0)], "id int, x double precision")
    code, out = env.json("a", "b", "--key", "id", "--float-tolerance", "0")
    # exact: 0.1 + 0.2 is not 0.3; -0.0 equals 0.0 as the engines' `=` says
    assert (code, out["changed"], out["rows_only_left"], out["rows_only_right"]) == (1, 1, 1, 1)
    assert [r["id"] for r in out["sample"]] == [1, 1]
    # by default floats are equal within 1e-9 (relative): 0.1 + 0.2 is 0.3 (tests/test_float_tolerance.py)
    code, out = env.json("a", "b", "--key", "id")
    assert (code, out["changed"], out["float_tolerance"]) == (0, 0, 1e-9)


@pytest.mark.parametrize("args, message", [
    (["a", "nope"], "does not exist"),
    (["a", "b", "--key", "zz"], "key column 'zz'"),
    (["a", "b", "--where", "v > 1; drop table a"], "without semicolons"),
    (["a", "b", "--where", "id in (select 1)"], "subquery is not allowed"),
    (["a", "b", "--where", "nope > 1"], "query failed"),
    (["a", "b", "--where", "v >"], "not valid"),
    (["a", "b", "--partition-by", "zz"], "partition column 'zz'"),
])
def test_bad_input_exits_2_with_one_line(env, args, message):
    make(env, "a", [(1, 1)])
    make(env, "b", [(1, 1)])
    res = CliRunner().invoke(main, ["diff", env.side(args[0]), env.side(args[1]), *args[2:], *env.args])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in res.output


def test_unreachable_postgres_exits_2(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "dbt_project.yml").write_text(yaml.safe_dump({"name": "p", "profile": "p", "version": "1"}))
    write_profiles(project, "p", {"type": "postgres", "host": "127.0.0.1", "port": 1, "user": "x", "password": "",
                                  "dbname": "x", "schema": "public", "threads": 1})
    res = CliRunner().invoke(main, ["diff", "public.a", "public.b", "--project-dir", str(project),
                                    "--profiles-dir", str(project)])
    assert res.exit_code == 2
    assert len(res.output.strip().splitlines()) == 1 and "cannot connect" in res.output


def test_two_duckdb_files(tmp_path):
    for name, rows in (("l.duckdb", [(1, 1), (2, 2)]), ("r.duckdb", [(1, 1), (2, 3), (3, 3)])):
        con = duckdb.connect(str(tmp_path / name))
        con.execute("create schema s")
        con.execute(f"create table s.t as select * from (values {_values(rows)}) v(id, v)")
        con.close()
    res = CliRunner().invoke(main, ["diff", f"{tmp_path / 'l.duckdb'}:s.t", f"{tmp_path / 'r.duckdb'}:s.t",
                                    "--key", "id", "--format", "json"])
    assert res.exit_code == 1, res.output
    out = json.loads(res.output)
    assert (out["only_left"], out["only_right"], out["changed"]) == (0, 1, 1)
    # read-only: the files are not locked for writing by the diff
    duckdb.connect(str(tmp_path / "l.duckdb")).close()


def test_two_postgres_databases(pg_server, tmp_path):
    dbs = [pg_server.create_database("diffl"), pg_server.create_database("diffr")]
    try:
        for db, rows in zip(dbs, ([(1, 1), (2, 2), (2, 2)], [(1, 1), (2, 2), (4, 4)])):
            con = pg_server.connect(db)
            with con.cursor() as cur:
                cur.execute("create table t (id int, v int)")
                cur.execute(f"insert into t values {_values(rows)}")
            con.close()
        project = tmp_path / "proj"
        project.mkdir()
        (project / "dbt_project.yml").write_text(yaml.safe_dump({"name": "p", "profile": "p", "version": "1"}))
        write_profiles(project, "p", postgres_profile(pg_server, dbs[0]))
        res = CliRunner().invoke(main, ["diff", "public.t", f"{dbs[1]}.public.t", "--key", "id", "--format", "json",
                                        "--project-dir", str(project), "--profiles-dir", str(project)])
        assert res.exit_code == 1, res.output
        out = json.loads(res.output)
        assert (out["left_rows"], out["right_rows"], out["only_left"], out["only_right"], out["changed"],
                out["duplicate_keys_left"], out["rows_only_left"], out["rows_only_right"]) == (3, 3, 0, 1, 0, 1, 1, 1)
    finally:
        for db in dbs:
            pg_server.drop_database(db)


# ----------------------------------------------------------------------------- property test

def _random_rows(rng: random.Random) -> tuple[list, list]:
    base = [(rng.choice([None, *range(8)]), rng.choice([None, 0, 1, 2]), rng.choice([None, 0.0, -0.0, 0.5, 1e-9]))
            for _ in range(rng.randint(0, 30))]
    other = list(base)
    for _ in range(rng.randint(0, 6)):
        op = rng.random()
        if op < 0.3 and other:
            other.pop(rng.randrange(len(other)))
        elif op < 0.6 and other:
            other.append(rng.choice(other))  # a duplicate
        elif other:
            i = rng.randrange(len(other))
            other[i] = (other[i][0], rng.choice([None, 0, 1, 2, 3]), other[i][2])  # a changed row
        else:
            other.append((1, 1, 1.0))
    rng.shuffle(other)
    return base, other


def _oracle_keys(left: list, right: list) -> tuple[int, int, int, int, int]:
    lk, rk = Counter(r[0] for r in left), Counter(r[0] for r in right)
    lrows, rrows = Counter(left), Counter(right)
    only_l = sum(1 for k in lk if k not in rk)
    only_r = sum(1 for k in rk if k not in lk)
    changed = dup_l = dup_r = 0
    for k in set(lk) | set(rk):
        differs = any(lrows[r] != rrows[r] for r in set(lrows) | set(rrows) if r[0] == k)
        changed += differs and lk[k] == rk[k]
        dup_l += lk[k] > 1 and lk[k] > rk[k]
        dup_r += rk[k] > 1 and rk[k] > lk[k]
    return only_l, only_r, changed, dup_l, dup_r


def _except_all(fetch, left: str, right: str) -> tuple[int, int]:
    a = fetch(f"select count(*) from (select * from {left} except all select * from {right}) x")[0][0]
    b = fetch(f"select count(*) from (select * from {right} except all select * from {left}) x")[0][0]
    return int(a), int(b)


@pytest.mark.parametrize("mode", ["same", "across"])
def test_property_matches_except_all(engine, mode, request, tmp_path, monkeypatch):
    """Randomized small tables with duplicates, NULLs and changed rows: our counts equal EXCEPT ALL's."""
    if engine == "duckdb" and mode == "across":
        pytest.skip("two DuckDB files share one connection (covered by test_two_duckdb_files)")
    # Small buckets, so that several buckets exist and only some of them differ.
    monkeypatch.setattr(diffmod.limits, "RANGE_ROWS_PER_BUCKET", 2)
    monkeypatch.setattr(diffmod.limits, "PG_RANGE_ROWS_PER_BUCKET", 2)
    monkeypatch.setattr(diffmod.limits, "HASH_ROWS_PER_BUCKET", 2)
    monkeypatch.setattr(diffmod.limits, "CHUNK_ROWS", 5)
    rng = random.Random(20261130)
    if engine == "duckdb":
        lcon = rcon = DuckDBConnection(":memory:")
        schema = "main"
    else:
        server = request.getfixturevalue("pg_server")
        db = request.getfixturevalue("pg_database")
        params = {"host": server.host, "port": server.port, "user": server.user}
        lcon = PgConnection(params, db)
        rdb = server.create_database("diffr") if mode == "across" else db
        rcon = PgConnection(params, rdb) if mode == "across" else lcon
        schema = "public"
    try:
        for case in range(25):
            left, right = _random_rows(rng)
            for con, name, rows in ((lcon, "l", left), (rcon, "r", right)):
                con.execute(f"drop table if exists {name}")
                con.execute(f"create table {name} (id int, v int, f double precision)")
                if rows:
                    con.execute(f"insert into {name} values {_values(rows)}")
            if mode == "same":
                expected = _except_all(lcon.fetchall, "l", "r")
            else:
                lrows, rrows = Counter(left), Counter(right)
                expected = (sum((lrows - rrows).values()), sum((rrows - lrows).values()))
            sides = (Side(lcon, table(schema, "l")), Side(rcon, table(schema, "r")))
            for key in ((), ("id", "v"), ("id",)):
                got = compare(*sides, key=key, float_tolerance=0)  # exact, as EXCEPT ALL
                assert (got.missing_rows, got.extra_rows) == expected, (case, key, left, right)
                assert got.identical == (expected == (0, 0)), (case, key)
                assert (got.reference_rows, got.rows) == (len(left), len(right))
            assert (got.missing_keys, got.extra_keys, got.changed_keys, got.reference_duplicate_keys,
                    got.duplicate_keys) == _oracle_keys(left, right), (case, left, right)
            got = compare(*sides, bucket_column="v", float_tolerance=0)
            assert (got.missing_rows, got.extra_rows) == expected, (case, "partition")
    finally:
        lcon.close()
        if rcon is not lcon:
            rcon.close()
            server.drop_database(rdb)


def test_diff_relations_keeps_game_day_fields(engine, tmp_path, request):
    """One connection, (schema, table) pairs, the fields the game day reads."""
    con, schema = engine_connection(engine, tmp_path, request)
    try:
        con.execute("create table ref (id int, day date, v int)")
        con.execute("insert into ref values (1, date '2024-01-01', 1), (2, date '2024-01-02', 2), (3, date '2024-01-02', 3)")
        con.execute("create table cur (id int, day date, v int)")
        con.execute("insert into cur values (1, date '2024-01-01', 1), (2, date '2024-01-02', 2), (2, date '2024-01-02', 2), (3, date '2024-01-02', 4)")
        d = diff_relations(con, (schema, "ref"), (schema, "cur"), key=("id",), partition_column="day")
        assert (d.identical, d.reference_rows, d.rows, d.extra_rows, d.missing_rows, d.extra_copies) == (False, 3, 4, 2, 1, 1)
        assert (d.keyed, d.duplicate_keys, d.missing_keys, d.extra_keys, d.changed_rows) == (True, 1, 0, 0, 1)
        # the columns that differ within a changed key (id 3: v), not those an extra copy of row 2
        # touches (every column)
        assert d.differing_columns == ("v",)
        assert d.partitions == (("2024-01-01", 1, 1), ("2024-01-02", 2, 3)) and d.partition_column == "day"
        assert {r["_diff"] for r in d.sample} == {"extra", "missing"}
        d = diff_relations(con, (schema, "ref"), (schema, "cur"), key=("nope",))
        assert (d.keyed, d.extra_rows, d.missing_rows, d.extra_copies, d.changed_rows) == (False, 2, 1, 1, 1)
        assert diff_relations(con, (schema, "ref"), (schema, "ref"), key=("id",)).identical
    finally:
        con.close()


def test_profile_side_and_renderers(tmp_path):
    """A DuckDB profile target as `schema.table`; text and Markdown say the same numbers."""
    from support.common import duckdb_profile

    path = tmp_path / "wh.duckdb"
    con = duckdb.connect(str(path))
    con.execute("create table a as select * from (values (1, 'x'), (2, 'y')) v(id, v)")
    con.execute("create table b as select * from (values (1, 'x'), (2, 'z'), (3, 'w')) v(id, v)")
    con.close()
    project = tmp_path / "proj"
    project.mkdir()
    (project / "dbt_project.yml").write_text(yaml.safe_dump({"name": "p", "profile": "p", "version": "1"}))
    write_profiles(project, "p", duckdb_profile(path))
    args = ["--project-dir", str(project), "--profiles-dir", str(project)]
    res = CliRunner().invoke(main, ["diff", "main.a", "b", "--key", "id", *args])
    assert res.exit_code == 1, res.output
    lines = res.output.splitlines()
    assert lines[0] == "main.a vs b: DIFFERENT"
    assert [line.split()[-1] for line in lines[1:8]] == ["2", "3", "0", "1", "1", "0", "0"]
    assert ["differing", "columns", "v"] in [line.split() for line in lines]
    res = CliRunner().invoke(main, ["diff", "main.a", "main.b", "--format", "md", *args])
    assert res.exit_code == 1
    assert "| only left (rows) | 1 |" in res.output and "| only right (rows) | 2 |" in res.output
    assert "| only_left | 2 | y |" in res.output
    res = CliRunner().invoke(main, ["diff", "main.a", "main.a", *args])
    assert (res.exit_code, res.output.splitlines()[0]) == (0, "main.a vs main.a: identical")


# ----------------------------------------------------------------------------- row hash

def test_values_swapped_between_rows_of_one_bucket(env, monkeypatch):
    """Swapping a column's values between two rows keeps each column's multiset; the rows differ.

    PostgreSQL's `hash_record_extended` is linear in its columns' hashes, so the sum of those
    hashes over a bucket holding just the two rows stayed the same for two swaps in three.
    """
    for name in ("RANGE_ROWS_PER_BUCKET", "PG_RANGE_ROWS_PER_BUCKET", "HASH_ROWS_PER_BUCKET"):
        monkeypatch.setattr(diffmod.limits, name, 2)  # one swapped pair per bucket
    rows = [(i, f"v{i}") for i in range(40)]
    swapped = [(i, f"v{i + 1 if i % 2 == 0 else i - 1}") for i in range(40)]
    make(env, "a", rows, "id int, v varchar(10)")
    make(env, "b", swapped, "id int, v varchar(10)")
    code, out = env.json("a", "b", "--key", "id")
    assert (code, out["changed"], out["rows_only_left"], out["rows_only_right"]) == (1, 40, 40, 40)
    code, out = env.json("a", "b")
    assert (code, out["only_left"], out["only_right"]) == (1, 40, 40)


_PG_TYPES = ("id bigint, i2 smallint, i4 int, i8 bigint, n numeric, t text, vc varchar(20), ch char(4), "
             "r real, f double precision, b boolean, d date, ts timestamp, tz timestamptz, iv interval, "
             "tm time, u uuid, jb jsonb, by bytea, ar int[], js json")
_PG_ROW = ("({id}, 1, 2, 3, 1.5, 'x', 'y', 'ab', 0.5, 0.25, true, date '2024-01-01', "
           "timestamp '2024-01-01 10:00:00', timestamptz '2024-01-01 10:00:00+00', interval '1 day', "
           "time '10:00', '00000000-0000-0000-0000-000000000001', '{{\"a\": 1, \"b\": 2}}', '\\x01', "
           "array[1, 2], '{{\"a\": 1}}')")


@pytest.mark.parametrize("mode", ["same", "across"])
def test_postgres_types_match_except_all(pg_server, pg_database, mode):
    """Every type the row hash treats on its own, with NULLs and with values equal under `=`."""
    params = {"host": pg_server.host, "port": pg_server.port, "user": pg_server.user}
    lcon = PgConnection(params, pg_database)
    rdb = pg_server.create_database("difft") if mode == "across" else pg_database
    rcon = PgConnection(params, rdb) if mode == "across" else lcon
    # one changed column per row id: equal under `=` (scale, trailing spaces, -0.0, key order,
    # 1 day = 24 hours), or different
    equal = {"n": "1.50", "ch": "'ab  '", "f": "-0.0 + 0.25", "jb": "'{\"b\": 2, \"a\": 1}'", "iv": "interval '24 hours'"}
    differ = {"i2": "-1", "i4": "null", "i8": "4294967300", "n": "1.51", "t": "''", "vc": "null", "ch": "'ab_'",
              "r": "0.50001", "f": "0.1 + 0.2", "b": "false", "d": "date 'infinity'",
              "ts": "timestamp '2024-01-01 10:00:00.000001'", "tz": "null", "iv": "interval '1 day 1 second'",
              "tm": "time '10:00:01'", "u": "'00000000-0000-0000-0000-000000000002'", "jb": "'{\"a\": 1}'",
              "by": "'\\x02'", "ar": "array[2, 1]"}
    try:
        for con in {id(lcon): lcon, id(rcon): rcon}.values():
            con.execute("drop table if exists l")
            con.execute("drop table if exists r")
            con.execute(f"create table l ({_PG_TYPES})")
            con.execute(f"create table r ({_PG_TYPES})")
        for con, name in ((lcon, "l"), (rcon, "r")):
            con.execute(f"insert into {name} values {_PG_ROW.format(id=0)}")
            con.execute(f"insert into {name} (id) values (1)")  # NULL in every other column
            for n, c in enumerate([*equal, *differ]):
                con.execute(f"insert into {name} values {_PG_ROW.format(id=10 + n)}")
        for n, (c, value) in enumerate([*equal.items(), *differ.items()]):
            rcon.execute(f"update r set {c} = {value} where id = {10 + n}")
        # 0 and 4294967297 share PostgreSQL's 32-bit bigint hash; the row hash tells them apart
        lcon.execute("insert into l (id, i8) values (100, 0)")
        rcon.execute("insert into r (id, i8) values (100, 4294967297)")
        expected = (len(differ) + 1, len(differ) + 1)
        if mode == "same":
            cols = ", ".join(c.split()[0] for c in _PG_TYPES.split(", ") if not c.startswith("js"))  # json has no `=`
            assert _except_all(lcon.fetchall, f"(select {cols} from l) x", f"(select {cols} from r) y") == expected
        sides = (Side(lcon, table("public", "l")), Side(rcon, table("public", "r")))
        for key in ((), ("id",), ("t",)):
            got = compare(*sides, key=key)
            assert (got.missing_rows, got.extra_rows) == expected, key
        assert compare(*sides, key=("id",)).changed_keys == expected[0]
        assert compare(sides[0], Side(lcon, table("public", "l")), key=("id",)).identical
    finally:
        lcon.close()
        if rcon is not lcon:
            rcon.close()
            pg_server.drop_database(rdb)


def test_postgres_samples_from_views_and_moved_rows(pg_server, pg_database):
    """Sample rows come by row address from tables, by a scan from views or when a row moved."""
    con = PgConnection({"host": pg_server.host, "port": pg_server.port, "user": pg_server.user}, pg_database)
    try:
        con.execute("create table a (id int, v int)")
        con.execute("insert into a select i, i from generate_series(1, 100) i")
        con.execute("create table b as select * from a")
        con.execute("update b set v = -1 where id = 7")
        con.execute("create view bv as select * from b")
        for right in ("b", "bv"):
            got = compare(Side(con, table("public", "a")), Side(con, table("public", right)), key=("id",))
            assert sorted((r["_diff"], r["id"], r["v"]) for r in got.sample) == [("extra", 7, -1), ("missing", 7, 7)]
        plan = diffmod.plan.make_diff_plan(Side(con, table("public", "a")), Side(con, table("public", "b")), ("id",), (), None,
                                  True)
        assert diffmod.plan.set_range_buckets(plan)
        row = con.fetchone(f"select {plan.rb}, {plan.rh}, cast(ctid as text) from b where id = 7")
        stale = (int(row[0]), int(row[1]), "(0,1)")  # the address of another row
        rows = diffmod.samples.fetch_sample(plan, plan.right, plan.rb, plan.rh, [stale], "extra")
        assert [(r["id"], r["v"]) for r in rows] == [(7, -1)]
    finally:
        con.close()


def test_postgres_column_search_reads_the_unmatched_rows_by_address(pg_server, pg_database, monkeypatch):
    """PostgreSQL: the changed columns come from the unmatched rows read by address (no third scan
    of both sides); a row no longer at its address (a concurrent update) sends the search back to a
    scan, with the same answer."""
    import rerun_safety.diff.rows as rows

    con = PgConnection({"host": pg_server.host, "port": pg_server.port, "user": pg_server.user}, pg_database)
    seen: list[str] = []
    fetchone = PgConnection.fetchone
    monkeypatch.setattr(PgConnection, "fetchone", lambda self, sql: seen.append(str(sql)) or fetchone(self, sql))
    try:
        con.execute("create table a (id int, v int, w text, x float8)")
        con.execute("insert into a select i, i, 'w' || i, i * 0.5 from generate_series(1, 5000) i")
        con.execute("create table b as select * from a")
        con.execute("update b set v = -v where id % 500 = 7")
        con.execute("update b set w = 'changed' where id % 1000 = 9")
        con.execute("delete from b where id = 4000")
        got = compare(Side(con, table("public", "a")), Side(con, table("public", "b")), key=("id",))
        assert (got.changed_rows, got.missing_keys, got.differing_columns) == (15, 1, ("v", "w"))
        assert sum("ctid = any(array[" in q for q in seen) == 1
        seen.clear()
        same_rows = rows.rows_same

        def moved(plan, buckets):  # one address no longer holds the row
            out = same_rows(plan, buckets)
            plan.extra["unmatched_tids"][1][0] = "(999,1)"
            return out

        monkeypatch.setattr(rows, "rows_same", moved)
        import rerun_safety.diff.core as core

        monkeypatch.setattr(core, "rows_same", moved)
        again = compare(Side(con, table("public", "a")), Side(con, table("public", "b")), key=("id",))
        assert (again.changed_rows, again.differing_columns) == (15, ("v", "w"))
        assert sum("ctid = any(array[" in q for q in seen) == 1 and sum(q.startswith("select max(") for q in seen) == 1
    finally:
        con.close()


def test_postgres_buckets_sized_from_statistics(pg_server, pg_database, monkeypatch):
    """Analyzed tables size their key-range buckets from pg_stats, without a min/max scan; rows
    outside the sampled range (even at the ends of bigint) and NULL keys still compare exactly."""
    con = PgConnection({"host": pg_server.host, "port": pg_server.port, "user": pg_server.user}, pg_database)
    got_stats: list = []
    real = diffmod.plan._stats_row
    monkeypatch.setattr(diffmod.plan, "_stats_row",
                        lambda side, cands: got_stats.append(real(side, cands)) or got_stats[-1])
    try:
        con.execute("create table a (id bigint, v int)")
        con.execute("insert into a select i, i % 7 from generate_series(1, 2000) i")
        con.execute("create table b as select * from a")
        con.execute("analyze a")
        con.execute("analyze b")
        con.execute("insert into b values (-9223372036854775808, 1), (9223372036854775807, 2), (null, 3), (null, 3)")
        con.execute("insert into a values (null, 3)")
        con.execute("update b set v = -1 where id in (5, 1500)")
        expected = _except_all(con.fetchall, "a", "b")
        assert expected == (2, 5)
        for key in (("id",), ()):
            got_stats.clear()
            d = compare(Side(con, table("public", "a")), Side(con, table("public", "b")), key=key)
            assert (d.missing_rows, d.extra_rows, d.bucketing) == (*expected, "range"), key
            assert got_stats and None not in got_stats
        d = compare(Side(con, table("public", "a")), Side(con, table("public", "b")), key=("id",))
        assert (d.changed_keys, d.extra_keys, d.reference_duplicate_keys, d.duplicate_keys) == (2, 2, 0, 1)
        # a filter (or a view) has no statistics of its own: the min/max scan sizes the buckets,
        # here over the whole bigint range (numeric arithmetic, integer bucket numbers)
        got_stats.clear()
        d = compare(Side(con, table("public", "a"), diffmod.parse_where("v > 0", "postgres")),
                    Side(con, table("public", "b"), diffmod.parse_where("v > 0", "postgres")), key=("id",))
        expected = _except_all(con.fetchall, "(select * from a where v > 0) x", "(select * from b where v > 0) y")
        assert got_stats == [None, None] and (d.missing_rows, d.extra_rows) == expected == (2, 3)
    finally:
        con.close()


# ----------------------------------------------------------------------------- the package

def test_package_keeps_every_import():
    """`rerun_safety.diff` is a package split by concern; every import of the single module still works."""
    import importlib

    import rerun_safety.diff as pkg
    from rerun_safety.diff import (DEFAULT_FLOAT_TOLERANCE, SAMPLE_ROWS, DiffError, DiffResult, Side, columns_of,
                                   compare, diff_relations, parse_where, row_hash)
    from rerun_safety.errors import RerunSafetyError

    users = {name: importlib.import_module(f"rerun_safety.{name}")
             for name in ("diff_command", "gameday.verdict", "gameday.replay")}
    assert users["diff_command"].compare is compare and users["diff_command"].DiffError is DiffError
    assert users["gameday.verdict"].DiffResult is DiffResult is pkg.results.DiffResult
    assert users["gameday.replay"].diff_relations is diff_relations is pkg.core.diff_relations
    assert issubclass(DiffError, RerunSafetyError) and Side is pkg.results.Side
    assert (columns_of, parse_where, row_hash) == (pkg.sql.columns_of, pkg.sql.parse_where, pkg.sql.row_hash)
    assert (DEFAULT_FLOAT_TOLERANCE, SAMPLE_ROWS) == (1e-9, 5)
    assert all(hasattr(pkg, name) for name in pkg.__all__)
    sizes = {p.name: len(p.read_text().splitlines()) for p in Path(pkg.__file__).parent.glob("*.py")}
    assert len(sizes) == 12 and max(sizes.values()) <= 500, sizes


def test_a_wide_table_names_exactly_the_changed_column(engine, tmp_path, request):
    """150 columns, one of which changed in 40 keys: the column is named from every changed key,
    in one pass, not from the sampled rows (whose 'only left' and 'only right' rows differ in key)."""
    from sqlglot import exp

    from rerun_safety.diff import Side, compare

    con, schema = engine_connection(engine, tmp_path, request)
    try:
        cols = ", ".join(f"c{i} int" for i in range(149))
        values = ", ".join(f"(g * {i + 1}) % 97" for i in range(149))
        for name in ("wide_l", "wide_r"):
            con.execute(f"create table {name} (id int, {cols})")
            series = "range(2000) t(g)" if engine == "duckdb" else "generate_series(0, 1999) g"
            con.execute(f"insert into {name} select g, {values} from {series}")
        con.execute("update wide_r set c77 = c77 + 1 where id % 50 = 0")
        con.execute("delete from wide_r where id = 1")
        con.execute("insert into wide_r (id, c3) values (5000, 1)")
        d = diff_relations(con, (schema, "wide_l"), (schema, "wide_r"), key=("id",))
        assert (d.changed_rows, d.missing_keys, d.extra_keys) == (40, 1, 1)
        assert d.differing_columns == ("c77",)
        got = compare(Side(con, exp.table_("wide_l", db=schema)), Side(con, exp.table_("wide_r", db=schema)),
                      key=("id",))
        assert got.differing_columns == ("c77",)
    finally:
        con.close()


_WIDE_FIELDS = ("reference_rows", "rows", "identical", "extra_rows", "missing_rows", "extra_copies", "duplicate_keys",
                "reference_duplicate_keys", "missing_keys", "extra_keys", "changed_rows", "changed_keys",
                "differing_columns")


def _wide_pair(con, engine: str, edits: list[str]) -> None:
    """Two 41-column tables of 2,000 keyed rows (ints, floats, text, a column with NULLs); `edits` on the right."""
    ints = ", ".join(f"c{i} int" for i in range(30))
    floats = ", ".join(f"f{j} double precision" for j in range(8))
    series = "range(2000) t(g)" if engine == "duckdb" else "generate_series(0, 1999) g"
    values = (", ".join(f"(g * {i + 1}) % 97" for i in range(30)) + ", "
              + ", ".join(f"g * 0.37 + {j}" for j in range(8)) + ", 'x' || (g % 13), case when g % 7 = 0 then null else g end")
    for name in ("wide_l", "wide_r"):
        con.execute(f"drop table if exists {name}")
        con.execute(f"create table {name} (id int, {ints}, {floats}, t0 text, n0 int)")
        con.execute(f"insert into {name} select g, {values} from {series}")
    for edit in edits:
        con.execute(edit)


def _both_paths(con, schema: str, monkeypatch):
    """The diff of the pair as a wide keyed table, and as the bucket path computes it."""
    from rerun_safety.diff import limits

    got = diff_relations(con, (schema, "wide_l"), (schema, "wide_r"), key=("id",))
    monkeypatch.setattr(limits, "WIDE_COLUMNS", 10**6)
    ref = diff_relations(con, (schema, "wide_l"), (schema, "wide_r"), key=("id",))
    monkeypatch.undo()
    assert ref.bucketing != "key"
    return got, ref


def test_a_wide_keyed_table_is_diffed_by_key_as_the_buckets_would(engine, tmp_path, request, monkeypatch):
    """41 columns keyed on id: the keys that differ are found by one join (bucketing 'key') and
    their columns compared by value; every count and the differing columns agree with the bucket
    path's, floats moved within their tolerance are not differences, NULLs are values."""
    con, schema = engine_connection(engine, tmp_path, request)
    try:
        _wide_pair(con, engine, [
            "update wide_r set c5 = c5 + 1 where id % 100 = 3",            # 20 keys
            "update wide_r set t0 = 'changed' where id % 250 = 7",          # 8 keys
            "update wide_r set f3 = f3 * (1 + 1e-13) where id % 40 = 11",   # 50 keys, within the tolerance
            "update wide_r set f1 = f1 + 1 where id % 500 = 9",             # 4 keys
            "update wide_r set n0 = 5 where id = 14",                       # NULL -> 5
            "delete from wide_r where id = 1",
            "insert into wide_r (id, c0) values (9000, 1)"])
        got, ref = _both_paths(con, schema, monkeypatch)
        assert got.bucketing == "key"
        assert (got.changed_rows, got.changed_keys, got.missing_keys, got.extra_keys) == (33, 33, 1, 1)
        assert (got.missing_rows, got.extra_rows, got.reference_rows, got.rows) == (34, 34, 2000, 2000)
        assert got.differing_columns == ("c5", "f1", "t0", "n0")
        assert all(getattr(got, f) == getattr(ref, f) for f in _WIDE_FIELDS), \
            {f: (getattr(got, f), getattr(ref, f)) for f in _WIDE_FIELDS if getattr(got, f) != getattr(ref, f)}
        # the sample: the first keys on each side; a changed key as a pair of its key and the
        # columns that differ (as read to compare them), a key on one side as its whole row
        sample = [(r["_diff"], r["id"]) for r in got.sample]
        assert sample[:5] == [("extra", k) for k in (3, 7, 9, 14, 103)]
        assert [k for label, k in sample if label == "missing"][:5] == [1, 3, 7, 9, 14]
        assert [len(r) for r in got.sample if r["id"] == 1] == [42]
        assert all(list(r) == ["_diff", "id", "c5", "f1", "t0", "n0"] for r in got.sample if r["id"] != 1)
        assert [(r["c5"], r["n0"]) for r in got.sample if r["id"] == 3] == [(19, 3), (18, 3)]
        assert [r["n0"] for r in got.sample if r["id"] == 14] == [5, None]
        # whole rows on request (`rerun-safety diff` asks): the same rows, every column
        from sqlglot import exp

        from rerun_safety.diff import Side
        whole = compare(Side(con, exp.table_("wide_l", db=schema)), Side(con, exp.table_("wide_r", db=schema)),
                        key=("id",))
        assert [(r["_diff"], r["id"]) for r in whole.sample] == sample and all(len(r) == 42 for r in whole.sample)
        assert [{k: r[k] for k in got.sample[i]} for i, r in enumerate(whole.sample)] == list(got.sample)
        if engine == "duckdb":  # the differing keys' temporary table is dropped
            assert con.fetchall("select table_name from duckdb_tables() where temporary") == []
        if engine == "duckdb":  # a side over WIDE_MAX_ROWS rows: the buckets, the same answer
            from rerun_safety.diff import limits

            monkeypatch.setattr(limits, "WIDE_MAX_ROWS", 1999)
            big = diff_relations(con, (schema, "wide_l"), (schema, "wide_r"), key=("id",))
            monkeypatch.undo()
            assert big.bucketing == "range" and all(getattr(big, f) == getattr(ref, f) for f in _WIDE_FIELDS)
        # float noise alone: identical, still by key
        _wide_pair(con, engine, ["update wide_r set f3 = f3 * (1 + 1e-13) where id % 40 = 11"])
        got, ref = _both_paths(con, schema, monkeypatch)
        assert (got.identical, got.bucketing, got.reference_rows, got.rows) == (True, "key", 2000, 2000)
        assert ref.identical
    finally:
        con.close()


def test_a_wide_keyed_table_with_a_filter_and_ignored_columns(engine, tmp_path, request, monkeypatch):
    """--where and ignored columns apply by key as by buckets: only the filtered rows are compared,
    an ignored column's change is no difference."""
    con, schema = engine_connection(engine, tmp_path, request)
    try:
        _wide_pair(con, engine, ["update wide_r set c5 = c5 + 1 where id % 100 = 3",
                                 "update wide_r set c7 = c7 + 1 where id % 10 = 1",
                                 "delete from wide_r where id in (2, 1502)"])
        from rerun_safety.diff import limits

        def run():
            return diff_relations(con, (schema, "wide_l"), (schema, "wide_r"), key=("id",), where="id < 1000",
                                  ignore_columns=("c7",))
        got = run()
        monkeypatch.setattr(limits, "WIDE_COLUMNS", 10**6)
        ref = run()
        monkeypatch.undo()
        assert (got.bucketing, ref.bucketing) == ("key", "range")
        assert (got.reference_rows, got.rows, got.changed_rows, got.missing_keys, got.differing_columns) == \
            (1000, 999, 10, 1, ("c5",))
        assert all(getattr(got, f) == getattr(ref, f) for f in _WIDE_FIELDS)
    finally:
        con.close()


def test_a_wide_table_keyed_on_text_goes_by_key_on_postgres(tmp_path, request, monkeypatch):
    """PostgreSQL groups by any key with a hash opclass: a text key goes by key too, rows read back by
    address; the same counts and columns as the buckets."""
    con, schema = engine_connection("postgres", tmp_path, request)
    try:
        _wide_pair(con, "postgres", ["update wide_r set c5 = c5 + 1 where id % 100 = 3",
                                     "delete from wide_r where id = 1"])
        for name in ("wide_l", "wide_r"):
            con.execute(f"alter table {name} alter column id type text using 'k' || id")
        got, ref = _both_paths(con, schema, monkeypatch)
        assert got.bucketing == "key"
        assert (got.changed_rows, got.missing_keys, got.extra_keys, got.differing_columns) == (20, 1, 0, ("c5",))
        assert all(getattr(got, f) == getattr(ref, f) for f in _WIDE_FIELDS)
        assert [r["id"] for r in got.sample if r["_diff"] == "missing"][:3] == ["k1", "k1003", "k103"]
    finally:
        con.close()


@pytest.mark.parametrize("case", ["duplicates", "offsetting", "null_key"])
def test_a_wide_keyed_table_with_repeated_or_null_keys_goes_by_buckets(engine, tmp_path, request, monkeypatch, case):
    """A key with more rows on one side than the join can show (one row left, the same row twice
    right; or that, and the other way round on another key, which balances the row counts), or a
    NULL key: the join does not answer, the buckets do, and the counts are theirs."""
    edits = {
        "duplicates": ["insert into wide_r select * from wide_r where id = 10",
                       "update wide_r set c5 = c5 + 1 where id = 20"],
        "offsetting": ["insert into wide_r select * from wide_r where id = 10",
                       "insert into wide_l select * from wide_l where id = 11",
                       "update wide_r set c5 = c5 + 1 where id = 20"],
        "null_key": ["update wide_r set id = null where id = 30",
                     "update wide_r set c5 = c5 + 1 where id = 20"],
    }[case]
    con, schema = engine_connection(engine, tmp_path, request)
    try:
        _wide_pair(con, engine, edits)
        got, ref = _both_paths(con, schema, monkeypatch)
        assert got.bucketing != "key"
        assert all(getattr(got, f) == getattr(ref, f) for f in _WIDE_FIELDS)
        expected = {"duplicates": (1, 0, 1, 2, 1), "offsetting": (1, 1, 1, 2, 2), "null_key": (0, 0, 1, 2, 2)}[case]
        assert (got.duplicate_keys, got.reference_duplicate_keys, got.changed_rows,
                got.extra_rows, got.missing_rows) == expected, got
    finally:
        con.close()


def test_the_cli_shows_a_changed_key_once_with_what_changed(tmp_path):
    """150 columns, 1,000 of 20,000 keys changed in one column: the CLI names that column, shows
    each sampled changed key once (the key, then the column as left -> right), and the whole rows
    only with --all-columns; a key on one side only is shown whole."""
    path = tmp_path / "wide.duckdb"
    con = duckdb.connect(str(path))
    cols = ", ".join(f"c{i} integer" for i in range(150))
    for t in ("a", "b"):
        con.execute(f"create table {t} (id integer, {cols})")
        con.execute(f"insert into {t} select i, " + ", ".join(f"i + {k}" for k in range(150)) + " from range(20000) r(i)")
    con.execute("update b set c77 = c77 + 1 where id % 20 = 0")
    con.execute("insert into b (id, c0) values (-1, 5)")
    con.close()
    sides = [f"{path}:main.a", f"{path}:main.b", "--key", "id"]
    res = CliRunner().invoke(main, ["diff", *sides])
    assert res.exit_code == 1, res.output
    lines = res.output.splitlines()
    assert "  differing columns     c77" in lines and "  changed keys          1,000" in lines
    start = lines.index("  changed keys (sample; left -> right):")
    changed = [ln for ln in lines[start + 1:] if ln.startswith("    id=")]
    # the sample's changed keys, each shown once as a pair (the other side's row fetched by key)
    assert 5 <= len(changed) <= 10
    keys = set()
    for ln in changed:
        key, left, right = map(int, re.fullmatch(r"    id=(\d+): c77 (\d+) -> (\d+)", ln).groups())
        assert (key % 20, left, right) == (0, key + 77, key + 78)
        keys.add(key)
    assert len(keys) == len(changed)
    # rows shown whole: only keys on one side (here at most the new key -1)
    sample = lines[lines.index("  sample:") + 1:] if "  sample:" in lines else []
    assert all(ln.split(",")[0].split() == ["only_right", "id=-1"] and "c149=None" in ln for ln in sample)
    res = CliRunner().invoke(main, ["diff", *sides, "--all-columns"])
    whole = [ln for ln in res.output.splitlines() if ln.startswith("    only_")]
    assert len(whole) == 2 * len(changed) + len(sample) and all("c149=" in ln for ln in whole)
    res = CliRunner().invoke(main, ["diff", *sides, "--format", "json"])
    out = json.loads(res.output)
    assert out["differing_columns"] == ["c77"] and len(out["changed_sample"]) == len(changed)
    assert all(set(c["columns"]) == {"c77"} for c in out["changed_sample"])
    res = CliRunner().invoke(main, ["diff", *sides, "--format", "md"])
    assert "| key | column | left | right |" in res.output
    first = min(keys)
    assert f"| id={first} | c77 | {first + 77} | {first + 78} |" in res.output


def test_duckdb_range_buckets_go_first_and_leave_nothing_behind(tmp_path, monkeypatch):
    """DuckDB, a key with an integer range: the range buckets decide identity in one pass (no
    totals pass first, identical or not), with a perfect hash table whose setting is put back; the
    rows of the unmatched keys are read once into temporary tables, dropped at the end. A key
    without an integer range still gets the totals pass first."""
    import rerun_safety.diff.core as core
    from rerun_safety.diff import limits

    monkeypatch.setattr(limits, "RANGE_ROWS_PER_BUCKET", 8)  # 6,250 buckets: past the default 4,096
    path = tmp_path / "c.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("create table a as select i as id, 'k' || i as name, i % 7 as grp, cast(i as double) * 0.5 as x "
                    "from range(50000) t(i)")
        con.execute("create table dup as select * from a union all select * from a where id % 500 = 3")
        con.execute("create table same as select * from a")
        con.execute("create table changed as select id, name, case when id % 1000 = 7 then grp + 1 else grp end "
                    "as grp, case when id % 1000 = 9 then x + 1 else x * (1 + 1e-12) end as x from a "
                    "where id % 5000 <> 11")
    calls: list[str] = []
    totals = core.checksum_totals
    monkeypatch.setattr(core, "checksum_totals", lambda plan, same: calls.append("totals") or totals(plan, same))
    import rerun_safety.diff.rows as rows

    narrow = rows._narrow_to_keys
    monkeypatch.setattr(rows, "_narrow_to_keys", lambda plan, keys: calls.append(len(keys)) or narrow(plan, keys))
    con = DuckDBConnection(str(path))
    try:
        dup = diff_relations(con, ("main", "a"), ("main", "dup"), key=("id",))
        assert calls == [100] and (dup.extra_rows, dup.duplicate_keys, dup.bucketing) == (100, 100, "range")
        calls.clear()
        same = diff_relations(con, ("main", "a"), ("main", "same"), key=("id",))
        assert calls == [] and same.identical and same.bucketing == "range" and same.buckets > 4096
        ch = diff_relations(con, ("main", "a"), ("main", "changed"), key=("id",))
        assert calls[:1] == [110] and not ch.identical  # the unmatched keys, read once
        calls.clear()
        # 50 keys with grp changed, 50 with x changed beyond the tolerance (the rest within it), 10 gone
        assert (ch.changed_rows, ch.missing_keys, ch.extra_keys, ch.missing_rows, ch.extra_rows) == (100, 10, 0, 110, 100)
        assert ch.differing_columns == ("grp", "x")
        assert con.fetchone("select current_setting('perfect_ht_threshold')")[0] == 12
        assert con.fetchone("select count(*) from duckdb_tables() where temporary")[0] == 0
        by_name = diff_relations(con, ("main", "a"), ("main", "same"), key=("name",))
        assert calls == ["totals"] and by_name.identical
    finally:
        con.close()


@pytest.mark.parametrize("key", [(), ("id",)])
def test_postgres_numeric_nan_and_infinities_are_told_apart_and_materialized_views_are_read(pg_server, pg_database, key):
    """numeric's own hash gives NaN, Infinity and -Infinity one value: three rows whose specials swap
    places must still differ (they compared identical), by buckets and by key; a materialized view is a
    side like a table (information_schema does not list it)."""
    con = PgConnection({"host": pg_server.host, "port": pg_server.port, "user": pg_server.user}, pg_database)
    try:
        con.execute("create table nan_l (id int, x numeric, y numeric(12, 2))")
        con.execute("insert into nan_l values (1, 'NaN', 1), (2, 'Infinity', 2), (3, '-Infinity', 3), (4, 1.5, 4)")
        con.execute("create table nan_r as select id, case id when 1 then 'Infinity'::numeric when 2 then "
                    "'-Infinity'::numeric when 3 then 'NaN'::numeric else x end as x, y from nan_l")
        con.execute("create materialized view nan_mv as select * from nan_l")
        got = compare(Side(con, table("public", "nan_l")), Side(con, table("public", "nan_r")), key=key)
        assert not got.identical
        assert (got.missing_rows, got.extra_rows) == (3, 3)
        if key:
            assert got.changed_rows == 3
        same = compare(Side(con, table("public", "nan_mv")), Side(con, table("public", "nan_l")), key=key)
        assert same.identical and (same.reference_rows, same.rows) == (4, 4)
        other = compare(Side(con, table("public", "nan_mv")), Side(con, table("public", "nan_r")), key=key)
        assert not other.identical and other.missing_rows == 3
    finally:
        con.close()
