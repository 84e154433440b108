"""Verified fixes on PostgreSQL for the shapes beyond examples/shop's (test_fixes.py has the catalogue and the
example): a hook that inserts into another relation at every run, a CTE reading {{ this }} outside
is_incremental() (the first build fails there) followed by the defect it hid, and a local package's model
fixed by an override in the project's dbt_project.yml. In the second test session (tests/_shards.py), beside
the other tests of a PostgreSQL server of their own, to balance the two."""
from __future__ import annotations

import subprocess
from pathlib import Path

from support.fix_models import DAY_AMOUNTS, MICROBATCH, RUN_LOGGED, VENDOR_WINDOW_MACRO, vendor_window_package
from support.gameday import SHOP, by_name, copy_project, dbt_deps, load_report, pg_profile, run_cli, shop_generator

VENDOR_MODEL = ("{{ config(materialized='incremental') }}\n"
                "select event_id, user_id, amount, event_time from {{ ref('stg_events') }}\n"
                "{% if is_incremental() %}\n"
                "where event_time >= (select max(event_time) - interval '3 days' from {{ this }})\n"
                "{% endif %}\n")
DAY_TOTALS = ("{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='event_id',\n"
              "          post_hook=\"insert into {{ source('audit', 'batch_totals') }} select cast(event_time as date), "
              "count(*) from {{ this }} group by 1\") }}\n"
              "select event_id, amount, event_time from {{ ref('stg_events') }}\n"
              "{% if is_incremental() %}\n"
              "where event_time >= (select max(event_time) - interval '3 days' from {{ this }})\n"
              "{% endif %}\n")
SINCE_CTE = ("{{ config(materialized='incremental') }}\n"
             "with since as (select max(event_time) - interval '3 days' as t from {{ this }}),\n"
             "events as (select event_id, amount, event_time from {{ ref('stg_events') }})\n"
             "select * from events\n"
             "{% if is_incremental() %}\n"
             "where event_time >= (select t from since)\n"
             "{% endif %}\n")


def test_hooks_this_outside_the_branch_and_package_models_get_verified_fixes_on_postgres(pg_server, tmp_path):
    """Three shapes, labelled before the run, in one PostgreSQL game day with --fix:
    - events_day_totals: its post-hook inserts per-day totals of the whole table at every run (side_effect);
      fixed by deleting the days it covers first (keyed by batch_day, the date column it inserts);
    - events_since: a CTE reads {{ this }} outside is_incremental() (the first build fails on PostgreSQL:
      error); moving the CTE inside the branch mends that and shows the next defect (an append re-reading
      three days: duplicates), so it is refused, and the same move with delete+insert on event_id (unique in
      that changed project's clean build) is verified;
    - vendor_events, a model of a local package: an append over a three-day lookback (duplicates); fixed by
      setting delete+insert on event_id for it in the project's dbt_project.yml (the package's file sets
      neither key), so the package's copy stays as installed.
    - events_logged, day_amounts, events_micro (support/fix_models.py, test_fixes.py on DuckDB): a run log's
      delete refused by the history rule and its declaration verified; a late aggregate's `>=`; a microbatch
      lookback of 2;
    - vendor_recent, a model of a package cloned by `dbt deps` (support/fix_models.py): its macro's window
      reads the var vendor_lookback_hours (6: loss); the var set to 48 for the package in the project's
      dbt_project.yml.
    Each patch then applied with `git apply -3` (two change dbt_project.yml) to a fresh copy: a second game
    day judges them all `safe`."""
    def project_at(dest: Path) -> Path:
        project = copy_project(SHOP, dest)
        (project / "models/staging/events_day_totals.sql").write_text(DAY_TOTALS)
        (project / "models/staging/events_since.sql").write_text(SINCE_CTE)
        for name, text in (("events_logged", RUN_LOGGED), ("day_amounts", DAY_AMOUNTS), ("events_micro", MICROBATCH)):
            (project / f"models/staging/{name}.sql").write_text(text)
        vendor = project / "vendor_pkg"
        (vendor / "models").mkdir(parents=True)
        (vendor / "dbt_project.yml").write_text("name: vendor\nversion: '1.0'\nconfig-version: 2\n"
                                                "profile: shop\nmodel-paths: ['models']\n")
        (vendor / "models" / "vendor_events.sql").write_text(VENDOR_MODEL)
        with open(project / "packages.yml", "a") as f:
            f.write("  - local: vendor_pkg\n")
            f.write(vendor_window_package(dest.parent / f"{dest.name}_vendor_window"))
        return project

    def gameday(project: Path, out: Path, dbname: str, *extra: str) -> tuple[int, str]:
        shop_generator().load_postgres(pg_server.dsn(dbname))
        profiles = pg_profile(pg_server, dbname, out.parent / f"{out.name}_profiles", "shop", "analytics")
        dbt_deps(project, profiles)
        code, stdout, stderr = run_cli(["gameday", "--project-dir", str(project), "--profiles-dir", str(profiles),
                                        "--output-dir", str(out), "--steps", "3", "--threads", "2",
                                        "--scenarios", "rerun,partial", "--select", "events_day_totals",
                                        "--select", "events_since", "--select", "vendor_events",
                                        "--select", "events_logged", "--select", "day_amounts",
                                        "--select", "events_micro", "--select", "vendor_recent", *extra])
        return code, stdout + stderr

    project = project_at(tmp_path / "shop")
    vendor_file = project / "vendor_pkg/models/vendor_events.sql"
    code, out = gameday(project, tmp_path / "out", pg_server.create_database("shop_fix_shapes"), "--fix")
    assert code == 1, out
    report = load_report(tmp_path / "out")
    assert {n: m["verdict"] for n, m in by_name(report).items() if n != "stg_events"} == {
        "events_day_totals": "side_effect", "events_since": "error", "vendor_events": "duplicates",
        "events_logged": "side_effect", "day_amounts": "drift", "events_micro": "loss", "vendor_recent": "loss"}
    fixes = {f["model"]: f for f in report["fixes"]}
    assert {n: (f["verified"], f["candidate"], f["path"]) for n, f in fixes.items()} == {
        "events_day_totals": (True, "replace the hook's rows by batch_day", "models/staging/events_day_totals.sql"),
        "events_since": (True, "move the read of this, then keyed on event_id", "models/staging/events_since.sql"),
        "vendor_events": (True, "keyed on event_id (dbt_project.yml)", "dbt_project.yml"),
        "events_logged": (True, "declare the run log", "models/staging/events_logged.sql"),
        "day_amounts": (True, "re-read the window", "models/staging/day_amounts.sql"),
        "events_micro": (True, "lookback 2", "models/staging/events_micro.sql"),
        "vendor_recent": (True, "var vendor_lookback_hours = 48", "dbt_project.yml")}, out
    assert "+vars:\n+  vendor_window:\n+    vendor_lookback_hours: 48\n" in fixes["vendor_recent"]["patch"]
    (tried,) = fixes["events_logged"]["tried"]
    assert tried["why"].startswith("it deletes the history a fault-free schedule keeps in audit.run_log (1 row "
                                   "instead of 4 after 4 runs)"), tried
    assert fixes["events_logged"]["declaration"] and not fixes["day_amounts"]["declaration"]
    assert ("delete from {{ source('audit', 'batch_totals') }} where batch_day in (select cast(event_time as date) "
            "from {{ this }} group by cast(event_time as date))") in fixes["events_day_totals"]["patch"]
    assert ("+with {% if is_incremental() %}since as (select max(event_time) - interval '3 days' as t from "
            "{{ this }}),{% endif %}\n") in fixes["events_since"]["patch"]
    assert "+{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='event_id') }}" \
        in fixes["events_since"]["patch"]
    (moved,) = fixes["events_since"]["tried"]  # it mended the first build and showed the append's duplicates
    assert moved["candidate"] == "move the read of this" and moved["why"].startswith("events_since is duplicates (")
    assert (' models:\n+  vendor:\n+    vendor_events:\n+      +incremental_strategy: "delete+insert"\n'
            '+      +unique_key: "event_id"\n   shop:\n') in fixes["vendor_events"]["patch"]
    assert fixes["vendor_events"]["note"] == "" and vendor_file.read_text() == VENDOR_MODEL

    fresh = project_at(tmp_path / "again")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "before"]):
        subprocess.run([*git, *args], cwd=fresh, check=True, capture_output=True)
    for name in fixes:
        subprocess.run([*git, "apply", "-3", str(tmp_path / "out" / "fixes" / f"{name}.patch")], cwd=fresh,
                       check=True)
    code, out = gameday(fresh, tmp_path / "out2", pg_server.create_database("shop_fix_shapes_again"))
    assert code == 0, out
    assert {n: m["verdict"] for n, m in by_name(load_report(tmp_path / "out2")).items()} == {
        "stg_events": "safe", "events_day_totals": "safe", "events_since": "safe", "vendor_events": "safe",
        "events_logged": "safe", "day_amounts": "safe", "events_micro": "safe", "vendor_recent": "safe"}
    assert (fresh / "dbt_packages/vendor_window/macros/recent.sql").read_text() == VENDOR_WINDOW_MACRO
