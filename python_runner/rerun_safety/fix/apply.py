"""--apply: the verified fixes written into the user's project, only where its files are as the game
day read them (else nothing is written)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..errors import ConfigError
from ..results import GamedayReport


def apply_fixes(report: GamedayReport, project_dir: Path) -> list[Path]:
    """Write each verified fix's file, all or nothing: refused as a whole (ConfigError) if any of them
    changed since the game day read it, or lies behind a link; every new text is written to a new
    temporary file first, then each file is renamed over in turn, the ones before put back if a later one
    fails, so a project is never left half-patched by an error."""
    from ..safe_files import open_dir, replace, write_new

    todo = []
    verified = [f for f in report.fixes if f.verified]
    shared = sorted({f.path for f in verified if sum(g.path == f.path for g in verified) > 1})
    if shared:  # each fix's text was made from the file as it was: applying one would undo the other
        raise ConfigError(f"--apply: several fixes change {', '.join(shared)}; nothing applied (apply the "
                          "patches under the output folder's fixes/ one at a time, with `git apply -3`)")
    try:
        for f in verified:
            relative = Path(f.path).relative_to(project_dir) if Path(f.path).is_absolute() else Path(f.path)
            if ".." in relative.parts:
                raise ConfigError(f"--apply: {f.path} is outside the project; nothing applied")
            folder = open_dir(project_dir, relative.parts[:-1], create=False, what="--apply: the folder")
            todo.append([folder, relative.name, f, None])
            try:
                fd = os.open(relative.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
                with os.fdopen(fd, "rb") as fh:
                    now = hashlib.sha256(fh.read()).hexdigest()
                mode = os.stat(relative.name, dir_fd=folder, follow_symlinks=False).st_mode & 0o7777
            except OSError as err:
                raise ConfigError(f"--apply: cannot read {project_dir / relative} ({err.strerror or err}: a link "
                                  "is not followed); nothing applied") from None
            if now != f.before_sha256:
                raise ConfigError(f"--apply: {f.path} changed since the game day read it; nothing applied (the "
                                  "patches are under the output folder's fixes/)")
            try:
                todo[-1][3] = write_new(folder, relative.name, f.text.encode("utf-8"), mode)
            except OSError as err:
                raise ConfigError(f"--apply: cannot write beside {project_dir / relative} ({err.strerror or err}); "
                                  "nothing applied") from None
        return _rename_all(project_dir, todo, replace)
    finally:
        for folder, name, _, tmp in todo:
            if tmp is not None:
                try:
                    os.unlink(tmp, dir_fd=folder)
                except OSError:
                    pass
            os.close(folder)


def _rename_all(project_dir: Path, todo: list, replace) -> list[Path]:
    """Each new file over its name, the old one kept under a backup name until all are in; on an error
    the ones before are put back."""
    import secrets

    done, linked = [], None
    try:
        for item in todo:
            folder, name, _, tmp = item
            backup = f".{name}.{secrets.token_hex(6)}.orig"
            os.link(name, backup, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
            linked = (folder, backup)
            replace(folder, tmp, name)
            item[3], linked = None, None
            done.append((folder, name, backup))
    except OSError as err:
        if linked is not None:
            os.unlink(linked[1], dir_fd=linked[0])
        for folder, name, backup in reversed(done):
            replace(folder, backup, name)
        raise ConfigError(f"--apply: cannot write {project_dir} ({err.strerror or err}); nothing applied") from None
    for folder, name, backup in done:
        os.unlink(backup, dir_fd=folder)
    return [project_dir / Path(*Path(item[2].path).parts) if not Path(item[2].path).is_absolute()
            else Path(item[2].path) for item in todo]
