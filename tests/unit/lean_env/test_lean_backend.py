"""The real Lean client (ReplProcess, LeanBackend) against the replay test
double, which answers with recorded REPL transcripts and simulates hangs,
crashes and garbage.  ``#print axioms`` answers are synthesized by the replay
in the REPL's documented format: no recorded transcript prints axioms."""

from __future__ import annotations

import os
import shlex
import signal
import time
from pathlib import Path

import psutil
import pytest

from lean_env.lean import (
    LeanBackend, LeanConfig, LeanConfigError, ProofStateRef, ReplProcess, TacticStatus)
from lean_env.verdict import ProofTask, Status
from tests.lean.lean_support import (
    FIXTURES, REPLAY, logged_requests, needs_fixtures, replay_backend, replay_command, requests, responses,
    split_at_by, wait_for)

pytestmark = needs_fixtures

MATHLIB = "mathlib/H20231020"
#: three theorems proved in the header's environment (env 0)
MATHLIB_HEADER = requests(MATHLIB)[0]["cmd"] if FIXTURES.is_dir() else ""


def mathlib_task(index: int) -> ProofTask:
    statement, body = split_at_by(requests(MATHLIB)[index]["cmd"])
    return ProofTask(id=f"p{index}", header=MATHLIB_HEADER, statement=statement, proof=body)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "requests.jsonl"


# -- one process -------------------------------------------------------------------

@pytest.mark.parametrize("name", ["line_breaks", "invalid_line_break", "mathlib/H20231020", "all_tactics",
                                  "mathlib/induction", "unknown_environment"])
def test_repl_process_round_trips_recorded_sessions(name):
    """Every recorded request goes over the wire as our client frames it and
    comes back as the recorded answer (the replay dies on bad framing)."""
    proc = ReplProcess(shlex.split(replay_command(name)))
    try:
        for request, expected in zip(requests(name), responses(name)):
            assert proc.request(request, time.monotonic() + 30) == expected
        assert proc.commands == len(responses(name))
    finally:
        proc.kill()
    assert gone(proc.pid)


def test_header_runs_once_per_process(log_path):
    with replay_backend(MATHLIB, request_log=log_path) as backend:
        verdicts = [backend.check_proof(mathlib_task(i), timeout=30) for i in (1, 2, 3)]
    assert [v.status for v in verdicts] == [Status.VALID] * 3, verdicts
    assert all(v.reason == "ok" and v.worker.startswith("lean:") for v in verdicts)
    sent = [entry["request"] for entry in logged_requests(log_path)]
    assert [r for r in sent if "env" not in r] == [{"cmd": MATHLIB_HEADER}]
    proofs = [r for r in sent if not r["cmd"].startswith("#print axioms")]
    assert [r.get("env") for r in proofs[1:]] == [0, 0, 0]
    assert proofs[1]["cmd"] == mathlib_task(1).statement + "\n  norm_num"
    axioms = [r for r in sent if r["cmd"].startswith("#print axioms")]
    assert axioms[0] == {"cmd": "#print axioms _root_.mathd_numbertheory_188", "env": 1}


def test_a_recorded_header_and_proof_without_mathlib():
    statement, body = split_at_by(requests("file_env")[1]["cmd"])
    task = ProofTask("demo", header=requests("file_env")[0]["cmd"], statement=statement, proof=body)
    with replay_backend("file_env") as backend:
        assert backend.check_proof(task, timeout=30).status is Status.VALID


@pytest.mark.parametrize("name", ["self_proof_exact_check", "self_proof_check"])
def test_lean_errors_make_the_proof_invalid(name):
    statement, body = split_at_by(requests(name)[0]["cmd"])
    with replay_backend(name, header="") as backend:
        verdict = backend.check_proof(ProofTask("ex", "", statement, body), timeout=30)
    assert verdict.status is Status.INVALID and verdict.reason == "prover_error"
    assert verdict.messages[0].startswith("error 1:")


@pytest.mark.parametrize("axioms, wrap, status, why", [
    ("none", False, Status.VALID, "ok"),
    ("propext,Classical.choice,Quot.sound", True, Status.VALID, "ok"),
    ("propext,sorryAx", False, Status.INVALID, "sorry"),
    ("propext,Classical.choice,Lean.ofReduceBool,Lean.trustCompiler,Quot.sound", False, Status.INVALID, "axioms"),
    ("propext,mathd_numbertheory_188._native.native_decide.ax_1_1", False, Status.INVALID, "axioms"),
    ("silent", False, Status.INVALID, "axioms_unknown"),
])
def test_axiom_audit(axioms, wrap, status, why):
    with replay_backend(MATHLIB, axioms=axioms, wrap_axioms=wrap) as backend:
        verdict = backend.check_proof(mathlib_task(1), timeout=30)
    assert (verdict.status, verdict.reason) == (status, why)


def test_allowed_axioms_come_from_the_config():
    config = {"allowed_axioms": ("propext", "Classical.choice", "Quot.sound", "Lean.ofReduceBool")}
    with replay_backend(MATHLIB, config=config, axioms="propext,Lean.ofReduceBool") as backend:
        assert backend.check_proof(mathlib_task(1), timeout=30).status is Status.VALID


def test_a_header_with_errors_is_a_system_error():
    header = requests("invalid_line_break")[0]["cmd"]
    with replay_backend("invalid_line_break") as backend:
        verdict = backend.check_proof(ProofTask("x", header, "theorem t : True := by", "trivial"), timeout=30)
    assert (verdict.status, verdict.reason) == (Status.SYSTEM_ERROR, "header_error")
    assert "bysorry" in verdict.messages[0]


# -- statements ----------------------------------------------------------------------

def test_check_statement_elaborates_with_sorry(log_path):
    with replay_backend("self_proof_check", header="", request_log=log_path) as backend:
        verdict = backend.check_statement("", "theorem ex : False := by", timeout=30)
    assert verdict.status is Status.VALID and verdict.reason == "ok"
    assert any("declaration uses `sorry`" in m for m in verdict.messages)
    assert logged_requests(log_path)[-1]["request"]["cmd"] == "theorem ex : False := by sorry"


@pytest.mark.parametrize("statement, why", [
    ("def f : Nat := by", "bad_statement"),
    ("theorem a : True := trivial\ntheorem b : False := by", "banned:theorem"),
    ("theorem t : True := by\ud800", "bad_encoding"),
])
def test_bad_statements_never_reach_lean(statement, why, log_path):
    with replay_backend(MATHLIB, request_log=log_path) as backend:
        verdict = backend.check_statement(MATHLIB_HEADER, statement, timeout=30)
        assert backend.pid is None
    assert (verdict.status, verdict.reason) == (Status.INVALID, why)
    assert logged_requests(log_path) == []


# -- hostile proofs --------------------------------------------------------------------

@pytest.mark.parametrize("proof, why", [
    ("norm_num\ntheorem cheat : False := sorry", "banned:theorem"),
    ("  norm_num\ntheorem cheat : False := sorry", "leaves_block"),
    ("  norm_num\n  #eval IO.Process.exit 0", "banned:#eval"),
    ("set_option maxHeartbeats 0 in\n  norm_num", "banned:set_option"),
    ("sorry", "banned:sorry"),
    ("admit", "banned:admit"),
    ("norm_num \ud83d", "bad_encoding"),
    ("norm_num\x00\x07", "control_char"),
    ("norm_num " + "a" * (4 << 20), "too_long"),
    ("", "empty"),
    (None, "bad_input"),
])
def test_hostile_bodies_are_invalid_without_a_process(proof, why, log_path):
    task = ProofTask("h", MATHLIB_HEADER, mathlib_task(1).statement, proof)
    with replay_backend(MATHLIB, request_log=log_path) as backend:
        verdict = backend.check_proof(task, timeout=30)
        assert backend.pid is None
    assert (verdict.status, verdict.reason) == (Status.INVALID, why)
    assert logged_requests(log_path) == []


def test_a_header_that_cannot_be_encoded_is_invalid():
    with replay_backend(MATHLIB) as backend:
        task = ProofTask("h", "import Mathlib\ud800", "theorem t : True := by", "trivial")
        assert backend.check_proof(task, timeout=30).reason == "bad_header"


# -- failures of the prover ----------------------------------------------------------------

def test_a_hung_prover_times_out_and_its_process_group_is_killed(tmp_path):
    child_file = tmp_path / "child.pid"
    timeout = 2.0
    with replay_backend(MATHLIB, fault="hang", fault_on="norm_num", child_pid_file=child_file) as backend:
        backend.warm_up(MATHLIB_HEADER)
        pid = backend.pid
        verdict = backend.check_proof(mathlib_task(1), timeout=timeout)
        assert (verdict.status, verdict.reason) == (Status.TIMEOUT, "timeout")
        # ended by its deadline, not by the hang (which never ends): a bound, not a speed, so that a
        # loaded machine's slow kill and restart do not fail it
        assert verdict.seconds < timeout + 10
        assert gone(pid)
        assert wait_for(lambda: child_file.exists() and gone(int(child_file.read_text())))
        # the next proof gets a fresh process
        assert backend.check_proof(mathlib_task(2), timeout=30).status is Status.VALID
        assert backend.pid != pid


@pytest.mark.parametrize("fault, status, why", [
    # the process died (or answered garbage) on this proof in two fresh processes, each after its
    # header ran: the proof's doing, so it costs the model a verdict rather than two restarts a try
    ("die", Status.INVALID, "prover_crash"), ("garbage", Status.INVALID, "prover_crash"),
    # a REPL-level refusal leaves the process alive: the machinery's failure, retried, never blamed
    ("message", Status.SYSTEM_ERROR, "repl_error")])
def test_a_failing_prover_is_retried_once_on_a_fresh_process(fault, status, why, log_path):
    with replay_backend(MATHLIB, fault=fault, fault_on="norm_num", request_log=log_path) as backend:
        verdict = backend.check_proof(mathlib_task(1), timeout=30)
    assert (verdict.status, verdict.reason) == (status, why)
    asked = {e["pid"] for e in logged_requests(log_path) if "norm_num" in e["request"]["cmd"]}
    assert len(asked) == 2


@pytest.mark.parametrize("fault", ["die", "garbage"])
def test_a_header_that_kills_the_prover_twice_stays_a_system_error(fault, log_path):
    """The header is trusted configuration: its failures are never a proof's fault."""
    with replay_backend(MATHLIB, fault=fault, fault_on="import Mathlib", request_log=log_path) as backend:
        verdict = backend.check_proof(mathlib_task(1), timeout=30)
    assert verdict.status is Status.SYSTEM_ERROR and verdict.reason != "prover_crash"


@pytest.mark.parametrize("fault", ["die", "garbage", "message"])
def test_a_single_failure_is_recovered_on_a_fresh_process(fault, tmp_path, log_path):
    with replay_backend(MATHLIB, fault=fault, fault_on="norm_num", fault_once=tmp_path / "failed-once",
                        request_log=log_path) as backend:
        verdict = backend.check_proof(mathlib_task(1), timeout=30)
    assert verdict.status is Status.VALID
    asked = [e["pid"] for e in logged_requests(log_path) if "norm_num" in e["request"]["cmd"]]
    assert len(asked) == 2 and asked[0] != asked[1]


def test_a_slow_answer_is_awaited():
    with replay_backend(MATHLIB, fault="slow", fault_on="norm_num", delay=0.5) as backend:
        assert backend.check_proof(mathlib_task(1), timeout=30).status is Status.VALID


# -- process management -------------------------------------------------------------------------

def test_recycle_after_max_commands():
    # header + proof + axioms = 3 commands: every proof after the first gets a new process
    with replay_backend(MATHLIB, config={"max_commands": 3}) as backend:
        pids = []
        for i in (1, 2, 3):
            assert backend.check_proof(mathlib_task(i), timeout=30).status is Status.VALID
            pids.append(backend.pid)
    assert len(set(pids)) == 3
    assert all(gone(pid) for pid in pids)


def test_recycle_above_max_rss():
    with replay_backend(MATHLIB, config={"max_rss_bytes": 1}) as backend:
        backend.check_proof(mathlib_task(1), timeout=30)
        first = backend.pid
        assert backend.check_proof(mathlib_task(2), timeout=30).status is Status.VALID
        assert backend.pid != first


def test_the_warm_spare_replaces_a_killed_process(log_path):
    def started() -> list[int]:
        return list(dict.fromkeys(e["pid"] for e in logged_requests(log_path)))

    with replay_backend(MATHLIB, config={"spare": True}, request_log=log_path) as backend:
        backend.warm_up(MATHLIB_HEADER)
        active = backend.pid
        assert wait_for(lambda: len(started()) == 2)
        spare = started()[1]
        os.kill(active, signal.SIGKILL)
        assert backend.check_proof(mathlib_task(1), timeout=30).status is Status.VALID
        assert backend.pid == spare
        # the spare's header had already run: it got the proof, not the header again
        headers = [e for e in logged_requests(log_path) if e["pid"] == spare and "env" not in e["request"]]
        assert len(headers) == 1
        assert wait_for(lambda: len(started()) == 3)  # and a new spare is on its way
        pids = started()
    assert wait_for(lambda: all(gone(pid) for pid in pids))


def test_close_kills_everything_and_is_idempotent():
    backend = replay_backend(MATHLIB)
    assert backend.check_proof(mathlib_task(1), timeout=30).status is Status.VALID
    pid = backend.pid
    backend.close()
    backend.close()
    assert gone(pid)
    verdict = backend.check_proof(mathlib_task(2), timeout=30)
    assert (verdict.status, verdict.reason) == (Status.SYSTEM_ERROR, "closed")


def test_configuration_errors_are_raised_early():
    with pytest.raises(LeanConfigError, match="no Lean REPL configured"):
        LeanBackend(LeanConfig())
    with pytest.raises(LeanConfigError, match="not found"):
        LeanBackend(LeanConfig(repl_command="/nonexistent/lake env repl"))
    with pytest.raises(LeanConfigError, match="cannot parse"):
        LeanBackend(LeanConfig(repl_command="repl 'unclosed"))
    with pytest.raises(LeanConfigError, match="not a directory"):
        LeanBackend(LeanConfig(repl_command=replay_command(MATHLIB), project_dir="/nonexistent/mathlib"))
    with pytest.raises(LeanConfigError, match="not found"):
        LeanBackend(LeanConfig(repl_binary=".lake/build/bin/repl", project_dir="/"))
    with pytest.raises(LeanConfigError, match="set prover.lean.project_dir"):
        LeanBackend(LeanConfig(repl_command=replay_command(MATHLIB)))
    with pytest.raises(LeanConfigError, match="axiom_check must be one of process, repl"):
        LeanConfig(axiom_check="trust_me")


def test_the_repl_runs_in_the_project_dir_which_survives(tmp_path, log_path):
    """With ``project_dir`` the REPL runs there (so ``lake env`` finds the
    project) and relative command paths are relative to it."""
    project = tmp_path / "mathlib"
    project.mkdir()
    (project / "repl.py").write_text(REPLAY.read_text())
    command = replay_command(MATHLIB, request_log=log_path).replace(str(REPLAY), "repl.py")
    with LeanBackend(LeanConfig(repl_command=command, project_dir=str(project), axiom_check="repl",
                                writable_paths=(str(tmp_path),), spare=False)) as backend:
        assert backend.check_proof(mathlib_task(1), timeout=30).status is Status.VALID
    assert {Path(e["cwd"]) for e in logged_requests(log_path)} == {project}
    assert (project / "repl.py").exists()


def test_version_names_toolchain_checks_and_policy(tmp_path):
    (tmp_path / "lean-toolchain").write_text("leanprover/lean4:v4.15.0\n")
    base = LeanConfig(repl_command=replay_command(MATHLIB), project_dir=str(tmp_path))
    assert base.version().startswith("lean-repl|leanprover/lean4:v4.15.0|checks-")
    stricter = LeanConfig(repl_command=base.repl_command, project_dir=str(tmp_path), allowed_axioms=("propext",))
    assert stricter.version() != base.version()


def test_the_prover_sees_only_safe_environment_variables(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "secret")
    monkeypatch.setenv("ELAN_HOME", "/opt/elan")
    env = LeanConfig(lean_num_threads=2, extra_env={"X": "1"}).child_env()
    assert "WANDB_API_KEY" not in env
    assert env["ELAN_HOME"] == "/opt/elan" and env["LEAN_NUM_THREADS"] == "2" and env["X"] == "1"


# -- tactic mode -------------------------------------------------------------------------------

def test_tactic_mode_progress_and_completion():
    with replay_backend("mathlib/exact") as backend:
        start = backend.start_proof("import Mathlib", "theorem test : 0 < 1 := by")
        assert start.status is TacticStatus.PROGRESS and start.goals == ("⊢ 0 < 1",)
        done = backend.run_tactic(start.state, "exact?")
        assert done.status is TacticStatus.COMPLETED and done.proof_status == "Completed"
        assert done.state == ProofStateRef(start.state.process, 1)
        other = backend.start_proof("import Mathlib", "theorem test : 3 = 7 := by")
        failed = backend.run_tactic(other.state, "exact?")
        assert (failed.status, failed.reason, failed.state) == (TacticStatus.ERROR, "tactic_error", other.state)
        assert failed.messages[0].startswith("Lean error:")


def test_tactic_mode_goals_step_by_step():
    with replay_backend("mathlib/induction") as backend:
        start = backend.start_proof("import Mathlib", "theorem foo (x : Nat) : x = x := by")
        split = backend.run_tactic(start.state, "induction x")
        assert split.status is TacticStatus.PROGRESS and len(split.goals) == 2
        one_left = backend.run_tactic(split.state, "next => rfl")
        assert one_left.status is TacticStatus.PROGRESS
        assert one_left.goals == ("case succ\nn✝ : ℕ\na✝ : n✝ = n✝\n⊢ n✝ + 1 = n✝ + 1",)


@pytest.mark.parametrize("name, statement, tactic", [
    ("invalid_tactic", "theorem my_theorem (x : Nat) : x = x := by", "exact my_fake_premise"),
    ("mathlib/20240209", "example : False := by", "simpa using show False by done"),
])
def test_empty_goals_with_an_error_are_not_success(name, statement, tactic):
    with replay_backend(name, header="") as backend:
        start = backend.start_proof("", statement)
        assert start.status is TacticStatus.PROGRESS
        step = backend.run_tactic(start.state, tactic)
    assert step.status is TacticStatus.ERROR and step.reason == "prover_error"
    assert step.goals == () and step.state == start.state
    assert step.proof_status == "Incomplete: contains sorry"


def test_tactic_mode_rejects_hostile_tactics_and_lost_states(log_path):
    with replay_backend("mathlib/exact", request_log=log_path) as backend:
        start = backend.start_proof("import Mathlib", "theorem test : 0 < 1 := by")
        asked = len(logged_requests(log_path))
        banned = backend.run_tactic(start.state, "sorry")
        assert (banned.status, banned.reason, banned.state) == (TacticStatus.ERROR, "banned:sorry", start.state)
        assert len(logged_requests(log_path)) == asked
        os.kill(backend.pid, signal.SIGKILL)
        assert wait_for(lambda: backend.pid is None)
        lost = backend.run_tactic(start.state, "exact?")
        assert (lost.status, lost.reason) == (TacticStatus.SYSTEM_ERROR, "state_lost")
        stale = backend.run_tactic(ProofStateRef(process=-1, proof_state=0), "exact?")
        assert stale.reason == "state_lost"


def test_tactic_timeout_kills_the_process():
    with replay_backend("mathlib/exact", fault="hang", fault_on="exact?") as backend:
        start = backend.start_proof("import Mathlib", "theorem test : 0 < 1 := by")
        pid = backend.pid
        step = backend.run_tactic(start.state, "exact?", timeout=1.0)
    assert step.status is TacticStatus.TIMEOUT and gone(pid)


def test_start_proof_rejects_statements_without_a_tactic_block():
    with replay_backend("mathlib/exact") as backend:
        result = backend.start_proof("import Mathlib", "theorem test : 0 < 1 := Nat.one_pos")
        assert (result.status, result.reason) == (TacticStatus.ERROR, "bad_statement")
        assert backend.pid is None


@pytest.mark.parametrize("field, value", [("repl_command", ["lake", "env", "repl"]), ("project_dir", 3),
                                          ("repl_binary", None)])
def test_config_fields_of_the_wrong_type_are_refused_by_name(field, value):
    """A list where the command-line string belongs (the CLI once passed one) fails at once, naming the field."""
    with pytest.raises(LeanConfigError, match=f"LeanConfig.{field} must be a string"):
        LeanConfig(**{field: value})
