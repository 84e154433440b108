"""The user's profile, found and rendered the way dbt does it."""
from __future__ import annotations

import os
from pathlib import Path

import yaml

from .errors import ConfigError
from .warehouse.dialects import engines


def resolve_profiles_dir(profiles_dir: str | None) -> Path:
    """dbt's own order: --profiles-dir, DBT_PROFILES_DIR, the current dir, ~/.dbt."""
    if profiles_dir:
        return Path(profiles_dir)
    if os.environ.get("DBT_PROFILES_DIR"):
        return Path(os.environ["DBT_PROFILES_DIR"])
    if (Path.cwd() / "profiles.yml").exists():
        return Path.cwd()
    return Path.home() / ".dbt"


def load_target_output(project_dir: Path, profiles_dir: Path, target: str | None,
                       cli_vars: dict) -> tuple[str, str, dict]:
    """Render the user's profile like dbt does; returns (profile name, target name, output dict)."""
    from dbt.config.profile import read_profile
    from dbt.config.renderer import ProfileRenderer
    from dbt_common.context import set_invocation_context

    project_file = project_dir / "dbt_project.yml"
    if not project_file.exists():
        raise ConfigError(f"no dbt_project.yml in {project_dir}: pass --project-dir pointing at a dbt project")
    try:
        project_yml = yaml.safe_load(project_file.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{project_file} is not valid YAML: {str(err).splitlines()[0]}") from None
    profile_name = os.environ.get("DBT_PROFILE") or project_yml.get("profile")
    if not profile_name:
        raise ConfigError(f"{project_file} names no profile: add 'profile: <name>'")
    profiles_file = profiles_dir / "profiles.yml"
    if not profiles_file.exists():
        raise ConfigError(f"no profiles.yml in {profiles_dir}: pass --profiles-dir or set DBT_PROFILES_DIR")
    try:  # file and line only: the text of a profile's line may be a password
        yaml.safe_load(profiles_file.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{profiles_file} is not valid YAML{where}: "
                          f"{getattr(err, 'problem', None) or 'syntax error'}") from None
    set_invocation_context(os.environ)
    try:
        raw = read_profile(str(profiles_dir))
        if profile_name not in raw:
            raise ConfigError(f"profile '{profile_name}' not found in {profiles_dir / 'profiles.yml'}")
        profile = raw[profile_name] if isinstance(raw[profile_name], dict) else {}
        renderer = ProfileRenderer(cli_vars)
        # like dbt: the target's name, then that one output; the other outputs stay unrendered
        # (their env_var() calls may name variables this machine does not set)
        target_name = (target or os.environ.get("DBT_TARGET")
                       or renderer.render_value(profile.get("target"), "target") or "default")
        outputs = profile.get("outputs") if isinstance(profile.get("outputs"), dict) else {}
        if target_name not in outputs:
            known = ", ".join(sorted(outputs)) or "none"
            raise ConfigError(f"target '{target_name}' not found in profile '{profile_name}' (known: {known})")
        output = dict(renderer.render_data(outputs[target_name]) or {})
    except ConfigError:
        raise
    except Exception as err:  # dbt raises its own error types for bad YAML or Jinja
        first = str(err).strip().splitlines()
        raise ConfigError(f"could not read profile '{profile_name}': {' '.join(first[:2])}") from None
    if output.get("type") not in engines():
        raise ConfigError(f"adapter '{output.get('type')}' of target '{target_name}' is not supported "
                          f"(supported: {', '.join(engines())})")
    return profile_name, target_name, output
