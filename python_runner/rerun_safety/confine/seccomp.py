"""A seccomp filter for what neither Landlock nor the namespaces close: `connect()` to a pathname Unix socket
(a terminal multiplexer's, a container daemon's, a desktop bus) is mediated by no Landlock right, so a
confined process that needs no Unix socket may not create one (socket(AF_UNIX, ...) fails with EACCES;
socketpair(), which multiprocessing uses between a process and its own children, is another system
call and stays). Also refused: raw and packet sockets. The filter is a classic BPF program built here."""
from __future__ import annotations

import ctypes
import errno as errnos
import os
import platform

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
# (audit arch, socket's system call number) per architecture; x86-64's x32 calls carry bit 30
_ARCH = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}
_X32_BIT = 0x40000000
_AF_UNIX, _AF_INET, _AF_INET6, _AF_PACKET = 1, 2, 10, 17
_SOCK_DGRAM, _SOCK_RAW, _SOCK_TYPE_MASK = 2, 3, 0xF
# BPF opcodes
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K, _ALU_AND_K = 0x20, 0x15, 0x35, 0x06, 0x54


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Filter))]


class SeccompError(OSError):
    """The kernel refused the filter."""


def available() -> bool:
    return platform.system() == "Linux" and platform.machine() in _ARCH


def _program(deny_unix: bool, deny_udp: bool = False) -> list[tuple[int, int, int, int]]:
    arch, socket_nr = _ARCH[platform.machine()]
    deny = _RET_ERRNO | errnos.EACCES
    # offsets in struct seccomp_data: nr 0, arch 4, args[0] 16, args[1] 24 (the low word, little-endian)
    prog = [
        (_LD_W_ABS, 0, 0, 4),
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, deny),  # another architecture's calls (i386 on x86-64): none of ours
        (_LD_W_ABS, 0, 0, 0),
    ]
    if platform.machine() == "x86_64":
        prog += [(_JGE_K, 0, 1, _X32_BIT), (_RET_K, 0, 0, deny)]
    prog += [
        (_JEQ_K, 1, 0, socket_nr),
        (_RET_K, 0, 0, _RET_ALLOW),
        (_LD_W_ABS, 0, 0, 16),  # the family
        (_JEQ_K, 0, 1, _AF_PACKET),
        (_RET_K, 0, 0, deny),
    ]
    if deny_unix:
        prog += [(_JEQ_K, 0, 1, _AF_UNIX), (_RET_K, 0, 0, deny)]
    prog += [
        (_LD_W_ABS, 0, 0, 24),  # the type, less SOCK_NONBLOCK/SOCK_CLOEXEC
        (_ALU_AND_K, 0, 0, _SOCK_TYPE_MASK),
        (_JEQ_K, 0, 1, _SOCK_RAW),
        (_RET_K, 0, 0, deny),
    ]
    if deny_udp:  # datagram sockets of IPv4 and IPv6 (UDP, ICMP): the family loaded again
        prog += [
            (_JEQ_K, 0, 4, _SOCK_DGRAM),
            (_LD_W_ABS, 0, 0, 16),
            (_JEQ_K, 1, 0, _AF_INET),
            (_JEQ_K, 0, 1, _AF_INET6),
            (_RET_K, 0, 0, deny),
        ]
    prog.append((_RET_K, 0, 0, _RET_ALLOW))
    return prog


def restrict_sockets(deny_unix: bool, deny_udp: bool = False) -> None:
    """From now on this thread and what it starts create no raw or packet socket, (`deny_unix`) no Unix
    socket, and (`deny_udp`) no IPv4 or IPv6 datagram socket. Raises SeccompError when the kernel refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    steps = _program(deny_unix, deny_udp)
    array = (_Filter * len(steps))(*[_Filter(*s) for s in steps])
    program = _Program(len(steps), array)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.prctl(
            _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
        errno = ctypes.get_errno()
        raise SeccompError(errno, f"seccomp: {os.strerror(errno)}")
