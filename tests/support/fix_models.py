"""Models of the shop with one defect each that a fix candidate mends (test_fixes.py on DuckDB,
test_fix_shapes_postgres.py on PostgreSQL)."""

RUN_LOGGED = ("{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='event_id',\n"
              "          post_hook=\"insert into {{ source('audit', 'run_log') }} select 'events_logged', count(*) "
              "from {{ this }}\") }}\n"
              "select event_id, amount, event_time from {{ ref('stg_events') }}\n"
              "{% if is_incremental() %}\n"
              "where event_time >= (select max(event_time) - interval '3 days' from {{ this }})\n"
              "{% endif %}\n")


DAY_AMOUNTS = ("{{ config(materialized='incremental', incremental_strategy='merge', unique_key='day') }}\n"
               "select cast(event_time as date) as day, sum(amount) as amount, count(*) as events\n"
               "from {{ ref('stg_events') }}\n"
               "{% if is_incremental() %}\nwhere cast(event_time as date) > (select max(day) from {{ this }})\n"
               "{% endif %}\ngroup by 1\n")


MICROBATCH = ("{{ config(materialized='incremental', incremental_strategy='microbatch', event_time='event_time',\n"
              "          batch_size='day', begin='2026-01-01', lookback=0,\n"
              "          unique_key=('event_id' if target.type == 'postgres' else none)) }}\n"
              "select event_id, amount, event_time from {{ source('raw', 'events') }}\n")


# A vendor package's shape: its lookback computed inside its macro from a var its own dbt_project.yml sets
# (six hours, while the shop's events land up to a day late: loss). A user cannot edit the installed copy;
# the var set for the package in their dbt_project.yml is the fix.
VENDOR_WINDOW_MACRO = ("{% macro recent(column) -%}\n"
                       "{{ column }} >= (select max({{ column }}) - interval '{{ var(\"vendor_lookback_hours\") }} "
                       "hours' from {{ this }})\n"
                       "{%- endmacro %}\n")
# the package's append of the newest events, after a watermark its own var moves back (0 hours: a strict
# watermark, loss); re-reading more only appends it again (the var's candidate is refused: duplicates)
VENDOR_APPEND_MACRO = ("{% macro newer(column) -%}\n"
                       "{{ column }} > (select max({{ column }}) - interval '{{ var(\"vendor_append_hours\") }} "
                       "hours' from {{ this }})\n"
                       "{%- endmacro %}\n")
VENDOR_APPEND_MODEL = ("{{ config(materialized='incremental') }}\n"
                       "select event_id, user_id, amount, event_time from {{ ref('stg_events') }}\n"
                       "{% if is_incremental() %}\nwhere {{ vendor_window.newer('event_time') }}\n{% endif %}\n")
VENDOR_WINDOW_MODEL = ("{{ config(materialized='incremental', incremental_strategy='delete+insert', "
                       "unique_key='event_id') }}\n"
                       "select event_id, user_id, amount, event_time from {{ ref('stg_events') }}\n"
                       "{% if is_incremental() %}\nwhere {{ vendor_window.recent('event_time') }}\n{% endif %}\n")


def vendor_window_package(folder):
    """A git repository of the vendor package in `folder` (dbt deps clones it into dbt_packages/, as from
    a hub or GitHub); returns the packages.yml entry that installs it."""
    import subprocess

    (folder / "models").mkdir(parents=True)
    (folder / "macros").mkdir()
    (folder / "dbt_project.yml").write_text("name: vendor_window\nversion: '1.0'\nconfig-version: 2\n"
                                            "model-paths: ['models']\nmacro-paths: ['macros']\n"
                                            "vars:\n  vendor_lookback_hours: 6\n  vendor_append_hours: 0\n")
    (folder / "macros" / "recent.sql").write_text(VENDOR_WINDOW_MACRO)
    (folder / "macros" / "newer.sql").write_text(VENDOR_APPEND_MACRO)
    (folder / "models" / "vendor_recent.sql").write_text(VENDOR_WINDOW_MODEL)
    (folder / "models" / "vendor_appended.sql").write_text(VENDOR_APPEND_MODEL)
    git = ["git", "-c", "user.name=vendor", "-c", "user.email=vendor@example.com", "-c", "init.defaultBranch=main"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "vendor_window 1.0"]):
        subprocess.run([*git, *args], cwd=folder, check=True, capture_output=True)
    return f"  - git: \"file://{folder}\"\n    revision: main\n"
