"""The attack catalogue against real Rocq: every hostile proof is refused
with its expected reason, and leaves nothing behind.

The catalogue is ``tests/data/rocq_attacks.toml`` (each case documents the
attack and where it was reported).  All cases run, in order, on ONE backend
(one persistent coqtop session, replaced only when a case breaks it), the way
a verifier pool's worker checks proof after proof.  After every case:

* nothing was written outside coqtop's scratch directory: the watched
  directory the attacks aim at (``{WATCH}``), coqtop's ``$HOME``, the test's
  working directory and the temporary directory the scratch directories live
  in are unchanged;
* no process is left behind: every process under this one is the backend's
  live coqtop (or its spare);
* the session is not poisoned: on the same backend, a correct proof is still
  ``valid`` and a wrong one still ``invalid``.

Run: ``pytest tests/integration/lean_env/test_rocq_attacks.py`` (needs ``coqtop``).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
import tomllib
from pathlib import Path

import psutil
import pytest

from lean_env.backends import BackendSpec
from lean_env.rocq.checks import REJECTION_REASONS
from lean_env.verdict import ProofTask, Status
from tests.paths import DATA

CATALOGUE = DATA / "rocq_attacks.toml"
HEADER = "Require Import Arith Lia List.\nImport ListNotations."
DEFAULT_STATEMENT = "Theorem t : False."
FIELDS = {"attack", "reported", "statement", "header", "proof", "reason", "timeout", "status"}
#: the checks after every case
GOOD = ProofTask(id="good", header=HEADER, statement="Theorem good : forall n : nat, 0 + n = n.",
                 proof="Proof. intros n. Show. reflexivity. Qed.")
WRONG = ProofTask(id="wrong", header=HEADER, statement="Theorem wrong : 1 = 2.", proof="Proof. reflexivity. Qed.")


def load_cases() -> list[dict]:
    cases = tomllib.loads(CATALOGUE.read_text("utf-8"))["case"]
    for case in cases:
        assert set(case) <= FIELDS and {"attack", "reported", "proof", "reason"} <= set(case), case
        assert case["attack"].strip() and case["reported"].strip(), case
    return cases


CASES = load_cases()


def test_the_catalogue_is_large_and_documented():
    assert len(CASES) >= 60
    assert len({case["proof"] for case in CASES}) == len(CASES)


def test_every_banned_reason_is_one_the_checks_can_give():
    banned = {case["reason"] for case in CASES if case["reason"].startswith("banned:")}
    assert banned <= REJECTION_REASONS, banned - REJECTION_REASONS


def snapshot(*roots: Path, skip_prefix: str = "") -> dict[str, tuple[int, int]]:
    """Every file and directory under ``roots`` (names starting with
    ``skip_prefix`` at the top level left out), with size and mtime."""
    seen: dict[str, tuple[int, int]] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            if Path(dirpath) == root and skip_prefix:
                dirnames[:] = [d for d in dirnames if not d.startswith(skip_prefix)]
                filenames = [f for f in filenames if not f.startswith(skip_prefix)]
            for name in [*dirnames, *filenames]:
                path = os.path.join(dirpath, name)
                st = os.lstat(path)
                seen[path] = (st.st_size, st.st_mtime_ns)
    return seen


def cwd_listing() -> dict[str, tuple[int, int]]:
    return {name: (st.st_size, st.st_mtime_ns) for name in os.listdir(".")
            for st in [os.lstat(name)]}


def stray_processes(backend, baseline: frozenset[int] = frozenset()) -> list[str]:
    """Processes under this one that are not the backend's live coqtops.

    ``baseline``: processes that were there before (a Ray cluster an earlier
    test started in this process): they and what they start are not the
    attack's doing."""
    live = {p for p in (backend.pid, getattr(backend._spare, "pid", None)) if p is not None}
    # a session is coqtop under unshare and its PID namespace's init: those are the session too
    sandbox = {parent.pid for pid in live if psutil.pid_exists(pid) for parent in psutil.Process(pid).parents()}
    stray = []
    for process in psutil.Process().children(recursive=True):
        try:
            if process.pid in live | sandbox or process.ppid() in live or process.pid in baseline:
                continue
            if any(parent.pid in baseline for parent in process.parents()):
                continue
            if process.status() == psutil.STATUS_ZOMBIE:
                stray.append(f"zombie {process.pid}")
            else:
                stray.append(f"{process.pid} {' '.join(process.cmdline())[:80]}")
        except psutil.NoSuchProcess:
            continue
    return stray


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    root = tmp_path_factory.mktemp("rocq-attacks")
    dirs = {name: root / name for name in ("watch", "home", "tmp")}
    for path in dirs.values():
        path.mkdir()
    return dirs


@pytest.fixture(scope="module")
def backend(coqtop, places):
    # scratch directories go under places["tmp"], coqtop's HOME is places["home"]
    saved_tempdir = tempfile.tempdir
    tempfile.tempdir = str(places["tmp"])
    built = BackendSpec("rocq", {"coqtop": coqtop, "axiom_census": False, "timeout": 30,
                                 "extra_env": {"HOME": str(places["home"]), "TMPDIR": str(places["tmp"])}}).create()
    yield built
    built.close()
    tempfile.tempdir = saved_tempdir


@pytest.mark.rocq
def test_every_attack_is_refused_and_leaves_nothing_behind(backend, places):
    watched = (places["watch"], places["home"])
    assert backend.check_proof(GOOD, 60).valid   # header loaded, sessions started
    baseline = frozenset(p.pid for p in psutil.Process().children(recursive=True)) - {backend.pid}
    files_before = snapshot(*watched) | snapshot(places["tmp"], skip_prefix="lean_env-")
    cwd_before = cwd_listing()
    failures: list[str] = []
    for number, case in enumerate(CASES):
        proof = case["proof"].replace("{WATCH}", str(places["watch"]))
        task = ProofTask(id=f"attack{number}", header=case.get("header", HEADER),
                         statement=case.get("statement", DEFAULT_STATEMENT), proof=proof)
        verdict = backend.check_proof(task, case.get("timeout", 30))
        expected = (Status(case.get("status", "invalid")), case["reason"])
        label = f"#{number} {case['attack']!r}"
        if (verdict.status, verdict.reason) != expected:
            failures.append(f"{label}: got {verdict.status.value}/{verdict.reason}, expected "
                            f"{expected[0].value}/{expected[1]}: {verdict.messages[:1]}")
        if verdict.valid or not verdict.messages:
            failures.append(f"{label}: a hostile proof must be refused with a message")
        after = snapshot(*watched) | snapshot(places["tmp"], skip_prefix="lean_env-")
        if after != files_before or cwd_listing() != cwd_before:
            failures.append(f"{label}: files changed outside the scratch directory: "
                            f"{sorted(set(after) ^ set(files_before))[:5]}")
            files_before, cwd_before = after, cwd_listing()
        good, wrong = backend.check_proof(GOOD, 60), backend.check_proof(WRONG, 60)
        if not good.valid or (wrong.status, wrong.reason) != (Status.INVALID, "prover_error"):
            failures.append(f"{label}: poisoned session: good={good.reason} wrong={wrong.reason}")
        stray = stray_processes(backend, baseline)
        if stray:
            failures.append(f"{label}: processes left behind: {stray}")
    assert not failures, "\n".join(failures)


def test_the_file_watcher_sees_a_new_or_changed_file(tmp_path):
    before = snapshot(tmp_path)
    (tmp_path / "leak").write_text("x")
    assert snapshot(tmp_path) != before
    (tmp_path / "lean_env-scratch").mkdir()
    assert set(snapshot(tmp_path, skip_prefix="lean_env-")) == {str(tmp_path / "leak")}


def test_the_process_watcher_sees_a_stray_child():
    class NoSessions:
        pid = None
        _spare = None

    child = psutil.Popen(["sleep", "30"])
    try:
        assert any(str(child.pid) in line for line in stray_processes(NoSessions()))
    finally:
        child.kill()
        child.wait()


@pytest.mark.rocq
def test_a_file_coqtop_writes_is_seen_by_the_watcher(coqtop, tmp_path):
    """The control for the catalogue: were a Redirect to reach coqtop, the
    watcher would see its file."""
    from lean_env.rocq import RocqConfig
    from lean_env.rocq.session import RocqSession

    config = RocqConfig(coqtop=coqtop)
    # the control may write where the watcher looks: everywhere else the sandbox refuses it
    limits = dataclasses.replace(config.limits(), writable_paths=(str(tmp_path),))
    session = RocqSession(config.argv(), env=config.child_env(), limits=limits, name="coqtop-control")
    try:
        session.wait_ready(time.monotonic() + 60)
        before = snapshot(tmp_path)
        assert session.run(f'Redirect "{tmp_path}/leak" Check I.', time.monotonic() + 60).ok
        assert set(snapshot(tmp_path)) - set(before) == {str(tmp_path / "leak.out")}
    finally:
        session.kill()
