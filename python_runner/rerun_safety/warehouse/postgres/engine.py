"""PostgreSQL sandboxes: databases created TEMPLATE the snapshot (file copy), found by prefix.

The user's database is read through a connection with default_transaction_read_only=on. A run
holds an advisory lock while it lives, so a later sweep only drops sandboxes of dead runs.
"""
from __future__ import annotations

import tempfile
import time
import zlib
from pathlib import Path
from typing import Iterable

import psycopg2
from psycopg2 import sql as pgsql

from ...errors import ConfigError, SandboxError, first_line
from ...secrets import password_of
from .connection import PgConnection, connect_params
from .dialect import POSTGRES
from ..base import KEEP_SECONDS, PREFIX, SNAPSHOT_SCHEMA, Engine, Sandbox, SourceTable, snapshot_table
from .redirect import connections_to, map_database, refuse_server_files
from .role import (attached_run_role, create_run_role, drop_run_role, leftover_roles, named_role, role_name,
                   take_named_role)

KEPT_COMMENT = "rerun_safety: kept (--keep-sandboxes) until unix time "


def _kept_until_later(comment: str | None) -> bool:
    if not comment or not comment.startswith(KEPT_COMMENT):
        return False
    try:
        return time.time() < float(comment[len(KEPT_COMMENT):])
    except ValueError:
        return False


def _lock_key(run_id: str) -> int:
    return zlib.crc32(f"rerun_safety:{run_id}".encode()) - 2**31


class PostgresEngine(Engine):
    dialect = POSTGRES

    def __init__(self, target_output: dict, work_root: Path, run_id: str, attach: bool = False,
                 confined: bool = False, max_sandbox_size: int | None = None, statement_guard: bool = True):
        """`confined`: dbt and the runner reach the sandboxes as the run's own role (see pg_role).
        `max_sandbox_size`: the disk budget (budget.py) of each sandbox; None: none (the library's callers)."""
        self.max_sandbox_size = max_sandbox_size
        self._watchdog = None
        dbname = target_output.get("dbname") or target_output.get("database") or ""
        if dbname.startswith(PREFIX):
            # a sweep drops databases with this prefix: the user's could be taken for a leftover
            raise SandboxError(f"refusing to run: the target database '{dbname}' starts with the sandbox "
                               f"prefix '{PREFIX}'")
        self.user_db = target_output.get("dbname") or target_output.get("database")
        if not self.user_db:
            raise ConfigError("the Postgres target has no dbname")
        super().__init__(target_output, work_root, run_id, attach, statement_guard)
        self.params = connect_params(target_output)
        try:
            self.admin = self._admin_connection()
            version = self.admin.fetchone("select current_setting('server_version_num')::int")[0]
            self.strategy_clause = pgsql.SQL(" strategy file_copy") if version >= 150000 else pgsql.SQL("")
            if not attach:
                self.admin.execute("select pg_advisory_lock(%s)", [_lock_key(run_id)])
            # (name, password) of the role the sandboxes are reached as; None: the profile's own
            self.role: tuple[str, str] | None = None
            self.own_role = False  # created by this run (and dropped at its end), not the team's game-day role
            self.sandbox_params = self.params
            if confined:
                self._take_role(attach)
        except BaseException:
            self._abandon()  # a run that cannot connect leaves no run folder
            raise

    def _take_role(self, attach: bool) -> None:
        if attach:
            self.role = attached_run_role()
            if self.role is None:
                raise SandboxError("the run's PostgreSQL role is not in this worker's environment")
        else:
            named = named_role()
            with self.admin.raw.cursor() as cur:
                self.role = take_named_role(cur, named) if named else create_run_role(cur, self.run_id)
            self.own_role = named is None
        self.sandbox_params = {k: v for k, v in self.params.items() if k not in ("user", "password")}
        self.sandbox_params.update(user=self.role[0], password=self.role[1])
        if attach:
            return
        try:  # it logs in as the profile's role does (same host and port), or the run stops here
            PgConnection(self.sandbox_params, self._admin_db).close()
        except SandboxError as err:
            if self.own_role:
                with self.admin.raw.cursor() as cur:
                    drop_run_role(cur, self.role[0])
            which = "roles named rerun_safety_role_*" if self.own_role else f"the game-day role {self.role[0]}"
            raise ConfigError(f"the game day's own PostgreSQL role cannot log in where the profile's does "
                              f"({first_line(err)}): allow password (scram-sha-256) logins for {which} in "
                              "pg_hba.conf, or pass --unconfined") from None

    def _admin_connection(self) -> PgConnection:
        last: Exception | None = None
        for db in ("postgres", "template1"):
            try:
                con = PgConnection(self.params, db)
                self._admin_db = db
                return con
            except SandboxError as err:
                last = err
        raise SandboxError(f"cannot open a maintenance connection to create sandboxes: {last}")

    def _create_database(self, name: str, template: str | None) -> None:
        if name == self.user_db:
            raise SandboxError(f"refusing to use the user's own database {name} as a sandbox")
        over = self.budget_tripped()
        if over:
            raise SandboxError(over)
        stmt = pgsql.SQL("create database {}").format(pgsql.Identifier(name))
        if template:
            stmt = pgsql.SQL("create database {} template {}").format(
                pgsql.Identifier(name), pgsql.Identifier(template)) + self.strategy_clause
        if self.role is not None:  # owned by the run's role, and by nothing the project's SQL can reach
            stmt += pgsql.SQL(" owner {}").format(pgsql.Identifier(self.role[0]))
        for attempt in range(40):
            try:
                with self.admin.raw.cursor() as cur:
                    cur.execute(stmt)
                return
            except psycopg2.errors.ObjectInUse:
                # a connection to the template is still closing
                time.sleep(0.05 * (attempt + 1))
            except psycopg2.Error as err:
                raise SandboxError(f"cannot create sandbox database {name}: "
                                   f"{str(err).strip().splitlines()[0]}") from None
        raise SandboxError(f"cannot create sandbox database {name}: template {template} stays in use")

    def create_snapshot(self, sources: Iterable[SourceTable]) -> Sandbox:
        sources = list(sources)
        if self.max_sandbox_size is not None and not self.attached:
            self._start_budget(sources)
        sandbox = Sandbox(self.sandbox_name("snapshot"), self.sandbox_name("snapshot"))
        self._types: dict[int, bool] = {}  # type oid in the user's database -> exists in the snapshot
        # from template0, not template1: nothing a DBA put into template1 (dblink, a foreign server) is
        # inherited; the user's database's extensions are created again by the sandbox's own role
        self._create_database(sandbox.location, "template0")
        self.sandboxes.append(sandbox)
        self._add_extensions(sandbox)
        self.add_to_snapshot(sandbox, sources)
        return sandbox

    def _start_budget(self, sources: list[SourceTable]) -> None:
        """Refuse a snapshot that does not fit; then watch the run's sandboxes (budget.py)."""
        from .budget import start

        self._watchdog = start(self, sources)

    def budget_tripped(self) -> str | None:
        from .budget import tripped

        return tripped(self.run_dir)

    def _add_extensions(self, sandbox: Sandbox) -> None:
        """The extensions of the user's database, created in the snapshot as the sandboxes' role (which
        then owns them: no function of an extension it did not create). An extension that role may not
        create (an untrusted one: dblink, postgres_fdw, file_fdw) is left out, and the notes say so."""
        wanted = self._user_rows("select e.extname, n.nspname from pg_extension e join pg_namespace n on "
                                 "n.oid = e.extnamespace where e.extname <> 'plpgsql' order by 1")
        if not wanted:
            return
        snap = PgConnection(self.sandbox_params, sandbox.location)
        left_out = []
        try:
            for name, schema in wanted:
                try:
                    snap.execute(pgsql.SQL("create schema if not exists {}").format(
                        pgsql.Identifier(schema)).as_string(snap.raw))
                    snap.execute(pgsql.SQL("create extension if not exists {} schema {}").format(
                        pgsql.Identifier(name), pgsql.Identifier(schema)).as_string(snap.raw))
                except psycopg2.Error as err:
                    left_out.append(f"{name} ({str(err).strip().splitlines()[0]})")
        finally:
            snap.close()
        if left_out:
            self.notes.append("extensions of the target database not in the sandboxes (their role may not create "
                              "them; a model that uses one fails there): " + "; ".join(left_out))

    def add_to_snapshot(self, sandbox: Sandbox, sources: Iterable[SourceTable], empty: bool = False) -> None:
        """Copy sources from the user's database into the snapshot (`empty`: their columns only)."""
        user = PgConnection(self.params, self.user_db, read_only=True)
        snap = PgConnection(self.sandbox_params, sandbox.location)
        try:
            for src in sources:
                if src.database and src.database != self.user_db:
                    raise ConfigError(f"source {src.name} lives in database '{src.database}', not in the "
                                      f"target's '{self.user_db}': only sources in the target database can be copied")
                self._copy_source(user, snap, src, empty)
                if src.time_column and not empty:
                    snap.copy_table(src.schema, src.identifier, SNAPSHOT_SCHEMA, snapshot_table(src))
        finally:
            user.close()
            snap.close()

    @property
    def database_names(self) -> set[str]:
        """The names the target's own database goes by in compiled SQL."""
        return {self.user_db.lower()}

    def user_relations(self) -> dict[tuple[str, str], tuple[str, str]]:
        """Every table, view and materialized view in the user's database: (schema, name) lower
        case -> as stored."""
        return {(s.lower(), n.lower()): (s, n) for s, n in self._user_rows(
            "select n.nspname, c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace "
            "where c.relkind in ('r', 'v', 'm', 'p', 'f') and n.nspname not in ('pg_catalog', "
            "'information_schema') and n.nspname not like 'pg\\_%'")}

    def _user_rows(self, sql: str) -> list[tuple]:
        """One read-only query on the user's database, on a connection of its own."""
        user = PgConnection(self.params, self.user_db, read_only=True)
        try:
            return user.fetchall(sql)
        finally:
            user.close()

    def user_columns(self, relations):
        wanted = {(str(sch).lower(), str(n).lower()): (sch, n) for sch, n in relations}
        if not wanted:
            return {}
        rows = self._user_rows("select table_schema, table_name, column_name, data_type from "
                               "information_schema.columns order by ordinal_position")
        out: dict = {}
        for sch, table_name, col, typ in rows:
            key = wanted.get((sch.lower(), table_name.lower()))
            if key is not None:
                out.setdefault(key, []).append((col, typ))
        return out

    def _copy_source(self, user: PgConnection, snap: PgConnection, src: SourceTable, empty: bool = False) -> None:
        qualified = pgsql.SQL("{}.{}").format(pgsql.Identifier(src.schema), pgsql.Identifier(src.identifier))
        with user.raw.cursor() as cur:
            cur.execute(pgsql.SQL("select to_regclass({})").format(
                pgsql.Literal(qualified.as_string(user.raw))))
            oid = cur.fetchone()[0]
            if oid is None:
                raise ConfigError(f"source {src.name}: relation {src.schema}.{src.identifier} does not exist "
                                  f"in database {self.user_db}")
            cur.execute("select has_table_privilege(%s::regclass, 'select'), current_user", [oid])
            readable, who = cur.fetchone()
            if not readable:
                raise ConfigError(f"source {src.name}: the profile's role {who} may not read {src.schema}.{src.identifier} "
                                  f"in database {self.user_db}; grant it SELECT on that table")
            # the element type of an array column: creating it creates its array type too
            cur.execute("select a.attname, format_type(a.atttypid, a.atttypmod), "
                        "case when t.typcategory = 'A' then t.typelem else t.oid end "
                        "from pg_attribute a join pg_type t on t.oid = a.atttypid "
                        "where a.attrelid = %s::regclass and a.attnum > 0 and not a.attisdropped "
                        "order by a.attnum", [qualified.as_string(user.raw)])
            columns = cur.fetchall()
        coldefs, selects = [], []
        for name, type_sql, base_oid in columns:
            if self._copy_type(user, snap, base_oid):
                coldefs.append(pgsql.SQL("{} {}").format(pgsql.Identifier(name), pgsql.SQL(type_sql)))
                selects.append(pgsql.Identifier(name))
            else:
                self.notes.append(f"source {src.name}: column {name} has type {type_sql}, which cannot be created "
                                  "in a sandbox; the game day reads it as text")
                coldefs.append(pgsql.SQL("{} text").format(pgsql.Identifier(name)))
                selects.append(pgsql.SQL("{}::text").format(pgsql.Identifier(name)))
        with snap.raw.cursor() as cur:
            cur.execute(pgsql.SQL("create schema if not exists {}").format(pgsql.Identifier(src.schema)))
            cur.execute(pgsql.SQL("create table {} ({})").format(qualified, pgsql.SQL(", ").join(coldefs)))
        if empty:
            return
        # Stream through a temp file: rows never sit in memory, and only this process sees them.
        with tempfile.TemporaryFile() as buf:
            with user.raw.cursor() as cur:
                cur.copy_expert(pgsql.SQL("copy (select {} from {}) to stdout with (format binary)")
                                .format(pgsql.SQL(", ").join(selects), qualified).as_string(user.raw), buf)
            buf.seek(0)
            with snap.raw.cursor() as cur:
                cur.copy_expert(pgsql.SQL("copy {} from stdin with (format binary)")
                                .format(qualified).as_string(snap.raw), buf)

    def _copy_type(self, user: PgConnection, snap: PgConnection, oid: int) -> bool:
        """Make the type `oid` of the user's database exist in the snapshot under the same name:
        built in; an extension's (e.g. citext: CREATE EXTENSION, trusted ones need no superuser);
        an enum (same labels, same order); a domain (same base type, NOT NULL and checks). False
        for anything else or when creating it fails: its columns are then copied as text."""
        if oid in self._types:
            return self._types[oid]
        self._types[oid] = False  # also ends a cycle
        with user.raw.cursor() as cur:
            cur.execute("select n.nspname, t.typname, t.typtype, t.typnotnull, "
                        "format_type(t.typbasetype, t.typtypmod), "
                        "(select case when b.typcategory = 'A' then b.typelem else b.oid end "
                        " from pg_type b where b.oid = t.typbasetype), "
                        "(select e.extname from pg_depend d join pg_extension e on e.oid = d.refobjid "
                        " where d.classid = 'pg_type'::regclass and d.objid = t.oid and d.deptype = 'e' "
                        " and d.refclassid = 'pg_extension'::regclass limit 1) "
                        "from pg_type t join pg_namespace n on n.oid = t.typnamespace where t.oid = %s", [oid])
            row = cur.fetchone()
            if row is None:
                return False
            schema, name, kind, not_null, base_sql, base_oid, extension = row
            if schema in ("pg_catalog", "information_schema"):
                self._types[oid] = True
                return True
            labels, checks = [], []
            if kind == "e":
                cur.execute("select enumlabel from pg_enum where enumtypid = %s order by enumsortorder", [oid])
                labels = [r[0] for r in cur.fetchall()]
            elif kind == "d":
                cur.execute("select pg_get_constraintdef(oid) from pg_constraint where contypid = %s "
                            "and contype = 'c' order by conname", [oid])
                checks = [r[0] for r in cur.fetchall()]
        nsp, typ = pgsql.Identifier(schema), pgsql.Identifier(name)
        if extension:
            stmts = [pgsql.SQL("create schema if not exists {}").format(nsp),
                     pgsql.SQL("create extension if not exists {} schema {}").format(pgsql.Identifier(extension), nsp)]
        elif kind == "e":
            stmts = [pgsql.SQL("create schema if not exists {}").format(nsp),
                     pgsql.SQL("create type {}.{} as enum ({})").format(
                         nsp, typ, pgsql.SQL(", ").join(pgsql.Literal(label) for label in labels))]
        elif kind == "d" and self._copy_type(user, snap, base_oid):
            # the checks are the server's own rendering of the user's DDL (pg_get_constraintdef)
            stmts = [pgsql.SQL("create schema if not exists {}").format(nsp),
                     pgsql.SQL("create domain {}.{} as {}{}{}").format(
                         nsp, typ, pgsql.SQL(base_sql), pgsql.SQL(" not null" if not_null else ""),
                         pgsql.SQL("".join(f" {check}" for check in checks)))]
        else:
            return False
        try:
            with snap.raw.cursor() as cur:
                for stmt in stmts:
                    cur.execute(stmt)
                cur.execute("select to_regtype(%s) is not null",
                            [pgsql.SQL("{}.{}").format(nsp, typ).as_string(snap.raw)])
                self._types[oid] = bool(cur.fetchone()[0])
        except psycopg2.Error:
            self._types[oid] = False
        return self._types[oid]

    def clone(self, source: Sandbox, role: str, read_only: tuple[str, ...] = ()) -> Sandbox:
        name = self.sandbox_name(role)
        self._create_database(name, source.location)
        sandbox = Sandbox(name, name)
        self.sandboxes.append(sandbox)
        return sandbox

    def _drop_database(self, name: str, attempts: int = 3) -> None:
        """Drop a sandbox database, also as a role without superuser while autovacuum works in it.

        `WITH (FORCE)` must be allowed to terminate every other session in the database, and a
        role without superuser may not terminate an autovacuum worker ("must be a member of the
        role whose process is being terminated"). Then: end this role's own sessions there and
        drop without FORCE, which stops autovacuum workers itself and waits up to 5 s for the
        rest; a few times, in case a worker starts again in between."""
        if name == self.user_db or not name.startswith(PREFIX):
            raise SandboxError(f"refusing to drop database {name}: not a sandbox")
        ident = pgsql.Identifier(name)
        try:
            with self.admin.raw.cursor() as cur:
                cur.execute(pgsql.SQL("drop database if exists {} with (force)").format(ident))
            return
        except (psycopg2.errors.InsufficientPrivilege, psycopg2.errors.ObjectInUse) as err:
            if isinstance(err, psycopg2.errors.InsufficientPrivilege) and "owner" in str(err):
                raise SandboxError(f"cannot drop sandbox database {name}: {str(err).strip().splitlines()[0]}") from None
            last = str(err).strip().splitlines()[0]
        except psycopg2.Error as err:
            raise SandboxError(f"cannot drop sandbox database {name}: {str(err).strip().splitlines()[0]}") from None
        for attempt in range(attempts):
            try:
                with self.admin.raw.cursor() as cur:
                    cur.execute("select pg_terminate_backend(pid) from pg_stat_activity where datname = %s "
                                "and pid <> pg_backend_pid() and usename = current_user", [name])
                    cur.execute(pgsql.SQL("drop database if exists {}").format(ident))
                return
            except psycopg2.errors.ObjectInUse as err:  # still in use after PostgreSQL's own 5 s
                last = str(err).strip().splitlines()[0]
                time.sleep(0.2 * (attempt + 1))
            except psycopg2.Error as err:
                raise SandboxError(f"cannot drop sandbox database {name}: {str(err).strip().splitlines()[0]}") from None
        raise SandboxError(f"cannot drop sandbox database {name}: {last}")

    def drop(self, sandbox: Sandbox) -> None:
        self._drop_database(sandbox.location)
        if sandbox in self.sandboxes:
            self.sandboxes.remove(sandbox)

    def _leftovers(self) -> list[str]:
        # Workers create sandboxes this process never saw: everything with this run's prefix.
        mine = f"{PREFIX}{self.run_id}_"
        try:
            return [name for (name,) in self.admin.fetchall("select datname from pg_database")
                    if name.startswith(mine)]
        except Exception as err:  # the connection is gone: the next run's sweep removes them
            raise SandboxError(f"cannot list this run's sandbox databases: {str(err).strip().splitlines()[0]}; "
                               "the next game day removes them") from None

    def cleanup(self) -> None:
        failed: list[str] = []
        try:
            super().cleanup()
        except SandboxError as err:
            failed.append(str(err))
        if not self.attached:
            try:
                for name in self._leftovers():
                    try:
                        self._drop_database(name)
                    except SandboxError as err:
                        failed.append(str(err))
            except SandboxError as err:
                failed.append(str(err))
            if self.role is not None and self.own_role and not failed:
                try:
                    with self.admin.raw.cursor() as cur:
                        drop_run_role(cur, self.role[0])
                except psycopg2.Error as err:
                    failed.append(f"cannot drop the run's role {self.role[0]}: {first_line(err)}")
        if failed:
            self.close()  # releases the run's advisory lock: the next run's sweep may drop them
            raise SandboxError(f"{failed[0]}; the next game day removes what is left")

    def connect(self, sandbox: Sandbox) -> PgConnection:
        if sandbox.location == self.user_db:
            raise SandboxError(f"refusing to write to the user's own database {self.user_db}")
        return PgConnection(self.sandbox_params, sandbox.location)

    def profile_output(self, sandbox: Sandbox) -> dict:
        # dbt sees the user's database name (target.database, every relation's database), as in
        # production; its connections go to the sandbox (invocation_context) and its statements
        # name the sandbox (sql_rewriter). A model that writes or hashes target.database into its
        # rows writes the production value in every scenario.
        out = dict(self.target_output)
        out["dbname"] = self.user_db
        out.pop("database", None)
        # one spelling, so that the caller finds the secret under `password` (and passes it on
        # through the environment, never in the file)
        password = password_of(out)
        out.pop("pass", None)
        out.pop("password", None)
        if password is not None:
            out["password"] = password
        if self.role is not None:  # dbt logs in as the run's role (its password, too, through the environment)
            for key in ("sslcert", "sslkey", "sslpassword"):  # the profile role's client certificate is not its
                out.pop(key, None)
            out["user"], out["password"] = self.role
        return out

    def invocation_context(self, sandbox: Sandbox):
        return connections_to(self.user_db, sandbox.location)

    def overlap(self, sandbox: Sandbox, index: dict[str, int], timeout: float):
        from .overlap import Coordinator, Hold

        return (Coordinator(self.sandbox_params, sandbox.location, index, timeout), Hold(True, dict(index)),
                Hold(False, dict(index)))

    def sql_rewriter(self, sandbox: Sandbox):
        user_db, target = self.user_db, sandbox.location
        if not self.statement_guard:
            return lambda sql: map_database(sql, user_db, target)
        return lambda sql: refuse_server_files(map_database(sql, user_db, target))

    def keep(self) -> list[str]:
        """The databases carry the mark (a comment), so that a run of another user or machine with
        this role leaves them alone too."""
        super().keep()
        names = self._leftovers()
        until = int(time.time() + KEEP_SECONDS)
        with self.admin.raw.cursor() as cur:
            for name in names:
                cur.execute(pgsql.SQL("comment on database {} is {}").format(
                    pgsql.Identifier(name), pgsql.Literal(f"{KEPT_COMMENT}{until}")))
        return names

    def sweep(self) -> int:
        """Drop the sandbox databases of dead runs of this role (kept ones once their day is over).
        Another role's are left alone: only their owner may drop them (and its own next run does),
        and trying must not fail this run."""
        removed = super().sweep()
        with self.admin.raw.cursor() as cur:
            roles = leftover_roles(cur)
            owners = roles + ([self.role[0]] if self.role is not None and not self.own_role else [])
            cur.execute("select datname, shobj_description(oid, 'pg_database') from pg_database "
                        "where starts_with(datname, %s) and datdba in (select oid from pg_roles "
                        "where rolname = current_user or rolname = any(%s))", [PREFIX, owners])
            rows = cur.fetchall()
        by_run: dict[str, list[str]] = {}
        for name, comment in rows:
            run = name[len(PREFIX):].split("_", 1)[0]
            if run != self.run_id and not _kept_until_later(comment):
                by_run.setdefault(run, []).append(name)
        for run, names in by_run.items():
            key = _lock_key(run)
            if not self.admin.fetchone(f"select pg_try_advisory_lock({int(key)})")[0]:
                continue  # its run is alive
            try:
                for name in names:
                    try:
                        self._drop_database(name)
                        removed += 1
                    except SandboxError:
                        continue  # e.g. still in use by another role's session: a later run retries
            finally:
                self.admin.execute("select pg_advisory_unlock(%s)", [key])
        self._sweep_roles(roles)
        return removed

    def _sweep_roles(self, roles: list[str]) -> None:
        """Drop the roles of dead runs once they own no database (a kept run's stay with its databases)."""
        for name in roles:
            run = name[len(role_name("")):]
            if run == self.run_id:
                continue
            key = _lock_key(run)
            if not self.admin.fetchone(f"select pg_try_advisory_lock({int(key)})")[0]:
                continue  # its run is alive
            try:
                with self.admin.raw.cursor() as cur:
                    cur.execute("select count(*) from pg_database where datdba = "
                                "(select oid from pg_roles where rolname = %s)", [name])
                    if not cur.fetchone()[0]:
                        drop_run_role(cur, name)
            except psycopg2.Error:
                continue  # a later run retries
            finally:
                self.admin.execute("select pg_advisory_unlock(%s)", [key])

    def close(self) -> None:
        if getattr(self, "_watchdog", None) is not None:
            self._watchdog.stop()
            self._watchdog = None
        try:
            if getattr(self, "admin", None) is not None:
                self.admin.close()
        except Exception:
            pass
        super().close()
