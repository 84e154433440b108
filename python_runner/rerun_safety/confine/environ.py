"""The confined child's environment, and the secrets every report is scrubbed of.

The child is exec'd with BASE names only (what Python, dbt, a JVM and the runner read of their
environment), so its first environment block (/proc/self/environ) holds no credential; the job then adds
the variables the project and the profile reference through env_var(). A credential-shaped variable (a
warehouse's or a cloud's: PG*, AWS_*, ...; or a name that says it is a secret) reaches the child only when
the profile references it; the project's own code referencing one is refused it (it renders as dbt's
"Env var required but not provided"), and the run's notes name it."""
from __future__ import annotations

import os
import re
from pathlib import Path

_BASE_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "VIRTUAL_ENV", "NO_COLOR",
    "CI", "JAVA_HOME", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "LD_LIBRARY_PATH", "SSL_CERT_FILE", "SSL_CERT_DIR",
    "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "DO_NOT_TRACK"})
# dbt's own settings (DBT_PROFILES_DIR, DBT_TARGET, ...: the game day notes and overrides those that would
# change a sandbox's runs); DBT_ENV_SECRET_ and DBT_CLOUD_ ones are credentials (below)
_BASE_PREFIXES = ("DBT_", "LC_", "PYTHON", "RERUN_SAFETY_", "SPARK_", "PYSPARK_", "HADOOP_", "OPENBLAS_", "OMP_", "MKL_")
# a warehouse's or a cloud's credentials, whatever the variable is called beyond its prefix
_CREDENTIAL_PREFIXES = ("PG", "AWS_", "GOOGLE_", "GCP_", "GCLOUD_", "CLOUDSDK_", "AZURE_", "ARM_", "SNOWFLAKE_",
                        "DATABRICKS_", "DBT_CLOUD_", "DBT_ENV_SECRET_", "MOTHERDUCK_", "BIGQUERY_", "REDSHIFT_",
                        "TRINO_", "CLICKHOUSE_", "MSSQL_", "MYSQL_", "ORACLE_", "VAULT_", "GITHUB_", "GH_",
                        "GITLAB_", "SSH_", "KUBE", "DOCKER_", "NPM_", "PYPI_", "TWINE_")
_SECRET_WORDS = ("PASS", "_PWD", "_PW", "SECRET", "TOKEN", "KEY", "CREDENTIAL", "AUTH", "PRIVATE", "COOKIE",
                 "SESSION", "SIGNATURE", "CERT")
_ENV_VAR = re.compile(r"""env_var\s*\(\s*(['"])([A-Za-z_][A-Za-z0-9_]*)\1""")
_SCANNED = (".sql", ".yml", ".yaml", ".py", ".jinja", ".j2", ".csv.yml")
_MAX_SCANNED_BYTES = 64 * 1024 * 1024


def is_credential(name: str) -> bool:
    upper = name.upper()
    return (upper.startswith(_CREDENTIAL_PREFIXES) and not upper.startswith(("PYTHON", "PGO"))) or any(
        w in upper for w in _SECRET_WORDS)


def base(environ: dict[str, str]) -> dict[str, str]:
    """What the child is exec'd with."""
    return {k: v for k, v in environ.items()
            if (k in _BASE_NAMES or k.startswith(_BASE_PREFIXES)) and not is_credential(k)}


def referenced(paths: list[Path]) -> set[str]:
    """Names that env_var('...') calls in the text of these files and folders' files name (dbt's own files
    and its packages': SQL, YAML, Python), up to a bound of bytes read."""
    names: set[str] = set()
    budget = _MAX_SCANNED_BYTES
    for root in paths:
        files = [root] if root.is_file() else (
            p for p in root.rglob("*") if p.suffix in _SCANNED and not _skipped(p.relative_to(root).parts[:-1]))
        for path in files:
            try:
                if path.is_symlink() or not path.is_file():
                    continue
                text = path.read_bytes()[:budget]
            except OSError:
                continue
            budget -= len(text)
            names.update(m.group(2) for m in _ENV_VAR.finditer(text.decode("utf-8", "replace")))
            if budget <= 0:
                return names
    return names


def _skipped(folders: tuple[str, ...]) -> bool:
    return any(f.startswith(".") or f in ("target", "logs", "node_modules", "venv", "__pycache__") for f in folders)


def for_child(environ: dict[str, str], project_dir: Path, profiles_file: Path | None,
              profile_copied: bool = False) -> tuple[dict, tuple]:
    """(the child's environment, the credential-shaped names the project's code referenced and was
    refused). A variable only the project's code references is passed unless it is credential-shaped. One
    the profile references is passed whatever it is called, unless the child reads a copy of the profile
    (`profile_copied`: its values in variables of the runner's own), which needs none of them."""
    by_profile = referenced([profiles_file]) if profiles_file is not None and profiles_file.is_file() else set()
    by_project = referenced([project_dir])
    env = base(environ)
    refused = []
    for name in sorted(by_project if profile_copied else by_profile | by_project):
        if name not in environ:
            continue
        if (name in by_profile and not profile_copied) or not is_credential(name):
            env[name] = environ[name]
        else:
            refused.append(name)
    return env, tuple(refused)


def secret_values(environ: dict[str, str], output: dict | None) -> set[str]:
    """Every value the run knows that a report must not show: the credential-shaped variables' values and
    the profile output's secret fields (by key or form, as secrets.secrets_through_env finds them),
    whatever variable they came from."""
    from ..secrets import secrets_through_env

    values = {v for k, v in environ.items() if is_credential(k)}
    if output:
        found: dict[str, str] = {}
        secrets_through_env(output, found)
        values.update(v for k, v in found.items() if k.startswith("DBT_ENV_SECRET_"))
    return {v for v in values if isinstance(v, str) and len(v) >= 4}
