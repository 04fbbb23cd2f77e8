"""The prover service (:mod:`sgs.serve`) in process, without Ray, a model or
a prover: the requests' checks, LeanCopilot's goals, the attempt loop
(against coroutines standing in for the engine and the verifier), the serve
settings, which weights a checkpoint or run directory serves, and what the
command refuses before starting anything.  ``python -m sgs.serve`` itself,
over HTTP: ``tests/e2e/test_serve.py``."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_dir

from lean_env.verdict import ProofTask, Status, Verdict
from sgs.config import CONFIG_DIR, ServeConfig, config_problems
from sgs.serve.__main__ import main
from sgs.serve.goals import goal_statement, suggestion
from sgs.serve.requests import BadRequest, generate_request, prove_request, read_body, verify_request
from sgs.serve.search import NO_PROOF, NOT_SAMPLED, UNCHECKED, call_sizes, search
from sgs.serve.weights import WeightsError, served_weights
from sgs.state.records import Target
from sgs.state.store import Store

LIMITS = ServeConfig(max_attempts=16, max_timeout_s=100.0, max_request_bytes=4096)
TRUE, FALSE = "Theorem t : True.", "Theorem f : 1 = 2."
RIGHT = "```coq\nTheorem t : True.\nProof.\n  exact I.\nQed.\n```"
WRONG = "```coq\nTheorem f : 1 = 2.\nProof.\n  reflexivity.\nQed.\n```"


# --------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------


def prove(body: bytes, limits: ServeConfig = LIMITS, prover: str = "rocq"):
    return prove_request(read_body(body, limits.max_request_bytes), limits, prover)


@pytest.mark.parametrize("body, status, problem", [
    (b'{"statement": 5}', 400, "'statement' must be a string, got a number (5)"),
    (b"{}", 400, "missing field 'statement'"),
    (b'{"statement": "  "}', 400, "'statement' is empty"),
    (b"[1]", 400, "must be a JSON object, got an array"),
    (b"{oops", 400, "not valid JSON"),
    (b"", 400, "the request body is empty"),
    (b'{"statement": "\xff"}', 400, "not UTF-8 (byte 15"),
    (b'{"statement": "\\ud800"}', 400, "'statement' holds an unpaired surrogate"),
    (b'{"statement": "Theorem t : True.", "attempt": 3}', 400, "unknown field(s) 'attempt'"),
    (b'{"statement": "Theorem t : True.", "attempts": 17}', 400, "attempts=17 must lie in 1..16"),
    (b'{"statement": "Theorem t : True.", "attempts": true}', 400, "'attempts' must be an integer, got a boolean"),
    (b'{"statement": "Theorem t : True.", "timeout": 0}', 400, "timeout=0 must lie in (0, 100.0]"),
    (b'{"statement": "Theorem t : True.", "timeout": NaN}', 400, "'timeout' must be a number of seconds"),
    (b'{"statement": "Theorem t : True.", "prover": "isabelle"}', 400, "unknown prover 'isabelle'"),
    (b'{"statement": "Theorem t : True.", "prover": "lean"}', 422, "this server checks rocq proofs, not lean"),
    (b'{"statement": "theorem t : 1 = 1 := by"}', 422, "a lean statement; this server checks rocq proofs"),
    (b'{"statement": "Theorem t : True. Proof. exact I. Qed."}', 422, "not a rocq problem: statement_shape"),
    (b'{"statement": "Theorem t : True.", "header": "Axiom a : False."}', 422, "header_rejected"),
    (b'{"statement": "Theorem t : True.", "pad": "' + b"x" * 5000 + b'"}', 413, "takes at most 4096"),
    (b'{"statement": "Theorem t : True.", "mode": "beam"}', 400, "unknown mode 'beam'; modes are sample, search, both"),
    (b'{"statement": "Theorem t : True.", "mode": 1}', 400, "'mode' must be a string, got a number (1)"),
])
def test_bad_prove_requests_are_named(body, status, problem):
    with pytest.raises(BadRequest) as refused:
        prove(body)
    assert refused.value.status == status and problem in refused.value.message, refused.value.message


def test_good_requests_get_the_servers_defaults():
    req = prove(b'{"statement": "Theorem t : True.", "header": "Require Import Arith."}')
    assert (req.attempts, req.timeout, req.header) == (LIMITS.default_attempts, LIMITS.default_timeout_s,
                                                       "Require Import Arith.")
    lean = prove(b'{"statement": "theorem t : 1 = 1 := by sorry", "prover": "lean", "attempts": 2}', prover="lean")
    assert (lean.statement, lean.attempts) == ("theorem t : 1 = 1 := by", 2)
    assert (req.mode, lean.mode) == ("sample", "sample")
    assert prove(b'{"statement": "Theorem t : True.", "mode": "both", "timeout": 5}').mode == "both"
    assert prove(b'{"statement": "theorem t : 1 = 1 := by", "mode": "search"}', prover="lean").mode == "search"
    check = verify_request({"statement": TRUE, "proof": "Proof. exact I. Qed.", "timeout": 5}, LIMITS, "rocq")
    assert (check.proof, check.timeout) == ("Proof. exact I. Qed.", 5.0)
    with pytest.raises(BadRequest, match="missing field 'proof'"):
        verify_request({"statement": TRUE}, LIMITS, "rocq")
    # LeanCopilot's format: other fields are ignored, a null prefix is no constraint.
    copilot = generate_request({"name": "sgs", "input": "⊢ True", "prefix": None, "extra": 1})
    assert (copilot.name, copilot.input, copilot.prefix) == ("sgs", "⊢ True", "")
    with pytest.raises(BadRequest, match="'input' is empty"):
        generate_request({"name": "sgs", "input": " ", "prefix": ""})


# --------------------------------------------------------------------------
# LeanCopilot goals
# --------------------------------------------------------------------------


@pytest.mark.parametrize("goal, language, statement", [
    ("n : ℕ\n⊢ gcd n n = n", "lean", "theorem copilot_goal (n : ℕ) : gcd n n = n := by"),
    ("case h\nx y : ℕ\ninst✝ : Fintype α\nh✝¹ : x < y\n  ∧ y < 3\nz : ℕ := 5\n⊢ x ≤\n    y\n\ncase g\n⊢ True", "lean",
     "theorem copilot_goal (x y : ℕ) (inst_1 : Fintype α) (h_2 : x < y ∧ y < 3) (z : ℕ) : x ≤ y := by"),
    ("theorem foo : 1 = 1 :=", "lean", "theorem foo : 1 = 1 := by"),
    ("1 goal\n  \n  n, m : nat\n  x := (3 : nat) : nat\n  H : n = m\n  ============================\n  n + 0 = n",
     "rocq", "Theorem copilot_goal (n m : nat) (x : nat) (H : n = m) : n + 0 = n."),
    ("True", "rocq", "Theorem copilot_goal : True."),
    ("Lemma l : 1 = 1.", "rocq", "Lemma l : 1 = 1."),
])
def test_goals_become_statements(goal, language, statement):
    assert goal_statement(goal, language) == statement


def test_proof_bodies_become_suggestions():
    assert suggestion("Proof.\n  intros.\n  exact I.\nQed.", "rocq") == "intros.\nexact I."
    assert suggestion("\n  simp\n  ring", "lean") == "simp\nring"


# --------------------------------------------------------------------------
# The attempt loop, with coroutines for the engine and the verifier
# --------------------------------------------------------------------------

BLOCK = "```coq\nTheorem t : True.\nProof.\n  {}\nQed.\n```"


def run_search(texts: list[str], verdicts: dict[str, Status], *, attempts: int, per_call: int, timeout: float = 5.0,
               draw_delays: list[float] | None = None, check_delay: float = 0.0):
    """``search`` with an engine answering ``texts`` in order (call i after
    ``draw_delays[i]`` seconds) and a verifier judging each tactic by ``verdicts``."""
    drawn, checked, calls = iter(texts), [], iter(range(1000))

    async def draw(prompt: str, n: int):
        call = next(calls)
        await asyncio.sleep((draw_delays or [0.0] * 100)[call])
        return [SimpleNamespace(text=next(drawn)) for _ in range(n)]

    async def check(task: ProofTask) -> Verdict:
        checked.append(task)
        await asyncio.sleep(check_delay)
        tactic = task.proof.split("\n")[1].strip()
        return Verdict(verdicts[tactic], reason="ok" if verdicts[tactic] is Status.VALID else "prover_error",
                       seconds=0.25)

    async def go():
        loop = asyncio.get_running_loop()
        return await search(draw, check, prompt="p", header="", statement=TRUE, language="rocq", attempts=attempts,
                            per_call=per_call, deadline=loop.time() + timeout, clock=loop.time)

    return asyncio.run(go()), checked


def test_the_first_valid_proof_wins_and_later_calls_are_cancelled():
    texts = [BLOCK.format("exact I."), "no proof here", BLOCK.format("auto.")] + [BLOCK.format("exact I.")] * 3
    outcome, checked = run_search(texts, {"exact I.": Status.VALID, "auto.": Status.INVALID}, attempts=6,
                                  per_call=3, draw_delays=[0.0, 3.0])
    assert outcome.proof == "Proof.\n  exact I.\nQed." and outcome.winner == 0 and not outcome.timed_out
    assert [a.status for a in outcome.attempts] == ["valid", NO_PROOF, "invalid"] + [NOT_SAMPLED] * 3
    assert outcome.attempts[1].reason == "no_code_block"
    # The body was checked under the given statement, the model's restatement dropped.
    assert all(task.statement == TRUE and task.proof.startswith("Proof.") for task in checked)
    assert outcome.verifier_seconds == 0.5


def test_the_deadline_ends_a_search_with_what_it_has():
    outcome, _ = run_search([BLOCK.format("auto.")] * 4, {"auto.": Status.INVALID}, attempts=4, per_call=2,
                            timeout=0.5, draw_delays=[0.0, 5.0], check_delay=2.0)
    assert outcome.proof is None and outcome.timed_out
    assert [a.status for a in outcome.attempts] == [UNCHECKED, UNCHECKED, NOT_SAMPLED, NOT_SAMPLED]


def test_attempts_are_drawn_in_calls_of_the_configured_size():
    assert call_sizes(10, 4) == [4, 4, 2] and call_sizes(3, 8) == [3]
    outcome, checked = run_search([BLOCK.format("auto.")] * 5, {"auto.": Status.INVALID}, attempts=5, per_call=2)
    assert not outcome.timed_out and len(checked) == 5 and {a.status for a in outcome.attempts} == {"invalid"}


# --------------------------------------------------------------------------
# Config, weights and the command's refusals (no Ray)
# --------------------------------------------------------------------------


def serve_problems(*overrides: str) -> list[str]:
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return config_problems(compose(config_name="serve", overrides=list(overrides)))


def test_the_serve_settings_are_validated():
    assert serve_problems() == []
    problems = serve_problems("serve.max_attempts=4", "serve.port=0", "serve.engine_max_replicas=0",
                              "serve.max_timeout_s=-1", "serve.max_request_bytes=10")
    for expected in ("serve.default_attempts=8 must not exceed serve.max_attempts=4", "serve.port=0 must lie in",
                     "serve.engine_max_replicas=0 must be at least 1", "serve.max_timeout_s=-1.0 must be positive",
                     "serve.max_request_bytes=10 must be at least 1024"):
        assert any(expected in p for p in problems), (expected, problems)


def make_run(run_dir: Path, checkpoint: Path | None, *, best: bool, prover: str = "rocq") -> Path:
    """A run directory whose Solver checkpoint of iteration 0 is ``checkpoint`` (flagged best or not)."""
    with Store.open(run_dir, [Target("t", "", TRUE)], {"prover": {"backend": prover}}) as store:
        if checkpoint is not None:
            target = store.checkpoint_dir("solver", 0)
            target.parent.mkdir(parents=True)
            target.symlink_to(checkpoint, target_is_directory=True)
            store.mark_done(0, "train")
            if best:
                store.set_best_checkpoint("solver", 0)
    return run_dir


def weights_for(checkpoint: str, *overrides: str):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        from sgs.config import validate

        return served_weights(validate(compose(config_name="serve",
                                               overrides=[f"serve.checkpoint={checkpoint}", *overrides])))


def test_a_run_directory_serves_its_best_else_newest_solver_checkpoint(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    best = weights_for(str(make_run(tmp_path / "a", model, best=True)))
    assert (best.source, best.policy_version) == ("run", 1)
    assert best.checkpoint.endswith("checkpoints/solver/iter_0000") and "best Solver checkpoint" in best.description
    assert "newest Solver checkpoint" in weights_for(str(make_run(tmp_path / "b", model, best=False))).description
    with pytest.raises(WeightsError, match="has no finished Solver checkpoint yet"):
        weights_for(str(make_run(tmp_path / "c", None, best=False)))
    with pytest.raises(WeightsError, match="trained with prover=lean; serve it with prover=lean"):
        weights_for(str(make_run(tmp_path / "d", model, best=True, prover="lean")))
    hf = weights_for(str(model))
    assert (hf.source, hf.checkpoint, hf.tokenizer) == ("checkpoint", str(model), str(model))
    with pytest.raises(WeightsError, match="neither a run directory"):
        weights_for(str(tmp_path))
    with pytest.raises(WeightsError, match="no such directory"):
        weights_for(str(tmp_path / "missing"))


def test_a_run_being_written_is_read_without_its_lock(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    run_dir = make_run(tmp_path / "run", model, best=True)
    with Store.open(run_dir, None, {"prover": {"backend": "rocq"}}):  # the run is going on
        assert weights_for(str(run_dir)).policy_version == 1


def test_the_command_refuses_bad_settings_before_starting_anything(tmp_path, capsys):
    assert main(["serve.max_attempts=0"]) == 2
    assert "serve.max_attempts=0 must be at least 1" in capsys.readouterr().err
    assert main(["resources.engine_backend=sglang", "model.dtype=int8"]) == 2  # every bad choice, named at once
    err = capsys.readouterr().err
    assert "resources.engine_backend='sglang' is not one of transformers, vllm" in err
    assert "model.dtype='int8' is not one of float32, bfloat16, float16" in err
    assert main([f"checkpoint={tmp_path / 'nothing'}"]) == 2
    assert "no such directory" in capsys.readouterr().err
    with socket.create_server(("127.0.0.1", 0)) as taken:
        assert main([f"serve.port={taken.getsockname()[1]}"]) == 3
    assert "cannot listen on 127.0.0.1:" in capsys.readouterr().err
