"""What a confined child of a project gets from the command: its rules (the engine's network needs, from
the profile), its environment, the secrets its answers are scrubbed of, and a copy of the profile whose
strings are env_var() references to the runner's own variables (confine/ runs the child)."""
from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path


def child_setup(project_dir, profiles_dir, target, vars_yaml, writable: list[Path], copy_dir: Path | None = None):
    """What a confined child of this project gets: its rules (the engine's network needs, from the
    profile), its environment, the secrets its answers are scrubbed of, the names its project's code
    referenced and did not get, and the profiles folder it reads. With `copy_dir`: the profile's output
    written there as one profile file whose every string is an env_var() reference (its secrets as
    DBT_ENV_SECRET_ variables, which dbt masks), so the child gets no variable of the user's profile under
    its own name: a credential-shaped one that the project's code also names is refused."""
    from .confine import environ, rules_for
    from .profiles import load_target_output, resolve_profiles_dir
    from .vars import parse_vars

    profiles = resolve_profiles_dir(profiles_dir)
    try:
        profile_name, target_name, output = load_target_output(Path(project_dir).resolve(), profiles, target,
                                                               parse_vars(vars_yaml))
    except Exception:  # noqa: BLE001 - the child meets the same mistake and says it in its own words
        output = None
    profiles_file = profiles / "profiles.yml"
    copied = output is not None and copy_dir is not None
    env, refused = environ.for_child(dict(os.environ), Path(project_dir).resolve(), profiles_file,
                                     profile_copied=copied)
    if copied:
        env.update(_profile_copy(copy_dir, profile_name, target_name, output))
    resolved = False
    if output is not None:
        from .warehouse.dialects import dialect_for

        more, resolved = dialect_for(str(output.get("type") or "")).child_environment(output, dict(os.environ))
        env.update(more)
    secrets = environ.secret_values(dict(os.environ), output)
    return (rules_for(writable, output, resolved), env, secrets, refused,
            str(copy_dir) if copied else profiles_dir)


def _profile_copy(folder: Path, profile_name: str, target_name: str, output: dict) -> dict[str, str]:
    """profiles.yml in `folder` (0700, _profile_folder's) with the one output the run uses, its strings
    env_var() references; returns the variables they name."""
    import yaml

    from .safe_files import open_dir, write_file
    from .secrets import SECRET_ENV_PREFIX, secrets_through_env

    values: dict[str, str] = {}
    copy = secrets_through_env(output, values, prefix=SECRET_ENV_PREFIX + "USER_")
    fd = open_dir(folder, (), create=False, what="the run's profile folder")
    try:
        write_file(fd, "profiles.yml", yaml.safe_dump({profile_name: {"target": target_name,
                                                                      "outputs": {target_name: copy}}}),
                   str(folder))
    finally:
        os.close(fd)
    return values


_PROFILE_PREFIX = ".profile_"


@contextlib.contextmanager
def profile_folder(work_root: Path):
    """A folder for the run's copy of the profile, locked while the command lives (a kill leaves it to the
    next command, which removes every such folder no live command holds), removed at the end."""
    import secrets

    from .warehouse.base import lock_is_free, make_locked_dir

    for old in work_root.glob(f"{_PROFILE_PREFIX}*"):
        if old.is_dir() and not old.is_symlink() and lock_is_free(old):
            shutil.rmtree(old, ignore_errors=True)
    folder = work_root / f"{_PROFILE_PREFIX}{secrets.token_hex(6)}"
    lock = make_locked_dir(folder)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        lock.close()
