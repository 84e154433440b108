"""Pass 2 of the lint's compile (the incremental branches) in a second process while pass 1 runs in
the first: Pass2Worker starts `python -m rerun_safety.lint.pass2 JOB`, whose entry is pass2_main. dbt
compiles one node at a time under the GIL, so on a multi-core machine the two passes overlap."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from ..dbt_invoke import DbtSession
from .dbt_compile import Selection, incremental_pass
from ..warehouse.postgres.scratch import point_manifest
from ..warehouse.scratch import Scratch

# Below this many incremental models a second process costs more (dbt import, parse) than it saves.
PARALLEL_MIN_MODELS = 40


def pass2_main(job_file: str) -> int:
    """Entry point of the pass-2 process (`python -m rerun_safety.lint.pass2 JOB`): its own dbt
    (one invocation at a time per process), parsing from the partial-parse state the main process
    just wrote. Writes {"compiled": {uid: [sql, error]}, "parse_time": s} next to the job."""
    job = json.loads(Path(job_file).read_text())
    session = DbtSession(job["project"], job["profiles_dir"], job["target"], Path(job["session_dir"]),
                         vars_yaml=job["vars_yaml"])
    parsed = session.invoke(["parse", "--no-write-json"], use_manifest=False)
    if not parsed.success or parsed.raw is None:
        return 3
    session.manifest = parsed.raw
    p2 = dict(job["pass2"])
    if p2.get("scratch_db"):
        point_manifest(parsed.raw, p2["user_db"], p2["scratch_db"])
    p2["selection"] = Selection(tuple(p2["selection"][0]), tuple(p2["selection"][1]))
    p2["flags"] = tuple(p2["flags"])
    out = incremental_pass(session, parsed.raw, job["scratch_profiles"], p2)
    Path(job["result"]).write_text(json.dumps({"compiled": out, "parse_time": parsed.wall_time}))
    return 0


class Pass2Worker:
    """Pass 2 in a second process while pass 1 runs here: dbt compiles one node at a time under
    the GIL, so on a multi-core machine the two passes overlap. A plain subprocess (not
    multiprocessing) so that nothing of the caller's main module is imported again."""

    parse_time = 0.0
    succeeded = False

    def __init__(self, process, result: Path, started: float):
        self.process, self.result_file, self.started = process, result, started

    @classmethod
    def start(cls, session: DbtSession, scratch: Scratch, work: Path, pass2: dict) -> "Pass2Worker":
        import subprocess
        import sys

        session_dir = work / "pass2_session"
        state = session.work_dir / "dbt_target" / "partial_parse.msgpack"
        (session_dir / "dbt_target").mkdir(parents=True, exist_ok=True)
        if state.exists():
            shutil.copy2(state, session_dir / "dbt_target" / "partial_parse.msgpack")
        sel = pass2["selection"]  # a compile.Selection
        job = dict(project=session.project_dir, profiles_dir=session.profiles_dir, target=session.target,
                   vars_yaml=session.vars_yaml, session_dir=str(session_dir),
                   scratch_profiles=scratch.worker_profiles_dir(work), result=str(work / "pass2_result.json"),
                   pass2={**pass2, "selection": [list(sel.select), list(sel.exclude)], "flags": list(pass2["flags"])})
        job_file = work / "pass2_job.json"
        job_file.write_text(json.dumps(job))
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "rerun_safety.lint.pass2", str(job_file)],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        return cls(process, Path(job["result"]), started)

    def result(self) -> dict | None:
        """The compiled SQL, or None when the process failed (the caller then compiles itself)."""
        if self.process.wait() != 0 or not self.result_file.exists():
            return None
        data = json.loads(self.result_file.read_text())
        self.parse_time = float(data.get("parse_time") or 0.0)
        return {uid: (sql, err) for uid, (sql, err) in data["compiled"].items()}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def worth_a_second_process(n_incremental: int) -> bool:
    """Only with enough incremental models to pay for the process start and its parse, and a core
    to spare: on a saturated machine two compiling processes only slow each other down."""
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return n_incremental >= PARALLEL_MIN_MODELS and cores > 1 and load < cores - 0.5


if __name__ == "__main__":
    import sys

    sys.exit(pass2_main(sys.argv[1]))
