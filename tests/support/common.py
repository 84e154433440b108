"""Shared helpers for the test suite: a throwaway PostgreSQL server, profiles, and dbt runs.

Everything here talks to real engines: DuckDB files in temp dirs and a PostgreSQL server
started with initdb + pg_ctl for the test session.
"""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    path = shutil.which(name)
    if not path:
        raise RuntimeError(f"PostgreSQL binary {name!r} not found; install the 'postgresql' package")
    return path


def _as_postgres(cmd: list[str]) -> list[str]:
    # initdb refuses to run as root: run server binaries as the postgres user when we are root.
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PgServer:
    host: str
    port: int
    user: str
    datadir: str
    base: str

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.host} port={self.port} user={self.user} dbname={dbname}"

    def connect(self, dbname: str = "postgres", autocommit: bool = True):
        import psycopg2

        conn = psycopg2.connect(self.dsn(dbname))
        conn.autocommit = autocommit
        return conn

    def create_database(self, prefix: str = "t") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f'create database "{name}"')
        finally:
            conn.close()
        return name

    def drop_database(self, name: str) -> None:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f'drop database if exists "{name}" with (force)')
        finally:
            conn.close()

    def password_role(self, role: str, password: str) -> None:
        """A login role (superuser, as the tests' own) that must give its password: the server otherwise
        trusts every local connection, so its first pg_hba line asks this role for one."""
        hba = Path(self.datadir) / "pg_hba.conf"
        lines = hba.read_text()
        rule = f"host all {role} 127.0.0.1/32 scram-sha-256\n"
        if rule not in lines:
            hba.write_text(rule + lines)
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("select 1 from pg_roles where rolname = %s", [role])
                if cur.fetchone() is None:
                    cur.execute(f'create role "{role}" login superuser')
                cur.execute(f'alter role "{role}" password %s', [password])
                cur.execute("select pg_reload_conf()")
        finally:
            conn.close()
        time.sleep(0.3)  # the postmaster rereads pg_hba.conf on the signal

    def stop(self) -> None:
        subprocess.run(_as_postgres([_pg_bin("pg_ctl"), "-D", self.datadir, "-m", "immediate", "stop"]),
                       capture_output=True)
        shutil.rmtree(self.base, ignore_errors=True)


def start_pg_server(extra_opts: str = "") -> PgServer:
    """`extra_opts`: more server settings, e.g. "-c autovacuum_naptime=1"."""
    base = tempfile.mkdtemp(prefix="rerun_safety_pg_")
    os.chmod(base, 0o777)
    datadir = os.path.join(base, "data")
    if os.geteuid() == 0:
        shutil.chown(base, user="postgres", group="postgres")
        user = "postgres"
    else:
        import getpass

        user = getpass.getuser()
    subprocess.run(_as_postgres([_pg_bin("initdb"), "-D", datadir, "-U", user, "--auth=trust",
                                 "--encoding=UTF8", "--no-sync"]),
                   check=True, capture_output=True)
    port = free_port()
    opts = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off {extra_opts}"
    subprocess.run(_as_postgres([_pg_bin("pg_ctl"), "-D", datadir, "-o", opts, "-l",
                                 os.path.join(base, "server.log"), "-w", "start"]),
                   check=True, capture_output=True)
    server = PgServer("127.0.0.1", port, user, datadir, base)
    deadline = time.time() + 30
    while True:
        try:
            server.connect().close()
            return server
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def create_role(server: PgServer, name: str | None = None, *, password: str | None = None,
                attributes: str = "login createdb createrole") -> str:
    """A role without superuser (by default CREATEDB and CREATEROLE, what a confined game day needs: it
    creates a role of its own for the sandboxes); returns its name."""
    from psycopg2 import sql as pgsql

    name = name or f"rs_role_{uuid.uuid4().hex[:8]}"
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(pgsql.SQL("create role {} " + attributes + (" password %s" if password else ""))
                        .format(pgsql.Identifier(name)), [password] if password else None)
    finally:
        conn.close()
    return name


def duckdb_profile(path: str | Path, schema: str = "main", **extra) -> dict:
    out = {"type": "duckdb", "path": str(path), "schema": schema, "threads": 1}
    out.update(extra)
    return out


def postgres_profile(server: PgServer, dbname: str, schema: str = "public", **extra) -> dict:
    out = {"type": "postgres", "host": server.host, "port": server.port, "user": server.user,
           "password": "", "dbname": dbname, "schema": schema, "threads": 1}
    out.update(extra)
    return out


def write_profiles(directory: str | Path, profile_name: str, output: dict, target: str = "dev") -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "profiles.yml"
    path.write_text(yaml.safe_dump({profile_name: {"target": target, "outputs": {target: output}}}))
    return path


def copy_fixture(name: str, dest: str | Path) -> Path:
    """Copy a fixture dbt project into a temp dir, pointing any `local:` package at the repo root."""
    dest = Path(dest) / name
    shutil.copytree(FIXTURES / name, dest, ignore=shutil.ignore_patterns("target", "dbt_packages", "logs"))
    packages = dest / "packages.yml"
    if packages.exists():
        packages.write_text(packages.read_text().replace("__REPO_ROOT__", str(REPO_ROOT)))
    return dest


def load_duckdb_with(path: str, load) -> None:
    """Run a fixture's `load(execute, executemany)` against a DuckDB file (`%s` placeholders)."""
    import duckdb

    with duckdb.connect(str(path)) as con:
        load(con.execute, lambda sql, rows: con.executemany(sql.replace("%s", "?"), rows))


def load_postgres_with(dsn: str, load) -> None:
    """Run a fixture's `load(execute, executemany)` in one PostgreSQL transaction."""
    import psycopg2

    conn = psycopg2.connect(dsn)
    try:
        with conn, conn.cursor() as cur:
            load(cur.execute, cur.executemany)
    finally:
        conn.close()


def warehouse_target(engine: str, project: Path, profile: str, tmp: Path, request, db_prefix: str, **extra):
    """Point `project`'s profile at a fresh DuckDB file in `tmp` or a fresh database on the session's
    PostgreSQL server; returns (query(sql) -> rows, or [] for a statement without any; the PostgreSQL
    database name or None)."""
    if engine == "duckdb":
        path = Path(tmp) / f"{db_prefix}.duckdb"
        write_profiles(project, profile, duckdb_profile(path, keep_open=False, **extra))

        def query(sql):
            import duckdb

            con = duckdb.connect(str(path))
            try:
                con.execute(sql)
                return con.fetchall() if con.description else []
            finally:
                con.close()
        return query, None
    server = request.getfixturevalue("pg_server")
    dbname = server.create_database(db_prefix)
    write_profiles(project, profile, postgres_profile(server, dbname, **extra))

    def pg_query(sql):
        conn = server.connect(dbname)
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return cur.fetchall() if cur.description else []
        finally:
            conn.close()
    return pg_query, dbname


def engine_connection(engine: str, tmp_path: Path, request):
    """(a runner Connection to a fresh DuckDB file or to the test's PostgreSQL database, its schema)."""
    if engine == "duckdb":
        from rerun_safety.warehouse.duckdb.engine import DuckDBConnection

        return DuckDBConnection(str(Path(tmp_path) / "g.duckdb")), "main"
    from rerun_safety.warehouse.postgres.engine import PgConnection

    server = request.getfixturevalue("pg_server")
    return PgConnection({"host": server.host, "port": server.port, "user": server.user},
                        request.getfixturevalue("pg_database")), "public"
