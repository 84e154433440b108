"""Float columns equal within a relative tolerance: the diff (`rerun-safety diff`, `compare`,
`diff_relations`), on DuckDB files and on the real PostgreSQL server of the test harness.

Floats come from Python (`repr`, cast to float8), so each value is exactly the double we built:
two sums of the same numbers in different orders, values a hair apart on either side of a rounding
boundary of the checksum, and real changes beside them.
"""
from __future__ import annotations

import math
import random
import struct
from collections import Counter

import duckdb
import pytest

from support.common import engine_connection
from rerun_safety import diff as diffmod
from rerun_safety.diff import DEFAULT_FLOAT_TOLERANCE, Side, compare, diff_relations, floats_close
from rerun_safety.warehouse.base import table
from rerun_safety.warehouse.duckdb.engine import DuckDBConnection
from rerun_safety.warehouse.postgres.engine import PgConnection
from test_diff import Env, _oracle_keys

N = 2000


@pytest.fixture
def env(engine, tmp_path, request):
    return Env(engine, tmp_path, request)


def _f(v: float) -> str:
    return "cast(null as float8)" if v is None else f"cast('{v!r}' as float8)"


def load(env: Env, name: str, rows, cols: str = "id bigint, grp int, x float8") -> None:
    body = ", ".join("(" + ", ".join(_f(v) if isinstance(v, float) or v is None else str(v) for v in r) + ")"
                     for r in rows)
    env.sql(f"create table {name} ({cols})", *([f"insert into {name} values {body}"] if rows else []))


def summed_twice(n: int = N) -> tuple[list, list]:
    """(id, grp, sum) rows: the same 40 numbers per row summed forwards and in a shuffled order."""
    rng = random.Random(12)
    forward, shuffled = [], []
    for i in range(n):
        parts = [rng.uniform(-1e3, 1e4) * 10 ** rng.randint(-3, 3) for _ in range(40)]
        forward.append((i, i % 7, sum(parts)))
        rng.shuffle(parts)
        shuffled.append((i, i % 7, sum(parts)))
    return forward, shuffled


def boundary_pair(k: int) -> tuple[float, float]:
    """Two values 2^-44 apart (about 6e-14 relative) on either side of a rounding boundary of the
    default tolerance: p = 31 bits, so [1, 2) is rounded to multiples of 2^-30."""
    mid = 1.0 + (k + 0.5) * 2.0 ** -30
    return mid - 2.0 ** -45, mid + 2.0 ** -45


def test_summation_order_is_identical(env):
    a, b = summed_twice()
    exact_changes = sum(1 for x, y in zip(a, b) if x[2] != y[2])
    assert exact_changes > 1000  # most sums really differ in their last bits
    assert max(abs(x[2] - y[2]) / max(abs(x[2]), 1) for x, y in zip(a, b)) < 1e-12
    load(env, "a", a)
    load(env, "b", list(reversed(b)))
    for extra in ((), ("--key", "id"), ("--partition-by", "grp")):
        code, out = env.json("a", "b", *extra)
        assert (code, out["identical"], out["left_rows"], out["right_rows"], out["only_left"], out["only_right"],
                out["changed"], out["float_tolerance"]) == (0, True, N, N, 0, 0, 0, DEFAULT_FLOAT_TOLERANCE), extra
    assert env.cli("a", "b").exit_code == 0
    # exact comparison: every sum that moved is a changed row
    code, out = env.json("a", "b", "--key", "id", "--float-tolerance", "0")
    assert (code, out["changed"], out["rows_only_left"], out["rows_only_right"]) == (1, exact_changes,
                                                                                     exact_changes, exact_changes)


def test_real_differences_beside_noise_are_found(env):
    a, b = summed_twice()
    b[10] = (10, 10 % 7, b[10][2] * (1 + 1e-6))  # beyond the tolerance
    b.append((N, 3, 1.5))  # a row added
    load(env, "a", a)
    load(env, "b", b)
    code, out = env.json("a", "b", "--key", "id")
    assert (code, out["identical"], out["only_left"], out["only_right"], out["changed"],
            out["rows_only_left"], out["rows_only_right"]) == (1, False, 0, 1, 1, 1, 2)
    assert out["differing_columns"] == ["x"]
    assert sorted((r["_diff"], r["id"]) for r in out["sample"]) == [("only_left", 10), ("only_right", 10),
                                                                    ("only_right", N)]
    code, out = env.json("a", "b")
    assert (code, out["only_left"], out["only_right"], out["changed"]) == (1, 1, 2, 0)
    # a relative tolerance of 1e-5 takes the change of 1e-6 as noise too
    code, out = env.json("a", "b", "--key", "id", "--float-tolerance", "1e-5")
    assert (code, out["only_left"], out["only_right"], out["changed"]) == (1, 0, 1, 0)


def test_the_unmatched_keys_filter_the_float_pairing_and_give_the_same_answer(env, monkeypatch):
    """Keyed on one integer column, the float pairing and the column search read the rows of the
    unmatched keys only (not whole buckets): the answer is the one the buckets give."""
    from rerun_safety.diff import limits, rows

    a, b = summed_twice()  # every sum in another order: noise, a few rows across a rounding boundary
    b[10] = (10, 5, b[10][2])  # grp changed (from 3)
    b[20] = (20, 20 % 7, b[20][2] * (1 + 1e-6))  # x beyond the tolerance
    b.append((N, 3, 1.5))  # a row added
    load(env, "a", a)
    load(env, "b", b)
    seen: list = []
    loose = rows._loose_rows_same

    def spy(plan, buckets, keys=None):
        seen.append(keys)
        return loose(plan, buckets, keys)

    monkeypatch.setattr(rows, "_loose_rows_same", spy)
    narrowed: list = []
    narrow = rows._narrow_to_keys
    monkeypatch.setattr(rows, "_narrow_to_keys", lambda plan, keys: narrowed.append(keys) or narrow(plan, keys))
    code, by_keys = env.json("a", "b", "--key", "id")
    assert (code, by_keys["only_left"], by_keys["only_right"], by_keys["changed"]) == (1, 0, 1, 2)
    assert by_keys["differing_columns"] == ["grp", "x"]
    # DuckDB copies the rows of those keys once (and the pairing reads them all); PostgreSQL filters by them
    listed = narrowed[-1] if env.engine == "duckdb" else seen[-1]
    assert seen and listed is not None and {10, 20, N} <= set(listed) and len(listed) < 50
    assert len(narrowed) == (env.engine == "duckdb") and (seen[-1] is None) == (env.engine == "duckdb")
    near: list = []
    find_near = rows._near_buckets
    monkeypatch.setattr(rows, "_near_buckets", lambda plan, buckets: near.append(find_near(plan, buckets)) or near[-1])
    monkeypatch.setattr(limits, "MAX_LISTED_KEYS", 0)  # too many keys: the buckets filter
    seen.clear()
    code, by_buckets = env.json("a", "b", "--key", "id")
    assert seen == [None] and len(narrowed) == (env.engine == "duckdb")
    # DuckDB found the buckets where rows may pair with a query of its own (the grouping did not
    # carry the exact columns' hash); PostgreSQL carries it
    assert len(near) == (env.engine == "duckdb") and all(near)
    assert (code, by_buckets) == (1, by_keys)


def _rounded(env: Env, values: list[float]) -> list[float]:
    d = "duckdb" if env.engine == "duckdb" else "postgres"
    expr = diffmod.round_float_sql("x", d, DEFAULT_FLOAT_TOLERANCE)
    env.sql("create table probe (i int, x float8)",
            "insert into probe values " + ", ".join(f"({i}, {_f(v)})" for i, v in enumerate(values)))
    if env.engine == "duckdb":
        con = duckdb.connect(str(env.path))
        try:
            return [r[0] for r in con.execute(f"select {expr} from probe order by i").fetchall()]
        finally:
            con.close()
    con = env.server.connect(env.db)
    try:
        with con.cursor() as cur:
            cur.execute(f"select {expr} from probe order by i")
            return [r[0] for r in cur.fetchall()]
    finally:
        con.close()


def test_values_across_a_rounding_boundary(env, monkeypatch):
    """Each pair rounds to two neighbouring grid points, so its bucket's checksum differs; the rows
    are then paired by their exact values and the tables are identical. Real changes among them
    (same bucket, same other columns) are still counted exactly."""
    for name in ("RANGE_ROWS_PER_BUCKET", "PG_RANGE_ROWS_PER_BUCKET", "HASH_ROWS_PER_BUCKET"):
        monkeypatch.setattr(diffmod.limits, name, 4)
    pairs = [boundary_pair(k * 1000) for k in range(12)]
    rounded = _rounded(env, [v for p in pairs for v in p])
    assert all(rounded[2 * i] != rounded[2 * i + 1] for i in range(12))  # really across a boundary
    assert all(floats_close(x, y, DEFAULT_FLOAT_TOLERANCE) for x, y in pairs)
    load(env, "a", [(i, 0, x) for i, (x, _y) in enumerate(pairs)] + [(100, 0, 1.0), (101, 0, 1.0)])
    load(env, "b", [(i, 0, y) for i, (_x, y) in enumerate(pairs)] + [(100, 0, 1.0), (101, 0, 1.0)])
    for extra in ((), ("--key", "id"), ("--key", "grp"), ("--partition-by", "x")):
        code, out = env.json("a", "b", *extra)
        assert (code, out["identical"], out["only_left"], out["only_right"], out["changed"]) == (0, True, 0, 0, 0), extra
        assert out["buckets"]["differing"] > 0, extra  # the buckets differed and were confirmed row by row
        assert "differing_partitions" not in out and out["differing_columns"] == []
    # pairs 0..5 across the boundary, pair 6 moved by 1e-8 (beyond 1e-9), one row duplicated
    load(env, "c", [(i, 0, y) for i, (_x, y) in enumerate(pairs)]
         + [(100, 0, 1.0), (101, 0, 1.0), (101, 0, 1.0)])
    env.sql("update c set x = x + 1e-8 where id = 6")
    code, out = env.json("a", "c", "--key", "id")
    assert (code, out["only_left"], out["only_right"], out["changed"], out["duplicate_keys_right"],
            out["rows_only_left"], out["rows_only_right"]) == (1, 0, 0, 1, 1, 1, 2)
    code, out = env.json("a", "c")
    assert (code, out["only_left"], out["only_right"]) == (1, 1, 2)
    # with the grp key every row shares one key: a multiset per key, paired by value
    code, out = env.json("a", "c", "--key", "grp")
    assert (code, out["changed"], out["rows_only_left"], out["rows_only_right"]) == (1, 0, 1, 2)


def test_keys_whose_other_rows_cannot_pair_stay_changed(env):
    """Rows no row of the other side can pair with (another id, or a float beyond reach) come back
    only as the first samples; their keys must still count as changed. Eight keys (grp), each with
    one row across a rounding boundary (pairs) and one row whose id differs (cannot pair)."""
    pairs = [boundary_pair(k * 1000) for k in range(8)]
    load(env, "a", [(10 + g, g, x) for g, (x, _y) in enumerate(pairs)] + [(100 + g, g, 5.0) for g in range(8)])
    load(env, "b", [(10 + g, g, y) for g, (_x, y) in enumerate(pairs)] + [(200 + g, g, 5.0) for g in range(8)])
    code, out = env.json("a", "b", "--key", "grp")
    assert (code, out["changed"], out["only_left"], out["only_right"], out["rows_only_left"],
            out["rows_only_right"]) == (1, 8, 0, 0, 8, 8)
    left = [r["id"] for r in out["sample"] if r["_diff"] == "only_left"]
    assert len(left) == 5 and set(left) < set(range(100, 108))  # the first five by bucket and hash
    # a float moved beyond its tolerance cannot pair either: every key changed, none paired
    env.sql("create table c as select * from b", "update c set x = x * 1.001 where id < 100")
    code, out = env.json("a", "c", "--key", "grp")
    assert (code, out["changed"], out["rows_only_left"], out["rows_only_right"]) == (1, 8, 16, 16)


def test_integers_and_decimals_stay_exact(env):
    cols = "id int, n bigint, d decimal(38, 10), x float8"
    big = 2 ** 53 + 1  # not a double: any cast to float would call it 2^53
    load(env, "a", [(1, big, "12345678901234567890.0000000001", 1.0), (2, 5, "1.5", 2.0), (3, 7, "0", 3.0)], cols)
    load(env, "b", [(1, big - 1, "12345678901234567890.0000000001", 1.0), (2, 5, "1.5000000001", 2.0),
                    (3, 7, "0", 3.0 * (1 + 1e-12))], cols)
    code, out = env.json("a", "b", "--key", "id")
    assert (code, out["changed"], out["rows_only_left"], out["rows_only_right"]) == (1, 2, 2, 2)
    assert out["differing_columns"] == ["n", "d"]
    assert sorted({r["id"] for r in out["sample"]}) == [1, 2]
    code, out = env.json("a", "b")
    assert (code, out["only_left"], out["only_right"]) == (1, 2, 2)


def test_real_columns_use_their_own_precision(env):
    """32-bit floats: at least 2^-20 (their own rounding is 6e-8)."""
    cols = "id int, r real"
    load(env, "a", [(1, 0.1), (2, 1000.0)], cols)
    env.sql("create table b as select * from a", "update b set r = r * cast(1.0000003 as real) where id = 1",
            "insert into b values (3, 1)")
    code, out = env.json("a", "b", "--key", "id")
    assert (code, out["changed"], out["only_right"]) == (1, 0, 1)
    env.sql("update b set r = r * cast(1.00001 as real) where id = 2")
    code, out = env.json("a", "b", "--key", "id")
    assert (code, out["changed"], out["only_right"]) == (1, 1, 1)


@pytest.mark.parametrize("value", ["abc", "-1", "1", "nan", "1e400"])
def test_bad_float_tolerance_exits_2_with_one_line(env, value):
    load(env, "a", [(1, 0, 1.0)])
    res = env.cli("a", "a", "--float-tolerance", value)
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--float-tolerance must be a relative tolerance >= 0 and < 1" in lines[0]
    assert f"got '{value}'" in lines[0]


def test_diff_relations_takes_the_tolerance(engine, tmp_path, request):
    """The game day's entry point: None is the default, 0 exact, a number its tolerance."""
    con, schema = engine_connection(engine, tmp_path, request)
    try:
        con.execute("create table ref (id int, total double precision)")
        con.execute("insert into ref values (1, 1234.5), (2, 0.0), (3, 7e20)")
        con.execute("create table cur (id int, total double precision)")
        # 1.2e-13 relative; a sum that should be 0 came out as 3e-13; 7e20 moved by 7e7 (1e-13)
        con.execute("insert into cur values (1, 1234.5000000001503), (2, 3e-13), (3, 7.00000000000070e20)")
        got = diff_relations(con, (schema, "ref"), (schema, "cur"), key=("id",))
        assert (got.identical, got.changed_rows, got.float_tolerance) == (True, 0, 1e-9)
        got = diff_relations(con, (schema, "ref"), (schema, "cur"), key=("id",), float_tolerance=0)
        assert (got.identical, got.changed_rows, got.differing_columns) == (False, 3, ("total",))
        # 2e-13: the first and the third are within it, 3e-13 from 0 is not (absolute below 1)
        got = diff_relations(con, (schema, "ref"), (schema, "cur"), key=("id",), float_tolerance=2e-13)
        assert (got.identical, got.changed_rows, got.extra_rows, got.missing_rows) == (False, 1, 1, 1)
        assert [(r["_diff"], r["id"]) for r in got.sample] == [("extra", 2), ("missing", 2)]
        with pytest.raises(diffmod.DiffError, match="float tolerance must be a number >= 0 and < 1"):
            diff_relations(con, (schema, "ref"), (schema, "cur"), float_tolerance=-1e-9)
    finally:
        con.close()


def test_two_postgres_databases_pair_floats(pg_server, tmp_path, monkeypatch):
    """Two connections: the unmatched rows are read from each database and paired in Python."""
    monkeypatch.setattr(diffmod.limits, "PG_RANGE_ROWS_PER_BUCKET", 4)
    monkeypatch.setattr(diffmod.limits, "CHUNK_ROWS", 8)
    pairs = [boundary_pair(k * 1000) for k in range(10)]
    left = [(i, i % 2, x) for i, (x, _y) in enumerate(pairs)]
    right = [(i, i % 2, y) for i, (_x, y) in enumerate(pairs)]
    right[3] = (3, 1, right[3][2] + 1e-6)
    right.append((50, 0, 2.0))
    dbs = [pg_server.create_database("fl"), pg_server.create_database("fr")]
    cons = [PgConnection({"host": pg_server.host, "port": pg_server.port, "user": pg_server.user}, db) for db in dbs]
    try:
        for con, rows in zip(cons, (left, right)):
            con.execute("create table t (id bigint, grp int, x float8)")
            con.execute("insert into t values " + ", ".join(f"({i}, {g}, {_f(x)})" for i, g, x in rows))
        sides = (Side(cons[0], table("public", "t")), Side(cons[1], table("public", "t")))
        got = compare(*sides, key=("id",))
        assert (got.identical, got.changed_keys, got.extra_keys, got.missing_keys, got.missing_rows,
                got.extra_rows) == (False, 1, 1, 0, 1, 2)
        assert sorted((r["_diff"], r["id"]) for r in got.sample) == [("extra", 3), ("extra", 50), ("missing", 3)]
        got = compare(*sides)
        assert (got.missing_rows, got.extra_rows) == (1, 2)
        got = compare(*sides, key=("id",), float_tolerance=0)
        assert (got.changed_keys, got.missing_rows, got.extra_rows) == (10, 10, 11)
    finally:
        for con in cons:
            con.close()
        for db in dbs:
            pg_server.drop_database(db)


def test_rounding_matches_python(engine, tmp_path, request):
    """The SQL rounding is the Python reference on both engines, and equal rounded values are
    always within the tolerance."""
    rng = random.Random(5)
    values = [rng.uniform(-2, 2) * 10 ** rng.randint(-12, 300) for _ in range(300)]
    values += [0.0, -0.0, 1.0, -1.0, 0.5, 2.0 ** -1074, 1e300, 1.5e300, math.inf, -math.inf]
    tol = DEFAULT_FLOAT_TOLERANCE
    bits = 1 + math.ceil(-math.log2(tol))
    c, m = float(2 ** (53 - bits) + 1), 1.5 * 2.0 ** (53 - bits)

    def ref(x: float) -> float:
        if abs(x) < 1:
            return (x + m) - m
        if abs(x) < 1e300:
            g = x * c
            return g + (x - g)
        return x

    env = Env(engine, tmp_path, request)
    got = _rounded(env, values)
    want = [ref(v) for v in values]
    assert [struct.pack("<d", v) for v in got[:-2]] == [struct.pack("<d", v + 0.0) for v in want[:-2]]
    assert got[-2:] == [math.inf, -math.inf]
    for x, r in zip(values, want):
        if math.isfinite(x):
            assert abs(x - r) <= tol * max(abs(x), 1) / 2


def _noisy(v, rng: random.Random):
    """v moved by at most 1e-12 of itself (absolute 1e-12 near zero): within the default tolerance."""
    if v is None:
        return None
    return v + rng.choice([-1, 1]) * rng.uniform(0, 1e-12) * max(abs(v), 1.0)


@pytest.mark.parametrize("mode", ["same", "across"])
def test_property_noise_changes_nothing(engine, mode, request, monkeypatch):
    """Random small tables with duplicates, NULLs, removed, added and changed rows, whose floats
    then get noise on the right side: every count equals the exact counts without the noise."""
    if engine == "duckdb" and mode == "across":
        pytest.skip("two DuckDB files share one connection")
    for name in ("RANGE_ROWS_PER_BUCKET", "PG_RANGE_ROWS_PER_BUCKET", "HASH_ROWS_PER_BUCKET"):
        monkeypatch.setattr(diffmod.limits, name, 2)
    monkeypatch.setattr(diffmod.limits, "CHUNK_ROWS", 5)
    rng = random.Random(20261201)
    if engine == "duckdb":
        lcon = rcon = DuckDBConnection(":memory:")
        schema = "main"
    else:
        server = request.getfixturevalue("pg_server")
        params = {"host": server.host, "port": server.port, "user": server.user}
        lcon = PgConnection(params, request.getfixturevalue("pg_database"))
        rdb = server.create_database("noiser") if mode == "across" else None
        rcon = PgConnection(params, rdb) if rdb else lcon
        schema = "public"
    # 1 + 2^-31 lies on a rounding boundary of the default tolerance: its noise rounds either way
    floats = [None, 0.0, 0.5, 2.0, -3.25, 1e6, 1.0 + 2.0 ** -31]
    confirmed = 0  # comparisons whose buckets differed and that the pairing found identical
    try:
        for case in range(20):
            left = [(rng.choice([None, *range(6)]), rng.choice([None, 0, 1]), rng.choice(floats), rng.choice(floats))
                    for _ in range(rng.randint(0, 25))]
            right = list(left)
            for _ in range(rng.randint(0, 5)):
                op = rng.random()
                if op < 0.3 and right:
                    right.pop(rng.randrange(len(right)))
                elif op < 0.6 and right:
                    right.append(rng.choice(right))
                elif right:
                    i = rng.randrange(len(right))
                    right[i] = (right[i][0], right[i][1], rng.choice(floats), right[i][3])  # a float changed
                else:
                    right.append((1, 1, 2.0, None))
            rng.shuffle(right)
            noisy = [(a, b, _noisy(x, rng), _noisy(y, rng)) for a, b, x, y in right]
            for con, name, rows in ((lcon, "l", left), (rcon, "r", noisy)):
                con.execute(f"drop table if exists {name}")
                con.execute(f"create table {name} (id int, v int, x float8, y float8)")
                if rows:
                    con.execute(f"insert into {name} values " + ", ".join(
                        "(" + ", ".join("null" if c is None else (_f(c) if isinstance(c, float) else str(c))
                                        for c in r) + ")" for r in rows))
            lrows, rrows = Counter(left), Counter(right)
            expected = (sum((lrows - rrows).values()), sum((rrows - lrows).values()))
            sides = (Side(lcon, table(schema, "l")), Side(rcon, table(schema, "r")))
            for key in ((), ("id", "v"), ("id",)):
                got = compare(*sides, key=key)
                assert (got.missing_rows, got.extra_rows) == expected, (case, key, left, right)
                assert got.identical == (expected == (0, 0)), (case, key)
                confirmed += got.identical and got.buckets_differing > 0
            assert (got.missing_keys, got.extra_keys, got.changed_keys, got.reference_duplicate_keys,
                    got.duplicate_keys) == _oracle_keys(left, right), (case, left, right)
            got = compare(*sides, bucket_column="v")
            assert (got.missing_rows, got.extra_rows) == expected, (case, "partition")
        assert confirmed >= 3
    finally:
        lcon.close()
        if rcon is not lcon:
            rcon.close()
            server.drop_database(rdb)
