"""Running an untrusted-input prover process: scratch directory, own process
group, resource limits, no network, and non-blocking reads with deadlines.

Model-written proof text reaches the prover, so the prover process is treated
as hostile: it runs in a fresh temporary directory that is deleted afterwards,
in its own session (so the whole process group can be killed on timeout), with
limits on address space, CPU time and open files, and (where the kernel lets
an unprivileged user create namespaces) in an empty network namespace.

Both backends use :class:`SandboxedProcess`; framing (blank-line JSON for the
Lean REPL, prompts for coqtop) is theirs.  :func:`run_batch` runs a fixed
sequence of batch commands (a compiler, then a checker) in one fresh scratch
directory under the same limits; the audits of both backends use it.
"""

from __future__ import annotations

import functools
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


class ProcessDied(RuntimeError):
    """The process exited or closed its output before answering."""


class ReadTimeout(TimeoutError):
    """No complete answer arrived before the deadline."""


class OutputTooLarge(RuntimeError):
    """The process produced more unframed output than we accept."""


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


@functools.lru_cache(maxsize=1)
def _usable_cpus() -> int:
    return len(os.sched_getaffinity(0))


def cpu_allowance(wall_seconds: float) -> int:
    """The CPU seconds a process may use in ``wall_seconds`` of wall time: every usable
    core busy (Lean elaborates on several threads), rounded up, plus one."""
    return math.ceil(max(wall_seconds, 0.0) * _usable_cpus()) + 1


@functools.lru_cache(maxsize=1)
def network_isolation_prefix() -> tuple[str, ...]:
    """The argv prefix that runs a command without network access, or ``()``
    when this machine does not allow it (no ``unshare``, or user namespaces
    disabled).  Probed once per process."""
    exe = shutil.which("unshare")
    if exe is None:
        return ()
    prefix = (exe, "--net", "--map-root-user") if os.geteuid() != 0 else (exe, "--net")
    try:
        ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return prefix if ok else ()


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
        self._own_dir = cwd is None
        self.cwd = cwd or tempfile.mkdtemp(prefix=f"lean_env-{name}-")
        prefix = network_isolation_prefix() if limits.isolate_network else ()
        self.network_isolated = bool(prefix)
        self.argv = [*prefix, *argv]
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
                preexec_fn=apply_limits(limits),
                bufsize=0,
            )
        except BaseException:
            self._remove_dir()
            raise
        self.pid = self.proc.pid
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
        try:
            times = psutil.Process(self.pid).cpu_times()
            _, hard = resource.prlimit(self.pid, resource.RLIMIT_CPU)
            soft = math.ceil(times.user + times.system) + cpu_allowance(covered_until - time.monotonic())
            resource.prlimit(self.pid, resource.RLIMIT_CPU,
                             (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
        except (psutil.Error, OSError):
            return  # gone: read_until reports how it ended
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
    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_bytes(self) -> int:
        """Resident memory of the process and its children (0 if gone)."""
        try:
            p = psutil.Process(self.pid)
            return sum(q.memory_info().rss for q in [p, *p.children(recursive=True)])
        except psutil.Error:
            return 0

    def kill(self) -> None:
        """Kill the whole process group and delete the scratch directory."""
        if self.proc.poll() is None:
            kill_process_group(self.pid)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is None:
                continue
            try:
                stream.close()
            except OSError:
                pass
        self._remove_dir()

    def _remove_dir(self) -> None:
        if self._own_dir:
            shutil.rmtree(self.cwd, ignore_errors=True)

    def __del__(self) -> None:  # last resort; callers should kill() explicitly
        try:
            if getattr(self, "proc", None) is not None and self.proc.poll() is None:
                os.killpg(self.pid, signal.SIGKILL)
        except Exception:
            pass


@dataclass(frozen=True)
class CommandResult:
    """What one command of :func:`run_batch` did."""

    #: the command as given (without the network-isolation prefix)
    argv: tuple[str, ...]
    #: exit status; negative: killed by that signal; None: not finished in time
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
    command is a new process in its own session under ``limits`` (and without
    network when ``limits.isolate_network`` and the machine allow it); its
    stdin is empty and its stdout and stderr go to unnamed temporary files, so
    that nothing it writes can pass for another command's output.  When a
    command exits, whatever it left running in its process group is killed.

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
    prefix = network_isolation_prefix() if limits.isolate_network else ()
    scratch = tempfile.mkdtemp(prefix=f"lean_env-{name}-")
    results: list[CommandResult] = []
    try:
        for file_name, text in files.items():
            with open(os.path.join(scratch, _plain_file_name(file_name)), "x", encoding="utf-8") as f:
                f.write(text)
        for argv in commands:
            result = _run_one(argv, prefix, scratch, env, limits, deadline)
            results.append(result)
            if not result.ok:
                break
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results


def _run_one(argv: list[str], prefix: tuple[str, ...], cwd: str, env: Optional[dict[str, str]],
             limits: Limits, deadline: float) -> CommandResult:
    started = time.monotonic()
    # CPU time never outruns wall time on the usable cores, so this cap never cuts a command the
    # deadline would not; it bounds one left running when this process dies before it can kill it.
    cpu_cap = cpu_allowance(deadline - started)
    limits = replace(limits, cpu_seconds=min(limits.cpu_seconds or cpu_cap, cpu_cap))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([*prefix, *argv], cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, start_new_session=True, preexec_fn=apply_limits(limits))
        try:
            returncode: Optional[int] = proc.wait(timeout=max(deadline - started, 0.0))
        except subprocess.TimeoutExpired:
            returncode = None
        finally:
            # the command's own leftovers (a daemon it forked) die with it
            kill_process_group(proc.pid)
            proc.wait()
        seconds = time.monotonic() - started
        return CommandResult(argv=tuple(argv), returncode=returncode, stdout=_read_capped(out, limits),
                             stderr=_read_capped(err, limits), seconds=seconds)


def kill_process_group(pgid: int, settle: float = 5.0) -> None:
    """SIGKILL every process in group ``pgid`` and wait, up to ``settle``
    seconds, until none is left running (zombies waiting to be reaped count as
    gone), so that a caller that returns has really stopped what it started:
    a killed process only dies when the kernel next schedules it, which on a
    loaded machine can take a while."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return  # the common case after a command exited: nothing of it left
    # one scan of /proc for the group's members; killed, they cannot fork more
    members = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid:
                members.append(p)
        except OSError:
            continue
    deadline = time.monotonic() + settle
    while any(_running(p) for p in members) and time.monotonic() < deadline:
        time.sleep(0.01)


def _running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _read_capped(f, limits: Limits) -> str:
    f.seek(0)
    return f.read(limits.max_output_bytes).decode("utf-8", "replace")
