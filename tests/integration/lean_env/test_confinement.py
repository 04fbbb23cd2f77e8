"""Confinement of prover processes (issue 43): a stand-in prover that does what a
hostile proof would make Lean or Rocq do (write outside its scratch directory,
leave daemons, fork without end, connect out, signal outside) fails at each, through
:class:`SandboxedProcess`, :func:`run_batch` and the Lean REPL's own
:class:`ReplProcess`; real coqtop checks leave no file and no process behind.

Each test says what it needs (Landlock, namespaces, a process bound) and skips
where the machine lacks it: the sandbox degrades there, and says so through
``write_confined``, ``processes_isolated``, ``process_bound`` and ``network_isolated``.
"""

from __future__ import annotations

import errno
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest

from lean_env import confinement, landlock, sandbox
from lean_env.lean.protocol import decode_response, encode_request, response_frame_end
from lean_env.lean.repl import ReplProcess
from lean_env.sandbox import Limits, SandboxedProcess, run_batch
from tests.integration.lean_env.test_sandbox import running_with

HOSTILE = Path(__file__).with_name("hostile_repl.py")
REPO = Path(__file__).resolve().parents[3]
DENIED = (errno.EACCES, errno.EPERM, errno.EROFS)


def fresh_marker() -> str:
    return f"lean-env-mark-{uuid.uuid4().hex}"


def hostile(marker: str, **kw) -> SandboxedProcess:
    # the marker rides in the command line, so that every process the stand-in forks carries it
    return SandboxedProcess([sys.executable, str(HOSTILE), marker], **kw)


def ask(p: SandboxedProcess, request: dict) -> dict:
    p.write(encode_request(request))
    return decode_response(p.read_until(response_frame_end, time.monotonic() + 30))


def outside_targets(tmp_path: Path) -> list[Path]:
    """Places outside the scratch directory a prover could leave a file in."""
    name = f"lean-env-hostile-{uuid.uuid4().hex}"
    return [Path(tempfile.gettempdir(), name), Path("/tmp", name), Path("/var/tmp", name),
            Path(os.path.expanduser("~"), name), REPO / name, tmp_path / name]


def require(condition: bool, why: str) -> None:
    if not condition:
        pytest.skip(why)


# -- files -------------------------------------------------------------------------

def test_writes_outside_the_scratch_dir_fail_and_inside_they_work(tmp_path):
    marker = fresh_marker()
    victim = tmp_path / "victim"
    victim.write_text("keep")
    p = hostile(marker)
    try:
        require(p.write_confined, "Landlock is not available here")
        where = ask(p, {"where": True})
        # every conventional writable place points into the scratch directory
        for name in ("HOME", "TMPDIR", "TMP", "TEMP", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"):
            assert where[name].startswith(p.scratch + os.sep), (name, where[name])
        targets = outside_targets(tmp_path)
        for target in targets:
            answer = ask(p, {"write": str(target)})
            assert not answer["ok"] and answer["errno"] in DENIED, (target, answer)
        for request in ({"mkdir": f"/tmp/{marker}-dir"}, {"mkdir": str(REPO / f"{marker}-dir")},
                        {"unlink": str(victim)}, {"truncate": str(victim)},
                        {"rename": [str(victim), os.path.join(p.scratch, "stolen")]},
                        {"symlink": [str(victim), f"/tmp/{marker}-link"]}):
            answer = ask(p, request)
            assert not answer["ok"] and answer["errno"] in DENIED, (request, answer)
        # where it may write, it can
        for inside in (os.path.join(where["TMPDIR"], "t"), os.path.join(where["HOME"], "h"), "relative"):
            assert ask(p, {"write": inside})["ok"], inside
        assert ask(p, {"mkdir": os.path.join(where["XDG_CACHE_HOME"])})["ok"]
        assert ask(p, {"write": "/dev/null"})["ok"]
    finally:
        p.kill()
    assert victim.read_text() == "keep"
    for target in [*targets, Path(f"/tmp/{marker}-dir"), REPO / f"{marker}-dir", Path(f"/tmp/{marker}-link")]:
        assert not os.path.lexists(target), target
    assert not os.path.exists(p.scratch)


def test_writable_paths_given_by_the_caller_are_writable(tmp_path):
    p = hostile(fresh_marker(), limits=Limits(writable_paths=(str(tmp_path),)))
    try:
        require(p.write_confined, "Landlock is not available here")
        assert ask(p, {"write": str(tmp_path / "log")})["ok"]
        assert not ask(p, {"write": f"/tmp/{fresh_marker()}"})["ok"]
    finally:
        p.kill()
    assert (tmp_path / "log").exists()


def test_a_given_working_directory_stays_read_only(tmp_path):
    """The Lean REPL runs in the project directory (for ``lake env``): the proof must
    not be able to change it, e.g. replace a compiled library."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "Lib.olean").write_text("compiled")
    p = hostile(fresh_marker(), cwd=str(project))
    try:
        require(p.write_confined, "Landlock is not available here")
        assert ask(p, {"where": True})["cwd"] == str(project)
        assert not ask(p, {"write": "Lib.olean"})["ok"]
        assert not ask(p, {"write": "New.olean"})["ok"]
        assert ask(p, {"write": os.path.join(p.scratch, "scratch-is-fine")})["ok"]
    finally:
        p.kill()
    assert (project / "Lib.olean").read_text() == "compiled" and not (project / "New.olean").exists()
    assert project.is_dir() and not os.path.exists(p.scratch)


def test_batch_commands_write_only_in_their_scratch_dir(tmp_path):
    require(sandbox.landlock_works(), "Landlock is not available here")
    outside = Path("/tmp", f"lean-env-batch-{uuid.uuid4().hex}")
    code = (f"import os\nopen('inside', 'w').write('x')\nprint(os.path.exists('inside'))\n"
            f"try:\n    open({str(outside)!r}, 'w')\nexcept OSError as e:\n    print(e.errno)")
    [result] = run_batch([[sys.executable, "-c", code]], files={}, deadline=time.monotonic() + 30)
    assert result.ok and result.stdout.split() == ["True", str(errno.EACCES)]
    assert not outside.exists()


# -- processes ---------------------------------------------------------------------

def test_daemons_that_leave_the_session_end_with_it():
    marker = fresh_marker()
    p = hostile(marker)
    try:
        require(p.processes_isolated or p.process_bound == "cgroup",
                "neither a PID namespace nor a cgroup holds the session's processes here")
        assert ask(p, {"daemon": f"{marker}-sleeper"})["ok"]
        assert ask(p, {"daemon": f"{marker}-spinner", "busy": True})["ok"]
        assert running_with(f"{marker}-sleeper") and running_with(f"{marker}-spinner")
        # they left the session and the process group: the old kill missed them
        sleeper = psutil.Process(running_with(f"{marker}-sleeper")[0])
        assert os.getsid(sleeper.pid) != os.getsid(p.proc.pid)
    finally:
        p.kill()
    assert running_with(marker) == []  # the daemons, the stand-in, and nothing else of it


def test_what_an_answer_left_running_ends_and_the_prover_stays():
    """After each answer the backend ends the session's strays (RocqSession after each
    sentence): the prover keeps working, its leftovers do not."""
    marker = fresh_marker()
    p = hostile(marker)
    try:
        require(p.processes_isolated or p.process_bound == "cgroup",
                "neither a PID namespace nor a cgroup holds the session's processes here")
        assert p.end_strays() == 0
        assert ask(p, {"daemon": f"{marker}-daemon", "busy": True})["ok"]
        assert ask(p, {"forks": 3})["started"] == 3
        # unshare and the namespace's init carry the marker in their command lines too
        wrappers = ({p.proc.pid, *(q.pid for q in psutil.Process(p.proc.pid).children())} - {p.pid}
                    if p.processes_isolated else set())
        assert len(set(running_with(marker)) - wrappers) == 1 + 1 + 3  # the prover, the daemon, its children
        assert p.end_strays() == 4
        assert running_with(f"{marker}-daemon") == [] and set(running_with(marker)) - wrappers == {p.pid}
        assert ask(p, {"where": True})["ok"] and p.alive
    finally:
        p.kill()
    assert running_with(marker) == []


def test_a_batch_command_s_daemons_end_when_it_exits():
    require("--pid" in sandbox.isolation_prefix(True, True) or confinement._pids_cgroup_base() is not None,
            "neither a PID namespace nor a cgroup holds a command's processes here")
    marker = fresh_marker()
    code = ("import os, sys, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(600)', '{marker}'])\n"
            "    os._exit(0)\n"
            "os.wait()\ntime.sleep(0.2)\nprint('left one behind')")
    [result] = run_batch([[sys.executable, "-c", code]], files={}, deadline=time.monotonic() + 30)
    assert result.ok and "left one behind" in result.stdout
    assert running_with(marker) == []


def test_the_number_of_processes_is_bounded():
    marker = fresh_marker()
    p = hostile(marker, limits=Limits(max_processes=24))
    try:
        require(p.process_bound is not None, "no pids cgroup and no user namespace here")
        require(p.process_bound == "cgroup" or os.geteuid() != 0, "RLIMIT_NPROC does not bind root")
        answer = ask(p, {"forks": 100})
        assert answer["ok"] and 0 < answer["started"] < 24
    finally:
        p.kill()
    assert running_with(marker) == []


def test_the_orphan_cpu_limit_reaches_the_prover_under_the_namespace():
    """The CPU bound that stops a prover nobody waits for any more is set on every
    process of the tree, not only on ``unshare``."""
    p = SandboxedProcess([sys.executable, "-c", "import sys; sys.stdin.readline()"],
                         limits=Limits(orphan_slack_seconds=1))
    try:
        with pytest.raises(sandbox.ReadTimeout):
            p.read_until(lambda b: None, time.monotonic() + 0.1)
        tree = [psutil.Process(p.proc.pid), *psutil.Process(p.proc.pid).children(recursive=True)]
        assert p.pid in [q.pid for q in tree]
        for q in tree:
            soft, _ = q.rlimit(psutil.RLIMIT_CPU)
            assert soft != psutil.RLIM_INFINITY, q.cmdline()
    finally:
        p.kill()


# -- network and signals -------------------------------------------------------------

@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "landlock-only"])
def test_no_connection_out_and_no_signal_out(namespaces):
    """With namespaces the network and the PID space are empty; without them,
    Landlock alone (ABI 4: TCP, ABI 6: abstract sockets and signals) refuses."""
    limits = Limits(isolate_network=namespaces, isolate_processes=namespaces)
    if not namespaces:
        require(sandbox.landlock_works() and landlock.abi_version() >= 6, "Landlock ABI 6 is not available here")
    listener = socket.create_server(("127.0.0.1", 0))
    abstract_name = f"lean-env-test-{uuid.uuid4().hex}"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind("\0" + abstract_name)
    unix.listen()
    victim = subprocess.Popen(["sleep", "600"])
    p = hostile(fresh_marker(), limits=limits)
    try:
        if namespaces:
            require(p.network_isolated and p.processes_isolated, "no network or PID namespace here")
        for request in ({"connect": listener.getsockname()[1]}, {"abstract": abstract_name},
                        {"signal": victim.pid}):
            answer = ask(p, request)
            assert not answer["ok"], (request, answer)
        # nobody knocked: nothing waits to be accepted on either socket
        assert select.select([listener, unix], [], [], 0)[0] == []
        assert victim.poll() is None
    finally:
        p.kill()
        victim.kill()
        victim.wait()
        listener.close()
        unix.close()


# -- the Lean REPL process ------------------------------------------------------------

def test_the_lean_repl_process_cannot_write_spawn_or_connect_outside(tmp_path):
    """``ReplProcess`` (what the Lean backend runs ``lake env repl`` with) with a
    stand-in that tries each: every attempt fails, or, for the daemon it leaves,
    ends with the process."""
    marker = fresh_marker()
    listener = socket.create_server(("127.0.0.1", 0))
    repl = ReplProcess([sys.executable, str(HOSTILE), marker], limits=Limits(max_processes=64))
    proc = repl._proc
    targets = outside_targets(tmp_path)
    try:
        require(proc.write_confined, "Landlock is not available here")
        deadline = time.monotonic() + 30
        for target in targets:
            assert not repl.request({"write": str(target)}, deadline)["ok"], target
        assert not repl.request({"mkdir": f"/tmp/{marker}"}, deadline)["ok"]
        assert not repl.request({"connect": listener.getsockname()[1]}, deadline)["ok"]
        assert select.select([listener], [], [], 0)[0] == []  # nobody knocked
        if proc.processes_isolated:
            assert repl.request({"daemon": marker}, deadline)["ok"] and running_with(marker)
        if proc.process_bound is not None and (proc.process_bound == "cgroup" or os.geteuid() != 0):
            assert repl.request({"forks": 200}, deadline)["started"] < 64
        # the REPL's pid is the stand-in's own, as the backend expects
        assert marker in " ".join(psutil.Process(repl.pid).cmdline())
    finally:
        repl.kill()
        listener.close()
    assert running_with(marker) == []
    for target in [*targets, Path(f"/tmp/{marker}")]:
        assert not target.exists(), target


# -- without root: a user namespace of the session's own ---------------------------------

NOBODY = 65534


def test_the_user_namespace_path_confines_as_well(monkeypatch, tmp_path):
    """The path a user other than root takes (a user namespace made in the child, then
    the namespaces, RLIMIT_NPROC, Landlock), taken here whoever runs the tests; that
    RLIMIT_NPROC binds is for the test below, as ``nobody`` (root is exempt from it)."""
    monkeypatch.setattr(confinement, "_needs_user_namespace", lambda: True)
    monkeypatch.setattr(confinement, "_pids_cgroup_base", lambda: None)
    marker = fresh_marker()
    p = hostile(marker, limits=Limits(max_processes=24))
    try:
        require(p.processes_isolated and p.write_confined, "no user namespace or no Landlock here")
        assert p.process_bound == "rlimit"
        assert not ask(p, {"write": str(tmp_path / "outside")})["ok"]
        assert ask(p, {"daemon": marker})["ok"] and running_with(marker)
    finally:
        p.kill()
    assert running_with(marker) == [] and not (tmp_path / "outside").exists()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root to become another user")
def test_as_an_unprivileged_user_the_same_holds(tmp_path):
    """What a non-root deployment gets: the user namespace made in the child, a PID
    and network namespace inside it, RLIMIT_NPROC per session, Landlock.  Run as
    ``nobody`` with the system's Python (ours lives under /root) and our psutil."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    site = [p for p in sys.path if p.endswith("site-packages") and Path(p, "psutil").is_dir()]
    require(python is not None and bool(site), "no system python3 to run as another user")
    version = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                             text=True).stdout.strip()
    require(version == str(tuple(sys.version_info[:2])), "the system python3 cannot load our psutil")
    work = Path(tempfile.mkdtemp(prefix="lean-env-nobody-", dir="/tmp"))  # pytest's are root's alone
    os.chown(work, NOBODY, NOBODY)
    marker = fresh_marker()
    outside = Path("/tmp", f"{marker}-file")
    script = f"""
import sys, time, os, tempfile
sys.path[:0] = [{str(REPO)!r}, {site[0]!r}]
tempfile.tempdir = {str(work)!r}
from lean_env.sandbox import SandboxedProcess, Limits
from lean_env.lean.protocol import decode_response, encode_request, response_frame_end
p = SandboxedProcess([sys.executable, {str(HOSTILE)!r}, {marker!r}], limits=Limits(max_processes=24))
def ask(r):
    p.write(encode_request(r))
    return decode_response(p.read_until(response_frame_end, time.monotonic() + 30))
print("flags", p.write_confined, p.processes_isolated, p.process_bound, p.network_isolated)
print("write", ask({{"write": {str(outside)!r}}})["ok"])
print("daemon", ask({{"daemon": {marker!r}}})["ok"])
print("forks", ask({{"forks": 100}}).get("started"))
p.kill()
"""
    try:
        done = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python,
                               "-c", script], capture_output=True, text=True, timeout=120, cwd=str(work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    if done.returncode != 0 or "flags" not in out:
        pytest.fail(f"the unprivileged run failed: {done.stdout}\n{done.stderr[-2000:]}")
    confined, isolated, bound, _ = out["flags"].split()
    require(confined == "True" and isolated == "True", f"an unprivileged user gets no sandbox here: {out}")
    assert out["write"] == "False" and not outside.exists()
    assert bound == "rlimit" and 0 < int(out["forks"]) < 24
    assert out["daemon"] == "True" and running_with(marker) == []


# -- real coqtop ------------------------------------------------------------------------

@pytest.mark.rocq
def test_coqtop_cannot_write_outside_its_scratch_dir(coqtop):
    from lean_env.rocq.config import RocqConfig
    from lean_env.rocq.session import RocqSession

    config = RocqConfig(coqtop=coqtop)
    session = RocqSession(config.argv(), env=config.child_env(), limits=config.limits(), name="coqtop-confined")
    marker = fresh_marker()
    outside = Path("/tmp", marker)
    try:
        require(session._proc.write_confined, "Landlock is not available here")
        deadline = time.monotonic() + 60
        session.wait_ready(deadline)
        assert session.run('Redirect "inside" Print nat.', deadline).ok
        assert Path(session._proc.scratch, "inside.out").exists()
        reply = session.run(f'Redirect "{outside}" Print nat.', deadline)
        assert not reply.ok and "ermission denied" in reply.output
        assert session.run("Require Extraction.", deadline).ok
        assert not session.run(f'Extraction "{outside}.ml" nat.', deadline).ok
    finally:
        session.kill()
    assert not Path(f"{outside}.out").exists() and not Path(f"{outside}.ml").exists()


@pytest.mark.rocq
def test_rocq_checks_leave_no_file_and_no_process_behind(coqtop, tmp_path, monkeypatch):
    """Valid, invalid and timed-out checks through the real backend: after each the
    processes of this test are the live session's and no others, after close none;
    the scratch directories (under a temporary directory of this test's own, so that
    other tests' files cannot interfere) are all gone."""
    from lean_env.rocq import RocqBackend, RocqConfig
    from lean_env.verdict import ProofTask, Status

    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch_root))
    me = psutil.Process()
    baseline = {q.pid for q in me.children(recursive=True)}
    backend = RocqBackend(RocqConfig(coqtop=coqtop, axiom_census=False, timeout=60, spare=False),
                          worker="confinement")
    header = "Require Import Arith Lia."
    checks = [("Theorem t : forall n : nat, n + 0 = n.", "Proof. intros. lia. Qed.", Status.VALID, 60),
              ("Theorem t : forall n : nat, n + 1 = n.", "Proof. intros. lia. Qed.", Status.INVALID, 60),
              ("Theorem t : True.", "Proof. do 1000000000 idtac. exact I. Qed.", Status.TIMEOUT, 2),
              ("Theorem t : 2 + 2 = 4.", "Proof. reflexivity. Qed.", Status.VALID, 60)]
    try:
        for statement, proof, status, timeout in checks:
            verdict = backend.check_proof(ProofTask(id="t", header=header, statement=statement, proof=proof),
                                          timeout)
            assert verdict.status is status, verdict
            live = [psutil.Process(q) for q in {q.pid for q in me.children(recursive=True)} - baseline]
            # the session's own processes only: unshare, the namespace's init and coqtop
            names = sorted(q.name() for q in live)
            assert set(names) <= {"unshare", "sh", "coqtop"} and names.count("coqtop") <= 1, names
    finally:
        backend.close()
    assert {q.pid for q in me.children(recursive=True)} - baseline == set()
    assert list(scratch_root.iterdir()) == []
