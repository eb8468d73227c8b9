"""Landlock (Linux 5.13+, here ABI 7 on Linux 6.18) through ctypes: a process restricts itself to
reading a few directory trees and writing one, for good, and so do its children.

Chosen over a mount namespace with a pivoted root because it needs no privilege, builds no
filesystem, and is what the kernel checks at every open: a path outside the rules is refused
(EACCES) however it is reached (symlinks, `..`, /proc/self/root). What it does not cover: a
connect(2) to a Unix socket by its path (the kernels here cannot restrict it), which is why the
sandbox also takes the network namespace away (runner.py); an abstract Unix socket and a signal
to a process outside the sandbox are refused by the ABI 6 scopes.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

__all__ = ["LandlockUnavailable", "abi", "restrict"]

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446  # the same on every architecture
VERSION = 1  # LANDLOCK_CREATE_RULESET_VERSION
PATH_BENEATH = 1  # LANDLOCK_RULE_PATH_BENEATH
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
# Every filesystem right each ABI knows: the ruleset handles them all, so any not granted is denied.
FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | (1 << 14) | (1 << 15)  # the rights a file (not a dir) may get
READ = EXECUTE | READ_FILE | READ_DIR
NET_TCP = (1 << 0) | (1 << 1)  # bind, connect (ABI 4)
SCOPES = (1 << 0) | (1 << 1)  # abstract Unix sockets, signals (ABI 6)


class LandlockUnavailable(OSError):
    """The kernel has no Landlock (or it is disabled): a sandbox cannot be made here."""


class RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


def abi() -> int:
    """The kernel's Landlock ABI version, 0 when it has none."""
    version = _libc.syscall(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(VERSION))
    return max(0, int(version))


def restrict(read: Iterable[str], write: Iterable[str]) -> None:
    """From now on this process (and every process it starts) reads and executes only beneath
    `read`, reads and writes only beneath `write`, opens no TCP connection and binds no TCP port
    (ABI 4+), reaches no abstract Unix socket and signals no process outside (ABI 6+). Paths that
    do not exist are skipped."""
    version = abi()
    if version < 1:
        raise LandlockUnavailable("this kernel has no Landlock")
    fs = FS_BY_ABI[min(version, 5)]
    attr = RulesetAttr(fs, NET_TCP if version >= 4 else 0, SCOPES if version >= 6 else 0)
    size = 8 if version < 4 else 16 if version < 6 else 24
    ruleset = _check(_libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0), "create_ruleset")
    try:
        for paths, rights in ((read, READ & fs), (write, fs)):
            for path in paths:
                _allow(ruleset, path, rights)
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
        _check(_libc.syscall(RESTRICT_SELF, ruleset, 0), "restrict_self")
    finally:
        os.close(ruleset)


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = PathBeneath(rights, fd)
        _check(_libc.syscall(ADD_RULE, ruleset, PATH_BENEATH, ctypes.byref(rule), 0), f"add_rule {path}")
    finally:
        os.close(fd)
