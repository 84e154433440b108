"""Kill-test worker: imports dbt and parses the project once, then for each trial forks a child
that runs `dbt run` of one model and SIGKILLs it a given delay after the strategy's statement
started (seen in dbt's debug log). Forking saves the ~2-3 s interpreter start-up per trial.

Protocol: one float per line on stdin (the delay in seconds; negative = let the run finish);
one JSON line per trial on stdout.
"""
from __future__ import annotations

import json
import os
import select
import signal
import sys
import time

MARKER = "rerun_safety partition_overwrite"  # the comment that opens the strategy's SQL


def main() -> None:
    project_dir, model = sys.argv[1], sys.argv[2]
    from dbt.cli.main import dbtRunner

    common = ["--project-dir", project_dir, "--profiles-dir", project_dir, "--no-write-json",
              "--log-level-file", "none"]
    res = dbtRunner().invoke(["parse", *common, "--log-level", "warn"])
    if not res.success:
        print(json.dumps({"error": f"parse failed: {res.exception}"}), flush=True)
        return
    manifest = res.result
    print(json.dumps({"ready": True}), flush=True)

    for line in sys.stdin:
        delay = float(line)
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the dbt process
            os.close(read_fd)
            os.dup2(write_fd, 1)
            os.dup2(write_fd, 2)
            sys.stdout = os.fdopen(1, "w", buffering=1)
            sys.stderr = sys.stdout
            run = dbtRunner(manifest=manifest).invoke(
                ["run", "--select", model, *common, "--debug", "--log-format", "text"])
            sys.stdout.flush()
            os._exit(0 if run.success else 1)
        os.close(write_fd)
        buf = b""
        t_marker = t_done = t_kill = None
        killed = False
        deadline = time.time() + 120
        while time.time() < deadline:
            timeout = 0.5
            if t_marker is not None and delay >= 0 and not killed:
                timeout = max(0.0, t_marker + delay - time.time())
                if timeout == 0.0:
                    os.kill(pid, signal.SIGKILL)
                    t_kill = time.time()
                    killed = True
                    continue
            ready, _, _ = select.select([read_fd], [], [], timeout)
            if not ready:
                continue
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            buf += chunk
            now = time.time()
            text = buf.decode(errors="replace")
            if t_marker is None and MARKER in text:
                t_marker = now
            if t_marker is not None and t_done is None and "SQL status" in text[text.index(MARKER):]:
                t_done = now
        _, status = os.waitpid(pid, 0)
        os.close(read_fd)
        out = {
            "delay": delay,
            "saw_marker": t_marker is not None,
            "killed": killed and os.WIFSIGNALED(status),
            "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status),
            "statement_seconds": (t_done - t_marker) if (t_done and t_marker) else None,
            "statement_done_before_kill": bool(t_done and (t_kill is None or t_done <= t_kill)),
        }
        if out["exit"] not in (0,) and not out["killed"]:
            out["log_tail"] = buf.decode(errors="replace")[-3000:]
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
