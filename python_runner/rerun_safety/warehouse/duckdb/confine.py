"""A dbt-duckdb plugin that the game day adds to every DuckDB sandbox profile: dbt's connection to a
sandbox reads and writes files only inside the sandbox's folder, and reads the databases the user's
profile attaches. A hook that writes the user's export file (`copy ... to '/data/export.csv'`), attaches
another database to write into it, or reads a file elsewhere is refused by DuckDB itself
(`enable_external_access = false` with `allowed_directories`/`allowed_paths`), which SQL cannot undo:
DuckDB refuses to enable external access again or to widen the allowed paths while the database runs.

Before the lock: every extension installed on this machine is loaded (autoloading reads the extension
folder, which is then out of reach), and the settings that name folders (temp_directory, ...) are set."""
from __future__ import annotations

from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin
from sqlglot import exp

# Settings DuckDB refuses to change once external access is off: applied before, once per database.
EARLY_SETTINGS = ("temp_directory", "extension_directory", "secret_directory", "home_directory",
                  "custom_extension_repository", "autoinstall_extension_repository", "allow_community_extensions",
                  "allow_unsigned_extensions", "autoinstall_known_extensions", "autoload_known_extensions")
CONFIG_KEY = "rerun_safety_confine"


def _list(values: list[str]) -> str:
    return "[" + ", ".join(exp.Literal.string(v).sql("duckdb") for v in values) + "]"


class Plugin(BasePlugin):
    def initialize(self, plugin_config: dict[str, Any]) -> None:
        conf = plugin_config.get(CONFIG_KEY) or {}
        self.active = CONFIG_KEY in plugin_config  # (named without the game day's settings: does nothing)
        self.directories = [str(d).rstrip("/") + "/" for d in conf.get("directories", [])]
        self.paths = [str(p) for p in conf.get("paths", [])]
        self.early = dict(conf.get("early_settings") or {})

    def configure_connection(self, conn) -> None:
        if not self.active:
            return
        if not conn.execute("select current_setting('enable_external_access')").fetchone()[0]:
            return  # already confined (a database opened again in this process)
        installed = conn.execute("select extension_name from duckdb_extensions() "
                                 "where installed and not loaded").fetchall()
        for (name,) in installed:
            try:
                conn.load_extension(name)
            except Exception:  # noqa: BLE001 - one that cannot load here is not needed by the model
                pass
        for key, value in self.early.items():
            conn.execute(f"set {exp.to_identifier(key).sql('duckdb')} = {exp.Literal.string(str(value)).sql('duckdb')}")
        conn.execute(f"set allowed_directories = {_list(self.directories)}")
        conn.execute(f"set allowed_paths = {_list(self.paths)}")
        conn.execute("set enable_external_access = false")
