"""dbt's own adapter test suite (dbt-tests-adapter) run against `partition_overwrite`, on DuckDB,
PostgreSQL and Spark, with a multiset check added to its set-based `check_relations_equal`."""
from __future__ import annotations

import pytest
from dbt.tests.adapter.basic.test_incremental import BaseIncremental
from dbt.tests.adapter.incremental.test_incremental_on_schema_change import BaseIncrementalOnSchemaChange
from dbt.tests.adapter.incremental.test_incremental_predicates import BaseIncrementalPredicates
from dbt.tests.util import relation_from_name, run_dbt

from support.spark import require_spark, spark_profile
from support.common import REPO_ROOT

SHIM = (REPO_ROOT / "integration_tests" / "macros" / "get_incremental_partition_overwrite_sql.sql").read_text()
SPARK_SHIM = (REPO_ROOT / "integration_tests" / "macros" / "rerun_safety_spark_shim.sql").read_text()
STRATEGY = {"+incremental_strategy": "partition_overwrite", "+partition_key": "id"}


def assert_multiset_equal(project, left: str, right: str) -> int:
    """EXCEPT ALL both ways over the left relation's columns: duplicates count. Returns rows."""
    a = relation_from_name(project.adapter, left)
    b = relation_from_name(project.adapter, right)
    with project.adapter.connection_named("__multiset"):
        columns = [c.name for c in project.adapter.get_columns_in_relation(a)]
    cols = ", ".join(project.adapter.quote(c) for c in columns)
    diff = project.run_sql(
        f"select count(*) from ((select {cols} from {a} except all select {cols} from {b}) "
        f"union all (select {cols} from {b} except all select {cols} from {a})) d", fetch="one")[0]
    assert diff == 0, f"{left} and {right} differ as multisets by {diff} rows"
    counts = [project.run_sql(f"select count(*) from {r}", fetch="one")[0] for r in (a, b)]
    assert counts[0] == counts[1]
    return counts[0]


class DuckDBTarget:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, tmp_path_factory):
        path = tmp_path_factory.mktemp("adapter_suite") / "suite.duckdb"
        return {"type": "duckdb", "path": str(path), "threads": 1}


class PostgresTarget:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, pg_server):
        dbname = pg_server.create_database("suite")
        yield {"type": "postgres", "threads": 1, "host": pg_server.host, "port": pg_server.port,
               "user": pg_server.user, "pass": "", "dbname": dbname}
        pg_server.drop_database(dbname)


class SparkTarget:
    """The process's in-process Spark; the `project` fixture puts each test class in its own schema."""

    @pytest.fixture(scope="class")
    def dbt_profile_target(self):
        require_spark()
        return spark_profile("replaced_by_the_project_fixture")

    @pytest.fixture(scope="class")
    def macros(self):
        return {"get_incremental_partition_overwrite_sql.sql": SHIM, "rerun_safety_spark_shim.sql": SPARK_SHIM}


class WithPackage:
    """The package as a `local:` dependency plus the root-project shim dbt needs."""

    @pytest.fixture(scope="class")
    def packages(self):
        return {"packages": [{"local": str(REPO_ROOT)}]}

    @pytest.fixture(scope="class")
    def macros(self):
        return {"get_incremental_partition_overwrite_sql.sql": SHIM}

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def install_package(cls, project):
        run_dbt(["deps"])


class Incremental(WithPackage, BaseIncremental):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"name": "incremental", "models": dict(STRATEGY)}

    def test_incremental(self, project):
        super().test_incremental(project)
        assert assert_multiset_equal(project, "added", "incremental") == 20


class Predicates(WithPackage, BaseIncrementalPredicates):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+incremental_predicates": ["id != 2"], **STRATEGY}}

    def test__incremental_predicates(self, project):
        super().test__incremental_predicates(project)
        rows = assert_multiset_equal(project, "expected_delete_insert_incremental_predicates",
                                     "delete_insert_incremental_predicates")
        assert rows == 4


class OnSchemaChange(WithPackage, BaseIncrementalOnSchemaChange):
    @pytest.fixture(scope="class")
    def models(self):
        # The suite's models configure unique_key='id'; switch each incremental one to our strategy.
        models = dict(BaseIncrementalOnSchemaChange.models.__wrapped__(self))
        out = {}
        for name, sql in models.items():
            if "materialized='incremental'" in sql:
                assert "unique_key='id'" in sql, name
                sql = sql.replace("unique_key='id'",
                                  "incremental_strategy='partition_overwrite', partition_key='id'")
            out[name] = sql
        return out

    def run_twice_and_assert(self, include, compare_source, compare_target, project):
        super().run_twice_and_assert(include, compare_source, compare_target, project)
        assert assert_multiset_equal(project, compare_source, compare_target) == 6


class TestIncrementalDuckDB(DuckDBTarget, Incremental):
    pass


class TestIncrementalPostgres(PostgresTarget, Incremental):
    pass


class TestPredicatesDuckDB(DuckDBTarget, Predicates):
    pass


class TestPredicatesPostgres(PostgresTarget, Predicates):
    pass


class TestOnSchemaChangeDuckDB(DuckDBTarget, OnSchemaChange):
    pass


class TestOnSchemaChangePostgres(PostgresTarget, OnSchemaChange):
    pass


class TestIncrementalSpark(SparkTarget, Incremental):
    pass


class TestPredicatesSpark(SparkTarget, Predicates):
    pass


class TestOnSchemaChangeSpark(SparkTarget, OnSchemaChange):
    # sync_all_columns drops a column here, which dbt-spark refuses on parquet tables before any
    # strategy runs (it needs Delta, not installed): assert that refusal instead of the rows.
    def run_incremental_sync_all_columns(self, project):
        self.assert_drop_refused("model_a incremental_sync_all_columns incremental_sync_all_columns_target")

    def run_incremental_sync_remove_only(self, project):
        self.assert_drop_refused("model_a incremental_sync_remove_only incremental_sync_remove_only_target")

    @staticmethod
    def assert_drop_refused(select):
        assert len(run_dbt(["run", "--select", select, "--full-refresh"])) == 3
        results = run_dbt(["run", "--select", select], expect_pass=False)
        failed = [r for r in results if str(r.status) == "error"]
        assert len(failed) == 1
        assert "Apache Spark does not support dropping columns from tables" in failed[0].message
