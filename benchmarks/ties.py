"""How many models whose result depends on the order of tied rows one game day finds.

    .venv/bin/python benchmarks/ties.py [--engine duckdb|postgres] [--rounds 3]

A generated project of TIE_MODELS (row_number, ntile, first_value, last_value, nth_value, lag and
lead over ties, a limit without a total order, a `row_number() = 1` dedup, string_agg and
array_agg without an order, distinct on) over one input with many ties, plus deterministic
controls (rank, dense_rank, an ordered string_agg, a total order). Each round runs the game day's
reference and determinism scenarios twice side by side: as it is (the second build reads its
inputs written in another physical order) and with the inputs left in the order they were
written (the game day before that change). Prints the detection rate of each and the false
alarms on the controls.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

T = "{{ source('raw', 'scores') }}"
TIE_MODELS = {
    "t_row_number": f"select id, row_number() over (partition by grp order by score) as rn from {T}",
    "t_row_number_global": f"select id, row_number() over (order by score) as rn from {T}",
    "t_ntile": f"select id, ntile(4) over (order by score) as quartile from {T}",
    "t_ntile_partition": f"select id, ntile(3) over (partition by grp order by score) as tercile from {T}",
    "t_first_value": f"select id, first_value(id) over (partition by grp order by score) as first_id from {T}",
    "t_last_value": f"select id, last_value(id) over (partition by grp order by score rows between unbounded "
                    f"preceding and unbounded following) as last_id from {T}",
    "t_nth_value": f"select id, nth_value(id, 2) over (partition by grp order by score rows between unbounded "
                   f"preceding and unbounded following) as second_id from {T}",
    "t_lag": f"select id, lag(id) over (partition by grp order by score) as prev_id from {T}",
    "t_lead": f"select id, lead(id) over (partition by grp order by score) as next_id from {T}",
    "t_lag_global": f"select id, lag(id) over (order by score) as prev_id from {T}",
    "t_limit": f"select id from {T} order by score limit 25",
    "t_limit_group": f"select id, grp from {T} where grp = 3 order by score desc limit 5",
    "t_dedup": f"select id, grp from (select id, grp, row_number() over (partition by grp order by score desc) "
               f"as rn from {T}) d where rn = 1",
    "t_dedup_day": f"select grp, score, id from (select grp, score, id, row_number() over (partition by grp, score "
                   f"order by day desc) as rn from (select grp, score, id, cast(ts as date) as day from {T}) x) d "
                   f"where rn = 1",
    "t_string_agg": f"select grp, string_agg(cast(id as varchar), ',') as ids from {T} group by grp",
    "t_array_agg": f"select grp, array_agg(id) as ids from {T} group by grp",
    "t_distinct_on": f"select distinct on (grp) grp, id from {T} order by grp, score",
    "t_running_count": f"select id, count(*) over (order by score rows between unbounded preceding and current "
                       f"row) as running from {T}",
    "t_percentile_pick": f"select id from (select id, row_number() over (order by score desc) as rn from {T}) r "
                         f"where rn <= 10",
    "t_window_sum_rows": f"select id, sum(score) over (partition by grp order by score rows between 1 preceding "
                         f"and current row) as s2 from {T}",
}
CONTROLS = {
    "c_rank": f"select id, rank() over (partition by grp order by score) as r from {T}",
    "c_dense_rank": f"select id, dense_rank() over (order by score) as r from {T}",
    "c_total_order": f"select id, row_number() over (partition by grp order by score, id) as rn from {T}",
    "c_ordered_agg": f"select grp, string_agg(cast(id as varchar), ',' order by id) as ids from {T} group by grp",
    "c_group": f"select grp, count(*) as n, sum(score) as s from {T} group by grp",
}


def rows() -> list[tuple]:
    """3,000 rows, 12 groups, scores 0-9: about 25 ties per group and score."""
    import datetime as dt
    import random

    rng = random.Random(7)
    start = dt.datetime(2025, 1, 1)
    return [(i, rng.randint(1, 12), rng.randint(0, 9), start + dt.timedelta(minutes=13 * i)) for i in range(3000)]


def make_project(tmp: Path, engine: str, server=None) -> Path:
    import yaml

    from support.common import duckdb_profile, load_duckdb_with, load_postgres_with, postgres_profile, write_profiles

    project = tmp / "ties"
    (project / "models").mkdir(parents=True)
    for name, sql in {**TIE_MODELS, **CONTROLS}.items():
        (project / "models" / f"{name}.sql").write_text(sql + "\n")
    # the game day replays incremental models: one that the determinism scenario rebuilds too
    (project / "models" / "inc_scores.sql").write_text(
        "{{ config(materialized='incremental', unique_key='id') }}\nselect id, grp, score, ts from " + T + "\n"
        "{% if is_incremental() %}where ts > (select max(ts) from {{ this }}){% endif %}\n")
    (project / "models" / "sources.yml").write_text(yaml.safe_dump({"version": 2, "sources": [
        {"name": "raw", "schema": "raw", "tables": [{"name": "scores", "config": {"event_time": "ts"}}]}]}))
    (project / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "ties", "version": "1.0", "config-version": 2, "profile": "ties",
         "models": {"ties": {"+materialized": "table"}}}))

    def load(execute, executemany):
        execute("create schema raw")
        execute("create table raw.scores (id integer, grp integer, score integer, ts timestamp)")
        executemany("insert into raw.scores values (%s, %s, %s, %s)", rows())

    if engine == "duckdb":
        load_duckdb_with(str(project / "ties.duckdb"), load)
        write_profiles(project, "ties", duckdb_profile(project / "ties.duckdb", schema="analytics"))
    else:
        dbname = server.create_database("ties")
        load_postgres_with(server.dsn(dbname), load)
        write_profiles(project, "ties", postgres_profile(server, dbname, schema="analytics"))
    return project


def run(project: Path, out: Path, reorder: bool) -> dict[str, str]:
    from rerun_safety.gameday import Gameday, GamedayOptions

    original = Gameday._reorder_inputs
    if not reorder:
        Gameday._reorder_inputs = lambda self, plan, sandbox: None  # the game day before the change
    try:
        options = GamedayOptions(project_dir=project, profiles_dir=str(project), target=None, select=(),
                                 exclude=(), vars_yaml=None, steps=4, scenarios=("reference", "determinism"),
                                 output_dir=out)
        report = Gameday(options).run()
    finally:
        Gameday._reorder_inputs = original
    return {m.name: m.verdict for m in report.models}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=["duckdb", "postgres"], default="duckdb")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    server = None
    if args.engine == "postgres":
        from support.common import start_pg_server

        server = start_pg_server()
    try:
        tmp = Path(tempfile.mkdtemp(prefix="rs_bench_ties_"))
        project = make_project(tmp, args.engine, server)
        os.chdir(project)
        totals = {True: [0, 0], False: [0, 0]}  # reorder -> [found, false alarms]
        for r in range(args.rounds):
            for reorder in (False, True):
                verdicts = run(project, tmp / f"out_{r}_{reorder}", reorder)
                found = sum(verdicts[m] == "nondeterministic" for m in TIE_MODELS)
                alarms = sum(verdicts[m] != "safe" for m in CONTROLS)
                totals[reorder][0] += found
                totals[reorder][1] += alarms
                missed = sorted(m for m in TIE_MODELS if verdicts[m] != "nondeterministic")
                print(f"round {r + 1} {'reordered inputs' if reorder else 'inputs as written'}: "
                      f"{found}/{len(TIE_MODELS)} found, {alarms} false alarm(s); missed: {', '.join(missed) or '-'}")
        n = len(TIE_MODELS) * args.rounds
        print(json.dumps({"engine": args.engine, "tie_models": len(TIE_MODELS), "controls": len(CONTROLS),
                          "rounds": args.rounds,
                          "rate_inputs_as_written": round(totals[False][0] / n, 3),
                          "rate_reordered_inputs": round(totals[True][0] / n, 3),
                          "false_alarms_as_written": totals[False][1], "false_alarms_reordered": totals[True][1]}))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
