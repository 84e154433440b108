"""Linux Landlock, through its three system calls: a process gives up the right to write anywhere but
beneath a few folders, to use a device's ioctls (a terminal's TIOCSTI), to bind or connect TCP ports but
the warehouse's, to reach abstract Unix sockets and to signal processes outside its own domain, for itself
and every process it starts afterwards, and can never take it back. Reading is left as it was. No other
module calls the kernel for this."""
from __future__ import annotations

import ctypes
import os
import platform
from pathlib import Path

# the system call numbers are the same on every Linux architecture (the generic table)
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2
_PR_SET_NO_NEW_PRIVS = 38

# access rights (include/uapi/linux/landlock.h); reading and executing are not handled, so stay allowed
WRITE_FILE = 1 << 1
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2: link or rename across folders
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5: ioctls on character and block devices (a terminal's TIOCSTI)
# network rights (ABI 4) and scopes (ABI 6)
BIND_TCP = 1 << 0
CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

_WRITES_V1 = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO
              | MAKE_BLOCK | MAKE_SYM)
_FILE_RIGHTS = WRITE_FILE | TRUNCATE  # the write rights a rule on a single file may hold


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _NetPortAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class LandlockError(OSError):
    """The kernel refused a step of the confinement."""


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """The Landlock ABI this kernel offers; 0 where there is none (another OS, an old kernel, Landlock
    left out of the kernel's LSM list, or a seccomp filter that refuses the call)."""
    if platform.system() != "Linux":
        return 0
    try:
        version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def unavailable_reason() -> str | None:
    """Why this process cannot be confined (None: it can)."""
    if platform.system() != "Linux":
        return f"the kernel's Landlock confinement exists on Linux only (this is {platform.system()})"
    if abi_version() < 1:
        errno = ctypes.get_errno()
        return ("this Linux kernel does not offer Landlock (landlock_create_ruleset: "
                f"{os.strerror(errno) if errno else 'not available'}; it needs Linux 5.13+ with landlock in the "
                "kernel's lsm= list)")
    return None


def handled_rights(abi: int) -> int:
    rights = _WRITES_V1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def _attr_size(abi: int) -> int:
    """The ruleset attribute as this ABI knows it: fs (1), net (4), scoped (6)."""
    return 8 if abi < 4 else 16 if abi < 6 else 24


def _add_rule(ruleset: int, kind: int, rule, what: str) -> None:
    if _libc().syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(kind), ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
        errno = ctypes.get_errno()
        raise LandlockError(errno, f"landlock_add_rule {what}: {os.strerror(errno)}")


def _restrict_self(attr, abi: int, rules=None) -> None:
    """Make a ruleset of `attr`, add its rules (`rules(ruleset)`), and enforce it on this thread."""
    libc = _libc()
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(_attr_size(abi)), ctypes.c_uint32(0))
    if ruleset < 0:
        errno = ctypes.get_errno()
        raise LandlockError(errno, f"landlock_create_ruleset: {os.strerror(errno)}")
    try:
        if rules is not None:
            rules(ruleset)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            errno = ctypes.get_errno()
            raise LandlockError(errno, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(errno)}")
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            errno = ctypes.get_errno()
            raise LandlockError(errno, f"landlock_restrict_self: {os.strerror(errno)}")
    finally:
        os.close(ruleset)


def restrict_scopes() -> None:
    """Landlock's scopes alone (ABI 6): no signal to, and no abstract Unix socket of, a process outside
    this domain; no file or network right handled (so that this process may still mount)."""
    _restrict_self(_RulesetAttr(0, 0, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL), 6)


def restrict_writes(writable: list[Path]) -> int:
    """restrict() with the file rights only (the network and scopes left as they are)."""
    return restrict(writable, tcp_ports=None, scoped=False)


def restrict(writable: list[Path], tcp_ports: tuple[int, ...] | None = (), scoped: bool = True) -> int:
    """From now on this thread, the threads it starts and every process they start may write (create,
    change, truncate, remove, rename) only beneath the folders of `writable` (and into the files of it
    that are not folders), use no device's ioctls (ABI 5), bind no TCP port and connect only to
    `tcp_ports` (ABI 4; None: TCP left as it is), and (`scoped`, ABI 6) neither reach an abstract Unix
    socket nor signal a process outside this domain. Returns the ABI used. Raises LandlockError when the
    kernel refuses."""
    abi = abi_version()
    if abi < 1:
        raise LandlockError(0, unavailable_reason() or "Landlock is not available")
    handled = handled_rights(abi)
    net = (BIND_TCP | CONNECT_TCP) if abi >= 4 and tcp_ports is not None else 0
    scopes = (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 and scoped else 0
    attr = _RulesetAttr(handled, net, scopes)

    def rules(ruleset: int) -> None:
        for path in writable:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # nothing there to write beneath
            try:
                # no ioctl on a device anywhere: nothing the project runs needs one, and a terminal's
                # TIOCSTI types into the user's shell
                rights = (handled & ~IOCTL_DEV) if os.path.isdir(path) else handled & _FILE_RIGHTS
                _add_rule(ruleset, _RULE_PATH_BENEATH, _PathBeneathAttr(rights, fd), str(path))
            finally:
                os.close(fd)
        for port in (tcp_ports or ()) if net else ():
            _add_rule(ruleset, _RULE_NET_PORT, _NetPortAttr(CONNECT_TCP, int(port)), f"tcp port {port}")

    _restrict_self(attr, abi, rules)
    return abi
