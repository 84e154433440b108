"""The second process of the lint's compile (`python -m rerun_safety.lint.pass2 JOB`): pass 2 (the
incremental branches) while pass 1 runs in the first, started by compile.Pass2Worker. dbt compiles one
node at a time under the GIL, so on a multi-core machine the two passes overlap."""
from __future__ import annotations

import json
from pathlib import Path

from ..dbt_invoke import DbtSession
from .compile import Selection, incremental_pass
from .scratch import point_manifest


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


if __name__ == "__main__":
    import sys

    sys.exit(pass2_main(sys.argv[1]))
