"""The game day's own PostgreSQL role: dbt and the runner reach the sandboxes as a login role that the run
creates (random password, never on disk), that owns its sandbox databases and nothing else, and that has no
superuser, CREATEROLE, CREATEDB, replication, RLS bypass nor membership in any role (pg_write_server_files,
pg_execute_server_program, pg_read_server_files, pg_signal_backend). Whatever the project's SQL is, and
however it is spelled, the database itself refuses such a role a server file, a program, another database
(ALTER/COMMENT ON DATABASE), another role, another role's sessions, and an untrusted extension (dblink,
postgres_fdw). The profile's role creates it and is made a member of it (to create, clone and drop the
databases it owns), and drops it at the end; a run killed before that leaves it to the next run's sweep."""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets

from psycopg2 import sql as pgsql

from ...errors import ConfigError

ROLE_PREFIX = "rerun_safety_role_"
# how the run's worker processes learn the role (the environment, never a file)
ROLE_ENV = "RERUN_SAFETY_PG_ROLE"
PASSWORD_ENV = "RERUN_SAFETY_PG_ROLE_PASSWORD"


def scram_verifier(password: str, iterations: int = 4096) -> str:
    """The SCRAM-SHA-256 verifier of `password`, as psql's \\password sends it: the server stores it as it
    is, so the password itself never reaches the server's statement log."""
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def role_name(run_id: str) -> str:
    return f"{ROLE_PREFIX}{run_id}"


def create_run_role(cur, run_id: str,
                    purpose: str = "a confined game day reaches its sandboxes") -> tuple[str, str]:
    """Create the run's role through the profile's connection `cur` (autocommit); returns its name and
    password, which are also put in this process's environment for the workers it starts. A profile role
    that cannot create roles is refused in one line that names the privilege (and `purpose`)."""
    user, may = may_create_roles(cur)
    if not may:
        raise ConfigError(
            f"the profile's PostgreSQL role {user} cannot create roles: {purpose} as a role of its own, which it "
            f"creates and drops; grant it with ALTER ROLE {pgsql_ident(user)} CREATEROLE, or pass --unconfined "
            "to run without that protection")
    name, password = role_name(run_id), secrets.token_urlsafe(24)
    ident = pgsql.Identifier(name)
    # INHERIT: it is a member of nothing but pg_database_owner in its own sandboxes, whose CREATE on the
    # public schema it needs (NOINHERIT would refuse dbt a seed there)
    cur.execute(pgsql.SQL("create role {} login nosuperuser nocreatedb nocreaterole inherit noreplication "
                          "nobypassrls password {}").format(ident, pgsql.Literal(scram_verifier(password))))
    # the profile's role may then create databases owned by it, clone them and drop them
    cur.execute(pgsql.SQL("grant {} to current_user").format(ident))
    os.environ[ROLE_ENV], os.environ[PASSWORD_ENV] = name, password
    return name, password


def may_create_roles(cur) -> tuple[str, bool]:
    """The connection's role, and whether it may create roles (superuser or CREATEROLE)."""
    cur.execute("select current_user, rolsuper or rolcreaterole from pg_roles where rolname = current_user")
    user, may = cur.fetchone()
    return user, bool(may)


def attached_run_role() -> tuple[str, str] | None:
    """The role of the run a worker process joins (from its environment)."""
    name, password = os.environ.get(ROLE_ENV), os.environ.get(PASSWORD_ENV)
    return (name, password) if name and password else None


def drop_run_role(cur, name: str) -> None:
    """Drop a run's role (its databases are gone first); nothing if it is gone already."""
    cur.execute(pgsql.SQL("drop role if exists {}").format(pgsql.Identifier(name)))
    if os.environ.get(ROLE_ENV) == name:
        os.environ.pop(ROLE_ENV, None)
        os.environ.pop(PASSWORD_ENV, None)


def leftover_roles(cur) -> list[str]:
    """Run roles that the profile's role was made a member of (by the run that created them)."""
    cur.execute("select r.rolname from pg_roles r join pg_auth_members m on m.roleid = r.oid "
                "join pg_roles me on me.oid = m.member and me.rolname = current_user "
                "where starts_with(r.rolname, %s)", [ROLE_PREFIX])
    return [name for (name,) in cur.fetchall()]


def pgsql_ident(name: str) -> str:
    """A role name as the user would type it in psql (quoted when it needs to be)."""
    return name if name.isidentifier() and name.islower() else '"' + name.replace('"', '""') + '"'
