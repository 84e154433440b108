"""partition_overwrite under faults: a Postgres backend terminated mid-statement
(pg_terminate_backend from another connection) and a DuckDB dbt process SIGKILLed mid-statement
must leave the target table exactly as before or exactly as after the replacement.

Reuses the SIGKILL harness of tests/strategy/test_strategy_kill.py (project, data, restore,
worker): the target holds 10 partitions, the batch replaces 5 of them. Kill points are spread
over the measured duration of the replacement statement.

    .venv/bin/python benchmarks/strategy_faults.py --trials 20            # both engines
    .venv/bin/python benchmarks/strategy_faults.py --engine postgres --trials 20
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "strategy")]

from _po_project import make_project, model_sql  # noqa: E402
from test_strategy_kill import FINGERPRINT, WORKER, Warehouse, _make_data, trial  # noqa: E402

MARKER = "rerun_safety partition_overwrite"  # the comment that opens the strategy's SQL


class Harness:
    """One project, one warehouse in its 'before' state, one worker that runs dbt on request."""

    def __init__(self, engine: str, root: Path, pg_server=None):
        self.engine = engine
        self.project = make_project(root, engine, {"po_kill": model_sql("partition_key='p'")},
                                    pg_server=pg_server, parse=False)
        self.worker = subprocess.Popen([sys.executable, str(WORKER), str(self.project.root), "po_kill"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.warehouse = Warehouse(self.project)
        self.before, self.after = _make_data(self.project)
        self.warehouse.freeze()
        ready = json.loads(self.worker.stdout.readline() or "{}")
        if not ready.get("ready"):
            raise RuntimeError(f"worker failed: {ready}")

    def close(self) -> None:
        self.worker.stdin.close()
        try:
            self.worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.worker.kill()
        self.warehouse.drop()

    def state(self):
        return self.project.sql(FINGERPRINT.format(t="po_kill"), fetch=True)

    def classify(self, state) -> str:
        return "before" if state == self.before else "after" if state == self.after else "PARTIAL"

    # -- one fault per trial ------------------------------------------------------------------
    def sigkill(self, delay: float) -> dict:
        """SIGKILL the dbt process `delay` seconds after the replacement statement started."""
        outcome, state = trial(self.project, self.warehouse, self.worker, delay)
        return {"delay": delay, "result": self.classify(state),
                "mid_statement": bool(outcome["killed"] and not outcome["statement_done_before_kill"]),
                "statement_seconds": outcome.get("statement_seconds")}

    def terminate(self, delay: float) -> dict:
        """pg_terminate_backend of dbt's connection `delay` seconds into the replacement statement
        (negative: no fault, the run completes)."""
        self.warehouse.restore()
        self.worker.stdin.write("-1\n")
        self.worker.stdin.flush()
        admin = self.project.pg_server.connect()
        pid, started, terminated, done_first, seconds, commit_seconds = None, None, False, False, None, None
        try:
            with admin.cursor() as cur:
                deadline = time.time() + 120
                while pid is None and time.time() < deadline:
                    cur.execute("select pid from pg_stat_activity where datname = %s and state = 'active' "
                                "and position(%s in query) > 0 and pid <> pg_backend_pid()",
                                [self.project.dbname, MARKER])
                    row = cur.fetchone()
                    if row:
                        pid, started = row[0], time.time()
                    else:
                        time.sleep(0.002)
                while pid is not None and delay < 0:  # no fault: time the statement
                    cur.execute("select state = 'active' and position(%s in query) > 0 from pg_stat_activity "
                                "where pid = %s", [MARKER, pid])
                    row = cur.fetchone()
                    if not row or not row[0]:
                        seconds = time.time() - started
                        break
                    time.sleep(0.002)
                while pid is not None and delay < 0 and time.time() < deadline:  # ... and up to COMMIT
                    cur.execute("select query from pg_stat_activity where pid = %s and state = 'idle'", [pid])
                    row = cur.fetchone()
                    if row and row[0].strip().lower().startswith("commit"):
                        commit_seconds = time.time() - started
                        break
                    cur.execute("select 1 from pg_stat_activity where pid = %s", [pid])
                    if cur.fetchone() is None:
                        commit_seconds = time.time() - started
                        break
                    time.sleep(0.002)
                if pid is not None and delay >= 0:
                    time.sleep(max(0.0, started + delay - time.time()))
                    cur.execute("select state = 'active' and position(%s in query) > 0 from pg_stat_activity "
                                "where pid = %s", [MARKER, pid])
                    row = cur.fetchone()
                    done_first = not row or not row[0]  # the statement had returned (COMMIT or later)
                    cur.execute("select pg_terminate_backend(%s)", [pid])
                    terminated = bool(cur.fetchone()[0])
        finally:
            admin.close()
        outcome = json.loads(self.worker.stdout.readline())
        return {"delay": delay, "result": self.classify(self.state()), "saw_statement": pid is not None,
                "mid_statement": terminated and not done_first, "exit": outcome["exit"],
                "statement_seconds": seconds, "commit_seconds": commit_seconds}


def run_trials(engine: str, trials: int, root: Path, pg_server=None, log=print) -> dict:
    """Measure the statement once without a fault, then `trials` faults spread over its duration."""
    h = Harness(engine, root, pg_server)
    try:
        fault = h.terminate if engine == "postgres" else h.sigkill
        clean = fault(-1)
        assert clean["result"] == "after", clean
        seconds = clean["statement_seconds"] or 0.5
        # Postgres commits after dbt's other statements of the transaction: spread faults up to COMMIT
        span = max(seconds, clean.get("commit_seconds") or 0.0)
        split = {"before": 0, "after": 0, "PARTIAL": 0}
        mid = 0
        for i in range(trials):
            # delays from 0 to 1.2x the statement's duration: most land inside it, a few at COMMIT
            delay = 1.2 * span * i / max(1, trials - 1)
            r = fault(delay)
            split[r["result"]] += 1
            mid += r["mid_statement"]
            log(f"  {engine} trial {i + 1:2d}: fault at {delay:5.2f}s -> {r['result']}"
                f"{' (mid-statement)' if r['mid_statement'] else ''}")
        return {"engine": engine, "fault": "pg_terminate_backend" if engine == "postgres" else "SIGKILL",
                "statement_seconds": round(seconds, 3), "until_commit_seconds": round(span, 3), "trials": trials, "mid_statement": mid, **split}
    finally:
        h.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=["duckdb", "postgres", "both"], default="both")
    ap.add_argument("--trials", type=int, default=20)
    a = ap.parse_args()
    from support.common import start_pg_server

    engines = ["duckdb", "postgres"] if a.engine == "both" else [a.engine]
    server = start_pg_server() if "postgres" in engines else None
    failed = 0
    try:
        for engine in engines:
            with tempfile.TemporaryDirectory(prefix=f"rerun_safety_faults_{engine}_") as tmp:
                r = run_trials(engine, a.trials, Path(tmp), server)
            print(f"[strategy faults {engine}] {r['fault']} x{r['trials']} (statement {r['statement_seconds']}s, until COMMIT {r['until_commit_seconds']}s): "
                  f"{r['before']} before, {r['after']} after, {r['PARTIAL']} partial; "
                  f"{r['mid_statement']} mid-statement", flush=True)
            failed += r["PARTIAL"]
    finally:
        if server is not None:
            server.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
