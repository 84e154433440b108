"""`rerun-safety init`: the strategy shim written into a user's dbt project."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rerun_safety.cli import main
from rerun_safety.errors import ConfigError
from rerun_safety.init import SHIM_CONTENT, write_shim

REPO_ROOT = Path(__file__).resolve().parents[1]
SHIM = "get_incremental_partition_overwrite_sql.sql"


def _project(tmp_path: Path, extra_yaml: str = "") -> Path:
    project = tmp_path / "user_project"
    project.mkdir()
    (project / "dbt_project.yml").write_text(
        "name: user_project\nversion: '1.0'\nconfig-version: 2\nprofile: user_project\n" + extra_yaml)
    return project


def test_shim_is_the_file_the_integration_project_uses():
    expected = (REPO_ROOT / "integration_tests" / "macros" / SHIM).read_text(encoding="utf-8")
    assert SHIM_CONTENT == expected


def test_writes_the_shim_then_is_idempotent(tmp_path):
    project = _project(tmp_path)
    path, changed = write_shim(project)
    assert (path, changed) == (project / "macros" / SHIM, True)
    assert path.read_bytes() == SHIM_CONTENT.encode("utf-8")
    mtime = path.stat().st_mtime_ns
    assert write_shim(project) == (project / "macros" / SHIM, False)
    assert path.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in (project / "macros").iterdir()) == [SHIM]


def test_respects_custom_macro_paths(tmp_path):
    project = _project(tmp_path, 'macro-paths: ["dbt/macros", "shared_macros"]\n')
    (project / "shared_macros").mkdir()
    (project / "shared_macros" / "other.sql").write_text("{% macro other() %}1{% endmacro %}\n")
    path, changed = write_shim(project)
    assert (path, changed) == (project / "dbt" / "macros" / SHIM, True)
    assert path.read_text(encoding="utf-8") == SHIM_CONTENT
    assert not (project / "macros").exists()


def test_shim_already_in_a_later_macro_path_is_reused(tmp_path):
    project = _project(tmp_path, "macro-paths: [macros, vendored]\n")
    (project / "vendored" / "strategies").mkdir(parents=True)
    existing = project / "vendored" / "strategies" / "po_shim.sql"
    existing.write_text(SHIM_CONTENT.replace("\n", "\r\n"), encoding="utf-8")  # checked out on Windows
    assert write_shim(project) == (existing, False)
    assert not (project / "macros").exists()


def test_a_hand_written_delegating_shim_counts_as_present(tmp_path):
    project = _project(tmp_path)
    (project / "macros").mkdir()
    mine = project / "macros" / "strategies.sql"
    mine.write_text("{%- macro get_incremental_partition_overwrite_sql(arg_dict) -%}\n"
                    "{{ return(rerun_safety.get_incremental_partition_overwrite_sql(arg_dict)) }}\n"
                    "{%- endmacro %}\n")
    assert write_shim(project) == (mine, False)
    assert not (project / "macros" / SHIM).exists()


def test_another_definition_of_the_macro_is_a_config_error(tmp_path):
    project = _project(tmp_path)
    (project / "macros" / "custom").mkdir(parents=True)
    other = project / "macros" / "custom" / "my_strategy.sql"
    other.write_text("{% macro get_incremental_partition_overwrite_sql(arg_dict) %}\n"
                     "  delete from {{ arg_dict['target_relation'] }}\n{% endmacro %}\n")
    with pytest.raises(ConfigError) as info:
        write_shim(project)
    assert str(info.value) == (
        f"{other} already defines get_incremental_partition_overwrite_sql as another strategy; remove that "
        "macro or make it return rerun_safety.get_incremental_partition_overwrite_sql(arg_dict)")
    assert not (project / "macros" / SHIM).exists()


def test_a_mention_in_a_comment_is_not_a_definition(tmp_path):
    project = _project(tmp_path)
    (project / "macros").mkdir()
    (project / "macros" / "notes.sql").write_text(
        "{# we use get_incremental_partition_overwrite_sql from rerun_safety #}\n")
    assert write_shim(project) == (project / "macros" / SHIM, True)


def test_a_different_file_at_the_shim_path_is_not_overwritten(tmp_path):
    project = _project(tmp_path)
    (project / "macros").mkdir()
    (project / "macros" / SHIM).write_text("-- placeholder\n")
    with pytest.raises(ConfigError, match="already exists and is not the shim"):
        write_shim(project)
    assert (project / "macros" / SHIM).read_text() == "-- placeholder\n"


def test_no_dbt_project_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError) as info:
        write_shim(tmp_path)
    assert str(info.value) == f"{tmp_path} is not a dbt project: it has no dbt_project.yml"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("yaml_text, message", [
    ("name: [unclosed\n", "cannot read"),
    ("macro-paths: 3\n", "macro-paths must be a list of folder names; got 3"),
])
def test_unreadable_project_config_is_a_config_error(tmp_path, yaml_text, message):
    (tmp_path / "dbt_project.yml").write_text(yaml_text)
    with pytest.raises(ConfigError, match=message):
        write_shim(tmp_path)


def test_cli_init_exit_codes(tmp_path):
    project = _project(tmp_path)
    runner = CliRunner()
    first = runner.invoke(main, ["init", "--project-dir", str(project)])
    assert (first.exit_code, first.output) == (0, f"wrote {project / 'macros' / SHIM}\n")
    second = runner.invoke(main, ["init", "--project-dir", str(project)])
    assert (second.exit_code, second.output) == (0, f"already present: {project / 'macros' / SHIM}\n")

    empty = tmp_path / "empty"
    empty.mkdir()
    failed = runner.invoke(main, ["init", "--project-dir", str(empty)])
    assert failed.exit_code == 2
    assert failed.stderr == f"rerun-safety: error: {empty} is not a dbt project: it has no dbt_project.yml\n"
    assert failed.stdout == ""
    assert "Traceback" not in failed.output
    assert isinstance(failed.exception, SystemExit)


def test_spark_shim_is_the_file_the_integration_project_uses_and_is_idempotent(tmp_path):
    from rerun_safety.init import SPARK_SHIM_CONTENT, SPARK_SHIM_FILENAME

    expected = (REPO_ROOT / "integration_tests" / "macros" / SPARK_SHIM_FILENAME).read_text(encoding="utf-8")
    assert SPARK_SHIM_CONTENT == expected
    project = _project(tmp_path)
    runner = CliRunner()
    first = runner.invoke(main, ["init", "--spark", "--project-dir", str(project)])
    assert (first.exit_code, first.output) == (
        0, f"wrote {project / 'macros' / SHIM}\nwrote {project / 'macros' / SPARK_SHIM_FILENAME}\n")
    assert (project / "macros" / SPARK_SHIM_FILENAME).read_text(encoding="utf-8") == expected
    again = runner.invoke(main, ["init", "--spark", "--project-dir", str(project)])
    assert again.output.count("already present:") == 2


def test_another_dbt_spark_override_is_a_config_error(tmp_path):
    from rerun_safety.init import SPARK_SHIM_FILENAME

    project = _project(tmp_path)
    (project / "macros").mkdir()
    (project / "macros" / "mine.sql").write_text(
        "{% macro dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format) %}"
        "{{ return(raw_strategy) }}{% endmacro %}\n")
    with pytest.raises(ConfigError, match="already defines dbt_spark_validate_get_incremental_strategy"):
        write_shim(project, spark=True)
    assert not (project / "macros" / SPARK_SHIM_FILENAME).exists()
