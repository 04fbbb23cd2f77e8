"""The sandbox that runs prover processes: own process group, scratch
directory, resource limits, no network, deadlines, garbled output."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil
import pytest

from lean_env.sandbox import (Limits, OutputTooLarge, ProcessDied, ReadTimeout, SandboxedProcess,
                              network_isolation_prefix)


def line_frame(buf: bytes):
    i = buf.find(b"\n")
    return None if i < 0 else i + 1


def python(code: str, **kw) -> SandboxedProcess:
    return SandboxedProcess([sys.executable, "-u", "-c", code], **kw)


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
