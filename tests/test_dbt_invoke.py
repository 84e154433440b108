"""DbtSession over many invocations in one process, on a real PostgreSQL server."""
from __future__ import annotations

import yaml

from _support import postgres_profile, write_profiles
from rerun_safety.dbt_invoke import DbtSession


def test_invocations_leave_dbt_adapters_flag_list_as_it_was(pg_server, pg_database, tmp_path):
    # Each PostgreSQL adapter dbt creates extends dbt-adapters' module-level flag list in place;
    # without trimming, the list grows by the adapter's flags on every invocation.
    from dbt.adapters.base.impl import DEFAULT_BASE_BEHAVIOR_FLAGS as flags

    project = tmp_path / "p"
    (project / "models").mkdir(parents=True)
    (project / "models" / "m.sql").write_text("select 1 as id")
    (project / "dbt_project.yml").write_text(yaml.safe_dump(
        {"name": "p", "version": "1.0", "config-version": 2, "profile": "p"}))
    write_profiles(project, "p", postgres_profile(pg_server, pg_database))
    session = DbtSession(project, project, None, tmp_path / "work")
    session.parse()
    sizes = []
    for _ in range(4):
        res = session.invoke(["run"])
        assert res.success, res.error
        sizes.append(len(flags))
    names = [f["name"] for f in flags]
    assert len(names) == len(set(names))
    assert sizes == [sizes[0]] * 4
    assert [n.status for n in res.nodes] == ["success"]
