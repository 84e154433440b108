"""The command's own writes into folders a project ships (its reports under target/, --apply's fixes): never
through a link the project put there. Folders below a trusted one are opened one component at a time
with O_NOFOLLOW (a link is refused in one line); a file is written to a new temporary name (O_EXCL |
O_NOFOLLOW: nothing planted there is followed or reused) and renamed over its name within the same
opened folder, which replaces a link at that name instead of writing through it."""
from __future__ import annotations

import errno as errnos
import os
import secrets
from pathlib import Path

from .errors import ConfigError

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def open_dir(base: Path | int, parts: tuple[str, ...] = (), create: bool = True, what: str = "the folder") -> int:
    """A descriptor of `base` (a trusted path, created if missing, or an open folder's descriptor) /
    parts, each part a real folder (created if missing), never a link. ConfigError where one is a link."""
    if isinstance(base, int):
        fd = os.dup(base)
    else:
        try:
            if create:
                Path(base).mkdir(parents=True, exist_ok=True)
            fd = os.open(base, _DIR)
        except OSError as err:
            raise ConfigError(f"cannot create {what} {base}: {err.strerror or err}") from None
    where = str(base) if not isinstance(base, int) else "."
    for part in parts:
        where = os.path.join(where, part)
        try:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            new = os.open(part, _DIR | os.O_NOFOLLOW, dir_fd=fd)
        except OSError as err:
            os.close(fd)
            if err.errno in (errnos.ELOOP, errnos.ENOTDIR):
                raise ConfigError(f"refusing to write into {where}: it is a link or not a folder (name the "
                                  "output folder with --output-dir to write elsewhere)") from None
            raise ConfigError(f"cannot create {what} {where}: {err.strerror or err}") from None
        os.close(fd)
        fd = new
    return fd


def write_new(dir_fd: int, name: str, data: bytes, mode: int = 0o644) -> str:
    """Write `data` to a new temporary file in the folder; returns its name (rename it with replace())."""
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    return tmp


def replace(dir_fd: int, tmp: str, name: str) -> None:
    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def write_file(dir_fd: int, name: str, text: str, where: str) -> None:
    """`name` in the folder holds `text` (UTF-8), written whole or not at all."""
    tmp = None
    try:
        tmp = write_new(dir_fd, name, text.encode("utf-8"))
        replace(dir_fd, tmp, name)
    except OSError as err:
        if tmp is not None:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
        raise ConfigError(f"cannot write {where}: {err.strerror or err}") from None
