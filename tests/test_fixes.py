"""Verified fixes (`gameday --fix`): candidates made from the defect and the model's file, each proven by a
game day of a changed copy of the project before it is reported.

- The candidates' text work (pure): config() settings changed in place or added, the incremental window
  aligned or widened, window orderings tie-broken, and the reasons when nothing applies.
- examples/shop on DuckDB and PostgreSQL (the session's game day runs with --fix): four root causes get a
  verified fix, two a reason; each patch, applied with `git apply` to a fresh copy of the example, makes a
  second game day judge those models and every model below them `safe`.
- A refused candidate (a key the output does not hold unique loses rows) is listed with why, and the next
  one is verified; the reference fingerprints refuse a change of what a clean build produces; --apply
  writes only files unchanged since the game day.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from rerun_safety.diff.fingerprint import Fingerprint, fingerprint
from rerun_safety.errors import ConfigError
from rerun_safety.fix.apply import apply_fixes
from rerun_safety.fix.candidates import (SideTable, Target, candidates, ordered_aggregates, set_config, this_moved,
                                         tiebroken, watermarks)
from rerun_safety.fix.overrides import model_override
from rerun_safety.results import Fix, GamedayReport, ModelVerdict, ScenarioResult
from support.fix_models import (DAY_AMOUNTS, MICROBATCH, RUN_LOGGED, VENDOR_WINDOW_MACRO, VENDOR_WINDOW_MODEL,
                                vendor_window_package)
from support.gameday import (SHOP, by_name, copy_project, dbt_deps, load_report, pg_profile, run_cli,
                             shop_generator)

SHOP_MODELS = SHOP / "models" / "staging"
COLUMNS = ("event_id", "user_id", "event_type", "amount", "currency", "event_time", "loaded_at")


def _target(name: str, verdict: str, **kw) -> Target:
    raw = kw.pop("raw", None) or (SHOP_MODELS / f"{name}.sql").read_text()
    args = dict(materialized="incremental", strategy="append", key=(), columns=COLUMNS, lookback="2 days",
                keys=(("event_id",),))
    args.update(kw)
    return Target(name, verdict, raw, **args)


# ------------------------------------------------------------------ candidates (pure)
def test_set_config_changes_the_one_call_in_place_and_adds_what_it_lacks():
    raw = "{{ config(materialized='incremental', incremental_strategy = 'append', event_time='t') }}\nselect 1\n"
    out = set_config(raw, incremental_strategy="delete+insert", unique_key=("id",))
    assert out == ("{{ config(materialized='incremental', incremental_strategy = 'delete+insert', event_time='t', "
                   "unique_key='id') }}\nselect 1\n")
    assert set_config("select 1\n", unique_key=("a", "b")) == "{{ config(unique_key=['a', 'b']) }}\nselect 1\n"
    lines = "{{\n  config(\n    materialized='incremental',\n    time_column='ds',\n  )\n}}\nselect 1"
    assert set_config(lines, unique_key=("a", "ds")) == (
        "{{\n  config(\n    materialized='incremental',\n    time_column='ds',\n    unique_key=['a', 'ds'],\n  )\n}}"
        "\nselect 1")  # one setting a line, the trailing comma kept
    two = "{% if x %}{{ config(a='1') }}{% else %}{{ config(a='2', b=[1, (2, 3)]) }}{% endif %}\nselect 1"
    assert set_config(two, a="3") == ("{% if x %}{{ config(a='1') }}{% else %}{{ config(a='2', b=[1, (2, 3)]) }}"
                                      "\n{{ config(a='3') }}{% endif %}\nselect 1")


def test_watermarks_are_read_only_inside_the_incremental_block():
    raw = ("select * from t where a > (select max(a) from {{ this }})\n"
           "{% if is_incremental() %}\nwhere event_time > (select max(event_time)\n  from {{ this }})\n{% endif %}")
    found = watermarks(raw)
    assert [(w.column, w.op, w.expr) for w in found] == [("event_time", ">", "max(event_time)")]
    assert found[0].rewritten(raw, "max(event_time) - interval '1 days'").endswith(
        "where event_time >= (select max(event_time) - interval '1 days' from {{ this }})\n{% endif %}")


def test_tiebroken_orders_each_window_by_the_extra_columns_it_lacks():
    raw = "select row_number() over (partition by u order by t desc) as rn, lag(x) over (order by t, id) from s"
    assert tiebroken(raw, ("id",)) == ("select row_number() over (partition by u order by t desc, id) as rn, "
                                       "lag(x) over (order by t, id) from s")
    assert tiebroken("select random() as r from s", ("id",)) is None


def test_list_aggregates_without_an_order_are_ordered_by_what_they_gather():
    from rerun_safety.fix.candidates import ordered_aggregates

    raw = ("select c, string_agg(cast(e as varchar), ',') as es, array_agg(distinct x), "
           "string_agg(y, ',' order by y) from t group by c")
    assert ordered_aggregates(raw) == (
        "select c, string_agg(cast(e as varchar), ',' order by cast(e as varchar)) as es, "
        "array_agg(distinct x order by x), string_agg(y, ',' order by y) from t group by c")
    assert ordered_aggregates("select string_agg(y, ',' order by y) from t") is None
    (cand,), _ = candidates(_target("lists", "nondeterministic", materialized="table", raw=raw))
    assert cand.name == "order the aggregates"


def test_the_catalogue_on_the_shop_shapes():
    keyed, why = candidates(_target("events_keyed_append", "duplicates", key=("event_id",)))
    assert why == "" and [c.name for c in keyed] == ["keyed on event_id"]
    assert "incremental_strategy='delete+insert', unique_key='event_id', event_time='event_time'" in keyed[0].text
    keys = (("event_id",), ("user_id", "event_time"))  # as the reference showed them unique
    guessed, _ = candidates(_target("events_append_lookback", "duplicates", keys=keys))
    assert [c.name for c in guessed] == ["keyed on event_id", "keyed on user_id, event_time"]
    assert "unique_key=['user_id', 'event_time']" in guessed[1].text
    none, why = candidates(_target("events_append_lookback", "duplicates", keys=()))
    assert none == [] and why.startswith("no candidate: no key holds its clean build's output unique")
    wider, _ = candidates(_target("events_watermark", "loss"))
    assert "where event_time >= (select max(event_time) - interval '2 days' from {{ this }})" in wider[0].text
    assert "incremental_strategy='delete+insert', unique_key='event_id'" in wider[0].text
    unaligned = _target("events_partition_overwrite_unaligned", "loss", strategy="partition_overwrite",
                        granularity="day")
    assert [c.name for c in candidates(unaligned)[0]] == ["align the window", "align and widen the window"]
    late = _target("events_partition_overwrite_unaligned", "loss", strategy="partition_overwrite", granularity="day",
                   late=True)
    first = candidates(late)[0][0]  # late rows land in partitions an aligned window alone does not re-read
    assert first.name == "align and widen the window"
    assert "(select date_trunc('day', max(event_time) - interval '2 days') from {{ this }})" in first.text
    none, why = candidates(_target("events_scored", "nondeterministic", materialized="table", strategy=None))
    assert none == [] and why.startswith("no candidate: no window function or list aggregate orders its rows")
    none, why = candidates(_target("events_summarised", "side_effect"))  # its relation's columns unknown
    assert none == [] and why.startswith("no candidate: no hook set in one config() call of the model")
    side = (SideTable("batch_summary", (("batch_day", "date"), ("events", "bigint"))),)
    (hook,), _ = candidates(_target("events_summarised", "side_effect", side=side, dialect="duckdb"))
    assert hook.name == "replace the hook's rows by batch_day"
    assert ("{{ config(post_hook=[\"delete from {{ source('audit', 'batch_summary') }} where batch_day in (select "
            "cast(max(event_time) as date) from {{ this }})\", \"insert into {{ source('audit', 'batch_summary') }} "
            "select cast(max(event_time) as date), count(*) from {{ this }}\"]) }}\n") in hook.text
    # a keyed strategy with a window that re-reads: nothing to change for duplicates
    none, why = candidates(_target("events_merge", "duplicates", strategy="merge", key=("event_id",)))
    assert none == [] and "strategy merge" in why


def test_a_hook_insert_gets_a_delete_of_its_batch_first_keyed_by_a_column_it_inserts():
    side = (SideTable("totals", (("events", "bigint"), ("day", "date"), ("note", "text"))),)
    raw = ("{{ config(materialized='incremental', post_hook=[\n"
           "    \"insert into audit.totals (events, day, note) select count(*), cast(t as date) as day, 'x' "
           "from {{ this }} group by 2, 3\",\n    'insert into audit.log select 1']) }}\nselect 1\n")
    found, _ = candidates(Target("m", "side_effect", raw, "incremental", "append", (), (), side=side, dialect="postgres"))
    assert [c.name for c in found] == ["replace the hook's rows by day", "replace the hook's rows by note"]
    assert found[0].text == (  # the date column first; the positions of `group by` become the expressions
        "{{ config(materialized='incremental', post_hook=[\n    \"delete from audit.totals where day in (select "
        "cast(t as date) from {{ this }} group by cast(t as date), 'x')\", \"insert into audit.totals (events, day, "
        "note) select count(*), cast(t as date) as day, 'x' from {{ this }} group by 2, 3\",\n"
        "    'insert into audit.log select 1']) }}\nselect 1\n")
    # already replacing what it inserts, a count as the only column, or set in two config() calls: none
    for raw in ("{{ config(post_hook=['delete from audit.totals', 'insert into audit.totals select 1, current_date, "
                "null from {{ this }}']) }}select 1",
                "{{ config(post_hook='insert into audit.totals (events) select count(*) from {{ this }}') }}select 1",
                "{% if a %}{{ config(post_hook='insert into audit.totals select 1, d, 2 from {{ this }}') }}{% else %}"
                "{{ config(post_hook='insert into audit.totals select 1, d, 2 from {{ this }}') }}{% endif %}select 1"):
        none, why = candidates(Target("m", "side_effect", raw, "incremental", "append", (), (), side=side))
        assert none == [] and why.startswith("no candidate: no hook set in one config() call"), raw


def test_a_hook_keeping_a_row_per_run_gets_the_log_declaration_after_the_deletes():
    from rerun_safety.gameday.side_effects import per_run

    # the fault-free schedule: 4 runs, the clean build's 1 row each (a run log); 7 rows is data
    assert per_run({"relation": "audit.run_log", "rows": 4, "reference_rows": 1, "runs": 4, "missing_rows": 1}) == 1
    assert per_run({"relation": "audit.t", "rows": 7, "reference_rows": 1, "runs": 4}) == 0
    assert per_run({"relation": "audit.t", "rows": 1, "reference_rows": 1, "runs": 1}) == 0
    log = (SideTable("run_log", (("model", "text"), ("rows_after", "bigint")), "audit.run_log", per_run=1),)
    raw = ("{{ config(materialized='incremental', meta={'owner': 'data'},\n"
           "          post_hook=\"insert into audit.run_log select 'm', count(*) from {{ this }}\") }}\nselect 1\n")
    found, _ = candidates(Target("m", "side_effect", raw, "incremental", "append", (), (), side=log))
    assert [(c.name, c.declaration) for c in found] == [("replace the hook's rows by model", False),
                                                        ("declare the run log", True)]
    assert "meta={'owner': 'data', 'rerun_safety': {'log_tables': ['audit.run_log']}}," in found[1].text
    assert found[1].text.count("post_hook=") == 1 and "delete" not in found[1].text
    # a meta that is no literal cannot be merged into: the deletes only
    odd = raw.replace("meta={'owner': 'data'}", "meta=var('m')")
    assert [c.name for c in candidates(Target("m", "side_effect", odd, "incremental", "append", (), (),
                                              side=log))[0]] == ["replace the hook's rows by model"]


def test_drift_gets_the_window_and_ties_a_loss_gets_and_microbatch_gets_its_lookback():
    # a merge aggregate recomputing from its newest day while payments land late: drift, the window widened
    agg = ("{{ config(materialized='incremental', incremental_strategy='merge', unique_key='day') }}\n"
           "select cast(event_time as date) as day, sum(amount) as amount from {{ ref('stg_events') }}\n"
           "{% if is_incremental() %}\nwhere event_time >= (select max(day) from {{ this }})\n{% endif %}\n"
           "group by 1\n")
    found, _ = candidates(_target("daily", "drift", raw=agg, strategy="merge", key=("day",)))
    assert [c.name for c in found] == ["re-read the window"]
    assert "where event_time >= (select max(day) - interval '2 days' from {{ this }})" in found[0].text
    # an unkeyed drift whose window already reaches back further than the lateness: the key alone
    found, _ = candidates(_target("events_append_lookback", "drift"))
    assert [c.name for c in found] == ["keyed on event_id"]
    # ties in a window's order with a drift verdict: tie-broken by the key
    ranked = ("{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='event_id') }}\n"
              "select event_id, row_number() over (partition by user_id order by event_time) as n\n"
              "from {{ ref('stg_events') }}\n")
    found, _ = candidates(_target("ranked", "drift", raw=ranked, strategy="delete+insert", key=("event_id",)))
    assert [c.name for c in found] == ["tie-break by the key", "tie-break by every output column"]
    assert "order by event_time, event_id)" in found[0].text
    # microbatch: the lookback raised to what the replay measured, in its own batches; never lowered
    micro = ("{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='event_time', "
             "batch_size='day', lookback=1, begin='2026-01-01') }}\nselect * from {{ ref('stg_events') }}\n")
    found, _ = candidates(_target("m", "loss", raw=micro, strategy="microbatch", microbatch_lookback=2))
    assert [(c.name, c.settings) for c in found][:1] == [("lookback 2", (("lookback", 2),))]
    assert "batch_size='day', lookback=2, begin=" in found[0].text
    none, why = candidates(_target("m", "loss", raw=micro, strategy="microbatch", microbatch_lookback=2,
                                   lookback_now=3))
    assert all(not c.name.startswith("lookback") for c in none)


def test_a_cte_reading_this_outside_the_branch_is_moved_inside_it():
    sole = ("with w as (select max(d) as since from {{ this }})\nselect * from {{ ref('a') }}\n"
            "{% if is_incremental() %}where d >= (select since from w){% endif %}\n")
    assert this_moved(sole) == ("{% if is_incremental() %}with w as (select max(d) as since from {{ this }})"
                                "{% endif %}\nselect * from {{ ref('a') }}\n"
                                "{% if is_incremental() %}where d >= (select since from w){% endif %}\n")
    later = ("with a as (select * from {{ ref('a') }}), w as (select max(d) as since from {{ this }})\n"
             "select * from a\n{% if is_incremental() %}where d >= (select since from w){% endif %}")
    assert this_moved(later).startswith("with a as (select * from {{ ref('a') }}){% if is_incremental() %}, w as "
                                        "(select max(d) as since from {{ this }}){% endif %}\nselect * from a\n")
    assert this_moved(later.replace("select * from a\n", "select * from a, w\n")) is None  # read outside: no
    assert this_moved("select * from a where d > (select max(d) from {{ this }})") is None  # not in a CTE
    hooked = "{{ config(post_hook='insert into x select * from {{ this }}') }}select 1"
    assert this_moved(hooked) is None  # a hook reads the built relation: nothing to move
    assert this_moved(sole.replace("select since from w", "select max(d) from {{ this }}")) is not None


def test_a_package_models_config_goes_under_models_in_the_projects_file():
    settings = {"incremental_strategy": "delete+insert", "unique_key": ("event_id", "day")}
    text = ("name: p  # the project\nmodels:\n  p:\n    +materialized: view\n  # vendor models\n  vendor:\n"
            "    +schema: vendor\n    staging:\n      other:\n        +enabled: true\nseeds:\n  p: {}\n")
    assert model_override(text, ["vendor", "staging", "m"], settings) == (
        "name: p  # the project\nmodels:\n  p:\n    +materialized: view\n  # vendor models\n  vendor:\n"
        "    +schema: vendor\n    staging:\n      m:\n        +incremental_strategy: \"delete+insert\"\n"
        "        +unique_key: [\"event_id\", \"day\"]\n      other:\n        +enabled: true\nseeds:\n  p: {}\n")
    assert model_override("name: p\n", ["vendor", "m"], {"unique_key": ("id",)}) == (
        "name: p\nmodels:\n  vendor:\n    m:\n      +unique_key: \"id\"\n")
    # a flow mapping, or the key already set there: the text cannot take it safely
    assert model_override("name: p\nmodels: {vendor: {m: {}}}\n", ["vendor", "m"], settings) is None
    assert model_override("name: p\nmodels:\n  vendor:\n    m:\n      +unique_key: id\n", ["vendor", "m"],
                          settings) is None


def test_a_crlf_file_keeps_its_line_ends_in_the_patch_and_when_applied(tmp_path):
    from rerun_safety.fix.candidates import Candidate
    from rerun_safety.fix.search import _lf, _read, _Search

    path = tmp_path / "m.sql"
    path.write_bytes(b"{{ config(materialized='incremental') }}\r\nselect 1\r\n")
    mv = ModelVerdict("m", "model.p.m", "duplicates", True, (), "incremental", "append", (), (), ())
    search = _Search(mv, ["model.p.m"], text=_read(path), rel=Path("m.sql"))
    search.verified = (Candidate("keyed", "d", set_config(_lf(search.text), unique_key=("id",))), ["m"])
    fix = search.result()
    assert fix.patch.splitlines(keepends=True)[3:] == [
        "-{{ config(materialized='incremental') }}\r\n", "+{{ config(materialized='incremental', unique_key='id') }}\r\n",
        " select 1\r\n"]
    report = GamedayReport("p", "duckdb", "dev", (), 1, (), (), 1.0, 1, 1.0, "", fixes=(fix,))
    assert apply_fixes(report, tmp_path) == [path]  # the game day's hash is of the bytes as read
    assert path.read_bytes() == b"{{ config(materialized='incremental', unique_key='id') }}\r\nselect 1\r\n"


def test_two_fixes_of_one_file_are_not_applied(tmp_path):
    (tmp_path / "dbt_project.yml").write_text("name: p\n")
    both = GamedayReport("p", "duckdb", "dev", (), 1, (), (), 1.0, 1, 1.0, "",
                         fixes=(_fix("dbt_project.yml", "name: p\n", "name: p\n# a\n"),
                                _fix("dbt_project.yml", "name: p\n", "name: p\n# b\n")))
    with pytest.raises(ConfigError, match=r"--apply: several fixes change dbt_project.yml; nothing applied"):
        apply_fixes(both, tmp_path)
    assert (tmp_path / "dbt_project.yml").read_text() == "name: p\n"


def test_key_candidates_are_the_configured_key_then_ids_then_ids_with_the_time_column():
    from rerun_safety.gameday.lineage import key_candidates

    assert key_candidates((), ["customer_id", "revenue", "ds"], ["", "ds", "x"]) == [
        ("customer_id",), ("customer_id", "ds")]
    assert key_candidates(("k",), ["id", "k", "order_key", "t"], ["T"]) == [
        ("k",), ("id",), ("order_key",), ("id", "t"), ("order_key", "t")]
    assert key_candidates((), ["a", "b"], []) == []


def test_a_strict_watermark_on_a_day_column_is_first_made_to_re_read_the_last_day():
    raw = ("{{ config(materialized='incremental', incremental_strategy='delete+insert') }}\n"
           "with t as (select * from {{ ref('i') }}\n{% if is_incremental() %} where i.ds > (select max(ds) from "
           "{{ this }}) {% endif %})\nselect c_id, ds from t\n{% if is_incremental() %}\nwhere o.ds > "
           "(select max(ds) from {{ this }})\n{% endif %}\n")
    found, _ = candidates(_target("by_day", "loss", raw=raw, column_types=(("c_id", "INTEGER"), ("ds", "VARCHAR")),
                                  lookback="1 days", strategy="delete+insert", keys=(("c_id", "ds"),)))
    assert [c.name for c in found] == ["keyed on c_id, ds", "keyed on c_id, ds"]
    first, second = (c.text for c in found)
    assert first.count(".ds >= (select max(ds) from {{ this }})") == 2 and " > (" not in first  # every watermark
    assert second.count(".ds >= (select max(ds) - interval '1 days' from {{ this }})") == 2
    assert "incremental_strategy='delete+insert', unique_key=['c_id', 'ds']" in first
    timed, _ = candidates(_target("by_day", "loss", raw=raw, column_types=(("c_id", "INTEGER"), ("ds", "TIMESTAMP")),
                                  lookback="1 days", strategy="delete+insert", keys=(("c_id", "ds"),)))
    assert [c.text for c in timed] == [second]  # on a timestamp, `>=` re-reads one instant: widened only


def test_widening_keeps_the_longer_of_the_two_lookbacks():
    from rerun_safety.fix.candidates import widened

    assert widened("max(t)", "2 days") == "max(t) - interval '2 days'"
    assert widened("max(t) - interval '9 seconds'", "2 days") == "max(t) - interval '2 days'"
    assert widened("max(t) - INTERVAL '1 day'", "36 hours") == "max(t) - interval '36 hours'"
    assert widened("max(t) - interval '3 days'", "2 days") is None  # it reaches that far already
    # a loss behind a window that reaches far enough: the strategy is what to change
    (only, *_), _ = candidates(_target("events_append_lookback", "loss"))
    assert only.name == "keyed on event_id" and "interval '3 days'" in only.text


# ------------------------------------------------------------------ fingerprints (DuckDB)
def test_fingerprints_see_rows_not_their_order_and_leave_volatile_columns_out(tmp_path):
    import duckdb
    from sqlglot import exp

    from rerun_safety.warehouse.dialects import dialect_for

    con = duckdb.connect(str(tmp_path / "f.duckdb"))

    class Con:  # the engine connection's two calls the fingerprint makes
        dialect = dialect_for("duckdb")

        def fetchone(self, sql):
            return con.execute(sql).fetchone()

    con.execute("create table a as select * from (values (1, 'x', 0.1), (2, 'y', 0.2), (2, 'y', 0.2)) v(id, s, f)")
    con.execute("create table b as select * from a order by id desc")
    con.execute("create table c as select id, s, f + 1e-14 as f from a")  # float noise within the tolerance
    con.execute("create table d as select id, case when id = 1 then 'z' else s end as s, f from a")
    cols = [("id", "INTEGER"), ("s", "VARCHAR"), ("f", "DOUBLE")]
    fa, fb, fc, fd = (fingerprint(Con(), exp.to_table(t), cols) for t in "abcd")
    assert fa.rows == 3 and fa.same(fb) and fa.same(fc)
    assert not fa.same(fd) and fa.differing_columns(fd) == ["s"]
    assert fa.same(fd, volatile=["s"])  # a column that differs between any two builds is left out
    con.execute("create table e as select * from a where id = 2")
    assert not fa.same(fingerprint(Con(), exp.to_table("e"), cols), volatile=["s"])  # rows still count


def test_a_change_of_what_a_clean_build_produces_is_refused():
    from rerun_safety.fix.search import _judge

    safe = ScenarioResult("rerun", "safe", 10, 10)
    mv = ModelVerdict("m", "model.p.m", "duplicates", True, (), "incremental", "append", (), (), (safe,))
    report = GamedayReport("p", "duckdb", "dev", ("rerun",), 2, (), (mv,), 1.0, 1, 1.0, "")
    again = GamedayReport("p", "duckdb", "dev", ("rerun",), 2, (), (ModelVerdict(
        "m", "model.p.m", "safe", False, (), "incremental", "delete+insert", (), (), (safe,)),), 1.0, 1, 1.0, "")
    from rerun_safety.gameday.side_effects import SidePlan, SideRelation

    def built(fingerprint: Fingerprint, side_rows: int | None = None, replayed: dict | None = None, log=None):
        side = SidePlan()
        if side_rows is not None:  # a relation m's hook writes, as the clean build left it
            side.relations.append(SideRelation("audit", "totals", "s0", False, ("model.p.m",), False, log_of=log,
                                               fingerprint=Fingerprint(side_rows, "7", ())))
        return SimpleNamespace(plan=SimpleNamespace(facts=SimpleNamespace(fingerprints={"model.p.m": fingerprint},
                                                                          side=side)),
                               side_found={"replay": (replayed,)} if replayed else {})

    before = Fingerprint(10, "5", (("a", "2"), ("b", "3")))
    first = built(before)
    assert _judge(first, report, built(Fingerprint(10, "5", before.columns)), again, ["model.p.m"]) == (None, ["m"])
    assert _judge(first, report, built(Fingerprint(10, "6", (("a", "2"), ("b", "4")))), again, ["model.p.m"]) == (
        "it changes what a clean build of m produces (other values in b)", [])
    assert _judge(first, report, built(Fingerprint(9, "5", before.columns)), again, ["model.p.m"])[0] == (
        "it changes what a clean build of m produces (9 rows instead of 10)")
    # a hook's relation: the clean build must leave in it what it left before the change
    hooked = built(before, side_rows=6)
    assert _judge(hooked, report, built(before, side_rows=6), again, ["model.p.m"]) == (None, ["m"])
    assert _judge(hooked, report, built(before, side_rows=5), again, ["model.p.m"])[0] == (
        "it changes what a clean build writes to audit.totals (5 rows instead of 6)")
    assert _judge(hooked, report, built(before), again, ["model.p.m"])[0] == (
        "the clean build of the changed project leaves no audit.totals")
    # a row per run in the fault-free schedule (4 runs, the clean build's 1 row each): a history the
    # change must keep; a change leaving the one-shot build's 1 row there is refused, one keeping 4 is not
    logged = {"relation": "audit.totals", "log": False, "rows": 4, "reference_rows": 1, "runs": 4, "extra_rows": 4,
              "missing_rows": 1}
    history = built(before, side_rows=1, replayed=logged)
    assert _judge(history, report, built(before, side_rows=1), again, ["model.p.m"])[0] == (
        "it deletes the history a fault-free schedule keeps in audit.totals (1 row instead of 4 after 4 runs): the "
        "hook records every run; where one row per run is by design, declare it a log (meta.rerun_safety.log_tables)")
    assert _judge(history, report, built(before, side_rows=1, replayed=logged), again, ["model.p.m"]) == (None, ["m"])
    assert _judge(history, report, built(before, side_rows=1, log="model.p.m"), again, ["model.p.m"]) == (None, ["m"])
    # rows that the fault-free schedule adds otherwise than once per run are data: no history rule
    summed = {**logged, "rows": 7}
    assert _judge(built(before, side_rows=1, replayed=summed), report, built(before, side_rows=1), again,
                  ["model.p.m"]) == (None, ["m"])


def test_a_scenario_the_first_game_day_did_not_exercise_is_not_held_against_a_fix():
    from rerun_safety.fix.search import _not_safe

    def model(verdict, *scenarios):
        return ModelVerdict("m", "model.p.m", verdict, True, (), "incremental", "append", (), (), tuple(
            ScenarioResult(name, v, 5, 5, missing_rows=3 if v == "loss" else 0, input_rows=rows)
            for name, v, rows in scenarios))

    was = model("duplicates", ("rerun", "duplicates", 4), ("partial", "duplicates", 0), ("backfill", "untested", 0))
    assert _not_safe(was, model("untested", ("rerun", "safe", 4), ("partial", "untested", 0),
                                ("backfill", "untested", 0))) == ""
    assert _not_safe(was, model("untested", ("rerun", "untested", 0), ("partial", "safe", 0))) == (
        "is untested in rerun, which the first game day exercised")
    assert _not_safe(was, model("loss", ("rerun", "loss", 4))) == "is loss (rerun: 3 missing)"
    assert _not_safe(was, model("duplicates", ("rerun", "duplicates", 4))) == "stays duplicates (rerun)"


# ------------------------------------------------------------------ --apply
def _fix(path: str, before: str, after: str) -> Fix:
    import hashlib

    return Fix("m", "duplicates", True, "keyed", "d", path, "patch", ("m",),
               before_sha256=hashlib.sha256(before.encode()).hexdigest(), text=after)


def test_apply_writes_only_files_unchanged_since_the_game_day(tmp_path):
    (tmp_path / "models").mkdir()
    a, b = tmp_path / "models" / "a.sql", tmp_path / "models" / "b.sql"
    a.write_text("select 1\n")
    b.write_text("select 2\n")
    report = GamedayReport("p", "duckdb", "dev", (), 1, (), (), 1.0, 1, 1.0, "",
                           fixes=(_fix("models/a.sql", "select 1\n", "select 10\n"),
                                  _fix("models/b.sql", "select 2 -- as read\n", "select 20\n")))
    with pytest.raises(ConfigError, match=r"--apply: models/b.sql changed since the game day read it; nothing applied"):
        apply_fixes(report, tmp_path)
    assert (a.read_text(), b.read_text()) == ("select 1\n", "select 2\n")  # nothing written, not even a.sql
    report = GamedayReport("p", "duckdb", "dev", (), 1, (), (), 1.0, 1, 1.0, "",
                           fixes=(_fix("models/a.sql", "select 1\n", "select 10\n"),))
    assert apply_fixes(report, tmp_path) == [a] and a.read_text() == "select 10\n"
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["a.sql", "b.sql"]  # no temporary left


def test_apply_without_fix_is_one_line_and_exit_2(tmp_path):
    code, out, err = run_cli(["gameday", "--project-dir", str(tmp_path), "--apply"])
    assert code == 2 and err.strip() == "rerun-safety: error: --apply writes the fixes --fix verifies: pass --fix too", err


# ------------------------------------------------------------------ examples/shop, DuckDB and PostgreSQL
VERIFIED = {"events_partition_overwrite_unaligned": ("align and widen the window", ["events_partition_overwrite_unaligned"]),
            "events_watermark": ("keyed on event_id", ["events_watermark", "daily_volume_monitor"]),
            "events_append_lookback": ("keyed on event_id", ["events_append_lookback", "daily_revenue"]),
            "events_keyed_append": ("keyed on event_id", ["events_keyed_append"])}


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def shop_fixed(request, shop_gameday):
    server = request.getfixturevalue("pg_server") if request.param == "postgres" else None
    return shop_gameday(request.param, server), server


def test_shop_root_causes_get_verified_fixes_or_a_reason(shop_fixed):
    run, _ = shop_fixed
    fixes = {f["model"]: f for f in run["report"]["fixes"]}
    assert sorted(fixes) == sorted([*VERIFIED, "events_scored", "events_summarised"])
    for name, (candidate, models) in VERIFIED.items():
        f = fixes[name]
        assert (f["verified"], f["candidate"], f["models"], f["tried"]) == (True, candidate, models, []), f
        assert f["path"] == f"models/staging/{name}.sql" and f["patch"].startswith(f"--- a/{f['path']}\n")
        assert (run["out"] / "fixes" / f"{name}.patch").read_text() == f["patch"]
    assert "interval '2 days'" in fixes["events_watermark"]["patch"]  # one day late at most, plus one batch
    assert (fixes["events_scored"]["verified"], fixes["events_scored"]["tried"]) == (False, [])
    assert fixes["events_scored"]["why_none"].startswith("no candidate: no window function")
    # a summary row per run (the latest day, the count so far) never matches one clean build's: refused
    (tried,) = fixes["events_summarised"]["tried"]
    assert not fixes["events_summarised"]["verified"] and tried["candidate"] == "replace the hook's rows by batch_day"
    assert tried["why"].startswith("events_summarised stays side_effect ("), tried
    assert sorted(p.name for p in (run["out"] / "fixes").iterdir()) == sorted(f"{n}.patch" for n in VERIFIED)
    md = (run["out"] / "report.md").read_text()
    assert "#### Fixes" in md and "```diff" in md
    assert "Fixes: 4 of 6 root causes have a verified fix" in run["stdout"]
    assert "safe in every scenario that exercised them, clean build unchanged" in run["stdout"]
    assert run["before"] == run["after"]  # the fix search changed nothing of the user's either


def test_shop_patches_applied_make_a_second_game_day_safe(shop_fixed, tmp_path):
    """Every verified patch, applied to a fresh copy of the example the way a user would (`git apply`),
    and a game day of those models and everything below them: all `safe`."""
    run, server = shop_fixed
    project = copy_project(SHOP, tmp_path / "shop")
    for name in VERIFIED:
        subprocess.run(["git", "apply", str(run["out"] / "fixes" / f"{name}.patch")], cwd=project, check=True)
    assert "unique_key='event_id'" in (project / "models/staging/events_watermark.sql").read_text()
    if server is None:
        shop_generator().load_duckdb(str(project / "shop.duckdb"))
        profiles = project
    else:
        dbname = server.create_database("shop_fixed")
        shop_generator().load_postgres(server.dsn(dbname))
        profiles = pg_profile(server, dbname, tmp_path / "profiles", "shop", "analytics")
    dbt_deps(project, profiles)
    cwd = os.getcwd()
    os.chdir(project)
    try:
        code, out, err = run_cli(["gameday", "--project-dir", str(project), "--profiles-dir", str(profiles),
                                  "--output-dir", str(tmp_path / "out"), "--steps", "4",
                                  *[a for n in VERIFIED for a in ("--select", f"{n}+")]])
    finally:
        os.chdir(cwd)
    models = by_name(load_report(tmp_path / "out"))
    expected = sorted({m for _, ms in VERIFIED.values() for m in ms})
    assert code == 0, out + err
    assert set(expected) <= set(models)  # (with the upstream models the game day builds and judges too)
    assert {n: m["verdict"] for n, m in models.items()} == {n: "safe" for n in models}


def _fix_gameday(project: Path, profiles: Path, out: Path, *args: str) -> tuple[int, str, str]:
    """The shop copy's game day (3 steps, 2 threads) with these arguments, from the project's folder."""
    dbt_deps(project, profiles)
    cwd = os.getcwd()
    os.chdir(project)
    try:
        return run_cli(["gameday", "--project-dir", str(project), "--profiles-dir", str(profiles),
                        "--output-dir", str(out), "--steps", "3", "--threads", "2", *args])
    finally:
        os.chdir(cwd)


def test_a_refused_candidate_is_listed_with_why_and_the_next_is_verified(tmp_path):
    """A strict watermark on a day column: `>=` (re-read the last day) is the smallest change, but rows
    arriving a day after their event's day land in a day no longer read (loss), so it is refused; the window
    widened by the lateness the replay measured, plus a batch, is verified. Both keyed on event_id (the
    only key the clean build holds unique: user_id repeats)."""
    project = copy_project(SHOP, tmp_path / "shop")
    (project / "models/staging/events_user_first.sql").write_text(
        "{{ config(materialized='incremental') }}\n"
        "select user_id, event_id, amount, event_time, cast(event_time as date) as event_day\n"
        "from {{ ref('stg_events') }}\n"
        "{% if is_incremental() %}\n"
        "where cast(event_time as date) > (select max(event_day) from {{ this }})\n"
        "{% endif %}\n")
    shop_generator().load_duckdb(str(project / "shop.duckdb"))
    code, out, err = _fix_gameday(project, project, tmp_path / "out",
                                  "--scenarios", "rerun,partial",  # where the two windows differ (and cheaper)
                                  "--select", "events_user_first", "--fix", "--apply")
    assert code == 1, out + err
    report = load_report(tmp_path / "out")
    assert by_name(report)["events_user_first"]["verdict"] == "loss"
    (fix,) = report["fixes"]
    assert (fix["verified"], fix["candidate"]) == (True, "keyed on event_id")
    assert fix["description"].startswith("incremental_strategy='delete+insert', unique_key='event_id': the "
                                         "incremental window re-reads the last 2 days")
    (tried,) = fix["tried"]
    assert tried["description"].startswith("incremental_strategy='delete+insert', unique_key='event_id': the "
                                           "incremental filter re-reads the last day")
    assert tried["why"].startswith("events_user_first stays loss (partial: ") and " missing)" in tried["why"], tried
    text = (project / "models/staging/events_user_first.sql").read_text()  # --apply wrote it
    assert text.startswith("{{ config(materialized='incremental', incremental_strategy='delete+insert', "
                           "unique_key='event_id') }}\n")
    # the late rows arrive one day after their event's at most: one batch more than that
    assert "where cast(event_time as date) >= (select max(event_day) - interval '2 days' from {{ this }})" in text
    assert "--apply: 1 fix(es) written:" in out
    assert json.loads((tmp_path / "out" / "report.json").read_text())["fixes"][0]["before_sha256"]
    shutil.rmtree(tmp_path / "out")


def test_run_logs_late_aggregates_and_microbatch_lookbacks_get_their_fixes(tmp_path):
    """Three shapes labelled before the run, in one game day with --fix --apply:
    - events_logged: its post-hook appends one audit row per run (the model, its rows so far): a rerun adds one
      more (side_effect). Deleting the model's rows first would match a clean build's one row and turn the
      log into one row per model: the fault-free schedule's 4 rows after 4 runs become 1, refused with that
      reason. The log's declaration is verified and left for review (--apply writes no declaration);
    - day_amounts: a merge per day recomputing only the days after its newest while events land up to a day
      late: a day keeps the total of the rows landed when it was first computed (drift, no day lost).
      Re-reading the newest day (`>=`) is verified for the drift as for a loss;
    - events_micro: a microbatch model with lookback=0 while rows land a day late: their day is never
      processed again (loss). lookback=2 (the lateness plus a batch) is verified and written.
    - vendor_recent, a model of a package installed by `dbt deps` from git (support/fix_models.py): its
      window is a macro of the package reading the var vendor_lookback_hours, 6 in the package's own
      dbt_project.yml (loss). The var set to 48 (a day late plus a batch) for the package in the project's
      dbt_project.yml is verified
      and written there, the installed copy untouched (the applied patch's second game day: on PostgreSQL, in
      test_fix_shapes_postgres.py).
      vendor_appended, its append after a watermark its var vendor_append_hours (0) moves back (loss): the var
      at 48 re-reads two days and appends them again (duplicates): refused with that reason, as is the keyed
      override with the watermark left as it is (still loss); no fix.
    (On PostgreSQL in test_fix_shapes_postgres.py's game day.)"""
    project = copy_project(SHOP, tmp_path / "shop")
    for name, text in (("events_logged", RUN_LOGGED), ("day_amounts", DAY_AMOUNTS), ("events_micro", MICROBATCH)):
        (project / f"models/staging/{name}.sql").write_text(text)
    with open(project / "packages.yml", "a") as f:
        f.write(vendor_window_package(tmp_path / "vendor_window"))
    shop_generator().load_duckdb(str(project / "shop.duckdb"))
    code, out, err = _fix_gameday(project, project, tmp_path / "out", "--scenarios", "rerun",
                                  "--select", "events_logged", "--select", "day_amounts", "--select", "events_micro",
                                  "--select", "vendor_recent", "--select", "vendor_appended", "--fix", "--apply")
    assert code == 1, out + err
    report = load_report(tmp_path / "out")
    models = by_name(report)
    assert {n: (m["verdict"], m["root_cause"]) for n, m in models.items() if n != "stg_events"} == {
        "events_logged": ("side_effect", True), "day_amounts": ("drift", True), "events_micro": ("loss", True),
        "vendor_recent": ("loss", True), "vendor_appended": ("loss", True)}
    replay = next(s for s in models["day_amounts"]["scenarios"] if s["name"] == "replay")
    assert replay["missing_keys"] == 0 and replay["changed_rows"] > 0, replay
    fixes = {f["model"]: f for f in report["fixes"]}
    assert {n: (f["verified"], f["candidate"], f["declaration"]) for n, f in fixes.items()} == {
        "events_logged": (True, "declare the run log", True), "day_amounts": (True, "re-read the window", False),
        "events_micro": (True, "lookback 2", False), "vendor_recent": (True, "var vendor_lookback_hours = 48", False),
        "vendor_appended": (False, "", False)}, fixes

    logged = fixes["events_logged"]
    assert "delete from" not in logged["patch"]  # the hook inserts as it did, nothing deleted
    assert "meta={'rerun_safety': {'log_tables': ['audit.run_log']}}" in logged["patch"], logged["patch"]
    (tried,) = logged["tried"]
    assert tried["candidate"] == "replace the hook's rows by model", tried
    assert tried["why"].startswith("it deletes the history a fault-free schedule keeps in audit.run_log (1 row "
                                   "instead of 4 after 4 runs)"), tried
    assert logged["note"].startswith("a declaration of what the table is for")
    assert (project / "models/staging/events_logged.sql").read_text() == RUN_LOGGED  # left for review
    assert "--apply: left for review (a declaration of what a table is for): events_logged" in out

    assert fixes["day_amounts"]["tried"] == []
    assert "+where cast(event_time as date) >= (select max(day) from {{ this }})" in fixes["day_amounts"]["patch"]
    assert "batch_size='day', begin='2026-01-01', lookback=2," in (project / "models/staging/events_micro.sql").read_text()

    vendor = fixes["vendor_recent"]
    assert (vendor["path"], vendor["tried"], vendor["note"]) == ("dbt_project.yml", [], ""), vendor
    assert vendor["description"].startswith("the var `vendor_lookback_hours` that the window reads set to 48 (hours; "
                                            "it was 6) for vendor_window under `vars:`"), vendor["description"]
    assert yaml.safe_load((project / "dbt_project.yml").read_text())["vars"] == {
        "vendor_window": {"vendor_lookback_hours": 48}}
    installed = project / "dbt_packages/vendor_window"
    assert not installed.is_symlink()
    assert (installed / "macros/recent.sql").read_text() == VENDOR_WINDOW_MACRO
    assert (installed / "models/vendor_recent.sql").read_text() == VENDOR_WINDOW_MODEL
    tried = [(t["candidate"], t["why"].split(" (")[0]) for t in fixes["vendor_appended"]["tried"]]
    assert tried[:2] == [("var vendor_append_hours = 48", "vendor_appended is duplicates"),
                         ("keyed on event_id (dbt_project.yml)", "vendor_appended stays loss")], tried
    assert not [t for t in tried if "(dbt_project.yml)" not in t[0] and not t[0].startswith("var ")], tried
    assert "--apply: 3 fix(es) written:" in out


def test_a_fix_search_with_no_root_cause_says_so_and_one_not_asked_says_nothing():
    from rerun_safety.report.terminal import fix_lines

    asked = GamedayReport("p", "duckdb", "dev", (), 1, (), (), 1.0, 1, 1.0, "", fixes=())
    assert fix_lines(asked, {}) == [("Fixes: no root cause to fix", "bold")]
    assert asked.to_dict()["fixes"] == []
    plain = GamedayReport("p", "duckdb", "dev", (), 1, (), (), 1.0, 1, 1.0, "")
    assert fix_lines(plain, {}) == [] and "fixes" not in plain.to_dict()


def test_the_copy_of_a_project_leaves_out_a_work_root_inside_it(tmp_path):
    from rerun_safety.fix.search import _not_copied

    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "models" / "m.sql").write_text("select 1")
    (project / ".work" / "run").mkdir(parents=True)  # --work-root .work, inside the project
    (project / "target").mkdir()
    (project / "p.duckdb").write_text("")
    shutil.copytree(project, project / ".work" / "run" / "copy", ignore=_not_copied(project / ".work"))
    copied = sorted(str(p.relative_to(project / ".work" / "run" / "copy")) for p in
                    (project / ".work" / "run" / "copy").rglob("*"))
    assert copied == ["models", "models/m.sql"]


def test_a_package_var_goes_under_vars_for_the_package_and_a_value_set_there_is_replaced():
    from rerun_safety.fix.overrides import package_var

    text = "name: p\nvars:\n  start: '2026-01-01'  # global\nmodels:\n  p:\n    +materialized: view\n"
    assert package_var(text, "vendor", "vendor_lookback_hours", 48) == (
        "name: p\nvars:\n  vendor:\n    vendor_lookback_hours: 48\n  start: '2026-01-01'  # global\nmodels:\n"
        "  p:\n    +materialized: view\n")
    scoped = "name: p\nvars:\n  vendor:\n    vendor_lookback_hours: 6  # the default\n    other: x\n"
    assert package_var(scoped, "vendor", "vendor_lookback_hours", 48) == (
        "name: p\nvars:\n  vendor:\n    vendor_lookback_hours: 48  # the default\n    other: x\n")
    assert package_var("name: p\n", "vendor", "d", 3) == "name: p\nvars:\n  vendor:\n    d: 3\n"
    # a flow mapping, or the var a block of its own: not as text
    assert package_var("name: p\nvars: {a: 1}\n", "vendor", "d", 3) is None
    assert package_var("name: p\nvars:\n  vendor:\n    d:\n      x: 1\n", "vendor", "d", 3) is None


def test_the_vars_a_window_reads_are_found_with_their_unit_and_their_value_in_dbts_order():
    from rerun_safety.fix.package_vars import in_effect, needed, window_vars

    macro = ("{% macro since(c) %}{{ c }} >= (select max({{ c }}) - interval '{{ var(\"lookback\", 6) }} hours' "
             "from {{ this }}){% endmacro %}")
    named = "where d >= {{ dbt.dateadd('day', -var('snowplow__lookback_window_days', 3), 'current_date') }}"
    found = window_vars([macro, named])
    assert [(v.name, v.default, v.unit_name, v.unit) for v in found] == [
        ("lookback", 6.0, "hour", 3600), ("snowplow__lookback_window_days", 3.0, "day", 86400)]
    # not a window's: a row limit, a start date, a var without a unit of time
    assert window_vars(["select * from t limit {{ var('max_rows', 100) }}",
                        "where d >= '{{ var(\"start_date\", \"2026-01-01\") }}'",
                        "where n > {{ var('threshold', 2) }}"]) == []
    assert (needed(found[0], 2 * 86400), needed(found[1], 2 * 86400), needed(found[1], 3600)) == (48, 2, 1)
    root = {"vars": {"vendor": {"lookback": 12}, "lookback": 9}}
    own = {"vars": {"lookback": 7}}
    assert in_effect("lookback", "vendor", {"lookback": 30}, root, own, 6) == 30  # --vars first
    assert in_effect("lookback", "vendor", {}, root, own, 6) == 12  # the root's, for the package
    assert in_effect("lookback", "vendor", {}, {"vars": {"lookback": 9}}, own, 6) == 9  # the root's global
    assert in_effect("lookback", "vendor", {}, {}, {"vars": {"vendor": {"lookback": 8}, "lookback": 7}}, 6) == 8
    assert in_effect("lookback", "vendor", {}, {}, own, 6) == 7
    assert in_effect("lookback", "vendor", {}, {}, {}, 6) == 6


def test_a_file_dbt_deps_installed_or_outside_the_project_is_never_patched(tmp_path):
    """The search changes files in its copy of the project folder: a package model that `dbt deps` installed
    (replaced at the next deps), or a file outside the folder that no local package's link reaches, is left to
    dbt_project.yml settings, with the reason; a model of the project, of a local package inside it, or of a
    local package outside it that dbt deps linked (`local: ../`, in a copy of that package: see
    test_a_local_package_outside_the_project_gets_its_own_files_patch_left_for_review) can be patched."""
    from rerun_safety.fix.project_files import kept as _kept

    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "models" / "m.sql").write_text("select 1")
    (project / "dbt_project.yml").write_text("name: p\n")
    (project / "vendored" / "models").mkdir(parents=True)
    (project / "vendored" / "models" / "v.sql").write_text("select 1")
    (project / "dbt_packages" / "installed" / "models").mkdir(parents=True)
    (project / "dbt_packages" / "installed" / "models" / "i.sql").write_text("select 1")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "o.sql").write_text("select 1")
    (project / "dbt_packages" / "outside").symlink_to(tmp_path)
    (project / "dbt_packages" / "vendored").symlink_to(project / "vendored")
    first = SimpleNamespace(options=SimpleNamespace(project_dir=project))
    assert _kept(first, project / "models" / "m.sql") == ""
    assert _kept(first, project / "dbt_packages" / "vendored" / "models" / "v.sql") == ""
    assert _kept(first, project / "dbt_packages" / "installed" / "models" / "i.sql") == (
        "the package's installed file is not changed (dbt deps replaces it)")
    assert _kept(first, project / "dbt_packages" / "outside" / "models" / "o.sql") == ""  # a linked local package
    assert _kept(first, tmp_path / "models" / "o.sql") == (  # (a parse's absolute path, no link to it)
        f"its file is outside the project folder ({tmp_path / 'models' / 'o.sql'}): the fix search changes only "
        "files inside it, in a copy")
    (project / "dbt_project.yml").write_text("name: p\npackages-install-path: deps\n")
    assert _kept(first, project / "dbt_packages" / "installed" / "models" / "i.sql") == ""


LOCAL_PACKAGE_MODEL = ("{{ config(materialized='incremental') }}\n"
                       "select event_id, user_id, amount, event_time from {{ ref('stg_events') }}\n"
                       "{% if is_incremental() %}\n"
                       "where event_time >= (select max(event_time) - interval '3 days' from {{ this }})\n"
                       "{% endif %}\n")


def test_a_local_package_outside_the_project_gets_its_own_files_patch_left_for_review(tmp_path):
    """A package developed beside its integration_tests project (`local: ../`): its model appends a re-read
    three-day window (duplicates). The search changes a copy of the package, linked in its copy of the
    project, and verifies `keyed on event_id` in the package's file first (an override in the project's
    dbt_project.yml would fix only this project); the patch is relative to the package's folder and applies
    there; --apply leaves it (outside the project folder), and the package's file is unchanged."""
    package = tmp_path / "vendor_local"
    (package / "models").mkdir(parents=True)
    (package / "dbt_project.yml").write_text("name: vendor_local\nversion: '1.0'\nconfig-version: 2\n")
    (package / "models" / "vendor_lookback.sql").write_text(LOCAL_PACKAGE_MODEL)
    project = copy_project(SHOP, package / "integration_tests")
    with open(project / "packages.yml", "a") as f:
        f.write("  - local: ../\n")
    shop_generator().load_duckdb(str(project / "shop.duckdb"))
    code, out, err = _fix_gameday(project, project, tmp_path / "out", "--scenarios", "rerun",
                                  "--select", "vendor_lookback", "--fix", "--apply")
    assert code == 1, out + err
    report = load_report(tmp_path / "out")
    assert by_name(report)["vendor_lookback"]["verdict"] == "duplicates"
    (fix,) = report["fixes"]
    assert (fix["verified"], fix["candidate"], fix["path"], fix["tried"]) == (
        True, "keyed on event_id", "../models/vendor_lookback.sql", []), fix
    assert fix["patch"].startswith("--- a/models/vendor_lookback.sql\n+++ b/models/vendor_lookback.sql\n"), fix["patch"]
    assert fix["note"] == ("the file is in the local package vendor_local at .., outside the project folder: the "
                           "patch is relative to that folder (`git apply` there); --apply leaves it to you")
    assert "--apply: 0 fix(es) written: none" in out
    assert ("--apply: left for review (a local package's file outside the project folder): vendor_lookback "
            "(../models/vendor_lookback.sql)") in out
    assert (package / "models" / "vendor_lookback.sql").read_text() == LOCAL_PACKAGE_MODEL
    assert "unique_key" not in (project / "dbt_project.yml").read_text()
    subprocess.run(["git", "apply", str(tmp_path / "out" / "fixes" / "vendor_lookback.patch")], cwd=package,
                   check=True)
    assert (package / "models" / "vendor_lookback.sql").read_text().startswith(
        "{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='event_id') }}\n")


def test_a_macros_list_aggregate_is_not_ordered_inside_its_arguments_and_the_reason_says_so():
    """`{{ fivetran_utils.string_agg('v', "', '") }}` (a public package's shape): an ORDER BY put into the macro's
    arguments does not compile (found on fivetran/dbt_jira: "expected token ',', got 'order'"); a plain
    string_agg beside it is still ordered, and a model with only the macro's gets none, with why."""
    mixed = "select {{ fivetran_utils.string_agg('v', \"', '\") }} as x, string_agg(a, ',') as y from t"
    assert ordered_aggregates(mixed) == ("select {{ fivetran_utils.string_agg('v', \"', '\") }} as x, "
                                         "string_agg(a, ',' order by a) as y from t")
    only = "select project_id, {{ fivetran_utils.string_agg( \"issue_name\", \"', '\" ) }} as epics from t group by 1"
    assert ordered_aggregates(only) is None
    found, why = candidates(_target("jira__project_enhanced", "nondeterministic", raw=only, materialized="table"))
    assert found == []
    assert why == ("no candidate: its list aggregate is a macro's (`{{ fivetran_utils.string_agg( \"issue_name\", "
                   "\"', '\" ) }}`), whose arguments take no ORDER BY: order what it gathers in the macro, or write "
                   "the engine's own aggregate with an ORDER BY")


RANKED = ("{{ config(materialized='table') }}\n"
          "select event_id, user_id, amount,\n"
          "       row_number() over (partition by user_id order by cast(event_time as date)) as nth_of_user__NOISE__\n"
          "from {{ ref('stg_events') }}\n")


def test_ties_in_a_tables_window_get_the_key_as_tie_break_and_noise_is_refused(engine, tmp_path, request):
    """Labelled before the run, on DuckDB and PostgreSQL, the determinism scenario (a table is judged by rebuilds):
    - events_ranked (a table; `unique` test on event_id): row_number() over a user's events ordered by their
      day numbers the events of one day in any order (nondeterministic nth_of_user); `tie-break by the key`
      (event_id added to the window's ORDER BY) is verified. Its verifying game day selects a table alone
      (nothing below it keeps state): it runs (it stopped with "no incremental model is selected");
    - events_ranked_noisy: the same with a random() column: each tie-break is tried and refused (it stays
      nondeterministic: the noise), and the window's own column is never added to its ORDER BY.
    - events_keyed_append (the example's append that ignores its unique_key: duplicates in rerun) with
      keyed_numbered below it (a table numbering its rows per user by day: ties, nondeterministic on its
      own): `keyed on event_id` is verified, keyed_numbered's own nondeterminism (there before the change and
      after) not held against it, and said so in the models judged.
    events_merge (incremental, safe) is selected so that the first game day replays something."""
    project = copy_project(SHOP, tmp_path / "shop")
    (project / "models/staging/events_ranked.sql").write_text(RANKED.replace("__NOISE__", ""))
    (project / "models/staging/events_ranked_noisy.sql").write_text(
        RANKED.replace("__NOISE__", ",\n       cast(random() * 1000 as integer) as noise"))
    (project / "models/staging/ranked.yml").write_text(yaml.safe_dump({"version": 2, "models": [
        {"name": "events_ranked", "columns": [{"name": "event_id", "data_tests": ["unique"]}]}]}))
    (project / "models/staging/keyed_numbered.sql").write_text(RANKED.replace("__NOISE__", "").replace(
        "stg_events", "events_keyed_append").replace("nth_of_user", "nth"))
    if engine == "duckdb":
        shop_generator().load_duckdb(str(project / "shop.duckdb"))
        profiles = project
    else:
        server = request.getfixturevalue("pg_server")
        dbname = server.create_database("shop_ties")
        shop_generator().load_postgres(server.dsn(dbname))
        profiles = pg_profile(server, dbname, tmp_path / "profiles", "shop", "analytics")
    code, out, err = _fix_gameday(project, profiles, tmp_path / "out", "--scenarios", "rerun,determinism", "--select",
                                  "events_ranked events_ranked_noisy events_merge events_keyed_append+", "--fix")
    assert code == 1, out + err
    report = load_report(tmp_path / "out")
    models = by_name(report)
    assert {n: models[n]["verdict"] for n in ("events_ranked", "events_ranked_noisy", "events_merge")} == {
        "events_ranked": "nondeterministic", "events_ranked_noisy": "nondeterministic", "events_merge": "safe"}
    fixes = {f["model"]: f for f in report["fixes"]}
    ranked = fixes["events_ranked"]
    assert (ranked["verified"], ranked["candidate"], ranked["tried"]) == (True, "tie-break by the key", []), ranked
    assert ("+       row_number() over (partition by user_id order by cast(event_time as date), event_id) as "
            "nth_of_user\n") in ranked["patch"]
    noisy = fixes["events_ranked_noisy"]
    assert not noisy["verified"]
    assert [(t["candidate"], t["why"].split(" (")[0]) for t in noisy["tried"]] == [
        ("tie-break by every output column", "events_ranked_noisy stays nondeterministic")], noisy["tried"]
    assert "nth_of_user," not in noisy["tried"][0]["description"]  # the window's own column is not ordered by
    assert models["keyed_numbered"]["nondeterministic_columns"] == ["nth"]
    keyed = fixes["events_keyed_append"]
    assert (keyed["verified"], keyed["candidate"], keyed["models"]) == (
        True, "keyed on event_id", ["events_keyed_append", "keyed_numbered (but for its own nondeterminism)"]), keyed
