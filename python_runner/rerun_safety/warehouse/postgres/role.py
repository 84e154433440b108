"""The game day's own PostgreSQL role: dbt and the runner reach the sandboxes as a login role that the run
creates (random password, never on disk), that owns its sandbox databases and nothing else, and that has no
superuser, CREATEROLE, CREATEDB, replication, RLS bypass nor membership in any role (pg_write_server_files,
pg_execute_server_program, pg_read_server_files, pg_signal_backend). Whatever the project's SQL is, and
however it is spelled, the database itself refuses such a role a server file, a program, another database
(ALTER/COMMENT ON DATABASE), another role, another role's sessions, and an untrusted extension (dblink,
postgres_fdw). The profile's role creates it and is made a member of it (to create, clone and drop the
databases it owns), and drops it at the end; a run killed before that leaves it to the next run's sweep.

A team whose profile role may not create roles has a DBA create one game-day role once (the SQL that
`rerun-safety init --postgres-role NAME` prints) and names it in RERUN_SAFETY_PG_GAMEDAY_ROLE, with its
password in RERUN_SAFETY_PG_GAMEDAY_PASSWORD: every run then uses it as it would its own (after checking
that it has none of the attributes or memberships above), and leaves it in place at its end."""
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
# a game-day role a DBA created once (init --postgres-role), named by the team
GAMEDAY_ROLE_ENV = "RERUN_SAFETY_PG_GAMEDAY_ROLE"
GAMEDAY_PASSWORD_ENV = "RERUN_SAFETY_PG_GAMEDAY_PASSWORD"


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
            f"creates and drops; grant it with ALTER ROLE {pgsql_ident(user)} CREATEROLE, or have a DBA create a "
            f"game-day role once (`rerun-safety init --postgres-role NAME` prints the SQL) and set {GAMEDAY_ROLE_ENV}, "
            "or pass --unconfined to run without that protection")
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


def named_role() -> tuple[str, str] | None:
    """The game-day role the team named (RERUN_SAFETY_PG_GAMEDAY_ROLE), with its password; None: none.
    A name without a password is refused in one line."""
    name = os.environ.get(GAMEDAY_ROLE_ENV, "").strip()
    if not name:
        return None
    password = os.environ.get(GAMEDAY_PASSWORD_ENV, "")
    if not password:
        raise ConfigError(f"{GAMEDAY_ROLE_ENV} names the game-day role {name}, but {GAMEDAY_PASSWORD_ENV} (its "
                          "password) is not set")
    return name, password


def take_named_role(cur, role: tuple[str, str]) -> tuple[str, str]:
    """Check the team's game-day role through the profile's connection and use it: refused (ConfigError) in
    one line where it is missing, could do more than its sandboxes need, or the profile's role may not
    create databases owned by it."""
    name = role[0]
    cur.execute("select rolsuper, rolcreaterole, rolcreatedb, rolbypassrls, rolreplication, rolcanlogin, "
                "coalesce((select array_agg(g.rolname::text order by g.rolname) from pg_auth_members m "
                "join pg_roles g on g.oid = m.roleid where m.member = r.oid), '{}'), "
                "pg_has_role(current_user, r.oid, 'usage'), "
                "(select rolcreatedb or rolsuper from pg_roles where rolname = current_user) "
                "from pg_roles r where rolname = %s", [name])
    row = cur.fetchone()
    if row is None:
        raise ConfigError(f"the game-day role {name} ({GAMEDAY_ROLE_ENV}) does not exist: a DBA creates it once with "
                          f"the SQL that `rerun-safety init --postgres-role {name}` prints")
    superuser, createrole, createdb, bypassrls, replication, login, groups, member, may_createdb = row
    extra = [word for word, on in (("SUPERUSER", superuser), ("CREATEROLE", createrole), ("CREATEDB", createdb),
                                   ("BYPASSRLS", bypassrls), ("REPLICATION", replication)) if on]
    if extra or groups:
        what = ", ".join(extra + [f"a member of {g}" for g in groups])
        raise ConfigError(f"refusing the game-day role {name}: it is {what}, so the project's SQL could do more than "
                          f"its sandboxes need; create it as `rerun-safety init --postgres-role {name}` prints")
    if not login:
        raise ConfigError(f"the game-day role {name} cannot log in: ALTER ROLE {pgsql_ident(name)} LOGIN")
    if not member or not may_createdb:
        cur.execute("select current_user")
        user = cur.fetchone()[0]
        need = [] if may_createdb else [f"ALTER ROLE {pgsql_ident(user)} CREATEDB"]
        need += [] if member else [f"GRANT {pgsql_ident(name)} TO {pgsql_ident(user)}"]
        raise ConfigError(f"the profile's role {user} cannot create sandbox databases owned by the game-day role "
                          f"{name}: a DBA runs {'; '.join(need)}")
    os.environ[ROLE_ENV], os.environ[PASSWORD_ENV] = role
    return role


def init_sql(name: str, profile_user: str | None) -> str:
    """What a DBA runs once for a team whose profile role may not create roles."""
    role = pgsql_ident(name)
    user = pgsql_ident(profile_user) if profile_user else "<the profile's role>"
    return "\n".join([
        "-- The game-day role: run once as a superuser (or a role with CREATEROLE).",
        "-- It owns the game day's sandbox databases and nothing else; no superuser, CREATEROLE, CREATEDB,",
        "-- BYPASSRLS, REPLICATION, nor membership in any role (the game day refuses one that has any).",
        f"CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE INHERIT NOREPLICATION NOBYPASSRLS",
        "  PASSWORD 'choose-a-password';  -- or \\password in psql, which sends no password in the clear",
        "-- The profile's role creates, clones and drops the databases the game-day role owns:",
        f"GRANT {role} TO {user};",
        f"ALTER ROLE {user} CREATEDB;  -- unless it has it",
        "-- pg_hba.conf: allow password (scram-sha-256) logins for it where the profile's role logs in.",
        "-- Then, for every game day and lint:",
        f"--   export {GAMEDAY_ROLE_ENV}={name}",
        f"--   export {GAMEDAY_PASSWORD_ENV}=...   (from the team's secret store)",
        "",
    ])


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
