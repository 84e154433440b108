"""The doors around the box (confine/): with the statement guard off, a Python model of the project probes
every channel a confined game day could use to reach past its sandboxes, and each one is closed by the
kernel or by construction, not by reading the project's code:
- a session of its own, no terminal (/dev/tty), stdin from /dev/null;
- no credential of the job's environment (PG*, AWS_*) in its environment or its first environment block,
  and no ancestor's environment readable;
- no TCP to a server of this machine, no Unix socket, no signal to another process, no device ioctl;
- no metadata change to a user's file (mode, times, extended attributes); /dev/shm its own;
- its answer channel carries JSON only: a pickle written into every pipe it can reach runs nothing.
Real dbt, real DuckDB files."""
from __future__ import annotations

import errno
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from support.gameday import hostile_project, run_cli, sha256_of

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock is Linux's")

_PROBE = '''
import errno, fcntl, json, os, signal, socket, struct, termios
from pathlib import Path

def attempt(fn):
    try:
        fn()
        return "allowed"
    except OSError as err:
        return err.errno

def model(dbt, session):
    dbt.config(materialized="table")
    facts = json.loads(Path(FACTS).read_text())
    out = {"sid_is_own": os.getsid(0) != facts["sid"], "tty": attempt(lambda: open("/dev/tty", "rb")),
           "stdin": os.readlink("/proc/self/fd/0")}
    out["env"] = sorted(k for k in ("AWS_SECRET_ACCESS_KEY", "PGPASSWORD", "RS_PLAIN_SETTING") if k in os.environ)
    out["first_block"] = facts["secret"] in Path("/proc/self/environ").read_text(errors="replace")
    ancestors, pid = [], os.getppid()
    while pid > 1:
        ancestors.append(attempt(lambda: Path(f"/proc/{pid}/environ").read_bytes()))
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    out["ancestor_environ"] = ancestors
    tcp = socket.socket()
    tcp.settimeout(2)
    out["tcp"] = attempt(lambda: tcp.connect(("127.0.0.1", facts["port"])))
    out["unix"] = attempt(lambda: socket.socket(socket.AF_UNIX).connect(facts["unix"]))
    out["signal"] = attempt(lambda: os.kill(facts["sleeper"], signal.SIGKILL))
    null = os.open("/dev/null", os.O_RDONLY)
    out["ioctl"] = attempt(lambda: fcntl.ioctl(null, termios.TIOCSTI, b"x"))
    user_file = facts["user_file"]
    out["chmod"] = attempt(lambda: os.chmod(user_file, 0o666))
    out["utime"] = attempt(lambda: os.utime(user_file, (0, 0)))
    out["xattr"] = attempt(lambda: os.setxattr(user_file, "user.rerun", b"x"))
    held = os.open(user_file, os.O_RDONLY)
    try:  # chattr +i: FS_IOC_GETFLAGS, then FS_IOC_SETFLAGS with FS_IMMUTABLE_FL
        flags = struct.unpack("i", fcntl.ioctl(held, 0x80086601, struct.pack("i", 0)))[0]
        out["chattr"] = attempt(lambda: fcntl.ioctl(held, 0x40086602, struct.pack("i", flags | 0x10)))
    except OSError as err:
        out["chattr"] = "no flags here: " + str(err.errno)
    os.close(held)
    out["shm"] = attempt(lambda: Path("/dev/shm/rerun_safety_probe_" + facts["tag"]).write_text("x"))
    if out:
        raise RuntimeError("PROBE" + json.dumps(out, sort_keys=True) + "EBORP")
    return dbt.source("raw", "events").df()
'''

_TAMPER = '''
import os, pickle, stat
from pathlib import Path

class Run:
    def __reduce__(self):
        return (os.system, ("touch " + MARKER,))

def model(dbt, session):
    dbt.config(materialized="table")
    payload = pickle.dumps(Run()) + b"\\n"
    for pid in ("self", str(os.getppid())):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if stat.S_ISFIFO(os.stat(fd).st_mode):
                    with open(fd, "wb") as pipe:
                        pipe.write(payload)
            except OSError:
                pass
    return dbt.source("raw", "events").df()
'''


def _with_model(tmp: Path, name: str, body: str) -> dict:
    p = hostile_project(tmp)
    for f in (p["project"] / "models").glob("events_*"):
        f.unlink()
    (p["project"] / "models" / f"{name}.py").write_text(body)
    (p["project"] / "models" / "events_merged.sql").write_text(
        "{{ config(materialized='incremental', unique_key='id', incremental_strategy='merge') }}\n"
        "select id, event_time, amount from {{ source('raw', 'events') }}\n")
    return p


def _gameday(p: dict, out: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command in a process of its own (as a user runs it): its environment is the job's."""
    return subprocess.run([str(Path(sys.executable).with_name("rerun-safety")), "gameday", "--project-dir",
                           str(p["project"]), "--profiles-dir", str(p["project"]), "--output-dir", str(out),
                           "--steps", "2", "--threads", "1", "--scenarios", "rerun"],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "RERUN_SAFETY_STATEMENT_GUARD": "off", **(env or {})})


def test_a_python_model_finds_every_door_closed(tmp_path):
    secret = "s3cr3t-" + os.urandom(6).hex()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    unix_path = str(tmp_path / "user.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(unix_path)
    unix.listen()
    sleeper = subprocess.Popen(["sleep", "300"])
    user_file = tmp_path / "userdata_file.txt"
    user_file.write_text("kept\n")
    os.chmod(user_file, 0o640)
    before = os.stat(user_file)
    tag = os.urandom(4).hex()
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"sid": os.getsid(0), "secret": secret, "port": listener.getsockname()[1],
                                 "unix": unix_path, "sleeper": sleeper.pid, "user_file": str(user_file),
                                 "tag": tag}))
    p = _with_model(tmp_path, "probe", f"FACTS = {str(facts)!r}\n" + _PROBE)
    try:
        proc = _gameday(p, tmp_path / "out", {"AWS_SECRET_ACCESS_KEY": secret, "PGPASSWORD": secret,
                                              "RS_PLAIN_SETTING": "x"})
        assert sleeper.poll() is None  # the other process lives
    finally:
        sleeper.kill()
        listener.close()
        unix.close()
    assert proc.returncode == 1, proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    text = json.dumps(report)
    messages = [s["message"] for m in report["models"] for s in m["scenarios"] if "PROBE{" in s["message"]]
    assert messages, text
    found = json.loads(messages[0][messages[0].index("PROBE{") + 5:messages[0].index("}EBORP") + 1])
    assert found["sid_is_own"] is True
    assert found["tty"] == errno.ENXIO  # no controlling terminal
    assert found["stdin"] == "/dev/null"
    assert found["env"] == []  # neither credential, nor a variable nothing references
    assert found["first_block"] is False
    assert found["ancestor_environ"] and set(found["ancestor_environ"]) == {errno.EACCES}
    assert found["tcp"] in (errno.ENETUNREACH, errno.EACCES)  # DuckDB: a network namespace with nothing in it
    assert found["unix"] == errno.EACCES  # seccomp: no Unix socket for an engine that needs none
    assert found["signal"] == errno.EPERM  # Landlock's signal scope
    assert found["ioctl"] == errno.EACCES  # Landlock's IOCTL_DEV (ENOTTY if the ioctl reached the device)
    assert (found["chmod"], found["utime"], found["xattr"], found["chattr"]) == (errno.EROFS,) * 4
    assert found["shm"] == "allowed" and not Path(f"/dev/shm/rerun_safety_probe_{tag}").exists()
    after = os.stat(user_file)
    assert (after.st_mode, after.st_mtime_ns, after.st_atime_ns) == (before.st_mode, before.st_mtime_ns,
                                                                     before.st_atime_ns)
    assert os.listxattr(user_file) == []
    assert secret not in proc.stdout + proc.stderr + text
    note = report["summary"]["notes"][-1]
    assert note.startswith("confined by the kernel (Linux Landlock ABI ") and "NOT confined" not in note, note


def test_a_pickle_in_every_pipe_it_reaches_runs_nothing(tmp_path):
    import time

    marker = tmp_path / "unpickled_by_the_command"
    p = _with_model(tmp_path, "tamper", f"MARKER = {str(marker)!r}\n" + _TAMPER)
    started = time.time() - 1
    proc = _gameday(p, tmp_path / "out")
    assert not marker.exists()
    # the answer channel held a line that is not JSON: the run ends as a crash of its confined process
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("rerun-safety: error:")]
    assert lines and "the confined process sent an answer that is not JSON" in lines[0], proc.stderr
    assert not (tmp_path / "out" / "report.json").exists()
    # the job was killed at the line: its temporary folder (dbt's Python model file in it) is gone all the same
    root = Path(os.environ.get("TMPDIR", "/tmp"), f"rerun_safety-{os.getuid()}")
    assert not [f for f in root.glob(".job_tmp_*") if f.stat().st_mtime > started], list(root.iterdir())


def test_the_profiles_variables_reach_dbt_as_its_secrets_and_the_projects_code_not_at_all(tmp_path):
    """The child reads a copy of the profile whose strings are env_var() references to the runner's own
    variables (DBT_ENV_SECRET_ for secrets, which dbt masks): a credential-shaped variable the profile names
    is not in the child's environment under its own name, so a model that renders it gets the default, and
    the notes name it; the game day itself runs on the profile as the user wrote it."""
    p = _with_model(tmp_path, "reads_env", "")
    (p["project"] / "models" / "reads_env.py").unlink()
    (p["project"] / "models" / "reads_env.sql").write_text(
        "{{ config(materialized='table') }}\n"
        "{% if execute %}{{ exceptions.raise_compiler_error('SEEN=' ~ env_var('RS_WAREHOUSE_KEY_PATH', 'absent')) }}"
        "{% endif %}\n"
        "select 1 as x\n")
    profiles = p["project"] / "profiles.yml"
    path = str(p["user"] / "prod.duckdb")
    text = profiles.read_text()
    assert f"path: {path}" in text
    profiles.write_text(text.replace(f"path: {path}", "path: \"{{ env_var('RS_WAREHOUSE_KEY_PATH') }}\""))
    root = Path(os.environ.get("TMPDIR", "/tmp"), f"rerun_safety-{os.getuid()}")
    others = set(root.glob(".profile_*"))  # another game day's on this machine, running now
    proc_started = time.time() - 1
    proc = _gameday(p, tmp_path / "out", {"RS_WAREHOUSE_KEY_PATH": path})
    assert proc.returncode == 1, proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    models = {m["name"]: m for m in report["models"]}
    assert models["events_merged"]["verdict"] == "safe"  # the profile's path rendered in the copy
    text = json.dumps(models["reads_env"])
    assert "SEEN=absent" in text and path not in text, text
    assert any(n.startswith("environment: the project's code names") and n.endswith(": RS_WAREHOUSE_KEY_PATH")
               for n in report["summary"]["notes"]), report["summary"]["notes"]
    # the copy of the profile is gone with the run (another game day's running beside it may hold its own)
    left = [f for f in root.glob(".profile_*") if f not in others]
    assert not [f for f in left if f.stat().st_mtime >= proc_started], left
