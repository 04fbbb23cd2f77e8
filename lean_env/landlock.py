"""Linux Landlock through ctypes: confine a process's writes to a few directories
and deny it TCP, abstract unix sockets and signals outside its own sandbox.

Landlock (Linux 5.13 and later) lets an unprivileged process restrict itself and
every process it later starts; the restriction cannot be lifted, survives
``execve`` and is inherited across ``fork``.  :mod:`lean_env.sandbox` calls
:func:`restrict_self` between fork and exec of a prover, so the prover and all its
descendants (shells, worker copies, daemons) are bound by it.

The rights are chosen by ABI version (what the running kernel supports):

* ABI 1-3, 5: every *write-type* filesystem right is handled (writing, truncating,
  creating, removing, renaming across directories, ioctl on devices); reading and
  executing are not, so the prover reads its libraries and runs programs as before.
  Handled rights are allowed only beneath the writable paths;
* ABI 4: TCP ``bind`` and ``connect`` are handled and allowed nowhere;
* ABI 6: connecting to abstract unix sockets made outside the sandbox, and sending
  signals to processes outside it, are denied.

The pure helpers (:func:`handled_fs`, :func:`allowed_for`, the ruleset
attribute) are separate from the system calls so that they can be tested
without a kernel that has Landlock.
"""

from __future__ import annotations

import ctypes
import functools
import os
import stat
from typing import Iterable, Optional

# system call numbers: the same on every architecture (allocated after the unification)
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# filesystem rights (include/uapi/linux/landlock.h)
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13        # ABI 2
FS_TRUNCATE = 1 << 14     # ABI 3
FS_IOCTL_DEV = 1 << 15    # ABI 5
NET_BIND_TCP = 1 << 0     # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1                # ABI 6

#: the write-type rights of ABI 1
_WRITE_V1 = (FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG
             | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM)
#: the rights Landlock accepts on a rule for a file that is not a directory
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV

#: device files a prover may write (or truncate, as a shell's ``>/dev/null`` does):
#: they store nothing
DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/full")


class LandlockError(OSError):
    """Landlock is missing, disabled, or refused the ruleset."""


def handled_fs(abi: int) -> int:
    """The write-type filesystem rights that ABI ``abi`` can handle."""
    if abi < 1:
        return 0
    rights = _WRITE_V1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


def handled_net(abi: int) -> int:
    """TCP bind and connect from ABI 4 on (none allowed: no rule is ever added)."""
    return NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0


def scoped(abi: int) -> int:
    """Abstract unix sockets and signals kept inside the sandbox, from ABI 6 on."""
    return SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0


def allowed_for(handled: int, is_dir: bool) -> int:
    """The rights a rule may grant on a path: all ``handled`` ones beneath a
    directory; on any other file only those that apply to files (Landlock
    refuses a rule that grants directory rights on a file)."""
    return handled if is_dir else handled & _FILE_RIGHTS


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the kernel's header
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def ruleset_attr_size(abi: int) -> int:
    """How much of the attribute structure to pass: older kernels reject fields they
    do not know (``handled_access_net`` arrived in ABI 4, ``scoped`` in ABI 6)."""
    if abi >= 6:
        return ctypes.sizeof(_RulesetAttr)
    if abi >= 4:
        return _RulesetAttr.scoped.offset
    return _RulesetAttr.handled_access_net.offset


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


@functools.lru_cache(maxsize=1)
def abi_version() -> int:
    """The Landlock ABI of the running kernel; 0 where there is none (an old kernel,
    Landlock not among the LSMs at boot, or a seccomp filter refusing the call)."""
    try:
        version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                                  ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def restrict_self(writable: Iterable[str], abi: Optional[int] = None) -> None:
    """Confine the calling process (and whatever it starts afterwards) as the
    module docstring says: write-type rights only beneath ``writable`` (missing
    paths are skipped) and :data:`DEVICE_FILES`.  Meant for a child between fork
    and exec; sets ``no_new_privs`` (set-user-id programs then gain nothing).
    Raises :class:`LandlockError` when the kernel cannot do it; the process is
    then unchanged except for ``no_new_privs``."""
    abi = abi_version() if abi is None else abi
    if abi < 1:
        raise LandlockError("Landlock is not available on this kernel")
    libc = _libc()
    fs = handled_fs(abi)
    attr = _RulesetAttr(fs, handled_net(abi), scoped(abi))
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ruleset_attr_size(abi)),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        raise LandlockError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path in (*writable, *DEVICE_FILES):
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path that does not exist needs no rule
            try:
                rule = _PathBeneathAttr(allowed_for(fs, stat.S_ISDIR(os.fstat(fd).st_mode)), fd)
                if libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                    raise LandlockError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise LandlockError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise LandlockError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
