"""The work root: private folders and sandbox copies, a root owned by someone else refused, an unwritable
output folder found before any work, a run that cannot connect leaving nothing, half-made folders of dead runs
swept, and kept sandboxes surviving other game days for a day. Real DuckDB files, a real PostgreSQL."""
from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest


from support.reliability import CHEAP, PREFIX, payments_target, phase, spawn_gameday, work_root


def _modes(root: Path) -> dict[str, str]:
    """Permission bits of every entry under `root`, as 'dir 0700' / 'file 0600'."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            try:
                info = path.lstat()
            except OSError:
                continue  # removed while we looked
            kind = "dir" if stat.S_ISDIR(info.st_mode) else "file"
            out[str(path.relative_to(root))] = f"{kind} {stat.S_IMODE(info.st_mode):04o}"
    return out


def test_work_root_and_sandbox_copies_are_private(tmp_path):
    target = payments_target("duckdb", tmp_path / "proj")
    run = tmp_path / "run"
    root = work_root(run)
    root.mkdir(parents=True, mode=0o755)
    root.chmod(0o755)  # ours, but open to others: tightened
    proc = spawn_gameday(target, run, "--steps", "2", "--scenarios", "replay,rerun", "--threads", "2")
    seen: dict[str, str] = {}
    while proc.poll() is None:  # sample the tree while the run lives
        if phase(run) in ("snapshot", "reference", "scenario"):
            seen.update({k: v for k, v in _modes(root).items() if k.startswith(PREFIX)})
        time.sleep(0.02)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    copies = {k: v for k, v in seen.items() if k.endswith(".duckdb")}
    assert any("_snapshot" in k or "/snapshot/" in k for k in copies) and any("/replay/" in k for k in copies), copies
    assert set(copies.values()) == {"file 0600"}, copies
    wrong = {k: v for k, v in seen.items() if v not in ("dir 0700", "file 0600")}
    assert wrong == {}, wrong
    assert len(seen) >= 10


def test_work_root_owned_by_someone_else_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user")
    target = payments_target("duckdb", tmp_path / "proj")
    run = tmp_path / "run"
    root = work_root(run)
    root.mkdir(parents=True)
    os.chown(root, 65534, 65534)
    proc = spawn_gameday(target, run, *CHEAP)
    _, err = proc.communicate(timeout=120)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"refusing to use the work root {root}: it belongs to another user (uid 65534)" in lines[0]
    assert list(root.iterdir()) == [] and not proc.out_dir.exists()


def _made(tmp: Path) -> list[str]:
    """What a game day with TMPDIR=tmp left there, besides its stdout files and an empty work root."""
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*")
                  if not p.name.startswith("stdout_") and p != work_root(tmp))


def test_unwritable_output_dir_is_found_before_any_work(tmp_path):
    target = payments_target("duckdb", tmp_path / "proj")
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n")
    run = tmp_path / "run"
    proc = spawn_gameday(target, run, *CHEAP, out=blocker / "reports")
    _, err = proc.communicate(timeout=120)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 2, err
    assert len(lines) == 1 and f"cannot write into the output directory {blocker / 'reports'}" in lines[0], err
    assert _made(run) == []  # no parse, no snapshot: nothing was done


def test_run_that_cannot_connect_leaves_no_folder(tmp_path, pg_server):
    from support.common import free_port


    target = payments_target("postgres", tmp_path / "proj", server=pg_server)
    from support.common import write_profiles
    write_profiles(target.profiles, "payments", dict(target.output, port=free_port()), target="local")
    run = tmp_path / "run"
    proc = spawn_gameday(target, run, *CHEAP)
    _, err = proc.communicate(timeout=120)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 2, err
    assert len(lines) == 1 and "cannot open a maintenance connection" in lines[0], err
    assert _made(run) == []


def test_sweep_removes_half_made_run_folders_of_dead_runs(tmp_path):
    """A run killed between creating its run folder and naming it leaves `.rerun_safety_new_*`: the next
    sweep removes an old one, and leaves a young one (a live run may still be making it)."""
    from rerun_safety.warehouse.engines import engine_for
    from rerun_safety.warehouse.base import NEW_PREFIX


    target = payments_target("duckdb", tmp_path / "proj")
    root = tmp_path / "work"
    old, young = root / f"{NEW_PREFIX}dead", root / f"{NEW_PREFIX}alive"
    for folder in (old, young):
        folder.mkdir(parents=True)
        (folder / "lock").write_text("")
    os.utime(old, (time.time() - 300, time.time() - 300))
    engine = engine_for(target.output, root, "sweep_half")
    try:
        assert engine.sweep() == 1
    finally:
        engine.cleanup()
        engine.close()
    assert not old.exists() and young.exists()


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_kept_sandboxes_survive_other_game_days_for_a_day(tmp_path, request, engine):
    import time


    from support.gameday import load_report
    from rerun_safety.warehouse.engines import engine_for
    from rerun_safety.warehouse.base import KEPT_MARKER
    from support.reliability import PREFIX, leftover_databases, spawn_gameday, work_root


    server = request.getfixturevalue("pg_server") if engine == "postgres" else None
    target = payments_target(engine, tmp_path / "proj", server=server)
    # two scenarios in two workers: sandboxes this process made (reference, first build) and theirs
    proc = spawn_gameday(target, tmp_path, "--steps", "2", "--scenarios", "replay,rerun", "--threads", "2",
                         "--select", "payments_merged", "--keep-sandboxes")
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    note = next(n for n in load_report(proc.out_dir)["summary"]["notes"] if n.startswith("--keep-sandboxes"))
    kept = note.split("after that): ", 1)[1].split(", ")
    run_dirs = list(work_root(tmp_path).glob(f"{PREFIX}*"))
    assert len(run_dirs) == 1 and (run_dirs[0] / KEPT_MARKER).exists()
    run_id = run_dirs[0].name[len(PREFIX):]


    def present() -> list[str]:
        if engine == "postgres":
            return [d for d in leftover_databases(server) if d.startswith(f"{PREFIX}{run_id}_")]
        return sorted(str(p) for p in run_dirs[0].rglob("*.duckdb"))


    before = present()
    assert len(before) == 4 and sorted(kept) == before, (note, before)  # the workers' sandboxes named too
    # the game day of another job: its sweep leaves them
    other = engine_for(target.output, work_root(tmp_path), "otherjob01")
    try:
        assert other.sweep() == 0
    finally:
        other.cleanup()
        other.close()
    assert present() == before
    # a day later the next sweep removes them
    marker = run_dirs[0] / KEPT_MARKER
    marker.write_text(marker.read_text().replace('"until": ', '"until": -'))
    if engine == "postgres":
        conn = server.connect()
        with conn.cursor() as cur:
            for name in before:
                cur.execute(f'comment on database "{name}" is %s',
                            [f"rerun_safety: kept (--keep-sandboxes) until unix time {int(time.time()) - 1}"])
        conn.close()
    later = engine_for(target.output, work_root(tmp_path), "nextday01")
    try:
        assert later.sweep() >= 1
    finally:
        later.cleanup()
        later.close()
    assert present() == [] and not run_dirs[0].exists()
