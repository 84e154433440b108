"""The lint's PostgreSQL scratch: a database `rerun_safety_lint_<run id>` on the target's server."""
from __future__ import annotations

import zlib
from pathlib import Path

from ...errors import ConfigError
from ..scratch import SCRATCH_PREFIX, Scratch, TargetProfile, create_batch, quoted_ident, create_statements, first_line, write_profile
from .dialect import POSTGRES
from .connection import connect_params
from .role import (create_run_role, drop_run_role, leftover_roles, may_create_roles, named_role, role_name,
                   take_named_role)


def pg_lock_key(run_id: str) -> int:
    return zlib.crc32(f"rerun_safety_lint:{run_id}".encode()) - 2**31


def point_manifest(manifest, user_db: str, scratch_db: str) -> None:
    """Move every node and source of the user's database to the scratch database (in memory)."""
    for collection in (manifest.nodes, manifest.sources):
        for node in collection.values():
            if (getattr(node, "database", None) or "") != user_db:
                continue
            node.database = scratch_db
            if getattr(node, "relation_name", None):
                ident = getattr(node, "alias", None) or getattr(node, "identifier", None) or node.name
                node.relation_name = ".".join(
                    '"{}"'.format(str(p).replace('"', '""')) for p in (scratch_db, node.schema, ident))


LINT_ROLE_RUN = "lint_"  # a lint's role is rerun_safety_role_lint_<run id> (role.role_name)


class PostgresScratch(Scratch):
    """A database `rerun_safety_lint_<run id>` on the target's server. An admin connection holds an
    advisory lock for the run's life, so that a later run's sweep drops it only once we died.

    `own_role` (a confined lint): the database belongs to a role the run creates (as the game day's
    sandboxes do, see role.py), and the relations, the compiles and their introspective queries run as
    that role: whatever the project's Jinja asks, the server refuses it files, programs and other
    databases. A profile role that may not create roles (no CREATEROLE: itself no superuser) compiles
    as itself, as `dbt compile` would, and the mode says so: the lint stays the cheap gate."""

    mode = "scratch postgres database"
    dialect = POSTGRES
    extra_flags = ("--no-populate-cache",)

    def __init__(self, tp: TargetProfile, work: Path, run_id: str, own_role: bool = False):
        import psycopg2

        self.tp = tp
        self.user_db = str(tp.output.get("dbname") or tp.output.get("database") or "")
        self.dbname = f"{SCRATCH_PREFIX}{run_id}"
        self.run_id = run_id
        self.created = False
        self.refusal = ""
        self.admin = None
        self.role: tuple[str, str] | None = None  # (name, password) of the run's own role
        self.own_role = False  # created by this lint (dropped at its end), not the team's game-day role
        try:
            self.admin = self._admin()
            with self.admin.cursor() as cur:
                cur.execute("select pg_advisory_lock(%s)", [pg_lock_key(run_id)])
            self.swept = self._sweep()
            if own_role and (named_role() is not None or self._may_create_roles()):
                self._take_role()
            elif own_role:
                self.mode += (f" (as the profile's role {tp.output.get('user')}, which may not create a role of the "
                              "lint's own: ALTER ROLE ... CREATEROLE gives it one)")
            owner = f" owner {self._quoted(self.role[0])}" if self.role else ""
            with self.admin.cursor() as cur:
                cur.execute(f"create database {self._quoted(self.dbname)}{owner}")
            self.created = True
        except psycopg2.Error as err:
            self.refusal = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            if self.admin is None:  # not a missing privilege: the target cannot be reached at all
                raise ConfigError(f"cannot connect to the PostgreSQL server of target '{tp.target_name}': "
                                  f"{self.refusal}") from None
        self.incremental_possible = self.created
        output = dict(tp.output)
        if self.role:  # dbt compiles as the run's role (its password through the environment, as every secret)
            for key in ("pass", "sslcert", "sslkey", "sslpassword"):
                output.pop(key, None)
            output["user"], output["password"] = self.role
        if self.created:
            output["dbname"] = self.compile_database = self.dbname
            output.pop("database", None)
            self._profiles = write_profile(work / "scratch_profile", tp, output)
        else:
            self.mode = f"not checked (no scratch database: {self.refusal})"
            self._profiles = write_profile(work / "target_profile", tp, output)

    def _may_create_roles(self) -> bool:
        with self.admin.cursor() as cur:
            return may_create_roles(cur)[1]

    def _take_role(self) -> None:
        """Create the run's role; refused in one line when the profile's role cannot create roles, or
        when the new role cannot log in where the profile's does (pg_hba.conf)."""
        import psycopg2

        named = named_role()
        with self.admin.cursor() as cur:
            self.role = take_named_role(cur, named) if named else create_run_role(
                cur, LINT_ROLE_RUN + self.run_id, purpose="a confined lint compiles in its scratch database")
        self.own_role = named is None
        try:
            psycopg2.connect(**self._dsn(self.admin.info.dbname)).close()
        except psycopg2.Error as err:
            if self.own_role:
                with self.admin.cursor() as cur:
                    drop_run_role(cur, self.role[0])
            self.role = None
            raise ConfigError(f"the lint's own PostgreSQL role cannot log in where the profile's does "
                              f"({first_line(err)}): allow password (scram-sha-256) logins for roles named "
                              "rerun_safety_role_* in pg_hba.conf, or pass --unconfined") from None

    def _admin(self):
        import psycopg2

        last = None
        for db in ("postgres", "template1", self.user_db):
            try:
                conn = psycopg2.connect(**self._dsn(db, admin=True))
                conn.autocommit = True
                return conn
            except psycopg2.Error as err:
                last = err
        raise last  # type: ignore[misc]

    @staticmethod
    def _quoted(name: str) -> str:
        return quoted_ident(name).sql("postgres")

    def _dsn(self, dbname: str, admin: bool = False) -> dict:
        """Connection parameters: as the run's role (when it has one) unless `admin`."""
        dsn = {**connect_params(self.tp.output), "dbname": dbname}
        if self.role and not admin:
            dsn.update(user=self.role[0], password=self.role[1])
            dsn.pop("sslcert", None)
            dsn.pop("sslkey", None)
        return {k: v for k, v in dsn.items() if v is not None}

    def _sweep(self) -> int:
        """Drop scratch databases (and the lint roles) whose run died (their advisory lock is free); one
        this user may not drop (another user's) stays for its owner's next run."""
        import psycopg2

        removed = 0
        with self.admin.cursor() as cur:
            cur.execute("select datname from pg_database where starts_with(datname, %s)", [SCRATCH_PREFIX])
            runs = {r[0][len(SCRATCH_PREFIX):] for r in cur.fetchall() if r[0] != self.user_db}
            roles = {name[len(role_name(LINT_ROLE_RUN)):] for name in leftover_roles(cur)
                     if name.startswith(role_name(LINT_ROLE_RUN))}
        for run in sorted((runs | roles) - {self.run_id}):
            key = pg_lock_key(run)
            with self.admin.cursor() as cur:
                cur.execute("select pg_try_advisory_lock(%s)", [key])
                if not cur.fetchone()[0]:
                    continue  # its run is alive
                try:
                    if run in runs:
                        cur.execute(f"drop database if exists {self._quoted(SCRATCH_PREFIX + run)} with (force)")
                        removed += 1
                    if run in roles:
                        drop_run_role(cur, role_name(LINT_ROLE_RUN + run))
                except psycopg2.Error:
                    pass
                finally:
                    cur.execute("select pg_advisory_unlock(%s)", [key])
        return removed

    def profiles_dir(self) -> str:
        return str(self._profiles)

    def prepare_manifest(self, manifest) -> None:
        """dbt-postgres bakes the database into each node at parse time and refuses cross-database
        references (`information_schema.columns` of the user's database, from the scratch one):
        point what lives in the user's database at the scratch database."""
        if self.created:
            point_manifest(manifest, self.user_db, self.dbname)

    def _connect(self):
        import psycopg2

        conn = psycopg2.connect(**self._dsn(self.dbname))
        conn.autocommit = True
        return conn

    def create(self, specs):
        failed: dict[tuple[str, str], str] = {}
        specs = list(specs)
        if not specs or not self.created:
            return failed
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                try:  # all in one transaction first: one commit instead of one per relation
                    cur.execute("begin")
                    for stmt in create_batch(specs, "postgres", with_database=False):
                        cur.execute(stmt)
                    cur.execute("commit")
                    specs = []
                except Exception:  # then one at a time, to keep those that work and say why the others fail
                    cur.execute("rollback")
                for spec in specs:
                    cur.execute("begin")  # a query that fails here leaves the placeholder in place
                    try:
                        for stmt in create_statements(spec, "postgres", with_database=False):
                            cur.execute(stmt)
                        cur.execute("commit")
                    except Exception as err:
                        cur.execute("rollback")
                        failed[spec.key] = first_line(err)
        finally:
            conn.close()
        return failed

    def columns(self):
        out: dict[tuple[str, str], list[tuple[str, str]]] = {}
        if not self.created:
            return out
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute("select n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod) "
                            "from pg_attribute a join pg_class c on c.oid = a.attrelid "
                            "join pg_namespace n on n.oid = c.relnamespace "
                            "where a.attnum > 0 and not a.attisdropped and c.relkind in ('r', 'v', 'm', 'p', 'f') "
                            "and n.nspname not in ('pg_catalog', 'information_schema') "
                            "and n.nspname not like 'pg\\_toast%%' order by 1, 2, a.attnum")
                for schema, name, column, kind in cur.fetchall():
                    out.setdefault((schema.lower(), name.lower()), []).append((column.lower(), kind.lower()))
        finally:
            conn.close()
        return out

    def close(self):
        if self.admin is None:
            return
        try:
            with self.admin.cursor() as cur:
                if self.created:
                    cur.execute(f"drop database if exists {self._quoted(self.dbname)} with (force)")
                if self.role and self.own_role:
                    drop_run_role(cur, self.role[0])
        finally:
            try:
                self.admin.close()
            except Exception:
                pass
