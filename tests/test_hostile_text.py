"""Hostile text in names and values: the terminal, CLI error lines and diff output show control characters
instead of sending them, and Markdown escapes names and values. Real DuckDB files."""
from __future__ import annotations


import pytest

from support.gameday import run_cli


ESCAPES = "\x1b]0;PWNED-TITLE\x07\x1b[2J\x1b[1A\r"


def test_the_terminal_summary_shows_control_characters_instead_of_sending_them():
    import io


    from rich.console import Console


    from rerun_safety.report.terminal import print_summary
    from rerun_safety.results import GamedayReport, ModelVerdict, ScenarioResult


    broken = ModelVerdict(
        f"evil{ESCAPES}model", "model.p.evil", "error", True, (), "incremental", "merge", ("id",), (),
        (ScenarioResult("replay", "error", message=f"Conversion Error: could not convert '{ESCAPES}' to INT32"),))
    report = GamedayReport("p", "duckdb", "dev", ("reference", "replay"), 2, (), (broken,), 1.0, 3, 0.5,
                           "2026-12-03T00:00:00+00:00", notes=(f"a note naming {ESCAPES}",))
    for tty in (False, True):
        buf = io.StringIO()
        print_summary(report, {}, console=Console(file=buf, width=200, force_terminal=tty, color_system=None))
        text = buf.getvalue()
        assert "\x1b]" not in text and "\x07" not in text and "\r" not in text and "\x1b[2J" not in text
        assert text.count("evil\\x1b]0;PWNED-TITLE\\x07\\x1b[2J\\x1b[1A\\x0dmodel") == 3  # table, headline, error
        assert "could not convert '\\x1b]0;PWNED-TITLE" in text


def test_cli_error_lines_show_control_characters_instead_of_sending_them(tmp_path):
    code, out, err = run_cli(["diff", f"{tmp_path}/no{ESCAPES}.duckdb:main.a", f"{tmp_path}/x.duckdb:main.b"])
    assert code == 2 and "\x1b" not in err and "\\x1b]0;PWNED-TITLE" in err, err


@pytest.fixture(scope="module")
def hostile_tables(tmp_path_factory):
    import duckdb


    path = tmp_path_factory.mktemp("hostile") / "h.duckdb"
    con = duckdb.connect(str(path))
    con.execute('create table a (id int, "note<b>|x" varchar)')
    con.execute('create table b (id int, "note<b>|x" varchar)')
    con.execute("insert into a values (1, 'fine'), (2, 'fine')")
    con.execute("insert into b values (1, 'fine'), (2, ?)", [f"<script>alert(1)</script>|`{ESCAPES}"])
    con.close()
    return path


def test_diff_markdown_escapes_names_and_values_like_the_game_days(hostile_tables):
    code, out, err = run_cli(["diff", f"{hostile_tables}:main.a", f"{hostile_tables}:main.b", "--key", "id",
                              "--format", "md"])
    assert code == 1, err
    assert "<script>" not in out and "<b>" not in out and "\x1b" not in out and "\x07" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\|\\`\\\\x1b" in out
    # every table row keeps its column count: an escaped | does not split a cell (the changed key's
    # table: key, column, left, right; with --all-columns the whole rows: side, id, note)
    rows = [ln for ln in out.splitlines() if ln.startswith("| key") or ln.startswith("| id=")]
    assert len(rows) == 2 and {len(ln.replace("\\|", "").split("|")) for ln in rows} == {6}, out
    code, out, err = run_cli(["diff", f"{hostile_tables}:main.a", f"{hostile_tables}:main.b", "--key", "id",
                              "--format", "md", "--all-columns"])
    assert "<script>" not in out and "&lt;script&gt;alert(1)&lt;/script&gt;\\|\\`\\\\x1b" in out
    rows = [ln for ln in out.splitlines() if ln.startswith("| side")] + \
        [ln for ln in out.splitlines() if ln.startswith("| only_")]
    assert len(rows) == 3 and {len([c for c in ln.replace("\\|", "").split("|")]) for ln in rows} == {5}


def test_diff_text_shows_control_characters_instead_of_sending_them(hostile_tables):
    code, out, err = run_cli(["diff", f"{hostile_tables}:main.a", f"{hostile_tables}:main.b", "--key", "id"])
    assert code == 1, err
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]0;PWNED-TITLE" in out
