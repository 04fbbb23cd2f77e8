"""Running an untrusted-input prover process: scratch directory, confined
writes, its own process tree, resource limits, no network, and non-blocking
reads with deadlines.

Model-written proof text reaches the prover, so the prover process is treated
as hostile.  It runs

* in a fresh scratch directory that is deleted afterwards; ``TMPDIR``, ``HOME``
  and the XDG cache/state/runtime directories of its environment point inside it,
  and (where the kernel has Landlock, :mod:`lean_env.landlock`) it can write,
  create, remove or rename nothing outside it (and outside
  ``Limits.writable_paths``), nor (ABI 4) connect or bind TCP, nor (ABI 6) reach
  abstract unix sockets or signal processes outside its sandbox;
* in its own session, and (where ``unshare`` may create one) its own PID
  namespace under a small init, so that ending the session ends every process
  it ever started, daemons that double-fork and call ``setsid`` included;
* with a bound on its processes and threads (a ``pids`` cgroup where this
  process may create one, as root usually can; otherwise ``RLIMIT_NPROC``
  inside its own user namespace, which is per session for a non-root user);
* with limits on address space, CPU time and open files, and in an empty
  network namespace where the kernel allows it.

The mechanisms live in :mod:`lean_env.confinement`.  Whatever the machine
cannot do is skipped with one warning per kind, and the
process still runs: :attr:`SandboxedProcess.write_confined`,
``processes_isolated``, ``process_bound`` and ``network_isolated`` say what held.

Both backends use :class:`SandboxedProcess`; framing (blank-line JSON for the
Lean REPL, prompts for coqtop) is theirs.  :func:`run_batch` runs a fixed
sequence of batch commands (a compiler, then a checker) in one fresh scratch
directory under the same limits; the audits of both backends use it.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Callable, Optional

import psutil

from lean_env.confinement import (
    Limits, apply_limits, confined_env, confinement_for, descendants, isolation_prefix, landlock_works,
    network_isolation_prefix, running_pid, signal_of)
from lean_env.scratch import make_scratch_dir

log = logging.getLogger(__name__)


class ProcessDied(RuntimeError):
    """The process exited or closed its output before answering."""


class ReadTimeout(TimeoutError):
    """No complete answer arrived before the deadline."""


class OutputTooLarge(RuntimeError):
    """The process produced more unframed output than we accept."""



@functools.lru_cache(maxsize=1)
def _usable_cpus() -> int:
    return len(os.sched_getaffinity(0))


def cpu_allowance(wall_seconds: float) -> int:
    """The CPU seconds a process may use in ``wall_seconds`` of wall time: every usable
    core busy (Lean elaborates on several threads), rounded up, plus one."""
    return math.ceil(max(wall_seconds, 0.0) * _usable_cpus()) + 1


class SandboxedProcess:
    """A child process with a byte-stream protocol on stdin/stdout.

    A reader thread appends stdout to a buffer; :meth:`read_until` waits (with
    a deadline) until a caller-supplied framing function finds a complete
    message.  stderr is drained continuously into a bounded ring buffer so a
    chatty prover can never block on a full pipe.
    """

    def __init__(
        self,
        argv: list[str],
        *,
        cwd: Optional[str] = None,
        env: Optional[dict[str, str]] = None,
        limits: Limits = Limits(),
        name: str = "prover",
        merge_stderr: bool = False,
    ) -> None:
        """``merge_stderr`` sends stderr into the stdout stream (in order), for
        programs such as ``coqtop -emacs`` that print their prompts on stderr."""
        self.name = name
        self.limits = limits
        #: the process's own writable directory, deleted with it; its working directory
        #: unless ``cwd`` is given (a project directory, which stays read-only)
        self.scratch = make_scratch_dir(name)
        self.cwd = cwd or self.scratch
        try:
            self._confinement = confinement_for(limits, self.scratch)
            env = confined_env(env, self.scratch)
        except BaseException:
            self._remove_dir()
            raise
        #: no network namespace... see the module docstring for each of these
        self.network_isolated = self._confinement.network_isolated
        #: writes outside the scratch directory (and ``Limits.writable_paths``) fail
        self.write_confined = self._confinement.landlock
        #: the session has its own PID namespace: ending it ends all it started
        self.processes_isolated = self._confinement.processes_isolated
        #: what bounds the session's process count: ``"cgroup"``, ``"rlimit"`` or ``None``
        self.process_bound = self._confinement.process_bound
        self.argv = self._confinement.argv(argv)
        self._buf = bytearray()
        self._eof = False
        self._cond = threading.Condition()
        self._stderr_tail: deque[bytes] = deque(maxlen=256)
        #: until when (monotonic) the CPU limit last set covers every core busy (see _bound_cpu)
        self._cpu_covered_until = float("-inf")
        self.started_at = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                start_new_session=True,
                preexec_fn=self._confinement.preexec(limits),
                bufsize=0,
            )
        except BaseException:
            self._confinement.release()
            self._remove_dir()
            raise
        self._prover_pid: Optional[int] = None
        #: the PID namespace's init, once the prover was found under it
        self._init_pid: Optional[int] = None
        self._threads = [threading.Thread(target=self._pump_stdout, daemon=True, name=f"{name}-stdout")]
        if not merge_stderr:
            self._threads.append(
                threading.Thread(target=self._pump_stderr, daemon=True, name=f"{name}-stderr"))
        for t in self._threads:
            t.start()

    # -- background pumps -------------------------------------------------
    def _pump_stdout(self) -> None:
        fd = self.proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            with self._cond:
                if chunk:
                    self._buf += chunk
                else:
                    self._eof = True
                self._cond.notify_all()
            if not chunk:
                return

    def _pump_stderr(self) -> None:
        fd = self.proc.stderr.fileno()
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            self._stderr_tail.append(chunk)

    # -- protocol ---------------------------------------------------------
    def write(self, data: bytes) -> None:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as e:
            raise ProcessDied(f"{self.name}: cannot write to process ({e}); {self._last_words()}") from e

    def read_until(self, frame: Callable[[bytes], Optional[int]], deadline: float) -> bytes:
        """Return the first complete message and remove it from the buffer.

        ``frame(buffer)`` returns the end offset of the first complete message,
        or ``None``.  ``deadline`` is a ``time.monotonic()`` value.
        """
        self._bound_cpu(deadline)
        with self._cond:
            while True:
                end = frame(bytes(self._buf)) if self._buf else None
                if end is not None:
                    msg = bytes(self._buf[:end])
                    del self._buf[:end]
                    return msg
                if len(self._buf) > self.limits.max_output_bytes:
                    raise OutputTooLarge(f"{self.name}: more than {self.limits.max_output_bytes} bytes "
                                         "without a complete answer")
                if self._eof:
                    raise ProcessDied(f"{self.name}: process closed its output; {self._last_words()}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ReadTimeout(f"{self.name}: no answer before the deadline")
                self._cond.wait(remaining)

    def _bound_cpu(self, deadline: float) -> None:
        """Keep the process's soft CPU limit (RLIMIT_CPU) above what it can use until
        ``deadline`` plus ``limits.orphan_slack_seconds``, and no further.  While this
        side waits for answers the limit is never reached (CPU time cannot outrun wall
        time on the usable cores); if this side dies mid-answer, nobody kills the
        process, which may be busy with a hostile proof and never read its closed
        stdin: SIGXCPU then ends it.  Raised only when a deadline passes the time the
        last limit covered: a system call about once per slack, not per answer."""
        if deadline <= self._cpu_covered_until:
            return
        covered_until = deadline + self.limits.orphan_slack_seconds
        allowance = cpu_allowance(covered_until - time.monotonic())
        # RLIMIT_CPU counts each process's own CPU time, and ``self.proc`` may be
        # ``unshare`` with the prover a grandchild: every process of the tree gets its
        # own limit.  One forked after its parent's limit was set inherits it; one
        # forked before, but after the tree was listed, shows up in the next listing:
        # list again until nothing new appears.
        done: set[int] = set()
        for _ in range(8):
            try:
                root = psutil.Process(self.proc.pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                return  # gone: read_until reports how it ended
            new = [p for p in tree if p.pid not in done]
            if not new:
                break
            for process in new:
                done.add(process.pid)
                try:
                    times = process.cpu_times()
                    _, hard = resource.prlimit(process.pid, resource.RLIMIT_CPU)
                    soft = math.ceil(times.user + times.system) + allowance
                    resource.prlimit(process.pid, resource.RLIMIT_CPU,
                                     (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
                except (psutil.Error, OSError):
                    if process.pid == self.proc.pid:
                        return
        self._cpu_covered_until = covered_until

    def stderr_tail(self) -> str:
        return b"".join(self._stderr_tail).decode("utf-8", "replace")

    def _last_words(self) -> str:
        """Exit code and the end of stderr of a process that stopped answering.
        A prover that cannot start says why on stderr as it exits, so wait (a
        second at most) for the exit and for the stderr pump to read the rest:
        without it the message read "exit code None; stderr: " (seen with a
        coqtop that could not find its standard library)."""
        try:
            code: Optional[int] = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        if len(self._threads) == 1:  # stderr merged: what it said is unread output
            said = bytes(self._buf[-500:]).decode("utf-8", "replace")
            return f"exit code {code}; unanswered output: {said}"
        self._threads[1].join(timeout=1.0)
        return f"exit code {code}; stderr: {self.stderr_tail()[-500:]}"

    # -- state ------------------------------------------------------------
    @property
    def pid(self) -> int:
        """The prover's process id as this machine numbers it.  Under a PID namespace
        the process started is ``unshare``, and the prover the child of the
        namespace's init, started a moment later: looked up once (waiting for it a
        few seconds at most); ``unshare``'s own id if it cannot be found (the prover
        already exited).  Signals and limits for the whole session use
        ``self.proc.pid``, the process group's leader."""
        if self._prover_pid is None:
            self._prover_pid = self._find_prover() if self.processes_isolated else self.proc.pid
        return self._prover_pid

    def _find_prover(self, wait: float = 5.0) -> int:
        deadline = time.monotonic() + wait
        while True:
            try:
                for init in psutil.Process(self.proc.pid).children():
                    children = init.children()
                    if children:
                        self._init_pid = init.pid
                        return min(children, key=lambda c: c.create_time()).pid
            except psutil.Error:
                return self.proc.pid
            if self.proc.poll() is not None or time.monotonic() >= deadline:
                return self.proc.pid
            time.sleep(0.002)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def end_strays(self, settle: float = 5.0) -> int:
        """End every process of the session except the prover itself (and the
        sandbox's ``unshare`` and init): what a finished piece of work left running,
        such as a daemon, a watchdog or a worker copy of the prover.  Only for a
        prover that runs no helper of its own between answers (coqtop); call it
        when an answer is complete.  Under a PID namespace, every process the
        prover started is below the namespace's init (an orphan is re-parented to
        it), so the strays are found by reading the kernel's lists of children, a
        few small files when there are none; without one, through the cgroup, or
        else only those still below the prover.  Returns how many were ended."""
        if not self.alive:
            return 0
        prover = self.pid
        killed: set[int] = set()
        deadline = time.monotonic() + settle
        while True:
            if self._init_pid is not None:
                strays = descendants(self._init_pid) - {prover}
            elif self._confinement.cgroup is not None:
                strays = set(self._confinement.cgroup.members()) - {self.proc.pid, prover}
            else:
                strays = descendants(prover)
            strays = {pid for pid in strays if running_pid(pid)}
            if not strays or time.monotonic() >= deadline:
                return len(killed)
            for pid in strays - killed:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except (ProcessLookupError, PermissionError):
                    pass
            # killed, their children go to the init: the next round finds them
            time.sleep(0.005)

    def rss_bytes(self) -> int:
        """Resident memory of the process and its children (0 if gone)."""
        try:
            p = psutil.Process(self.proc.pid)
            return sum(q.memory_info().rss for q in [p, *p.children(recursive=True)])
        except psutil.Error:
            return 0

    def kill(self) -> None:
        """End every process the session started (its process group, its PID
        namespace, its cgroup), wait until they are gone, and delete the scratch
        directory.  Idempotent."""
        self._confinement.end(self.proc.pid, reaped=self.proc.returncode is not None)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._confinement.release()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is None:
                continue
            try:
                stream.close()
            except OSError:
                pass
        self._remove_dir()

    def _remove_dir(self) -> None:
        # the scratch directory only: ``cwd`` may be the caller's (a Lean project)
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __del__(self) -> None:  # last resort; callers should kill() explicitly
        try:
            if getattr(self, "proc", None) is not None and self.proc.poll() is None:
                # unshare leads the group: its death takes the PID namespace with it
                os.killpg(self.proc.pid, signal.SIGKILL)
        except Exception:
            pass


@dataclass(frozen=True)
class CommandResult:
    """What one command of :func:`run_batch` did."""

    #: the command as given (without the network-isolation prefix)
    argv: tuple[str, ...]
    #: exit status (:func:`signal_of` tells which signal killed it: negative, or 128 + N
    #: under a PID namespace); None: not finished in time
    returncode: Optional[int]
    #: standard output, at most ``Limits.max_output_bytes`` of it, decoded
    stdout: str
    #: standard error, at most ``Limits.max_output_bytes`` of it, decoded
    stderr: str
    #: wall-clock seconds the command ran
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def _plain_file_name(name: str) -> str:
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"run_batch: {name!r} is not a plain file name")
    return name


def run_batch(
    commands: list[list[str]],
    *,
    files: dict[str, str],
    deadline: float,
    env: Optional[dict[str, str]] = None,
    limits: Limits = Limits(),
    name: str = "batch",
) -> list[CommandResult]:
    """Run ``commands`` one after another in one fresh scratch directory.

    ``files`` (plain file name -> text) are written there first.  Each
    command is a new process in its own session under ``limits``, confined as a
    :class:`SandboxedProcess` is (writes only in the scratch directory, its own
    PID namespace and process bound, no network, as the machine allows); its
    stdin is empty and its stdout and stderr go to unnamed temporary files, so
    that nothing it writes can pass for another command's output.  When a
    command exits, whatever it left running (in its process group, PID namespace
    or cgroup) is killed.

    The batch stops after the first command that fails (non-zero exit) or
    runs past ``deadline`` (a ``time.monotonic()`` value; it is then killed
    and its ``returncode`` is ``None``); the results of the commands that ran
    are returned in order.  The scratch directory is deleted in every case.
    Raises ``FileNotFoundError`` before running anything when a command's
    executable cannot be found (checked here because under the
    network-isolation prefix a missing binary would only be an exit status).
    """
    for argv in commands:
        if not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"run_batch: a command must be a non-empty list of strings, got {argv!r}")
        if shutil.which(argv[0]) is None:
            raise FileNotFoundError(f"run_batch: {argv[0]!r} is not an executable on PATH")
    scratch = make_scratch_dir(name)
    results: list[CommandResult] = []
    try:
        for file_name, text in files.items():
            with open(os.path.join(scratch, _plain_file_name(file_name)), "x", encoding="utf-8") as f:
                f.write(text)
        child_env = confined_env(env, scratch)
        for argv in commands:
            result = _run_one(argv, scratch, child_env, limits, deadline)
            results.append(result)
            if not result.ok:
                break
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results


def _run_one(argv: list[str], cwd: str, env: dict[str, str], limits: Limits, deadline: float) -> CommandResult:
    started = time.monotonic()
    # CPU time never outruns wall time on the usable cores, so this cap never cuts a command the
    # deadline would not; it bounds one left running when this process dies before it can kill it.
    cpu_cap = cpu_allowance(deadline - started)
    limits = replace(limits, cpu_seconds=min(limits.cpu_seconds or cpu_cap, cpu_cap))
    confinement = confinement_for(limits, cwd)
    try:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(confinement.argv(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=err, start_new_session=True,
                                    preexec_fn=confinement.preexec(limits))
            try:
                returncode: Optional[int] = proc.wait(timeout=max(deadline - started, 0.0))
            except subprocess.TimeoutExpired:
                returncode = None
            finally:
                # the command's own leftovers (a daemon it forked) die with it
                confinement.end(proc.pid, reaped=returncode is not None)
                proc.wait()
            seconds = time.monotonic() - started
            return CommandResult(argv=tuple(argv), returncode=returncode, stdout=_read_capped(out, limits),
                                 stderr=_read_capped(err, limits), seconds=seconds)
    finally:
        confinement.release()


def _read_capped(f, limits: Limits) -> str:
    f.seek(0)
    return f.read(limits.max_output_bytes).decode("utf-8", "replace")


__all__ = [
    # what this module runs and reports
    "CommandResult", "OutputTooLarge", "ProcessDied", "ReadTimeout", "SandboxedProcess", "cpu_allowance", "run_batch",
    # how it confines, from lean_env.confinement, where callers have always found them
    "Limits", "apply_limits", "isolation_prefix", "landlock_works", "network_isolation_prefix", "signal_of",
]
