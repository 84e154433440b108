"""Secrets of a dbt profile output, kept off disk: a profile file the runner writes (a sandbox's, the
lint's scratch one) holds `{{ env_var('DBT_ENV_SECRET_...') }}` where the user's file holds a secret,
the value itself going to the environment of the dbt that reads it. dbt masks DBT_ENV_SECRET_ values in
its logs and refuses them outside profiles."""
from __future__ import annotations

import os
import re
from typing import Any, MutableMapping

SECRET_ENV_PREFIX = "DBT_ENV_SECRET_RERUN_SAFETY_"
# Keys whose values are secrets at any depth: dbt-postgres `password`/`pass`, dbt-spark `token`, dbt-duckdb
# `settings` (s3_secret_access_key, motherduck_token, azure_storage_connection_string), `filesystems`
# entries (fsspec's key, secret, token, account_key, sas_token, client_secret), credentials files' contents.
_SECRET_WORDS = ("pass", "secret", "token", "key", "credential", "connection_string", "auth")
# Keys of a dbt-duckdb `secrets:` entry that only say what the secret is for; every other key is secret.
_SECRET_ENTRY_PLAIN = ("type", "provider", "name", "scope", "persistent", "region", "endpoint", "url_style",
                       "use_ssl")
# A URL with a password in it (a proxy setting, a connection string): the whole value is a secret.
# So is a value with a credential as a query parameter (`md:my_db?motherduck_token=...`).
_URL_CREDENTIALS = re.compile(r"[a-z][a-z0-9+.-]*://[^/@\s:]*:[^/@\s]*@|[?&;][\w.-]*(token|password|secret|key)=",
                              re.I)


def password_of(output: dict) -> str | None:
    """A PostgreSQL profile's password under either spelling dbt-postgres accepts (`password`, `pass`)."""
    for key in ("password", "pass"):
        if output.get(key) is not None:
            return str(output[key])
    return None


def is_secret_key(key: str) -> bool:
    return any(word in key.lower() for word in _SECRET_WORDS)


# Top-level keys whose values a sandbox profile holds as they are: they name the adapter, the connection's
# host and user, the sandbox's own file and schema. dbt shows some of them in its messages, which would be
# masked if they went through DBT_ENV_SECRET_ variables.
PLAIN_KEYS = frozenset({"type", "threads", "schema", "database", "dbname", "host", "port", "user", "path", "method",
                        "keep_open", "external_root", "sslmode", "connect_timeout", "retries", "keepalives_idle",
                        "search_path", "role", "cluster", "driver", "session_properties"})
# every other string of the user's profile (a plugin's config, an attached database's path, a setting) goes
# through the environment too, whatever its key is called, under this prefix (not masked by dbt)
PLAIN_ENV_SUFFIX = "PLAIN_"


def secrets_through_env(output: dict, environ: MutableMapping[str, str] | None = None,
                        prefix: str = SECRET_ENV_PREFIX) -> dict:
    """A copy of `output` whose strings, at any depth, are `{{ env_var(...) }}` references, the values put
    into `environ` (default os.environ): a secret (by its key or its form) as DBT_ENV_SECRET_..., which dbt
    masks in its logs; any other but those of PLAIN_KEYS and a plugin's module name under a variable of its
    own (its key may not say that it is a secret: `config: {opaque: ...}`)."""
    environ = os.environ if environ is None else environ
    plain_prefix = prefix.replace("DBT_ENV_SECRET_", "", 1) + PLAIN_ENV_SUFFIX

    def to_env(path: list[str], value: str, secret: bool) -> str:
        name = (prefix if secret else plain_prefix) + re.sub(r"[^A-Z0-9]+", "_", "_".join(path).upper()).strip("_")
        environ[name] = value
        return "{{ env_var('%s') }}" % name

    def walk(value: Any, path: list[str], secret: bool, entry: bool) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, [*path, str(k)],
                            is_secret_key(str(k)) or (entry and str(k) not in _SECRET_ENTRY_PLAIN), False)
                    for k, v in value.items()}
        if isinstance(value, list):
            in_secrets = path[-1:] == ["secrets"]
            return [walk(v, [*path, str(i)], secret, in_secrets) for i, v in enumerate(value)]
        if isinstance(value, str) and value:
            if secret or _URL_CREDENTIALS.search(value):
                return to_env(path, value, True)
            if (len(path) == 1 and path[0] in PLAIN_KEYS) or (len(path) == 3 and path[0] == "plugins"
                                                               and path[2] == "module"):
                return value
            return to_env(path, value, False)
        return value

    return walk(output, [], False, False)


MASK = "****"


class Scrubber:
    """Removes every secret value the run knows from a text bound for a report or the terminal, whatever
    the key it came from was called (longest first, so that one secret inside another goes whole)."""

    def __init__(self, values=()):
        self.values = tuple(sorted({v for v in values if isinstance(v, str) and len(v) >= 4}, key=len, reverse=True))
        self._pattern = re.compile("|".join(re.escape(v) for v in self.values)) if self.values else None

    def __call__(self, text: str) -> str:
        if self._pattern is None or not isinstance(text, str):
            return text
        return self._pattern.sub(MASK, text)
