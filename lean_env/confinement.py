"""How a prover process is confined: its limits, its namespaces, its cgroup, its
Landlock ruleset, and how every process it started is ended.

:mod:`lean_env.sandbox` starts and talks to the process; this module decides
what the child does between fork and exec and what is left to clean up (the
what and why of each measure: the sandbox module's docstring and
docs/verifying.md, "Confinement").  Whatever the machine cannot do is skipped
with one warning per kind.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import logging
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

import psutil

from lean_env import landlock

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Limits:
    """Resource limits applied to the prover process (``None`` = unlimited).

    Lean maps the Mathlib .olean files into memory, so its address-space limit
    must be generous (a tight RLIMIT_AS causes spurious ``bad_alloc``); the
    Lean backend polices resident memory instead and recycles the process.
    """

    address_space_bytes: Optional[int] = 4 << 30
    cpu_seconds: Optional[int] = None
    open_files: int = 256
    #: run inside an empty network namespace when the kernel allows it
    isolate_network: bool = True
    #: largest answer (bytes) accepted before the process is declared garbled
    max_output_bytes: int = 64 << 20
    #: largest file the process may write (RLIMIT_FSIZE); None = unlimited
    file_size_bytes: Optional[int] = None
    #: wall seconds past the latest answer deadline that a persistent process's CPU limit
    #: still covers (:meth:`SandboxedProcess.read_until`); the limit is raised at most
    #: this often, and one orphaned by a killed worker runs at most this much longer
    orphan_slack_seconds: float = 60.0
    #: confine writes to the scratch directory and ``writable_paths`` (Landlock)
    confine_writes: bool = True
    #: more directories (or files) the process may write beneath, for what a prover
    #: needs besides its scratch directory (a cache the caller manages)
    writable_paths: tuple[str, ...] = ()
    #: run in an own PID namespace, so that ending the session ends all it started
    isolate_processes: bool = True
    #: most tasks (processes and threads together: the kernel counts both) alive at
    #: once in the session; Lean's threads count, so keep it well above its thread count
    max_processes: Optional[int] = 1024



def network_isolation_prefix() -> tuple[str, ...]:
    """The argv prefix that runs a command without network access, or ``()``
    when this machine does not allow it (no ``unshare``, or user namespaces
    disabled); for a user other than root it works only in the user namespace
    the sandbox's child enters first.  Probed once per process."""
    return isolation_prefix(network=True, processes=False)


#: argv of the PID namespace's init: the shell starts the command as its child
#: and exits with its status.  Not the command itself, because the init of a PID
#: namespace ignores signals it has no handler for, SIGXCPU among them, so a
#: prover there would outlive its CPU limit (see SandboxedProcess._bound_cpu); a
#: command killed by signal N makes the shell exit with 128 + N.  ``; exit``
#: keeps dash from exec'ing the command in its own place.
_INIT = ("/bin/sh", "-c", '"$@"; exit $?', "lean_env-init")


def signal_of(returncode: Optional[int]) -> Optional[int]:
    """The signal that ended a sandboxed process, from its exit status: negative for
    a process started directly, 128 + N through the PID namespace's init shell
    (which cannot tell it from a plain ``exit(128 + N)``); ``None`` otherwise."""
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    return returncode - 128 if 128 < returncode < 128 + 65 else None


def _needs_user_namespace() -> bool:
    """Whether namespaces need a user namespace first: they do for anyone but root."""
    return os.geteuid() != 0


def isolation_prefix(network: bool, processes: bool) -> tuple[str, ...]:
    """The ``unshare`` argv prefix for an empty network namespace and/or an own PID
    namespace (``--fork --kill-child``: the namespace's init dies with ``unshare``,
    and every process in the namespace dies with its init), or ``()`` when this
    machine allows neither.  Falls back to the one that works when only one does.
    Not root, the child first enters a user namespace of its own (see
    :func:`_enter_user_namespace`), which makes the others possible.  Probed once
    per process and combination."""
    return _probe_prefix(network, processes, _needs_user_namespace())


@functools.lru_cache(maxsize=None)
def _probe_prefix(network: bool, processes: bool, user_namespace: bool) -> tuple[str, ...]:
    exe = shutil.which("unshare")
    if exe is None or not (network or processes):
        return ()
    wanted = [(network, processes)]
    if network and processes:
        wanted += [(True, False), (False, True)]
    uid, gid = os.getuid(), os.getgid()
    for net, pid in wanted:
        prefix = (exe, *(("--net",) if net else ()), *(("--pid", "--fork", "--kill-child") if pid else ()))
        try:
            ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=10,
                                preexec_fn=(lambda: _enter_user_namespace(uid, gid)) if user_namespace else None
                                ).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            return prefix
    return ()


_CLONE_NEWUSER = 0x10000000


def _enter_user_namespace(uid: int, gid: int) -> None:
    """In the child: move into a new user namespace as its root, mapped to ``uid`` and
    ``gid`` (what ``unshare --map-root-user`` does, done here because it must come
    before the Landlock ruleset, which would refuse the writes to the map files).
    Its root may then make network and PID namespaces; and RLIMIT_NPROC set after
    this counts the tasks of this namespace only, not all of the user's."""
    if landlock._libc().unshare(_CLONE_NEWUSER) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER) failed")
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def _in_pid_namespace(prefix: tuple[str, ...]) -> bool:
    return "--pid" in prefix


_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(topic: str, message: str) -> None:
    with _warned_lock:
        if topic in _warned:
            return
        _warned.add(topic)
    log.warning(message)


@functools.lru_cache(maxsize=1)
def landlock_works() -> bool:
    """Whether a child can be confined with Landlock here: probed once per process
    by confining a throwaway ``true``, because a kernel can report an ABI and still
    refuse (a seccomp filter, an LSM stack without Landlock)."""
    if landlock.abi_version() < 1:
        return False
    try:
        with tempfile.TemporaryDirectory(prefix="lean_env-landlock-probe-") as d:
            return subprocess.run(["true"], preexec_fn=lambda: landlock.restrict_self([d]),
                                  capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


# -- a pids cgroup per session: a bound on processes that holds for root too ------

_cgroup_serial = itertools.count(1)
_CGROUP_PREFIX = "lean_env-"


@functools.lru_cache(maxsize=1)
def _pids_cgroup_base() -> Optional[str]:
    """A cgroup directory where this process may create child cgroups that have the
    ``pids`` controller (cgroup v1's ``pids`` hierarchy, or a v2 cgroup with
    ``pids`` enabled for its children), or ``None``.  Root can usually; a user
    only in a delegated cgroup.  Also removes the empty cgroups that processes
    which died without cleaning up left there."""
    try:
        with open("/proc/self/cgroup", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    candidates = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            root = "/sys/fs/cgroup/pids"
        elif controllers == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            root = "/sys/fs/cgroup"
        else:
            continue
        # our own cgroup first; then the hierarchy's root, for cgroup v2, where a cgroup
        # with processes in it (ours) cannot pass controllers on to its children
        candidates += [os.path.normpath(os.path.join(root, path.lstrip("/"))), root]
    for base in dict.fromkeys(candidates):
        probe = os.path.join(base, f"{_CGROUP_PREFIX}probe-{os.getpid()}")
        try:
            os.mkdir(probe)
        except OSError:
            continue
        try:
            usable = os.path.exists(os.path.join(probe, "pids.max")) and subprocess.run(
                ["true"], preexec_fn=lambda: _join_cgroup(os.path.join(probe, "cgroup.procs")),
                capture_output=True, timeout=10).returncode == 0
        except (OSError, subprocess.SubprocessError):
            usable = False
        finally:
            time.sleep(0.01)  # the probe's process leaves the cgroup a moment after it exits
            for _ in range(100):
                if _rmdir_quietly(probe) or not os.path.isdir(probe):
                    break
                time.sleep(0.01)
        if usable:
            _sweep_stale_cgroups(base)
            return base
    return None


def _sweep_stale_cgroups(base: str) -> None:
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        parts = name.split("-")
        if name.startswith(_CGROUP_PREFIX) and len(parts) >= 3 and parts[1].isdigit() \
                and not psutil.pid_exists(int(parts[1])):
            _rmdir_quietly(os.path.join(base, name))  # fails, harmlessly, while not empty


def _rmdir_quietly(path: str) -> bool:
    try:
        os.rmdir(path)
        return True
    except OSError:
        return False


class _PidsCgroup:
    """One session's cgroup: a ``pids.max`` bound, and the list of every process in
    it, whatever it did to its session or parent."""

    def __init__(self, base: str, max_tasks: int) -> None:
        self.path = os.path.join(base, f"{_CGROUP_PREFIX}{os.getpid()}-{next(_cgroup_serial)}")
        os.mkdir(self.path)
        try:
            with open(os.path.join(self.path, "pids.max"), "w", encoding="ascii") as f:
                f.write(str(max_tasks))
        except OSError:
            _rmdir_quietly(self.path)
            raise
        self.procs = os.path.join(self.path, "cgroup.procs")

    def members(self) -> list[int]:
        try:
            with open(self.procs, encoding="ascii") as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def remove(self, settle: float = 2.0) -> None:
        """Delete the cgroup once its last process is gone (a killed process leaves
        it a moment after it dies)."""
        deadline = time.monotonic() + settle
        while not _rmdir_quietly(self.path) and os.path.isdir(self.path) and time.monotonic() < deadline:
            time.sleep(0.01)


def _join_cgroup(procs_path: str) -> None:
    """In the child: move into the session's cgroup before anything else runs."""
    fd = os.open(procs_path, os.O_WRONLY)
    try:
        os.write(fd, str(os.getpid()).encode())
    finally:
        os.close(fd)


# -- the confined child ----------------------------------------------------------

#: directories of the scratch directory that stand in for the user's writable places
_HOME, _TMP, _RUN = ".home", ".tmp", ".run"


def confined_env(env: Optional[dict[str, str]], scratch: str) -> dict[str, str]:
    """``env`` (``None``: ours) with every place a program writes by convention
    moved into ``scratch``: ``TMPDIR``/``TMP``/``TEMP``, ``HOME`` and the XDG
    cache, state and runtime directories.  Where programs *find* things through
    ``HOME`` (elan's toolchains, Coq's user-contrib, configuration files) the
    old locations are kept explicitly, for reading: ``ELAN_HOME``,
    ``XDG_DATA_HOME`` and ``XDG_CONFIG_HOME`` default to the places the old
    ``HOME`` implied.  Everything else is the caller's."""
    out = dict(os.environ if env is None else env)
    old_home = out.get("HOME") or os.path.expanduser("~")
    home, tmp, run = (os.path.join(scratch, d) for d in (_HOME, _TMP, _RUN))
    for d in (home, tmp, run):
        os.makedirs(d, mode=0o700, exist_ok=True)
    if old_home and os.path.isabs(old_home):
        out.setdefault("XDG_DATA_HOME", os.path.join(old_home, ".local", "share"))
        out.setdefault("XDG_CONFIG_HOME", os.path.join(old_home, ".config"))
        if os.path.isdir(os.path.join(old_home, ".elan")):
            out.setdefault("ELAN_HOME", os.path.join(old_home, ".elan"))
    out.update(HOME=home, TMPDIR=tmp, TMP=tmp, TEMP=tmp, XDG_CACHE_HOME=os.path.join(home, ".cache"),
               XDG_STATE_HOME=os.path.join(home, ".local", "state"), XDG_RUNTIME_DIR=run)
    return out


@dataclass(frozen=True)
class Confinement:
    """How one child is started: argv prefix, what its preexec does, what held."""

    prefix: tuple[str, ...]
    writable: tuple[str, ...]
    landlock: bool
    cgroup: Optional[_PidsCgroup]
    #: the child first enters a user namespace of its own (not root)
    user_namespace: bool
    #: RLIMIT_NPROC set inside that namespace (no cgroup): the session's task bound
    nproc: Optional[int]

    @property
    def processes_isolated(self) -> bool:
        return _in_pid_namespace(self.prefix)

    @property
    def network_isolated(self) -> bool:
        return "--net" in self.prefix

    @property
    def process_bound(self) -> Optional[str]:
        if self.cgroup is not None:
            return "cgroup"
        return "rlimit" if self.nproc is not None else None

    def argv(self, argv: list[str]) -> list[str]:
        return [*self.prefix, *argv]

    def preexec(self, limits: Limits) -> Callable[[], None]:
        rlimits = apply_limits(limits)
        procs = self.cgroup.procs if self.cgroup is not None else None
        writable, confine, nproc = self.writable, self.landlock, self.nproc
        user_namespace, uid, gid = self.user_namespace, os.getuid(), os.getgid()

        def preexec() -> None:  # in the child between fork and exec: join, limit, confine
            if procs is not None:
                _join_cgroup(procs)
            if user_namespace:
                _enter_user_namespace(uid, gid)
            rlimits()
            if nproc is not None:
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            if confine:
                landlock.restrict_self(writable)

        return preexec

    def end(self, leader: int, reaped: bool, settle: float = 5.0) -> None:
        """End every process of the tree and wait until none runs: the process group
        of ``leader``, the PID namespace it made (looked up only while ``leader`` is
        not ``reaped``: its number may belong to another process then; a reaped
        ``unshare`` took its namespace with it), the cgroup."""
        namespace = _child_pid_namespace(leader) if self.processes_isolated and not reaped else None
        _end_processes(leader, namespace, self.cgroup, settle)

    def release(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()


def confinement_for(limits: Limits, scratch: str) -> Confinement:
    prefix = isolation_prefix(limits.isolate_network, limits.isolate_processes)
    if limits.isolate_network and "--net" not in prefix:
        _warn_once("net", "no network namespace here: prover processes keep the network "
                          "(Landlock still denies TCP where the kernel has ABI 4)")
    if limits.isolate_processes and not _in_pid_namespace(prefix):
        _warn_once("pid", "no PID namespace here: a prover's daemon that leaves its process group "
                          "survives the session unless a pids cgroup holds it")
    user_namespace = bool(prefix) and _needs_user_namespace()
    cgroup, nproc = None, None
    if limits.max_processes is not None:
        base = _pids_cgroup_base()
        if base is not None:
            try:
                cgroup = _PidsCgroup(base, limits.max_processes)
            except OSError:
                cgroup = None
        if cgroup is None and user_namespace:
            # Set inside the session's own user namespace, RLIMIT_NPROC counts that
            # namespace's tasks only (the kernel counts per user namespace and uid); set
            # outside, it would count every process of the user.  Root is exempt from
            # it, which is why root gets the cgroup.
            nproc = limits.max_processes
        elif cgroup is None:
            _warn_once("nproc", "no pids cgroup and no user namespace here: a prover's process count "
                                "is not bounded")
    if _in_pid_namespace(prefix):
        prefix = (*prefix, *_INIT)
    writable = (scratch, *limits.writable_paths)
    confine = limits.confine_writes and landlock_works()
    if limits.confine_writes and not confine:
        _warn_once("landlock", "Landlock is not available here: prover processes can write outside "
                               "their scratch directory (TMPDIR and HOME still point into it)")
    return Confinement(prefix=prefix, writable=writable, landlock=confine, cgroup=cgroup,
                        user_namespace=user_namespace, nproc=nproc)


def _pid_namespace(pid: int, which: str = "pid") -> Optional[tuple[int, int]]:
    try:
        st = os.stat(f"/proc/{pid}/ns/{which}")
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _child_pid_namespace(leader: int) -> Optional[tuple[int, int]]:
    """The PID namespace ``unshare`` (``leader``) made for its child, or ``None``
    when it is gone or has not made one yet."""
    made = _pid_namespace(leader, "pid_for_children")
    return None if made is None or made == _pid_namespace(leader) else made


def _namespace_members(namespace: tuple[int, int]) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and _pid_namespace(int(name)) == namespace:
            found.append(int(name))
    return found


def _end_processes(leader: int, namespace: Optional[tuple[int, int]], cgroup: Optional[_PidsCgroup],
                   settle: float) -> None:
    """SIGKILL the process group ``leader`` leads, every process in ``namespace`` and
    in ``cgroup``, and wait (``settle`` seconds at most) until none of them runs.
    The namespace's processes would die with its init anyway; they are killed and
    waited for here so that a caller that returns has really stopped them."""
    try:
        os.killpg(leader, signal.SIGKILL)
        # one scan of /proc for the group's members; killed, they cannot fork more
        members = set(_group_members(leader))
    except (ProcessLookupError, PermissionError):
        members = set()  # the common case after a command exited: nothing of it left
    deadline = time.monotonic() + settle
    while True:
        found = set()
        if namespace is not None:
            found.update(_namespace_members(namespace))
        if cgroup is not None:
            found.update(cgroup.members())
        for pid in found - members:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        members |= found
        running = [pid for pid in members if running_pid(pid)]
        if not running or time.monotonic() >= deadline:
            return
        time.sleep(0.01)


def _children(pid: int) -> list[int]:
    """The children of ``pid``, from the kernel's per-thread lists (no scan of /proc)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                found.extend(int(x) for x in f.read().split())
        except OSError:
            continue
    return found


def descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = _children(pid)
    while todo:
        child = todo.pop()
        if child not in found:
            found.add(child)
            todo.extend(_children(child))
    return found


def _group_members(pgid: int) -> list[int]:
    members = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid:
                members.append(p.pid)
        except OSError:
            continue
    return members


def running_pid(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def apply_limits(limits: Limits) -> Callable[[], None]:
    """A ``preexec_fn`` that puts ``limits`` on the child process."""

    def preexec() -> None:  # runs in the child between fork and exec
        if limits.address_space_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limits.address_space_bytes,) * 2)
        if limits.cpu_seconds is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds,) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files,) * 2)
        if limits.file_size_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_bytes,) * 2)
        # no core dumps of a prover that crashed on hostile input
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return preexec
