"""The command's own writes never follow a link the project ships (safe_files.py): the reports' default
folder, a planted temporary name, fixes/, and --apply's files; --apply is all or nothing on an error.
Real files; the report and fixes are the runner's own result types."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from rerun_safety.errors import ConfigError
from rerun_safety.fix.apply import apply_fixes
from rerun_safety.report import write_reports
from rerun_safety.results import Fix, GamedayReport


def _report(fixes=()) -> GamedayReport:
    return GamedayReport(project="p", adapter="duckdb", target="dev", scenarios=("reference",), steps=1,
                         cutoffs=(), models=(), wall_time=0.0, dbt_invocations=0, model_time=0.0,
                         started_at="2026-12-07T00:00:00", fixes=tuple(fixes))


def test_a_linked_target_folder_is_refused_and_the_folder_behind_it_untouched(tmp_path):
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    (elsewhere / "fixes").mkdir(parents=True)
    (elsewhere / "fixes" / "keep.patch").write_text("mine\n")
    (project / "target").symlink_to(elsewhere)
    with pytest.raises(ConfigError, match=r"refusing to write into .*target: it is a link"):
        write_reports(_report(), project / "target" / "rerun_safety", project)
    assert sorted(p.name for p in elsewhere.rglob("*")) == ["fixes", "keep.patch"]
    # named by the user, a link is theirs to choose
    paths = write_reports(_report(), elsewhere, project)
    assert paths["json"] == elsewhere / "report.json" and (elsewhere / "report.json").is_file()


def test_a_planted_link_at_a_report_or_patch_name_is_replaced_not_written_through(tmp_path):
    project, victim = tmp_path / "project", tmp_path / "victim.txt"
    victim.write_text("kept\n")
    out = project / "target" / "rerun_safety"
    (out / "fixes").mkdir(parents=True)
    (out / "report.json").symlink_to(victim)
    (out / f".report.json.{os.getpid()}.tmp").symlink_to(victim)  # the old temporary name
    (out / "fixes" / "m.patch").symlink_to(victim)
    fix = Fix(model="m", verdict="loss", verified=True, path="models/m.sql", patch="--- a\n+++ b\n", text="x")
    write_reports(_report([fix]), out, project)
    assert victim.read_text() == "kept\n"
    assert not (out / "report.json").is_symlink() and (out / "report.json").read_text().startswith("{")
    assert (out / "fixes" / "m.patch").read_text() == "--- a\n+++ b\n"


def _fix(project: Path, name: str, new: str) -> Fix:
    path = project / "models" / name
    return Fix(model=name, verdict="loss", verified=True, path=f"models/{name}", patch="p",
               before_sha256=hashlib.sha256(path.read_bytes()).hexdigest(), text=new)


def test_apply_refuses_a_linked_file_and_writes_nothing(tmp_path):
    project, victim = tmp_path / "project", tmp_path / "victim.sql"
    (project / "models").mkdir(parents=True)
    victim.write_text("select 1\n")
    (project / "models" / "a.sql").write_text("select a\n")
    (project / "models" / "b.sql").symlink_to(victim)
    fixes = [_fix(project, "a.sql", "select a2\n"), _fix(project, "b.sql", "select b2\n")]
    with pytest.raises(ConfigError, match="a link is not followed"):
        apply_fixes(_report(fixes), project)
    assert victim.read_text() == "select 1\n" and (project / "models" / "a.sql").read_text() == "select a\n"
    assert sorted(p.name for p in (project / "models").iterdir()) == ["a.sql", "b.sql"]  # no temporary left


def test_apply_puts_every_file_back_when_a_later_rename_fails(tmp_path, monkeypatch):
    from rerun_safety import safe_files

    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    for name in ("a.sql", "b.sql", "c.sql"):
        (project / "models" / name).write_text(f"select {name[0]}\n")
    fixes = [_fix(project, n, f"select {n[0]}2\n") for n in ("a.sql", "b.sql", "c.sql")]
    real, calls = safe_files.replace, []

    def failing(dir_fd, tmp, name):
        calls.append(name)
        if name == "c.sql" and tmp.endswith(".tmp"):
            raise OSError(28, "No space left on device")
        real(dir_fd, tmp, name)

    monkeypatch.setattr(safe_files, "replace", failing)
    with pytest.raises(ConfigError, match="No space left on device.*nothing applied"):
        apply_fixes(_report(fixes), project)
    assert {p.name: p.read_text() for p in (project / "models").iterdir()} == {
        "a.sql": "select a\n", "b.sql": "select b\n", "c.sql": "select c\n"}
    monkeypatch.setattr(safe_files, "replace", real)
    written = apply_fixes(_report(fixes), project)
    assert [p.name for p in written] == ["a.sql", "b.sql", "c.sql"]
    assert {p.name: p.read_text() for p in (project / "models").iterdir()} == {
        "a.sql": "select a2\n", "b.sql": "select b2\n", "c.sql": "select c2\n"}


@pytest.mark.parametrize("linked", ["target", "target/rerun_safety_lint"])
def test_the_lints_folder_is_never_one_the_project_links_elsewhere(tmp_path, linked):
    """The confined lint may write its dbt state under target/rerun_safety_lint: where the project ships
    that (or target/) as a link, the lint works in a folder of its own instead of writing where it points."""
    from rerun_safety.lint.compile import lint_session_dir

    project, elsewhere, fallback = tmp_path / "project", tmp_path / "elsewhere", tmp_path / "work"
    project.mkdir()
    elsewhere.mkdir()
    (project / linked).parent.mkdir(parents=True, exist_ok=True)
    (project / linked).symlink_to(elsewhere)
    assert lint_session_dir(project, fallback) == fallback / "session"
    assert lint_session_dir(project, None) is None
    assert list(elsewhere.iterdir()) == []
    plain = tmp_path / "plain"
    plain.mkdir()
    assert lint_session_dir(plain, fallback) == plain / "target" / "rerun_safety_lint"
    assert (plain / "target" / "rerun_safety_lint").is_dir()


_KILLED_APPLY = """
import hashlib, os, signal, sys
from pathlib import Path
from rerun_safety.fix.apply import apply_fixes
from rerun_safety.results import Fix, GamedayReport

project, at = Path(sys.argv[1]), int(sys.argv[2])
fixes = [Fix(model=n, verdict="loss", verified=True, path=f"models/{n}", patch="p", text=f"select {n[0]}2\\n",
             before_sha256=hashlib.sha256((project / "models" / n).read_bytes()).hexdigest())
         for n in ("a.sql", "b.sql", "c.sql")]
report = GamedayReport(project="p", adapter="duckdb", target="dev", scenarios=("reference",), steps=1, cutoffs=(),
                       models=(), wall_time=0.0, dbt_invocations=0, model_time=0.0, started_at="x", fixes=tuple(fixes))
count = [0]

def step(fn, writes=lambda *a, **k: True):
    def wrapped(*args, **kwargs):
        if writes(*args, **kwargs):
            count[0] += 1
            if count[0] == at:
                os.kill(os.getpid(), signal.SIGKILL)
        return fn(*args, **kwargs)
    return wrapped

os.open = step(os.open, lambda path, flags, *a, **k: bool(flags & os.O_CREAT))
os.link, os.replace, os.unlink = step(os.link), step(os.replace), step(os.unlink)
apply_fixes(report, project)
print("finished", count[0])
"""


def test_a_kill_at_any_step_of_apply_leaves_the_old_files_or_the_new_ones(tmp_path):
    """SIGKILL before each file-system step of --apply in turn (journal, temporary files, backups, renames,
    clean-up): after the next command's recover() the project holds either every old file or every new one,
    and nothing else (no temporary, backup or journal)."""
    import subprocess
    import sys

    from rerun_safety.fix.apply import recover

    old = {n: f"select {n[0]}\n" for n in ("a.sql", "b.sql", "c.sql")}
    new = {n: f"select {n[0]}2\n" for n in old}
    seen, at = [], 1
    while True:
        project = tmp_path / f"p{at}"
        (project / "models").mkdir(parents=True)
        for name, text in old.items():
            (project / "models" / name).write_text(text)
        proc = subprocess.run([sys.executable, "-c", _KILLED_APPLY, str(project), str(at)], capture_output=True,
                              text=True, timeout=60)
        if proc.returncode == 0:
            assert proc.stdout.startswith("finished"), proc.stdout
            break
        assert proc.returncode == -9, proc.stderr
        recover(project)
        files = {p.name: p.read_text() for p in (project / "models").iterdir()}
        assert files in (old, new), (at, files)
        assert [p.name for p in project.iterdir()] == ["models"], at  # no journal left
        seen.append("new" if files == new else "old")
        at += 1
    steps = int(proc.stdout.split()[1])
    assert len(seen) == steps >= 12  # every step was killed once
    assert seen[0] == "old" and seen[-1] == "new" and seen == sorted(seen, key=["old", "new"].index)
    assert {p.name: p.read_text() for p in (project / "models").iterdir()} == new
