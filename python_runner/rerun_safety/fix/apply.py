"""--apply: the verified fixes written into the user's project, only where its files are as the game
day read them (else nothing is written)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..errors import ConfigError
from ..results import GamedayReport


def apply_fixes(report: GamedayReport, project_dir: Path) -> list[Path]:
    """Write each verified fix's file; refused as a whole (ConfigError) if any of them changed since the
    game day read it, so a project is never left half-patched."""
    todo = []
    verified = [f for f in report.fixes if f.verified]
    shared = sorted({f.path for f in verified if sum(g.path == f.path for g in verified) > 1})
    if shared:  # each fix's text was made from the file as it was: applying one would undo the other
        raise ConfigError(f"--apply: several fixes change {', '.join(shared)}; nothing applied (apply the "
                          "patches under the output folder's fixes/ one at a time, with `git apply -3`)")
    for f in verified:
        path = Path(f.path) if Path(f.path).is_absolute() else project_dir / f.path
        try:
            now = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as err:
            raise ConfigError(f"--apply: cannot read {path} ({err.strerror or err}); nothing applied") from None
        if now != f.before_sha256:
            raise ConfigError(f"--apply: {f.path} changed since the game day read it; nothing applied (the "
                              "patches are under the output folder's fixes/)")
        todo.append((path, f.text))
    written = []
    for path, text in todo:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(text, encoding="utf-8", newline="")
            os.chmod(tmp, path.stat().st_mode & 0o7777)
            os.replace(tmp, path)
        except OSError as err:
            tmp.unlink(missing_ok=True)
            raise ConfigError(f"--apply: cannot write {path} ({err.strerror or err}); applied before it: "
                              + (", ".join(str(p) for p in written) or "nothing")) from None
        written.append(path)
    return written
