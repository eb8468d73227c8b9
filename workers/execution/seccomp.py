"""A seccomp filter through ctypes: the one hole Landlock (landlock.py) and a network namespace
leave, closed. A Unix socket is reached by its path, and neither a network namespace (path
sockets are the filesystem's) nor Landlock on the kernels here (it does not check connect(2) to
a socket file) stops it: the gateway's own Postgres listens on one. So a sandboxed process may
create no AF_UNIX socket at all (EACCES), start no io_uring (which could do it for it), and make
no call of another architecture's ABI (the filter could not read its numbers).
"""

from __future__ import annotations

import ctypes
import errno
import platform

__all__ = ["forbid_unix_sockets"]

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
LD_ABS, JEQ, JGE, RET = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
ALLOW, KILL = 0x7FFF0000, 0x80000000
AF_UNIX, X32 = 1, 0x40000000
# machine -> (AUDIT_ARCH, socket, io_uring_setup)
ARCHES = {"x86_64": (0xC000003E, 41, 425), "aarch64": (0xC00000B7, 198, 425)}


class Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Instruction))]


def _errno(number: int) -> int:
    return 0x00050000 | number


def program(machine: str) -> list[tuple[int, int, int, int]]:
    arch, socket, io_uring = ARCHES[machine]
    return [
        (LD_ABS, 0, 0, 4),  # the call's architecture
        (JEQ, 1, 0, arch),
        (RET, 0, 0, KILL),
        (LD_ABS, 0, 0, 0),  # the call's number
        (JGE, 0, 1, X32),
        (RET, 0, 0, _errno(errno.EPERM)),
        (JEQ, 0, 1, io_uring),
        (RET, 0, 0, _errno(errno.EPERM)),
        (JEQ, 0, 3, socket),
        (LD_ABS, 0, 0, 16),  # socket's first argument, its domain (the low half, little-endian)
        (JEQ, 0, 1, AF_UNIX),
        (RET, 0, 0, _errno(errno.EACCES)),
        (RET, 0, 0, ALLOW),
    ]


def forbid_unix_sockets() -> None:
    """From now on this process and its children create no AF_UNIX socket. Needs no_new_privs
    set first (landlock.restrict sets it)."""
    code = program(platform.machine())
    instructions = (Instruction * len(code))(*(Instruction(*i) for i in code))
    prog = Program(len(code), instructions)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"seccomp: {errno.errorcode.get(number, number)}")
