"""The sandbox that runs prover processes: own process group, scratch
directory, resource limits, no network, deadlines, garbled output."""

from __future__ import annotations

import os
import resource
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from lean_env import sandbox

from lean_env.sandbox import (Limits, OutputTooLarge, ProcessDied, ReadTimeout, SandboxedProcess, cpu_allowance,
                              network_isolation_prefix, run_batch)


def line_frame(buf: bytes):
    i = buf.find(b"\n")
    return None if i < 0 else i + 1


def python(code: str, **kw) -> SandboxedProcess:
    return SandboxedProcess([sys.executable, "-u", "-c", code], **kw)


def tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def running_with(marker: str) -> list[int]:
    """Processes (not zombies) whose command line contains ``marker``: how a test
    finds a process a sandboxed one started, whose own number for it means nothing
    here when it runs in a PID namespace."""
    found = []
    for q in psutil.process_iter():
        try:
            if marker in " ".join(q.cmdline()) and q.status() != psutil.STATUS_ZOMBIE:
                found.append(q.pid)
        except psutil.Error:
            continue
    return found


def test_echo_roundtrip_and_scratch_dir_removed():
    p = python("import sys\nfor line in sys.stdin: print(line.strip().upper(), flush=True)")
    try:
        p.write(b"hello\n")
        assert p.read_until(line_frame, time.monotonic() + 10) == b"HELLO\n"
        assert os.path.isdir(p.cwd) and p.cwd != os.getcwd()
    finally:
        p.kill()
    assert not os.path.exists(p.cwd)
    assert not p.alive


def test_a_killed_owners_scratch_dir_is_removed_by_the_next_sweep():
    """An owner killed with SIGKILL runs no clean-up: its session's directory stays
    until a later process's sweep (:mod:`lean_env.scratch`), which removes it once
    the owner is gone, and only then."""
    import subprocess
    from lean_env.scratch import remove_orphaned_scratch_dirs
    code = ("import sys, time\nfrom lean_env.sandbox import SandboxedProcess\n"
            # the session's process ends when its stdin closes with the owner, as coqtop does
            "p = SandboxedProcess([sys.executable, '-c', 'import sys; sys.stdin.read()'])\n"
            "print(p.scratch, flush=True)\ntime.sleep(60)\n")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[3])
    try:
        scratch = owner.stdout.readline().strip()
        assert os.path.isdir(scratch)
        assert scratch not in remove_orphaned_scratch_dirs()      # its owner still runs
    finally:
        owner.kill()
        owner.wait(timeout=30)
    assert os.path.isdir(scratch)                                  # no clean-up ran
    assert scratch in remove_orphaned_scratch_dirs() and not os.path.exists(scratch)


def test_deadline_then_kill_takes_the_whole_group():
    # The child starts a grandchild that would outlive a plain kill of the child.
    p = python("import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(300)")
    try:
        time.sleep(0.5)
        group = [q.pid for q in psutil.Process(p.pid).children(recursive=True)]
        assert group, "grandchild did not start"
        with pytest.raises(ReadTimeout):
            p.read_until(line_frame, time.monotonic() + 0.5)
    finally:
        p.kill()
    time.sleep(0.2)
    for pid in group:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_death_mid_answer_is_reported():
    p = python("import sys, os; sys.stdout.write('partial'); sys.stdout.flush(); os._exit(3)")
    try:
        with pytest.raises(ProcessDied, match="exit code"):
            p.read_until(line_frame, time.monotonic() + 10)
    finally:
        p.kill()


@pytest.mark.parametrize("merge_stderr, said", [(False, "stderr: cannot find my library"),
                                                 (True, "unanswered output: cannot find my library")])
def test_a_process_that_cannot_start_says_why_in_the_error(merge_stderr, said):
    # What a prover missing its library does: complain on stderr, exit.  The error
    # must carry the complaint and the exit code, not "exit code None; stderr: ".
    p = python("import sys; sys.stderr.write('cannot find my library'); sys.exit(1)", merge_stderr=merge_stderr)
    try:
        with pytest.raises(ProcessDied) as died:
            p.read_until(line_frame, time.monotonic() + 10)
        assert "exit code 1" in str(died.value) and said in str(died.value)
    finally:
        p.kill()


def test_unbounded_output_is_cut_off():
    p = python("import sys\nwhile True: sys.stdout.write('x' * 65536)",
               limits=Limits(max_output_bytes=1 << 20))
    try:
        with pytest.raises(OutputTooLarge):
            p.read_until(line_frame, time.monotonic() + 20)
    finally:
        p.kill()


def test_stderr_is_drained_and_kept():
    p = python("import sys\nfor i in range(20000): sys.stderr.write('noise %d\\n' % i)\nprint('done', flush=True)")
    try:
        assert p.read_until(line_frame, time.monotonic() + 20) == b"done\n"
        # stderr is read by its own thread: give it a moment to catch up
        deadline = time.monotonic() + 20
        while "noise 19999" not in p.stderr_tail() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "noise 19999" in p.stderr_tail()
    finally:
        p.kill()


def test_resource_limits_apply():
    p = python("import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], "
               "resource.getrlimit(resource.RLIMIT_AS)[0], flush=True)",
               limits=Limits(open_files=64, address_space_bytes=3 << 30))
    try:
        out = p.read_until(line_frame, time.monotonic() + 10).split()
        assert int(out[0]) == 64 and int(out[1]) == 3 << 30
    finally:
        p.kill()


def test_a_process_nobody_waits_for_stops_by_its_cpu_limit():
    """What an orphan does when its worker dies mid-answer: it is busy (a hostile proof),
    never reads its closed stdin, and nobody kills it; its CPU limit ends it."""
    p = python("while True: pass", limits=Limits(orphan_slack_seconds=0.5))
    try:
        with pytest.raises(ReadTimeout):
            p.read_until(line_frame, time.monotonic() + 0.5)
        soft, hard = resource.prlimit(p.pid, resource.RLIMIT_CPU)
        assert hard == resource.RLIM_INFINITY and 0 < soft <= cpu_allowance(1.0) + 1
        # nobody waits for it any more: it runs out of CPU seconds
        assert sandbox.signal_of(p.proc.wait(timeout=60)) == signal.SIGXCPU
    finally:
        p.kill()


def test_a_process_that_is_waited_for_keeps_working_past_its_first_limit(monkeypatch):
    """The limit follows the deadlines: a session that answers for longer than its first
    limit allows is not cut.  With one core counted (true of this single-threaded child)
    the first limit is 4 CPU seconds: 1 used, rounded up, + 1.6 s of wall time + 1."""
    monkeypatch.setattr(sandbox, "_usable_cpus", lambda: 1)
    p = python("import sys, time\nfor line in sys.stdin:\n    t = time.process_time()\n"
               "    while time.process_time() - t < 0.3: pass\n    print('done', flush=True)",
               limits=Limits(orphan_slack_seconds=0.1))
    try:
        for _ in range(15):  # 4.5 CPU seconds
            p.write(b"go\n")
            assert p.read_until(line_frame, time.monotonic() + 1.5) == b"done\n"
        # the limit of the process doing the work (under a PID namespace, p.pid is unshare)
        assert p.alive and max(resource.prlimit(q.pid, resource.RLIMIT_CPU)[0] for q in tree(p.pid)) > 4
    finally:
        p.kill()


def test_no_network_when_the_kernel_allows_it():
    if not network_isolation_prefix():
        pytest.skip("this machine does not allow network namespaces")
    p = python("import socket\ntry:\n socket.create_connection(('1.1.1.1', 53), timeout=2); print('open')\n"
               "except OSError as e: print('blocked', flush=True)")
    try:
        assert p.read_until(line_frame, time.monotonic() + 10) == b"blocked\n"
        assert p.network_isolated
    finally:
        p.kill()


def test_writes_stay_in_the_scratch_dir():
    p = python("open('scratch_file', 'w').write('x'); import os; print(os.getcwd(), flush=True)")
    try:
        cwd = p.read_until(line_frame, time.monotonic() + 10).decode().strip()
        assert Path(cwd, "scratch_file").exists()
    finally:
        p.kill()
    assert not Path(cwd).exists()


# -- run_batch: a sequence of batch commands in one fresh scratch directory --

def py_command(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_batch_commands_share_one_scratch_dir_that_is_removed():
    results = run_batch(
        [py_command("import os; open('made', 'w').write(open('given').read().upper()); print(os.getcwd())"),
         py_command("import sys; print(open('made').read()); print('warn', file=sys.stderr)")],
        files={"given": "proof text"}, deadline=time.monotonic() + 30)
    assert [r.returncode for r in results] == [0, 0]
    scratch = results[0].stdout.strip()
    assert results[1].stdout == "PROOF TEXT\n"
    # stderr is kept apart from stdout, so a warning cannot corrupt an answer
    assert results[1].stderr == "warn\n"
    assert not Path(scratch).exists()


def test_batch_stops_at_the_first_failing_command():
    results = run_batch([py_command("import sys; print('no'); sys.exit(3)"), py_command("print('never')")],
                        files={}, deadline=time.monotonic() + 30)
    assert len(results) == 1
    assert results[0].returncode == 3 and not results[0].ok and not results[0].timed_out
    assert results[0].stdout == "no\n"


def test_a_batch_command_cannot_use_more_cpu_than_its_deadline_allows():
    """The bound on a command left running if the process that started it dies first."""
    code = "import resource; print(*resource.getrlimit(resource.RLIMIT_CPU))"
    [result] = run_batch([py_command(code)], files={}, deadline=time.monotonic() + 20)
    soft, hard = map(int, result.stdout.split())
    assert 0 < soft == hard <= cpu_allowance(20)
    [tighter] = run_batch([py_command(code)], files={}, deadline=time.monotonic() + 20, limits=Limits(cpu_seconds=3))
    assert tighter.stdout.split() == ["3", "3"]  # a tighter limit of the caller's stays


def test_batch_deadline_kills_the_command_and_what_it_started():
    marker = f"{300 + os.getpid() % 1000 / 1000:.3f}"  # a sleep length no other process uses
    code = (f"import subprocess, time; p = subprocess.Popen(['sleep', '{marker}']); print(p.pid, flush=True); "
            "time.sleep(300)")
    results = run_batch([py_command(code), py_command("print('never')")], files={},
                        deadline=time.monotonic() + 1.0)
    assert len(results) == 1 and results[0].timed_out
    assert results[0].stdout.strip() and running_with(f"sleep {marker}") == []


def test_batch_kills_a_daemon_left_behind_by_a_command_that_exited():
    marker = f"{301 + os.getpid() % 1000 / 1000:.3f}"
    code = f"import subprocess; p = subprocess.Popen(['sleep', '{marker}']); print(p.pid, flush=True)"
    [result] = run_batch([py_command(code)], files={}, deadline=time.monotonic() + 30)
    assert result.ok and result.stdout.strip()
    assert running_with(f"sleep {marker}") == []


def test_batch_applies_limits_and_caps_output():
    limits = Limits(open_files=64, file_size_bytes=1 << 20, max_output_bytes=1000)
    [probe, flood] = run_batch(
        [py_command("import resource as r; print(r.getrlimit(r.RLIMIT_NOFILE)[0], r.getrlimit(r.RLIMIT_FSIZE)[0])"),
         py_command("import sys; sys.stdout.write('x' * 100000); sys.exit(1)")],
        files={}, deadline=time.monotonic() + 30, limits=limits)
    assert probe.stdout.split() == ["64", str(1 << 20)]
    assert flood.stdout == "x" * 1000


@pytest.mark.parametrize("name", ["../escape", "a/b", "", ".."])
def test_batch_refuses_file_names_that_are_not_plain(name):
    with pytest.raises(ValueError, match="not a plain file name"):
        run_batch([py_command("pass")], files={name: "x"}, deadline=time.monotonic() + 30)


def test_batch_with_a_missing_binary_raises_before_running_anything(tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(FileNotFoundError, match="nonexistent"):
        run_batch([py_command(f"open({str(marker)!r}, 'w')"), ["/nonexistent/coqc"]], files={},
                  deadline=time.monotonic() + 30)
    assert not marker.exists()
    with pytest.raises(FileNotFoundError):
        run_batch([["/nonexistent/coqc"]], files={}, deadline=time.monotonic() + 30)
