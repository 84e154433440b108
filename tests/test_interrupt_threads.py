"""Ctrl-C during a game day with worker processes: one line, exit 130, no warnings after it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from support.common import FIXTURES
from support.gameday import copy_project, dbt_deps

sys.path.insert(0, str(FIXTURES / "cadence"))
import cadence_data  # noqa: E402  (a name no other fixture uses)


def test_sigint_with_two_workers_prints_one_line(tmp_path):
    project = copy_project(FIXTURES / "cadence", tmp_path / "cadence")
    cadence_data.load_duckdb(str(project / "cadence.duckdb"))
    dbt_deps(project, project)
    exe = os.path.join(os.path.dirname(sys.executable), "rerun-safety")
    proc = subprocess.Popen([exe, "gameday", "--profiles-dir", ".", "--output-dir", str(tmp_path / "out"),
                             "--threads", "2"], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.time() + 120
    seen = []
    while time.time() < deadline:  # wait until the workers replay scenarios
        line = proc.stderr.readline()
        seen.append(line)
        if "scenario" in line and "reference" not in line or "isolation" in line:
            break
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (seen, err)
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("rerun-safety: scenario")]
    assert lines == ["rerun-safety: interrupted by SIGINT; sandboxes removed"], err
    assert not list((project / "target").glob("rerun_safety/report.json"))
