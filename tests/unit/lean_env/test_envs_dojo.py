"""The tactic environment on LeanDojo's Dojo (``lean_env.dojo``): the same
episode as on the Lean REPL gives the same observations and rewards; each of
Dojo's answers and failures maps onto the REPL backend's outcomes.

Lean cannot run here, so ``ScriptedDojo`` stands in for ``lean_dojo.Dojo``:
it answers with lean_dojo's own result classes, and its texts are Lean's, from
the recorded REPL transcripts the REPL side replays."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager

import pytest

from lean_env.backends import BackendSpec
from lean_env.envs import TacticEnv
from tests.lean.lean_support import needs_fixtures, replay_command, requests, responses, split_at_by
from tests.paths import DATA

lean_dojo = pytest.importorskip("lean_dojo")
from lean_env.dojo import DojoBackend, DojoTheorem  # noqa: E402  (needs lean_dojo)

LOCATION = {"url": "https://github.com/example/demo", "commit": "0123456789abcdef0123456789abcdef01234567",
            "file_path": "Demo/Logic.lean"}
HEADER = "import Mathlib"


class ScriptedDojo(AbstractContextManager):
    """TEST DOUBLE for ``lean_dojo.Dojo`` (which needs a traced repository and a Lean
    process): entering gives ``(self, initial TacticState)``; ``run_tac(state, tactic)``
    answers from ``script[(state.id, tactic)]`` with lean_dojo's TacticState, LeanError,
    ProofFinished or ProofGivenUp, or raises the exception scripted there.  Leaving
    records that the Dojo was closed."""

    def __init__(self, initial, script: dict, enter_error: Exception | None = None) -> None:
        self.initial, self.script, self.enter_error = initial, script, enter_error
        self.calls: list[tuple[int, str]] = []
        self.closed = False

    def __enter__(self):
        if self.enter_error is not None:
            raise self.enter_error
        return self, self.initial

    def __exit__(self, *exc) -> None:
        self.closed = True

    def run_tac(self, state, tactic: str):
        self.calls.append((state.id, tactic))
        answer = self.script[(state.id, tactic)]
        if isinstance(answer, Exception):
            raise answer
        return answer


class Opener:
    """TEST DOUBLE for opening a Dojo: hands out ``ScriptedDojo``s and records what was opened."""

    def __init__(self, *dojos: ScriptedDojo) -> None:
        self.dojos = list(dojos)
        self.opened: list[tuple[DojoTheorem, int]] = []

    def __call__(self, theorem: DojoTheorem, timeout: int) -> ScriptedDojo:
        self.opened.append((theorem, timeout))
        return self.dojos[len(self.opened) - 1]


class Checker:
    """TEST DOUBLE for ``lean_dojo.check_proof``: records each whole proof and gives ``verdict``."""

    def __init__(self, verdict: bool = True) -> None:
        self.verdict, self.proofs = verdict, []

    def __call__(self, theorem: DojoTheorem, proof: str) -> bool:
        self.proofs.append((theorem.full_name, proof))
        return self.verdict


def branching_episode():
    """The REPL transcript ``proof_branching`` (and ``unknown_tactic`` for a tactic Lean does not
    know), as the statement, the tactics in order, and the Dojo answers Lean's texts give."""
    statement, _ = split_at_by(requests("proof_branching")[0]["cmd"])
    answers = responses("proof_branching")
    root = lean_dojo.TacticState(answers[0]["sorries"][0]["goal"], 0)
    unknown = responses("unknown_tactic")[1]["message"].removeprefix("Lean error:\n")
    script = {(0, "exat 42"): lean_dojo.LeanError(unknown)}
    tactics = ["exat 42"]
    for request, answer in zip(requests("proof_branching")[1:], answers[1:]):
        tactics.append(request["tactic"])
        if answer["proofStatus"] == "Completed":
            result = lean_dojo.ProofFinished(answer["proofState"])
        else:
            result = lean_dojo.TacticState("\n\n".join(answer["goals"]), answer["proofState"])
        script[(request["proofState"], request["tactic"])] = result
    return statement, tactics, root, script


def play(env: TacticEnv, tactics: list[str]) -> list[tuple]:
    goals, info = env.reset()
    trace = [(goals, info["kind"], info["reason"])]
    for tactic in tactics:
        goals, reward, terminated, truncated, info = env.step(tactic)
        trace.append((goals, reward, terminated, truncated, info["kind"], info["reason"], info["script"]))
    return trace


@needs_fixtures
def test_the_same_episode_on_the_repl_and_on_dojo():
    statement, tactics, root, script = branching_episode()
    problem = {"id": "complex_and", "header": HEADER, "statement": statement, "full_name": "complex_and",
               **LOCATION}
    repl = TacticEnv([problem], BackendSpec("lean", {
        "repl_command": replay_command("proof_branching", "unknown_tactic", header=HEADER), "spare": False,
        "axiom_check": "repl",
        "timeout": 30.0, "header_timeout": 30.0}), timeout=30, recheck=False)
    checker = Checker()
    opener = Opener(ScriptedDojo(root, script))
    dojo = TacticEnv([problem], DojoBackend(opener, checker), timeout=30)
    try:
        on_repl, on_dojo = play(repl, tactics), play(dojo, tactics)
    finally:
        repl.close()
        dojo.close()
    assert on_dojo == on_repl
    assert on_repl[0] == ("p q r : Prop\nh1 : p ∧ q\nh2 : q → r\n⊢ p ∧ r", "progress", "ok")
    assert on_repl[1][1:6] == (0.0, False, False, "error", "tactic_error")
    assert on_repl[2][0].count("⊢") == 2 and on_repl[-1][1:5] == (1.0, True, False, "completed")
    # Dojo paid the reward once LeanDojo's whole-file check accepted the script
    assert checker.proofs == [("complex_and", "by\n  apply And.intro\n  exact h1.left\n  apply h2\n  exact h1.right")]
    assert opener.opened == [(DojoTheorem(LOCATION["url"], LOCATION["commit"], LOCATION["file_path"], "complex_and"),
                              30)]
    assert opener.dojos[0].closed


def single_goal_env(script: dict, checker: Checker | None = None, enter_error: Exception | None = None, **kw):
    root = lean_dojo.TacticState("n : ℕ\n⊢ n + 0 = n", 7)
    opener = Opener(ScriptedDojo(root, script, enter_error))
    problem = {"id": "t", "header": HEADER, "theorem": "theorem t (n : ℕ) : n + 0 = n := by", "full_name": "t",
               **LOCATION}
    return TacticEnv([problem], DojoBackend(opener, checker or Checker()), timeout=5, **kw), opener


def test_a_step_that_leaves_sorry_is_refused_and_the_state_kept():
    env, opener = single_goal_env({(7, "exact?"): lean_dojo.ProofGivenUp(),
                                   (7, "simp"): lean_dojo.ProofFinished(8, "")})
    env.reset()
    goals, reward, terminated, _, info = env.step("exact?")
    assert (goals, reward, terminated, info["kind"], info["reason"]) == ("n : ℕ\n⊢ n + 0 = n", 0.0, False,
                                                                          "error", "sorry")
    _, reward, terminated, _, info = env.step("simp")
    assert (reward, terminated, info["script"]) == (1.0, True, ["simp"])
    assert opener.dojos[0].calls == [(7, "exact?"), (7, "simp")]


def test_banned_tactics_never_reach_the_dojo():
    env, opener = single_goal_env({})
    env.reset()
    for tactic in ("sorry", "native_decide", "  "):
        _, reward, terminated, _, info = env.step(tactic)
        assert info["kind"] == "error" and reward == 0.0 and not terminated
    assert opener.dojos[0].calls == []


def test_a_rejected_recheck_pays_nothing():
    checker = Checker(verdict=False)
    env, _ = single_goal_env({(7, "simp"): lean_dojo.ProofFinished(8)}, checker)
    env.reset()
    _, reward, terminated, _, info = env.step("simp")
    assert (reward, terminated, info["kind"]) == (0.0, True, "completed")
    assert checker.proofs == [("t", "by\n  simp")]


@pytest.mark.parametrize("failure, reason", [
    (lean_dojo.DojoTacticTimeoutError(), "timeout"),
    (lean_dojo.DojoCrashError("OOM"), "dojo_crash"),
])
def test_a_timeout_or_crash_ends_the_episode_and_closes_the_dojo(failure, reason):
    env, opener = single_goal_env({(7, "simp"): failure})
    env.reset()
    _, reward, terminated, truncated, info = env.step("simp")
    assert (reward, terminated, truncated, info["kind"], info["reason"]) == (0.0, False, True, "ended", reason)
    assert opener.dojos[0].closed
    with pytest.raises(RuntimeError, match="reset"):
        env.step("simp")


def test_a_theorem_dojo_cannot_open_ends_the_episode_at_reset():
    env, _ = single_goal_env({}, enter_error=lean_dojo.DojoInitError("Cannot find the *.ast.json file"))
    goals, info = env.reset()
    assert (goals, info["kind"], info["reason"]) == ("", "error", "dojo_init_error")
    assert "ast.json" in info["messages"][0]
    with pytest.raises(RuntimeError, match="reset"):
        env.step("simp")


def test_max_steps_truncate_as_on_the_repl():
    env, _ = single_goal_env({(7, "skip"): lean_dojo.TacticState("n : ℕ\n⊢ n + 0 = n", 7)}, max_steps=2)
    env.reset()
    assert env.step("skip")[3] is False
    _, _, terminated, truncated, _ = env.step("skip")
    assert truncated and not terminated


def test_problems_must_say_where_their_theorem_is():
    with pytest.raises(ValueError, match=r"problem 0 \(t\) needs url, commit, file_path, full_name .*missing: url"):
        TacticEnv([{"id": "t", "header": "", "statement": "theorem t : True := by", "commit": "c",
                    "file_path": "A.lean", "full_name": "t"}], DojoBackend(Opener(), Checker()))


def test_a_traced_target_file_is_a_problem_list(tmp_path):
    """The records ``tools/trace_targets.py`` writes carry what the Dojo backend needs."""
    from sgs.state.leandojo import convert_benchmark

    data = DATA / "leandojo"
    targets, _ = convert_benchmark(json.loads((data / "benchmark4_demo.json").read_text()), "demo",
                                   data / "demo")
    problems = [t.to_json() for t in targets]
    root = lean_dojo.TacticState("n : ℕ\n⊢ n + 0 = n", 0)
    opener = Opener(ScriptedDojo(root, {}))
    env = TacticEnv(problems, DojoBackend(opener, Checker()))
    goals, _ = env.reset(options={"problem_id": "Demo.add_zero'"})
    assert goals == "n : ℕ\n⊢ n + 0 = n"
    assert opener.opened[0][0] == DojoTheorem("https://github.com/example/demo",
                                              "0123456789abcdef0123456789abcdef01234567", "Demo/Basic.lean",
                                              "Demo.add_zero'")
    env.close()
    assert opener.dojos[0].closed
