"""What Landlock cannot express, by the kernel's namespaces: the confined process enters a user and mount
namespace of its own (unprivileged: no setuid helper), where every mount but the writable folders is
remounted read-only, so that no file outside them can change its mode, owner, times, extended attributes
or flags (chmod, chown, utimes, setxattr, chattr: EROFS); `/dev/shm` becomes a tmpfs of its own (its
POSIX semaphores work, the machine's shared memory is out of reach). `network=False` adds a network
namespace with nothing in it (DuckDB needs no network; a Spark session only its own loopback): no TCP, UDP
or abstract socket leaves it.

enter() needs a process with one thread (the kernel refuses a user namespace to a threaded one): the
confined child calls it first thing, lock_down() once it knows its job."""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21
# a mount's flags that a remount inside a user namespace must keep (the kernel locks them)
_KEPT = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC, "noatime": _MS_NOATIME,
         "nodiratime": _MS_NODIRATIME, "relatime": _MS_RELATIME}


_LIBC = ctypes.CDLL(None, use_errno=True)


class NamespaceError(OSError):
    """The kernel refused a namespace step (user namespaces off, a threaded process, ...)."""


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise NamespaceError(errno, f"{what}: {os.strerror(errno)}")


def _mount_points() -> list[tuple[str, list[str]]]:
    """(mount point, its options) of this mount namespace, in mount order."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            # mountinfo escapes space, tab, newline and backslash as octal
            point = fields[4].encode().decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")
            out.append((point, fields[5].split(",")))
    return out


def beneath(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def enter() -> None:
    """Enter a user and mount namespace of this process's own, with a tmpfs of its own on /dev/shm: the
    first step, before anything creates a POSIX semaphore (dbt's imports do). Raises NamespaceError where
    the kernel refuses."""
    uid, gid = os.getuid(), os.getgid()
    _check(_LIBC.unshare(_CLONE_NEWUSER | _CLONE_NEWNS), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        try:
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        except OSError as err:
            raise NamespaceError(err.errno, f"/proc/self/{name}: {err.strerror}") from None
    _check(_LIBC.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    _check(_LIBC.mount(b"tmpfs", b"/dev/shm", b"tmpfs", _MS_NOSUID | _MS_NODEV, b"mode=1777,size=64m"),
           "mount tmpfs /dev/shm")


def nest() -> None:
    """In a process the fork server forked (after enter() in the server): a mount namespace of its own
    (its lock_down() changes no other job's mounts) with a `/dev/shm` of its own (no job meets another's
    semaphores or files there)."""
    _check(_LIBC.unshare(_CLONE_NEWNS), "unshare the mounts")
    _check(_LIBC.mount(b"tmpfs", b"/dev/shm", b"tmpfs", _MS_NOSUID | _MS_NODEV, b"mode=1777,size=64m"),
           "mount tmpfs /dev/shm")


def _loopback_up() -> None:
    """Bring up `lo` in this (new) network namespace: its processes reach each other over 127.0.0.1, and
    nothing else (a namespace of its own has no other interface, no route out)."""
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            request = struct.pack("16sh14x", b"lo", 0)
            flags = struct.unpack("16sh14x", fcntl.ioctl(sock.fileno(), siocgifflags, request))[1]
            fcntl.ioctl(sock.fileno(), siocsifflags, struct.pack("16sh14x", b"lo", flags | iff_up))
        except OSError as err:
            raise NamespaceError(err.errno, f"bring up lo: {err.strerror}") from None


def lock_down(writable: list[Path], network: bool = True, loopback: bool = False) -> None:
    """After enter(): only the folders of `writable` (and /dev/shm) stay on writable mounts; without
    `network`, a network namespace with nothing in it (`loopback`: but its own 127.0.0.1, where an engine's
    processes talk to each other: a Spark session's JVM and its Python gateway)."""
    if not network:
        _check(_LIBC.unshare(_CLONE_NEWNET), "unshare the network")
        if loopback:
            _loopback_up()
    folders = []
    for path in writable:
        real = os.path.realpath(path)
        if os.path.exists(real) and not beneath(real, folders):
            _check(_LIBC.mount(real.encode(), real.encode(), None, _MS_BIND | _MS_REC, None), f"bind {real}")
            folders.append(real)
    folders.append("/dev/shm")
    for point, options in _mount_points():
        if beneath(point, folders):
            continue
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
        for option in options:
            flags |= _KEPT.get(option, 0)
        if _LIBC.mount(None, point.encode(), None, flags, None) != 0:
            errno = ctypes.get_errno()
            if errno == 2 or not os.path.exists(point):  # a mount point hidden by another mount
                continue
            raise NamespaceError(errno, f"remount {point} read-only: {os.strerror(errno)}")
