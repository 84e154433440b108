"""--apply: the verified fixes written into the user's project, only where its files are as the game
day read them (else nothing is written)."""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from ..errors import ConfigError
from ..results import GamedayReport


JOURNAL = ".rerun_safety_apply.journal"


def apply_fixes(report: GamedayReport, project_dir: Path) -> list[Path]:
    """Write each verified fix's file, all or nothing: refused as a whole (ConfigError) if any of them
    changed since the game day read it, or lies behind a link. A journal in the project (JOURNAL) names
    every temporary and backup file before any is made; every new text is written to its temporary file,
    each old file linked to its backup, then each file is renamed over in turn, and the journal marked
    done before the backups go. An error puts the old files back; a kill leaves the journal, and the next
    command in the project (recover()) puts the old files back too, unless the journal was marked done."""
    from ..safe_files import open_dir

    recover(project_dir)
    # a declaration is for review, and so is a local package's file outside the project folder (its own folder's)
    verified = [f for f in report.fixes if f.verified and not f.declaration and not outside(f)]
    shared = sorted({f.path for f in verified if sum(g.path == f.path for g in verified) > 1})
    if shared:  # each fix's text was made from the file as it was: applying one would undo the other
        raise ConfigError(f"--apply: several fixes change {', '.join(shared)}; nothing applied (apply the "
                          "patches under the output folder's fixes/ one at a time, with `git apply -3`)")
    todo = []
    try:
        for f in verified:
            todo.append(_planned(project_dir, f))
        if not todo:
            return []
        root = open_dir(project_dir, (), create=False, what="--apply: the project")
        try:
            _journal(root, todo, "open")
            try:
                _write_all(project_dir, todo)
                _rename_all(project_dir, todo)
            except BaseException:
                _undo(todo)
                os.unlink(JOURNAL, dir_fd=root)
                raise
            _journal(root, todo, "done")
            for item in todo:
                _unlink(item["fd"], item["backup"])
            os.unlink(JOURNAL, dir_fd=root)
        finally:
            os.close(root)
        return [project_dir / Path(*Path(item["fix"].path).parts) if not Path(item["fix"].path).is_absolute()
                else Path(item["fix"].path) for item in todo]
    finally:
        for item in todo:
            os.close(item["fd"])


def outside(f) -> bool:
    """The fix changes a file outside the project folder (a local package's, `local: ../`)."""
    return ".." in Path(f.path).parts


def _planned(project_dir: Path, f) -> dict:
    """One fix's file, opened and checked unchanged since the game day read it (ConfigError else): its
    folder's fd, its name, mode, and the names of its temporary and backup files."""
    import secrets

    from ..safe_files import open_dir

    relative = Path(f.path).relative_to(project_dir) if Path(f.path).is_absolute() else Path(f.path)
    if ".." in relative.parts:
        raise ConfigError(f"--apply: {f.path} is outside the project; nothing applied")
    folder = open_dir(project_dir, relative.parts[:-1], create=False, what="--apply: the folder")
    token = secrets.token_hex(6)
    item = {"fd": folder, "dir": list(relative.parts[:-1]), "name": relative.name, "fix": f,
            "tmp": f".{relative.name}.{token}.tmp", "backup": f".{relative.name}.{token}.orig"}
    try:
        try:
            fd = os.open(relative.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
            with os.fdopen(fd, "rb") as fh:
                now = hashlib.sha256(fh.read()).hexdigest()
            item["mode"] = os.stat(relative.name, dir_fd=folder, follow_symlinks=False).st_mode & 0o7777
        except OSError as err:
            raise ConfigError(f"--apply: cannot read {project_dir / relative} ({err.strerror or err}: a link "
                              "is not followed); nothing applied") from None
        if now != f.before_sha256:
            raise ConfigError(f"--apply: {f.path} changed since the game day read it; nothing applied (the "
                              "patches are under the output folder's fixes/)")
    except BaseException:
        os.close(folder)
        raise
    return item


def _journal(root: int, todo: list, state: str) -> None:
    import json

    from ..safe_files import replace, write_new

    doc = {"state": state, "files": [{k: item[k] for k in ("dir", "name", "tmp", "backup")} for item in todo]}
    replace(root, write_new(root, JOURNAL, json.dumps(doc).encode(), 0o600), JOURNAL)


def _write_all(project_dir: Path, todo: list) -> None:
    for item in todo:
        fd = None
        try:
            fd = os.open(item["tmp"], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         item["mode"], dir_fd=item["fd"])
            with os.fdopen(fd, "wb") as fh:
                fd = None
                fh.write(item["fix"].text.encode("utf-8"))
        except OSError as err:
            if fd is not None:
                os.close(fd)
            raise ConfigError(f"--apply: cannot write beside {project_dir / item['name']} ({err.strerror or err}); "
                              "nothing applied") from None


def _rename_all(project_dir: Path, todo: list) -> None:
    """Each old file linked to its backup name, then each new file renamed over its name."""
    from ..safe_files import replace

    try:
        for item in todo:
            os.link(item["name"], item["backup"], src_dir_fd=item["fd"], dst_dir_fd=item["fd"],
                    follow_symlinks=False)
        for item in todo:
            replace(item["fd"], item["tmp"], item["name"])
    except OSError as err:
        raise ConfigError(f"--apply: cannot write {project_dir} ({err.strerror or err}); nothing applied") from None


def _unlink(folder: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=folder)
    except FileNotFoundError:
        pass


def _undo(todo: list) -> None:
    """The old files back where a backup of them was made; no temporary file left."""
    from ..safe_files import replace

    for item in reversed(todo):
        folder = item["fd"]
        try:
            os.stat(item["backup"], dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            replace(folder, item["backup"], item["name"])  # (the same file still: nothing to rename)
            _unlink(folder, item["backup"])
        _unlink(folder, item["tmp"])


def recover(project_dir: Path) -> int:
    """Finish an --apply that a kill stopped (its journal in the project): the old files back unless it was
    marked done, then no temporary or backup file left. The number of files put back."""
    import json

    from ..safe_files import open_dir

    try:
        root = os.open(project_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        for name in os.listdir(root):  # a journal's own temporary file (a kill before it was in place)
            if re.fullmatch(r"\.\.rerun_safety_apply\.journal\.[0-9a-f]{12}\.tmp", name):
                _unlink(root, name)
        try:
            fd = os.open(JOURNAL, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root)
        except FileNotFoundError:
            return 0
        except OSError as err:
            raise ConfigError(f"cannot read {project_dir / JOURNAL} (an --apply's journal): {err.strerror}") from None
        with os.fdopen(fd, "rb") as fh:
            try:
                doc = json.loads(fh.read())
                files = [(list(map(str, e["dir"])), str(e["name"]), str(e["tmp"]), str(e["backup"]))
                         for e in doc["files"]]
                done = doc["state"] == "done"
            except (ValueError, KeyError, TypeError):
                raise ConfigError(f"{project_dir / JOURNAL} is not an --apply journal: look at it, then remove "
                                  "it") from None
        restored, todo = 0, []
        try:
            for parts, name, tmp, backup in files:
                if any(p in ("", ".", "..") or "/" in p for p in [*parts, name, tmp, backup]) or not (
                        tmp.startswith(f".{name}.") and backup.startswith(f".{name}.")):
                    raise ConfigError(f"{project_dir / JOURNAL} names a file outside its folder: look at it, then "
                                      "remove it")
                todo.append({"fd": open_dir(root, tuple(parts), create=False, what="the folder"), "name": name,
                             "tmp": tmp, "backup": backup})
            if done:
                for item in todo:
                    _unlink(item["fd"], item["backup"])
                    _unlink(item["fd"], item["tmp"])
            else:
                for item in todo:
                    try:
                        same = os.path.samestat(os.stat(item["backup"], dir_fd=item["fd"], follow_symlinks=False),
                                                os.stat(item["name"], dir_fd=item["fd"], follow_symlinks=False))
                        restored += not same
                    except FileNotFoundError:
                        pass
                _undo(todo)
            os.unlink(JOURNAL, dir_fd=root)
        finally:
            for item in todo:
                os.close(item["fd"])
        return restored
    finally:
        os.close(root)
