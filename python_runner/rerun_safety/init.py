"""`rerun-safety init`: write the partition_overwrite strategy shim into a user's dbt project.

dbt looks up `get_incremental_<strategy>_sql` only in the root project, so the package's strategy
needs a one-macro file in the user's own macro path that returns the package's macro; on Spark a
second file (`--spark`) routes dbt-spark's incremental materialization to it.
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from .errors import ConfigError

MACRO_NAME = "get_incremental_partition_overwrite_sql"
SHIM_FILENAME = f"{MACRO_NAME}.sql"
SHIM_CONTENT = """\
{# dbt only looks up incremental strategy macros in the root project: this shim exposes the
   package's strategy under the name dbt expects (`rerun-safety init` writes the same file). #}
{% macro get_incremental_partition_overwrite_sql(arg_dict) %}
  {{ return(rerun_safety.get_incremental_partition_overwrite_sql(arg_dict)) }}
{% endmacro %}
"""

# dbt-spark's incremental materialization accepts only its own strategies and never asks for
# get_incremental_<strategy>_sql: on Spark three of its macros are overridden in the root project
# (root macros win over the adapter's), each returning the package's version.
SPARK_SHIM_FILENAME = "rerun_safety_spark_shim.sql"
SPARK_MACRO = "dbt_spark_validate_get_incremental_strategy"
SPARK_DELEGATE = "spark_validate_incremental_strategy"
SPARK_SHIM_CONTENT = """\
{# Spark only (harmless elsewhere): dbt-spark's incremental materialization accepts only its own
   strategies and partitions tables by partition_by. These overrides of three dbt-spark macros
   (root-project macros take precedence over the adapter's) route partition_overwrite to the
   package and leave every other model to dbt-spark unchanged. #}
{% macro dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format) %}
  {{ return(rerun_safety.spark_validate_incremental_strategy(raw_strategy, file_format)) }}
{% endmacro %}

{% macro dbt_spark_get_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates) %}
  {{ return(rerun_safety.spark_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates)) }}
{% endmacro %}

{% macro partition_cols(label, required=false) %}
  {{ return(rerun_safety.spark_partition_cols(label, required)) }}
{% endmacro %}
"""


def _defines(macro: str) -> re.Pattern:
    """A Jinja macro definition of that name ({% macro name( or {%- macro name( )."""
    return re.compile(r"\{%-?\s*macro\s+" + macro + r"\s*\(")


def _delegates(macro: str) -> re.Pattern:
    """A hand-written shim: the macro returns the package's (the user's own wording of our file)."""
    return re.compile(r"rerun_safety\s*\.\s*" + macro + r"\s*\(")


def _same(a: str, b: str) -> bool:
    """Equal up to line endings and trailing whitespace (editors and git may change those)."""
    def norm(t: str) -> list[str]:
        return [line.rstrip() for line in t.replace("\r\n", "\n").strip().split("\n")]
    return norm(a) == norm(b)


def macro_paths(project_dir: Path) -> list[Path]:
    """The project's macro folders from dbt_project.yml (dbt's default: macros)."""
    config_file = project_dir / "dbt_project.yml"
    if not config_file.is_file():
        raise ConfigError(f"{project_dir} is not a dbt project: it has no dbt_project.yml")
    try:
        config = yaml.safe_load(config_file.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read {config_file}: {str(err).splitlines()[0]}") from err
    if not isinstance(config, dict):
        raise ConfigError(f"cannot read {config_file}: expected a mapping at the top level")
    paths = config.get("macro-paths", ["macros"])
    if isinstance(paths, str):
        paths = [paths]
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p for p in paths):
        raise ConfigError(f"{config_file}: macro-paths must be a list of folder names; got {paths!r}")
    return [project_dir / p for p in paths]


def write_shim(project_dir: Path, spark: bool = False) -> tuple[Path, bool]:
    """Write the shim into the project's first macro path. Returns (path, changed).

    Idempotent: when the shim is already in the macro paths (this file up to line endings, or a
    macro of that name that returns the package's) nothing is written and changed is False.
    Refuses, with a ConfigError, a project where another file defines the macro differently.
    `spark`: the Spark shim (three dbt-spark macro overrides) instead.
    """
    if spark:
        return _write(Path(project_dir), SPARK_SHIM_FILENAME, SPARK_SHIM_CONTENT, SPARK_MACRO, SPARK_DELEGATE,
                      f"return rerun_safety.{SPARK_DELEGATE}(raw_strategy, file_format)")
    return _write(Path(project_dir), SHIM_FILENAME, SHIM_CONTENT, MACRO_NAME, MACRO_NAME,
                  f"return rerun_safety.{MACRO_NAME}(arg_dict)")


def _write(project_dir: Path, filename: str, content: str, macro: str, delegate: str,
           fix: str) -> tuple[Path, bool]:
    folders = macro_paths(project_dir)
    target = folders[0] / filename
    defines, delegates = _defines(macro), _delegates(delegate)
    shims: list[Path] = []
    others: list[Path] = []
    for folder in folders:
        for path in sorted(folder.rglob("*.sql")) if folder.is_dir() else ():
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if defines.search(text):
                is_shim = _same(text, content) or delegates.search(text)
                (shims if is_shim else others).append(path)
    if others:
        # A second definition would make dbt fail with a duplicate macro; never add one.
        raise ConfigError(f"{others[0]} already defines {macro} as another strategy; remove "
                          f"that macro or make it {fix}")
    if shims:
        return shims[0], False
    if target.exists():
        raise ConfigError(f"{target} already exists and is not the shim; move it away and run init again")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8", newline="\n")
    except OSError as err:
        raise ConfigError(f"cannot write {target}: {err.strerror or err}") from err
    return target, True
