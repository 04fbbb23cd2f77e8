"""CPU-seconds of a command's whole process tree, and what it leaves running.

    .venv/bin/python -m tests.cpu_meter [--linger S] [--json FILE] -- COMMAND [ARG...]

What a test costs on a shared machine is its CPU time, not its wall time
(docs/results.md, "where CI's test time goes").  Neither ``/usr/bin/time`` nor
``getrusage`` sees a Ray cluster's workers: their raylet reaps them with
``SIGCHLD`` ignored, which drops their times.  So the command runs in a cgroup
of its own (cgroup v1 ``cpuacct``, where the machine mounts it writable, as
root): every process it starts stays in it, and the cgroup's counter keeps the
CPU time of those that ended.  Without one, the figures are ``getrusage``'s,
and say so (``counted_by``).  The command also runs below a child subreaper
(Linux ``PR_SET_CHILD_SUBREAPER``), so that its orphans are reaped here.

Once the command has ended, what is left of its tree gets ``--linger`` seconds
(default 30) to end; whatever still runs then is listed on stderr, as
``left running: PID AGE CMD``, and killed (a leak: every process a test starts
must end with it).  Prints one line ``cpu_meter: ...`` on stderr and exits
with the command's status.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

PR_SET_CHILD_SUBREAPER = 36
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
#: How long the final reaping of killed leftovers may take, in seconds.
REAP_S = 30.0


def adopt_orphans() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                  ctypes.c_ulong(0)) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def make_cgroup() -> Path | None:
    """A fresh cpuacct cgroup for the command, or None where none can be made."""
    group = CPUACCT / f"cpu_meter_{os.getpid()}"
    try:
        group.mkdir()
    except OSError:
        return None
    return group


def cgroup_pids(group: Path) -> list[int]:
    try:
        return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def reap(until_pid: int | None, deadline: float, group: Path | None = None) -> int | None:
    """Reap children until ``until_pid`` ends (its exit code back) or, with None, until none is left
    (and ``group``, if given, is empty); gives up at ``deadline`` (monotonic) and returns None then."""
    while time.monotonic() < deadline:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            if until_pid is not None or group is None or not cgroup_pids(group):
                return None
            pid = 0
        if pid == 0:
            time.sleep(0.1)
        elif pid == until_pid:
            return os.waitstatus_to_exitcode(status)
    return None


def leftovers(group: Path | None) -> list[psutil.Process]:
    """What still runs of the tree (zombies waiting to be reaped are not running)."""
    if group is not None:
        candidates = []
        for pid in cgroup_pids(group):
            try:
                candidates.append(psutil.Process(pid))
            except psutil.Error:
                continue
    else:
        candidates = psutil.Process().children(recursive=True)
    alive = []
    for process in candidates:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.Error:
            continue
    return alive


def describe(process: psutil.Process) -> str:
    try:
        age = time.time() - process.create_time()
        return f"{process.pid} {age:.0f}s {' '.join(process.cmdline())[:200]}"
    except psutil.Error:
        return f"{process.pid} (ended)"


def cgroup_seconds(group: Path) -> tuple[float, float]:
    """User and system CPU-seconds of everything that ran in ``group``."""
    ticks = os.sysconf("SC_CLK_TCK")
    stat = dict(line.split() for line in (group / "cpuacct.stat").read_text().splitlines())
    return int(stat["user"]) / ticks, int(stat["system"]) / ticks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cpu_meter", description=__doc__.split("\n\n")[0])
    parser.add_argument("--linger", type=float, default=30.0, help="seconds the tree gets to end after the command")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    adopt_orphans()
    group = make_cgroup()

    def join_group() -> None:  # in the child, before it runs the command
        (group / "cgroup.procs").write_text("0")

    started = time.monotonic()
    child = subprocess.Popen(command, preexec_fn=join_group if group is not None else None)
    # Not child.wait(): every orphan of the tree is this process's child now, and is reaped here.
    code = reap(child.pid, float("inf"))
    child.returncode = code
    wall = time.monotonic() - started
    reap(None, time.monotonic() + args.linger, group)
    left = leftovers(group)
    described = [describe(process) for process in left]
    for process, description in zip(left, described):
        print(f"cpu_meter: left running: {description}", file=sys.stderr)
        try:
            process.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    reap(None, time.monotonic() + REAP_S, group)
    if group is not None:
        user, system = cgroup_seconds(group)
        try:
            group.rmdir()
        except OSError as error:
            print(f"cpu_meter: could not remove {group}: {error}", file=sys.stderr)
    else:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        user, system = usage.ru_utime, usage.ru_stime
    figures = {"command": command, "exit": code, "counted_by": "cgroup" if group is not None else "getrusage",
               "user_s": round(user, 1), "system_s": round(system, 1), "cpu_s": round(user + system, 1),
               "wall_s": round(wall, 1), "left_running": described,
               "load_average": [round(x, 1) for x in os.getloadavg()]}
    print(f"cpu_meter: cpu {figures['cpu_s']} s (user {figures['user_s']}, system {figures['system_s']}, by "
          f"{figures['counted_by']}), wall {figures['wall_s']} s, exit {code}, {len(left)} left running, "
          f"load {figures['load_average']}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return code if code is not None else 1


if __name__ == "__main__":
    sys.exit(main())
