"""The profile target the lint compiles for: dbt's own rendering (env_var() and var()), with errors
that name the file and line and never a value (a profile holds passwords)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..warehouse.scratch import TargetProfile


def resolve_target(project_dir: Path, profiles_dir: Path | None, target: str | None,
                   cli_vars: dict) -> TargetProfile:
    """The rendered output of the profile target dbt will use (env_var() and var() resolved)."""
    from dbt.cli.resolvers import default_profiles_dir
    from dbt.config.renderer import ProfileRenderer
    from dbt_common.context import set_invocation_context
    from dbt_common.exceptions import DbtBaseException

    set_invocation_context(os.environ)  # env_var() in profiles reads it
    try:
        return _resolve_target(project_dir, profiles_dir, target, cli_vars, ProfileRenderer, default_profiles_dir)
    except DbtBaseException as err:
        # dbt's message names the failing key, never its value
        raise ConfigError(f"could not render the profile: {' '.join(str(err).split())[:300]}") from None


def _load_yaml(path: Path, what: str) -> Any:
    """A YAML file, or a ConfigError naming the file and line (never the line's text: a profile
    holds passwords)."""
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "syntax error"
        raise ConfigError(f"{what} {path} is not valid YAML{where}: {problem}") from None
    except OSError as err:
        raise ConfigError(f"cannot read {what} {path}: {err.strerror}") from None


def _resolve_target(project_dir, profiles_dir, target, cli_vars, ProfileRenderer, default_profiles_dir):
    project_file = project_dir / "dbt_project.yml"
    if not project_file.exists():
        raise ConfigError(f"no dbt_project.yml in {project_dir}")
    renderer = ProfileRenderer(cli_vars)
    project = _load_yaml(project_file, "project file") or {}
    if not isinstance(project, dict):
        raise ConfigError(f"project file {project_file} is not a YAML mapping")
    profile_name = os.environ.get("DBT_PROFILE") or renderer.render_value(str(project.get("profile") or ""))
    directory = Path(profiles_dir) if profiles_dir else Path(os.environ.get("DBT_PROFILES_DIR") or default_profiles_dir())
    profiles_file = directory / "profiles.yml"
    if not profiles_file.exists():
        raise ConfigError(f"no profiles.yml in {directory} (pass --profiles-dir)")
    profiles = _load_yaml(profiles_file, "profiles file") or {}
    if not isinstance(profiles, dict):
        raise ConfigError(f"profiles file {profiles_file} is not a YAML mapping")
    profile = profiles.get(profile_name)
    if not isinstance(profile, dict):
        raise ConfigError(f"profile '{profile_name}' not found in {profiles_file}")
    target_name = target or os.environ.get("DBT_TARGET") or renderer.render_value(str(profile.get("target", "default")))
    outputs = profile.get("outputs") or {}
    if not isinstance(outputs, dict) or target_name not in outputs or not isinstance(outputs[target_name], dict):
        raise ConfigError(f"target '{target_name}' not found in profile '{profile_name}' of {profiles_file}")
    output = renderer.render_data(dict(outputs[target_name]))
    return TargetProfile(profile_name, target_name, output)
