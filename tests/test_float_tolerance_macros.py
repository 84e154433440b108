"""reconcile_sums and equal_multiset on float columns, built for real on DuckDB and PostgreSQL.

tests/fixtures/float_tolerance is a dbt project on the package: two seeds hold the same sums
added up in two orders (most differ in their last bits) plus pairs of values a hair apart across
a rounding boundary; a model moves one value by 1000 and adds a row; another moves a bigint by 1
next to 2^52 (a double cannot tell) and a decimal by 1e-10. Every data test has an exact
failure count.
"""
from __future__ import annotations

import csv
import json
import re
from decimal import Decimal

import pytest
import yaml
from click.testing import CliRunner

from support.common import REPO_ROOT, copy_fixture, duckdb_profile, warehouse_target, write_profiles
from rerun_safety.cli import main
from rerun_safety.diff import DEFAULT_FLOAT_TOLERANCE
from test_float_tolerance import boundary_pair, summed_twice

PROFILE = "float_tolerance"
ROWS = 300


def _seed_rows() -> tuple[list, list, list]:
    reference, reordered = summed_twice(ROWS)
    for k in range(6):
        a, b = boundary_pair(k * 1000)
        reference.append((1000 + k, 6, a))
        reordered.append((1000 + k, 6, b))
    exact = [(i, i % 3, 2 ** 52 + 7 * i, f"12345678901234567.{i:010d}") for i in range(1, 21)]
    return reference, reordered, exact


REFERENCE, REORDERED, EXACT = _seed_rows()
K = sum(1 for a, b in zip(REFERENCE, REORDERED) if a[2] != b[2])  # values that differ in their bits

EXPECTED_FAILURES = {
    "float_noise_equal_multiset": 0,
    "float_noise_reconcile_sums": 0,
    "float_noise_reconcile_sums_per_row": 0,
    "expect_fail_float_noise_exact_equal_multiset": 2 * K,  # each differing value: its row on both sides
    "expect_fail_float_noise_exact_reconcile_sums": K,      # one group per id
    "expect_fail_float_changed_equal_multiset": 3,          # id 10 on both sides, the added row
    "expect_fail_float_changed_reconcile_sums": 2,          # the groups of id 10 (3) and of the added row (5)
    "expect_fail_bigint_reconcile_sums": 1,
    "expect_fail_decimal_reconcile_sums": 1,
    "expect_fail_exact_equal_multiset": 4,                  # ids 3 and 4 on both sides
}


def _invoke(project, args, manifest=None):
    from dbt.cli.main import dbtRunner

    runner = dbtRunner(manifest=manifest) if manifest is not None else dbtRunner()
    return runner.invoke([*args, "--project-dir", str(project), "--profiles-dir", str(project)])


def _write_seeds(project) -> None:
    def write(name, header, rows):
        with open(project / "seeds" / f"{name}.csv", "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(header)
            w.writerows([[repr(v) if isinstance(v, float) else v for v in r] for r in rows])

    (project / "seeds").mkdir(exist_ok=True)
    write("data_float_reference", ["id", "grp", "x"], REFERENCE)
    write("data_float_reordered", ["id", "grp", "x"], REORDERED)
    write("data_exact", ["id", "grp", "n", "d"], EXACT)


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def built(request, tmp_path_factory):
    engine = request.param
    tmp = tmp_path_factory.mktemp(f"float_{engine}")
    project = copy_fixture("float_tolerance", tmp)
    _write_seeds(project)
    query, dbname = warehouse_target(engine, project, PROFILE, tmp, request, "rs_float")
    try:
        assert _invoke(project, ["deps"]).success
        build = _invoke(project, ["build"])
        yield build, query, project, (f"{tmp / 'rs_float.duckdb'}:main." if engine == "duckdb" else "public.")
    finally:
        if dbname:
            request.getfixturevalue("pg_server").drop_database(dbname)


def _by_name(res) -> dict:
    return {r.node.name: r for r in res.result.results}


def test_every_test_has_its_exact_failure_count(built):
    build, query, _project, _prefix = built
    assert build.success, build.exception
    # the seeds hold the values we wrote, bit for bit: K of them differ between the two orders
    assert K > 200
    assert query("select count(*) from data_float_reference a join data_float_reordered b on a.id = b.id "
                 "where a.x <> b.x")[0][0] == K
    tests = {name: r for name, r in _by_name(build).items() if r.node.resource_type == "test"}
    assert set(tests) == set(EXPECTED_FAILURES)
    got = {name: (str(r.status), r.failures) for name, r in tests.items()}
    assert got == {name: ("pass" if n == 0 else "warn", n) for name, n in EXPECTED_FAILURES.items()}


def test_failing_rows_say_what_moved(built):
    build, query, _project, _prefix = built
    nodes = _by_name(build)

    def rows(name):
        return query(f"select * from ({nodes[name].node.compiled_code}) as t")

    # bigint: exactly 1 apart next to 2^52 * 7 rows, found as 1 (sums stay exact integers)
    (grp, model_sum, compare_sum, diff, *_), = rows("expect_fail_bigint_reconcile_sums")
    assert (grp, int(diff), int(model_sum) - int(compare_sum)) == (0, 1, 1)
    (grp, _m, _c, diff, *_), = rows("expect_fail_decimal_reconcile_sums")
    assert (grp, Decimal(str(diff))) == (1, Decimal("1e-10"))
    assert sorted(r[0] for r in rows("expect_fail_float_changed_reconcile_sums")) == [3, 5]
    assert sorted(r[0] for r in rows("expect_fail_float_changed_equal_multiset")) == [10, 10, 99999]


def test_diff_calls_the_same_tables_identical(built):
    """The seeds that pass reconcile_sums and equal_multiset are identical for `rerun-safety diff`
    by default, and differ in exactly K rows with --float-tolerance 0."""
    build, _query, project, prefix = built
    assert build.success
    args = ["diff", f"{prefix}data_float_reference", f"{prefix}data_float_reordered", "--key", "id",
            "--format", "json", "--project-dir", str(project), "--profiles-dir", str(project)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["left_rows"] == ROWS + 6
    res = CliRunner().invoke(main, [*args, "--float-tolerance", "0"])
    out = json.loads(res.output)
    assert (res.exit_code, out["changed"], out["rows_only_left"], out["rows_only_right"]) == (1, K, K, K)


BAD_ARGUMENTS = [
    ("reconcile_sums", {"compare_to": "ref('m')", "column": "x", "float_tolerance": "tiny"},
     "reconcile_sums: argument 'float_tolerance' must be a number; got 'tiny' (a string). Fix: write it unquoted"),
    ("reconcile_sums", {"compare_to": "ref('m')", "column": "x", "float_tolerance": 2},
     "reconcile_sums: argument 'float_tolerance' is relative and must be < 1; got 2. Fix: float_tolerance: 1e-9"),
    ("equal_multiset", {"compare_to": "ref('m')", "float_tolerance": -1},
     "equal_multiset: argument 'float_tolerance' must be >= 0; got -1."),
]


def test_bad_float_tolerance_fails_at_parse_time(tmp_path):
    project = tmp_path / "bad_float"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "bad_float", "version": "1.0.0", "config-version": 2, "profile": "bad_float"}))
    (project / "packages.yml").write_text(yaml.safe_dump({"packages": [{"local": str(REPO_ROOT)}]}))
    (project / "models" / "m.sql").write_text("select 1 as id, cast(1.5 as double) as x")
    write_profiles(project, "bad_float", duckdb_profile(tmp_path / "w.duckdb", keep_open=False))
    assert _invoke(project, ["deps"]).success
    for test_name, arguments, message in BAD_ARGUMENTS:
        (project / "models" / "m.yml").write_text(yaml.safe_dump({"version": 2, "models": [
            {"name": "m", "data_tests": [{f"rerun_safety.{test_name}": {"arguments": arguments}}]}]}))
        res = _invoke(project, ["parse"])
        assert not res.success, test_name
        assert message in str(res.exception)


def test_macro_default_is_the_runner_default():
    core = (REPO_ROOT / "macros" / "_internal" / "_rs_test_core.sql").read_text()
    found = re.search(r"macro _rs_default_float_tolerance\(\) %}\s*{{ return\(([^)]+)\) }}", core)
    assert found and float(found.group(1)) == DEFAULT_FLOAT_TOLERANCE == 1e-9
