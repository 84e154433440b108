"""The harness itself: the PostgreSQL server and the DuckDB files are real."""
import duckdb


def test_postgres_server_is_real(pg_server, pg_database):
    conn = pg_server.connect(pg_database)
    try:
        with conn.cursor() as cur:
            cur.execute("create table t (x int)")
            cur.execute("insert into t values (1), (1), (2)")
            cur.execute("select count(*), count(distinct x), current_setting('server_version_num')::int / 10000 from t")
            rows, distinct, major = cur.fetchone()
    finally:
        conn.close()
    assert (rows, distinct) == (3, 2)
    assert major >= 13


def test_duckdb_file_is_real(tmp_path):
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("create table t as select * from range(5) r(x)")
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("select sum(x) from t").fetchone()[0] == 10
