"""A real standalone Spark cluster on loopback, started from the pyspark wheel alone.

`start_spark_cluster(root)` starts three process trees from the wheel's SPARK_HOME (the folder of
`pyspark.__file__`, which ships `bin/spark-class`, `bin/spark-submit` and the jars of the standalone
master/worker and of the Hive Thrift server):

* a standalone Master on 127.0.0.1 (free ports for its RPC endpoint and its web UI),
* one Worker (`--cores 2 --memory 1g`) registered with it; the worker launches executors as its
  own child processes,
* the Spark Thrift server (HiveThriftServer2, `spark-internal`) submitted to that master, with its
  own warehouse folder and Derby metastore under `root`.

Clients (dbt-spark `method: thrift`, PyHive) talk to the Thrift server; only the server opens the
Derby metastore, so any number of client processes can connect at once. Logs, the worker's work
folder, the warehouse and the metastore all live under `root`; nothing is downloaded.

Each tree runs in a process group of its own; `SparkCluster.stop()` ends the three (TERM, then KILL
after a timeout) and checks that no process of theirs remains. The JVMs also get SIGKILL if the
process that started them dies (Linux parent-death signal), so a killed test run leaves no Spark
behind.
"""
from __future__ import annotations

import atexit
import ctypes
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

THRIFT_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
LOG4J2 = """rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = info
logger.metastore.name = org.apache.hadoop.hive.metastore.RetryingHMSHandler
logger.metastore.level = fatal
logger.metastore2.name = org.apache.hadoop.hive.metastore.ObjectStore
logger.metastore2.level = error
"""
DRIVER_MEMORY = "768m"  # the Thrift server's heap (Spark refuses less than ~450m)


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the starting process dies (Linux), so an aborted
    test run leaves no JVM behind. (The parent-death signal follows the starting *thread*: start
    clusters from a thread that lives as long as the cluster, e.g. the main thread.)"""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _group_members(pgid: int, running_only: bool = False) -> list[int]:
    """PIDs of the processes in process group `pgid`. Zombies count unless `running_only`: in each
    tree the launcher of `bin/spark-class` stays a zombie child of the JVM (bash execs java with the
    launcher's process substitution still attached) until the JVM exits."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses.
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and not (running_only and fields[0] == "Z"):
            found.append(int(entry))
    return found


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class _Tree:
    name: str
    proc: subprocess.Popen
    log: Path

    @property
    def pgid(self) -> int:
        return self.proc.pid  # started with start_new_session: the leader's pid is the group id


@dataclass
class SparkCluster:
    root: Path
    host: str
    port: int  # the Thrift server's
    master_url: str
    master_ui_url: str
    trees: list[_Tree] = field(default_factory=list)
    started_in: float = 0.0  # seconds from the first launch to the first answered query
    _stopped: bool = False

    # -- clients -------------------------------------------------------------------------------
    def profile(self, schema: str, **extra) -> dict:
        """A dbt-spark `method: thrift` profile output for this cluster's Thrift server."""
        out = {"type": "spark", "method": "thrift", "host": self.host, "port": self.port,
               "schema": schema, "threads": 1}
        out.update(extra)
        return out

    def connect(self):
        from pyhive import hive

        return hive.connect(host=self.host, port=self.port, username="rerun_safety")

    def query(self, sql: str) -> list[tuple]:
        """Rows of one statement run through the Thrift server ([] for one without rows)."""
        conn = self.connect()
        try:
            cur = conn.cursor()
            try:
                cur.execute(sql)
                return [tuple(r) for r in cur.fetchall()] if cur.description else []
            finally:
                cur.close()
        finally:
            from rerun_safety.warehouse.spark.engine import close_hive_connection

            close_hive_connection(conn)  # bounded: this server sometimes never answers a close

    def master_state(self) -> dict:
        """The master's JSON state (workers, applications, cores and memory in use)."""
        with urllib.request.urlopen(f"{self.master_ui_url}/json/", timeout=5) as resp:
            return json.load(resp)

    # -- processes -----------------------------------------------------------------------------
    def pids(self) -> dict[str, list[int]]:
        """Live PIDs of each tree (master, worker with its executors, thriftserver)."""
        return {t.name: _group_members(t.pgid) for t in self.trees}

    def stop(self, timeout: float = 20.0) -> None:
        """End the three trees and wait until none of their processes remains.

        The Thrift server goes first, so its application ends while the master and worker still run;
        in each group the members other than the leader (the worker's executors, the launcher) go
        before the leader, so their parent is alive to reap them. TERM, then KILL after `timeout`.
        """
        if self._stopped:
            return
        self._stopped = True
        order = [t for t in self.trees if t.name == "thriftserver"] + \
                [t for t in self.trees if t.name != "thriftserver"]
        _stop_trees(order[:1], timeout)
        _stop_trees(order[1:], timeout)
        left = {name: pids for name, pids in self.pids().items() if pids}
        if left:
            raise RuntimeError(f"Spark processes still running after stop(): {left}")


def _signal_group(tree: _Tree, sig: int, leader_too: bool) -> None:
    for pid in _group_members(tree.pgid, running_only=True):
        if pid == tree.proc.pid and not leader_too:
            continue
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _wait_gone(trees: list[_Tree], deadline: float, members_only: bool) -> bool:
    while True:
        alive = False
        for t in trees:
            t.proc.poll()  # reap the leader once it exits
            if members_only:  # running children; zombies go with their parent
                members = [p for p in _group_members(t.pgid, running_only=True) if p != t.proc.pid]
            else:
                members = _group_members(t.pgid)
            alive = alive or bool(members)
        if not alive:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def _stop_trees(trees: list[_Tree], timeout: float) -> None:
    if not trees:
        return
    # Children first (the worker's executors), while the leader is alive to reap them.
    for t in trees:
        _signal_group(t, signal.SIGTERM, leader_too=False)
    if not _wait_gone(trees, time.monotonic() + timeout / 2, members_only=True):
        for t in trees:
            _signal_group(t, signal.SIGKILL, leader_too=False)
        _wait_gone(trees, time.monotonic() + 5, members_only=True)
    for t in trees:
        if t.proc.poll() is None:
            try:
                os.killpg(t.pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    if not _wait_gone(trees, time.monotonic() + timeout, members_only=False):
        for t in trees:
            try:
                os.killpg(t.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _wait_gone(trees, time.monotonic() + 10, members_only=False)
    for t in trees:
        try:
            t.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def processes_mentioning(text: str) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and text in cmdline(int(p))]


def check_stopped(cluster: "SparkCluster", pids: list[int]) -> None:
    """After `cluster.stop()`: none of `pids` (its processes before the stop) runs, no process names
    the cluster's folder, the Thrift port is closed, and a second stop is a no-op."""
    time.sleep(0.5)
    left = [p for p in pids if os.path.exists(f"/proc/{p}")]
    assert left == [], {p: cmdline(p)[:200] for p in left}
    assert processes_mentioning(str(cluster.root)) == []
    assert cluster.pids() == {"master": [], "worker": [], "thriftserver": []}
    try:
        socket.create_connection((cluster.host, cluster.port), timeout=2).close()
    except OSError:
        pass
    else:
        raise AssertionError(f"the Thrift port {cluster.port} still answers after stop()")
    cluster.stop()


class SparkClusterError(RuntimeError):
    pass


def start_spark_cluster(root: Path, *, timeout: float = 180.0, host: str = "127.0.0.1") -> SparkCluster:
    """Start master, worker and Thrift server under `root`; return once the Thrift server answers
    `select 1` through PyHive and the master has the worker and the server's executor running.

    On failure (a process exits, or `timeout` seconds pass) everything started is stopped and a
    SparkClusterError carries the tail of the relevant log."""
    root = Path(root).resolve()
    for sub in ("logs", "conf", "worker", "warehouse", "metastore", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    # Spark's default log level for daemons and spark-submit is INFO: ~130k lines over one game day,
    # formatted and written by the Thrift server's busy driver. Warnings and errors still reach the
    # logs, and the executor still says which tasks it finished.
    (root / "conf" / "log4j2.properties").write_text(LOG4J2)
    home = spark_home()
    master_port, master_ui, worker_ui, thrift_port = (_free_port() for _ in range(4))
    master_url = f"spark://{host}:{master_port}"
    env = dict(os.environ)
    for key in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "SPARK_MASTER_OPTS", "SPARK_WORKER_OPTS"):
        env.pop(key, None)
    env.update({
        "SPARK_HOME": str(home),
        "SPARK_CONF_DIR": str(root / "conf"),  # empty: no user spark-defaults.conf / spark-env.sh
        "SPARK_LOCAL_IP": host,
        "SPARK_LOCAL_DIRS": str(root / "tmp"),
        "SPARK_LOG_DIR": str(root / "logs"),
        "SPARK_WORKER_DIR": str(root / "worker"),
        "SPARK_DAEMON_MEMORY": "256m",
        # Serial GC and the C1 compiler only: about a third less start-up time on two busy cores;
        # the master and the worker do little work (the Thrift server gets its own, below).
        "SPARK_DAEMON_JAVA_OPTS": f"-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.io.tmpdir={root / 'tmp'}",
    })
    cluster = SparkCluster(root=root, host=host, port=thrift_port, master_url=master_url,
                           master_ui_url=f"http://{host}:{master_ui}")
    atexit.register(cluster.stop)

    def launch(name: str, args: list[str], **more_env: str) -> _Tree:
        log = root / "logs" / f"{name}.log"
        with open(log, "ab") as fh:
            proc = subprocess.Popen(args, cwd=root, env={**env, **more_env}, stdin=subprocess.DEVNULL, stdout=fh,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=_die_with_parent)
        tree = _Tree(name, proc, log)
        cluster.trees.append(tree)
        return tree

    started = time.monotonic()
    deadline = started + timeout

    def fail(reason: str, tree: _Tree) -> None:
        detail = f"{reason}\n--- last lines of {tree.log} ---\n{_tail(tree.log)}"
        try:
            cluster.stop()
        finally:
            atexit.unregister(cluster.stop)
        raise SparkClusterError(f"Spark cluster did not start: {detail}")

    def check_alive() -> None:
        for t in cluster.trees:
            code = t.proc.poll()
            if code is not None:
                fail(f"the {t.name} process exited with code {code}", t)

    spark_class = str(home / "bin" / "spark-class")
    master = launch("master", [spark_class, MASTER_CLASS, "--host", host, "--port", str(master_port),
                               "--webui-port", str(master_ui)])
    # The worker and the server try to register once at start-up and retry only after 5-20 s:
    # launch them once the master answers (its web UI starts after its RPC endpoint).
    while True:
        check_alive()
        try:
            cluster.master_state()
            break
        except (OSError, ValueError):  # not listening yet, or the UI's HTML before its JSON servlet
            if time.monotonic() > deadline:
                fail(f"the master did not answer on {cluster.master_ui_url} within {timeout:.0f} s", master)
            time.sleep(0.2)
    worker = launch("worker", [spark_class, WORKER_CLASS, master_url, "--host", host,
                               "--webui-port", str(worker_ui), "--cores", "2", "--memory", "1g",
                               "--work-dir", str(root / "worker")])
    metastore = root / "metastore" / "metastore_db"
    server = launch("thriftserver", [
        str(home / "bin" / "spark-submit"),
        "--class", THRIFT_SERVER_CLASS,
        "--master", master_url,
        "--name", "rerun_safety Thrift server",
        "--driver-memory", DRIVER_MEMORY,
        "--executor-memory", "512m",
        "--executor-cores", "2",
        "--total-executor-cores", "2",
        "--driver-java-options", f"-Dderby.system.home={root / 'metastore'} -Djava.io.tmpdir={root / 'tmp'}",
        "--conf", "spark.ui.enabled=false",
        # The executor runs each task on a few thousand rows: compiling its code fully (C2) cost
        # more CPU than the tasks themselves; the quick compiler and the serial collector suffice.
        "--conf", "spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "--conf", f"spark.driver.host={host}",
        "--conf", f"spark.driver.bindAddress={host}",
        "--conf", f"spark.sql.warehouse.dir={root / 'warehouse'}",
        "--conf", f"spark.hadoop.javax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={metastore};create=true",
        "--conf", "spark.sql.session.timeZone=UTC",
        "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", "spark.default.parallelism=2",
        "spark-internal",
        "--hiveconf", f"hive.server2.thrift.port={thrift_port}",
        "--hiveconf", f"hive.server2.thrift.bind.host={host}",
    ], SPARK_DAEMON_MEMORY=DRIVER_MEMORY,  # for the Thrift server it overrides --driver-memory
       # The server's driver plans every statement of a game day (~6 CPU minutes): the full JIT
       # costs ~5 s more start-up and saves about a quarter of a game day's time (432 -> 323 s).
       SPARK_DAEMON_JAVA_OPTS=f"-XX:+UseSerialGC -Djava.io.tmpdir={root / 'tmp'}")

    # Ready: the server answers a real query, and the master runs the worker and the executor.
    last_error: Exception | None = None
    while True:
        check_alive()
        try:
            # A plain TCP connect first: PyHive logs every refused connection.
            socket.create_connection((host, thrift_port), timeout=2).close()
            if cluster.query("select 1") == [(1,)]:
                break
        except Exception as err:  # connection refused until the server listens
            last_error = err
        if time.monotonic() > deadline:
            fail(f"the Thrift server on {host}:{thrift_port} did not answer `select 1` within "
                 f"{timeout:.0f} s (last error: {last_error!r})", server)
        time.sleep(0.5)
    while True:
        check_alive()
        state = cluster.master_state()
        alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
        apps = [a for a in state.get("activeapps", []) if a.get("cores", 0) >= 1]
        if alive and apps:
            break
        if time.monotonic() > deadline:
            fail(f"the master has {len(alive)} alive worker(s) and {len(apps)} application(s) with an "
                 f"executor after {timeout:.0f} s", worker if not alive else server)
        time.sleep(0.5)
    cluster.started_in = time.monotonic() - started
    return cluster
