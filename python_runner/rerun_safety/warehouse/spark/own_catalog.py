"""A confined game day's in-process Spark (`method: session`): a catalog of the run's own.

dbt-spark's `method: session` keeps its catalog in an embedded Derby database (`metastore_db`) and its
tables under `spark.sql.warehouse.dir`, both the user's. A confined game day may write only beneath its
run folder (confine/), so its Spark cannot create sandbox databases there, and must not: Derby would
write the user's metastore. Instead the run copies the user's metastore into its folder (a read) and
starts Spark on the copy, with its warehouse, scratch and temporary folders in the run folder too:

- the user's tables are found through the copy and read from their files where they are;
- every database the game day creates, and every file it writes, is the run's: the kernel refuses a
  write anywhere else (a hook's `insert overwrite directory`, a table whose LOCATION is the user's
  folder, an insert into a production table), and a statement that only changes the catalog (a DROP)
  changes the copy, which goes with the run folder.

A metastore that is not a file of this machine (a Hive metastore service, a JDBC database) would
receive the sandboxes' databases: such a session is not confined by the game day (`gap`).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

_URL_KEYS = ("spark.hadoop.javax.jdo.option.ConnectionURL", "javax.jdo.option.ConnectionURL",
             "spark.hive.javax.jdo.option.ConnectionURL")
_REMOTE_KEYS = ("spark.hadoop.hive.metastore.uris", "hive.metastore.uris", "spark.hive.metastore.uris")
_DERBY_HOME = re.compile(r"-Dderby\.system\.home=(\S+)")


@dataclass(frozen=True)
class OwnCatalog:
    """The session parameters of the run's own catalog, and the user's metastore it copied (None: the
    session keeps its catalog in memory, or the user has none yet)."""

    parameters: dict[str, str]
    copied_from: Path | None


def _hive_site() -> Path | None:
    for folder in (os.environ.get("SPARK_CONF_DIR"), os.path.join(os.environ.get("SPARK_HOME") or "", "conf")):
        if folder and (Path(folder) / "hive-site.xml").is_file():
            return Path(folder) / "hive-site.xml"
    return None


def gap(parameters: dict[str, str]) -> str | None:
    """Why this session's catalog cannot be the run's own (None: it can)."""
    if parameters.get("spark.sql.catalogImplementation", "hive").lower() == "in-memory":
        return None
    remote = next((k for k in _REMOTE_KEYS if str(parameters.get(k) or "").strip()), None)
    if remote:
        return f"its Hive metastore is a service ({remote}), which would hold the sandboxes' databases"
    url = next((parameters[k] for k in _URL_KEYS if parameters.get(k)), None)
    if url is not None and not str(url).startswith("jdbc:derby:"):
        return f"its Hive metastore is a database outside this machine's files ({str(url).split(';')[0]})"
    site = _hive_site()
    if site is not None:
        text = site.read_text(errors="replace")
        if "hive.metastore.uris" in text or ("ConnectionURL" in text and "jdbc:derby:" not in text):
            return f"{site} names a Hive metastore that would hold the sandboxes' databases"
    return None


def derby_folder(parameters: dict[str, str], cwd: Path) -> Path:
    """The user's embedded Derby metastore: the folder its connection URL names (`jdbc:derby:;databaseName=X`
    or `jdbc:derby:X`), relative to `derby.system.home` or the working folder, as Derby resolves it;
    `metastore_db` there when no URL is given."""
    url = next((str(parameters[k]) for k in _URL_KEYS if parameters.get(k)), "")
    name = "metastore_db"
    if url:
        head, *attributes = url[len("jdbc:derby:"):].split(";")
        named = [a.split("=", 1)[1] for a in attributes if a.lower().startswith("databasename=")]
        name = named[0] if named else (head or name)
    path = Path(name)
    if path.is_absolute():
        return path
    home = _DERBY_HOME.search(str(parameters.get("spark.driver.extraJavaOptions") or ""))
    base = Path(home.group(1)) if home else cwd
    return (base if base.is_absolute() else cwd / base) / path


def own_catalog(parameters: dict[str, str], run_dir: Path, cwd: Path) -> OwnCatalog:
    """The run's copy of the user's catalog under `run_dir`/spark, and the session parameters that use it.
    Call only when `gap(parameters)` is None."""
    root = run_dir / "spark"
    for sub in ("warehouse", "local", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    out = {k: v for k, v in parameters.items() if k not in _URL_KEYS}
    copied = None
    if out.get("spark.sql.catalogImplementation", "hive").lower() != "in-memory":
        user = derby_folder(parameters, cwd)
        copy = root / "metastore_db"
        if user.is_dir():
            # a lock file is the user's Derby's (a process of theirs may hold it): the copy boots without
            shutil.copytree(user, copy, ignore=shutil.ignore_patterns("*.lck"), symlinks=True)
            copied = user
        out["spark.hadoop.javax.jdo.option.ConnectionURL"] = f"jdbc:derby:;databaseName={copy};create=true"
    out["spark.sql.warehouse.dir"] = str(root / "warehouse")
    out["spark.local.dir"] = str(root / "local")
    # a write the kernel refused fails the statement, which says why; Spark's log would print each failed
    # task's stack on the terminal besides (the user's own level, if set, wins)
    out.setdefault("spark.log.level", "OFF")
    java = str(parameters.get("spark.driver.extraJavaOptions") or "")
    # later -D values win: Derby's log, the JVM's temporary files and no perf data file under /tmp
    out["spark.driver.extraJavaOptions"] = " ".join(
        x for x in (java, f"-Dderby.system.home={shlex.quote(str(root))}",
                    f"-Djava.io.tmpdir={shlex.quote(str(root / 'tmp'))}", "-XX:-UsePerfData") if x)
    return OwnCatalog(out, copied)
