"""Fixtures' building blocks for game-day tests: a copy of a project loaded with data."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

from click.testing import CliRunner

from _support import FIXTURES, REPO_ROOT, postgres_profile, write_profiles

SHOP = REPO_ROOT / "examples" / "shop"


def copy_project(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("target", "dbt_packages", "logs", "*.duckdb",
                                                             "*.wal", ".user.yml", "package-lock.yml"))
    packages = dest / "packages.yml"
    if packages.exists():
        text = packages.read_text()
        for rel in ("../../", "../"):
            text = text.replace(f"local: {rel}", f"local: {REPO_ROOT}")
        text = text.replace("__REPO_ROOT__", str(REPO_ROOT))
        packages.write_text(text)
    return dest


def shop_generator():
    sys.path.insert(0, str(SHOP))
    import generate_data  # noqa: E402

    return generate_data


def dbt_deps(project: Path, profiles: Path) -> None:
    from dbt.cli.main import dbtRunner

    res = dbtRunner().invoke(["deps", "--project-dir", str(project), "--profiles-dir", str(profiles), "--quiet"])
    assert res.success, res.exception


def duckdb_fixture_project(tmp: Path, name: str, load_duckdb) -> Path:
    """A copy of tests/fixtures/<name> in `tmp`, its `<name>.duckdb` loaded, its packages installed."""
    project = copy_project(FIXTURES / name, tmp / name)
    load_duckdb(str(project / f"{name}.duckdb"))
    dbt_deps(project, project)
    return project


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pg_fingerprint(server, dbname: str) -> dict:
    """Every relation in the database with a checksum of its rows."""
    conn = server.connect(dbname)
    try:
        with conn.cursor() as cur:
            cur.execute("select table_schema, table_name from information_schema.tables "
                        "where table_schema not in ('pg_catalog', 'information_schema') order by 1, 2")
            rels = cur.fetchall()
            out = {}
            for schema, name in rels:
                cur.execute(f'select count(*), md5(coalesce(string_agg(md5(t::text), \'\' order by md5(t::text)), \'\')) '
                            f'from "{schema}"."{name}" t')
                out[f"{schema}.{name}"] = cur.fetchone()
            return out
    finally:
        conn.close()


def run_cli(args: list[str]) -> tuple[int, str, str]:
    from rerun_safety.cli import main

    runner = CliRunner()
    result = runner.invoke(main, args, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def load_report(output_dir: Path) -> dict:
    return json.loads((output_dir / "report.json").read_text())


def by_name(report: dict) -> dict:
    return {m["name"]: m for m in report["models"]}


def scenario(model: dict, name: str) -> dict:
    return next(s for s in model["scenarios"] if s["name"] == name)


def pg_profile(server, dbname: str, dest: Path, profile: str, schema: str) -> Path:
    write_profiles(dest, profile, postgres_profile(server, dbname, schema=schema))
    return dest


def shop_gameday(engine: str, tmp: Path, server=None) -> dict:
    """The game day of examples/shop (--steps 4 --threads 2) on a copy of it, loaded into a DuckDB file
    or a fresh PostgreSQL database; the user's target is fingerprinted before and after."""
    project = copy_project(SHOP, tmp / "shop")
    gen = shop_generator()
    if engine == "duckdb":
        gen.load_duckdb(str(project / "shop.duckdb"))
        profiles = project
        before = file_sha256(project / "shop.duckdb")
    else:
        dbname = server.create_database("shop")
        gen.load_postgres(server.dsn(dbname))
        profiles = pg_profile(server, dbname, tmp / "profiles", "shop", "analytics")
        before = pg_fingerprint(server, dbname)
    dbt_deps(project, profiles)
    out = tmp / "out"
    cwd = os.getcwd()
    os.chdir(project)  # the DuckDB profile's path is relative, as users write it
    try:
        code, stdout, stderr = run_cli(["gameday", "--project-dir", str(project), "--profiles-dir", str(profiles),
                                        "--output-dir", str(out), "--steps", "4", "--threads", "2"])
    finally:
        os.chdir(cwd)
    after = file_sha256(project / "shop.duckdb") if engine == "duckdb" else pg_fingerprint(server, dbname)
    return {"engine": engine, "code": code, "stdout": stdout, "stderr": stderr, "report": load_report(out),
            "out": out, "before": before, "after": after}
