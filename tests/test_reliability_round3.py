"""Reliability, round three: what a filter, a password spelling, the CI environment or a hostile name can
still do. Real PostgreSQL servers, real DuckDB files, real dbt."""
from __future__ import annotations

import json

import pytest

from _support import write_profiles
from gameday_support import pg_fingerprint, run_cli
from test_reliability_support import payments_target

# A --where that, read with standard_conforming_strings off, ends its first literal at `\'`: the server
# then sees `)) l; commit; begin read write; create table ...; commit;` and a comment. On a read-only
# connection that sends the query in one piece, that committed a table.
INJECTED = ("account_id::text = 'A\\' or account_id::text = ')) l; commit; begin read write; "
            "create table public.pwned_diff (i int); commit; --'")


@pytest.fixture(scope="module")
def pg_off(tmp_path_factory, pg_server):
    """The payments fixture on PostgreSQL, in a database whose standard_conforming_strings is off."""
    target = payments_target("postgres", tmp_path_factory.mktemp("round3_pg"), server=pg_server)
    conn = pg_server.connect()
    with conn.cursor() as cur:
        cur.execute(f'alter database "{target.dbname}" set standard_conforming_strings = off')
    conn.close()
    return target


def _diff(target, *args: str, profiles=None) -> tuple[int, str, str]:
    return run_cli(["diff", "landing.payments", "landing.payments", "--project-dir", str(target.project),
                    "--profiles-dir", str(profiles or target.profiles), "--format", "json", *args])


def _exists(server, dbname: str, name: str) -> bool:
    conn = server.connect(dbname)
    with conn.cursor() as cur:
        cur.execute("select to_regclass(%s) is not null", [name])
        found = cur.fetchone()[0]
    conn.close()
    return found


def test_diff_where_cannot_end_a_literal_early_when_the_database_reads_backslashes_as_escapes(pg_off):
    conn = pg_off.server.connect(pg_off.dbname)
    with conn.cursor() as cur:
        cur.execute("show standard_conforming_strings")
        assert cur.fetchone() == ("off",)
    conn.close()
    before = pg_fingerprint(pg_off.server, pg_off.dbname)
    code, out, err = _diff(pg_off, "--where", INJECTED)
    assert code == 0, err
    result = json.loads(out)
    # the whole text is a filter: two literals no account id equals
    assert (result["identical"], result["left_rows"], result["right_rows"]) == (True, 0, 0)
    assert not _exists(pg_off.server, pg_off.dbname, "public.pwned_diff")
    assert pg_fingerprint(pg_off.server, pg_off.dbname) == before


def test_diff_where_reads_a_backslash_as_itself_whatever_the_database_setting(pg_off):
    code, out, err = _diff(pg_off, "--where", "account_id::text || '\\' = '4\\'")
    assert code == 0, err
    result = json.loads(out)
    conn = pg_off.server.connect(pg_off.dbname)
    with conn.cursor() as cur:
        cur.execute("select count(*) from landing.payments where account_id = 4")
        fours = cur.fetchone()[0]
    conn.close()
    assert fours > 0 and (result["left_rows"], result["right_rows"]) == (fours, fours)


def test_a_read_only_connection_sends_one_statement_or_none(pg_off):
    from rerun_safety.errors import SandboxError
    from rerun_safety.sandbox.postgres import PgConnection

    params = {k: pg_off.output[k] for k in ("host", "port", "user")}
    con = PgConnection(params, pg_off.dbname, read_only=True)
    try:
        with pytest.raises(SandboxError, match="more than one statement"):
            con.fetchall("select 1; select 2")
        assert con.fetchone("select ';' || 'x', $$;$$") == (";x", ";")  # in literals: one statement
    finally:
        con.close()


@pytest.fixture(scope="module")
def password_role(pg_server):
    pg_server.password_role("rs_pw_user", "s3cret-pw")
    return "rs_pw_user"


@pytest.mark.parametrize("spelling", ["password", "pass"])
def test_diff_uses_the_password_under_either_spelling(pg_off, password_role, tmp_path, spelling):
    output = {k: v for k, v in pg_off.output.items() if k != "password"}
    output.update({"user": password_role, spelling: "s3cret-pw"})
    profiles = tmp_path / "profiles"
    write_profiles(profiles, "payments", output, target="local")
    code, out, err = _diff(pg_off, profiles=profiles)
    assert code == 0, err
    assert json.loads(out)["left_rows"] == 600


def test_diff_with_a_wrong_password_is_one_line_and_exit_2(pg_off, password_role, tmp_path):
    output = {k: v for k, v in pg_off.output.items() if k != "password"}
    output.update({"user": password_role, "pass": "wrong"})
    profiles = tmp_path / "profiles"
    write_profiles(profiles, "payments", output, target="local")
    code, out, err = _diff(pg_off, profiles=profiles)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert (code, out) == (2, "")
    assert len(lines) == 1 and "password authentication failed" in lines[0], err
    assert "wrong" not in err
