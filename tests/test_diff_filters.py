"""`diff --where` stays a filter: what a filter does not need is refused, a literal cannot end early
whatever the database's standard_conforming_strings, a backslash is itself. A real PostgreSQL server."""
from __future__ import annotations

import json

import pytest

from support.gameday import pg_fingerprint
from support.reliability import diff_cli


def _diff_where(target, where: str) -> tuple[int, str, str]:
    from support.gameday import run_cli


    return run_cli(["diff", "landing.payments", "landing.payments", "--project-dir", str(target.project),
                    "--profiles-dir", str(target.profiles), "--format", "json", "--where", where])


@pytest.mark.parametrize("where,named", [
    ("set_config('default_transaction_read_only', 'off', false) is not null", "set_config"),
    ("pg_catalog.set_config('transaction_read_only', 'off', true) = 'off'", "set_config"),
    ("account_id > 3 and landing.bump() > 0", "bump"),  # a user-defined volatile function: PostgreSQL says so
    ("random() < 0.5", "random"),
])
def test_diff_where_refuses_what_a_filter_does_not_need(pg_payments, where, named):
    from support.gameday import pg_fingerprint


    before = pg_fingerprint(pg_payments.server, pg_payments.dbname)
    code, out, err = _diff_where(pg_payments, where)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (out, err)
    assert len(lines) == 1 and f"--where may not call {named}()" in lines[0], err
    assert out == ""
    conn = pg_payments.server.connect(pg_payments.dbname)
    with conn.cursor() as cur:
        cur.execute("select last_value, is_called from landing.counter")
        assert cur.fetchone() == (1, False)  # never called
    conn.close()
    assert pg_fingerprint(pg_payments.server, pg_payments.dbname) == before


def test_diff_where_still_filters(pg_payments):
    import json


    code, out, err = _diff_where(pg_payments, "account_id > 3 and lower('A') = 'a' and ingested_at >= date '2025-11-03'")
    assert code == 0, err
    result = json.loads(out)
    assert result["identical"] is True and 0 < result["left_rows"] == result["right_rows"] < 600


# A --where that, read with standard_conforming_strings off, ends its first literal at `\'`: the server
# then sees `)) l; commit; begin read write; create table ...; commit;` and a comment. On a read-only
# connection that sends the query in one piece, that committed a table.
INJECTED = ("account_id::text = 'A\\' or account_id::text = ')) l; commit; begin read write; "
            "create table public.pwned_diff (i int); commit; --'")


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
    code, out, err = diff_cli(pg_off, "--where", INJECTED)
    assert code == 0, err
    result = json.loads(out)
    # the whole text is a filter: two literals no account id equals
    assert (result["identical"], result["left_rows"], result["right_rows"]) == (True, 0, 0)
    assert not _exists(pg_off.server, pg_off.dbname, "public.pwned_diff")
    assert pg_fingerprint(pg_off.server, pg_off.dbname) == before


def test_diff_where_reads_a_backslash_as_itself_whatever_the_database_setting(pg_off):
    code, out, err = diff_cli(pg_off, "--where", "account_id::text || '\\' = '4\\'")
    assert code == 0, err
    result = json.loads(out)
    conn = pg_off.server.connect(pg_off.dbname)
    with conn.cursor() as cur:
        cur.execute("select count(*) from landing.payments where account_id = 4")
        fours = cur.fetchone()[0]
    conn.close()
    assert fours > 0 and (result["left_rows"], result["right_rows"]) == (fours, fours)
