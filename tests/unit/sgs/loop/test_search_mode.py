"""The Solver's search mode in self-play, its pure parts on hand-made results:
what a search attempt is stored as (and so what its solve rate and reward
are), the searches' own records, the tactic steps the Solver trains on, and
how generations count a search.  The phase itself, with Ray actors, real Rocq
and the engines: tests/e2e/test_fill_adapt_command.py (its self-play stage)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from types import SimpleNamespace

import pytest

from lean_env.verdict import ProofTask, Status, Verdict
from sgs import config as C
from sgs.config import SelfPlaySolverMode
from sgs.loop.context import Problem
from sgs.loop.search_prove import (NOT_FOUND, SearchAttempts, search_attempt, search_settings, search_verdict,
                                   tactic_sampling)
from sgs.loop.search_steps import (ANCHOR, STEP_OBJECTIVE, SearchRecord, StepChoice, anchor_pool, anchor_steps,
                                   chosen_steps, read_search_records, search_metrics, search_record, searches_path,
                                   step_example)
from sgs.loop.solver_modes import SOLVER_MODES, generation_counts, replayed_anchor_steps, solver_mode
from sgs.method.registry import objective, weighted_nll
from sgs.method.roles import PromptSet
from sgs.search.languages import LEAN_FINISHERS, TACTIC_LANGUAGES
from sgs.search.settings import ROCQ_FINISHERS
from sgs.state.records import prompt_digest, solve_rates
from tests.config_support import compose_cfg

PROBLEM = Problem("conjecture", "it0/t1/c0", "Require Import Lia.", "Theorem c : forall n : nat, n + 0 = n.")
FOUND = {"stop": "completed", "found": True, "proved": True, "proof": "Proof.\n  intros n.\n  lia.\nQed.",
         "tactics": ["intros n.", "lia"], "states": ["forall n : nat, n + 0 = n", "n : nat\nn + 0 = n"],
         "verdict": {"status": "valid", "reason": "ok"},
         "stats": {"expanded": 2, "seconds": 1.5}, "generation": {"model_calls": 2, "samples": 4, "tokens": 13}}


@pytest.fixture(scope="module")
def cfg():
    return C.validate(compose_cfg("solver.mode=search", "solver.attempts=4"))


def result(**changes):
    return {**FOUND, **changes}


REFUSED = result(proved=False, proof=None, verdict={"status": "invalid", "reason": "prover_error"})
NOTHING = result(stop="time", found=False, proved=False, proof=None, verdict=None, tactics=[], states=[])
DIED = result(stop="system_error", found=False, proved=False, proof=None, tactics=[], states=[],
              verdict={"status": "system_error", "reason": "search worker died: RayActorError"},
              stats={}, generation={})


def test_the_verdict_of_a_search_the_pool_never_saw():
    assert search_verdict(DIED) == Verdict(Status.SYSTEM_ERROR, "search worker died: RayActorError")
    assert search_verdict(REFUSED) == Verdict(Status.INVALID, "prover_error")
    assert search_verdict(NOTHING) is None


def test_only_the_pools_verdict_on_a_found_proof_earns_a_reward(cfg):
    prompt = "the Solver's prompt"
    accepted = search_attempt("conjecture/it0/t1/c0/a0", 0, PROBLEM, prompt, 3, FOUND, Verdict(Status.VALID, "ok"), cfg)
    assert accepted.verified and accepted.reward == 1.0 and accepted.proof == FOUND["proof"]
    assert accepted.completion.token_ids == [] and accepted.completion.prompt_sha256 == prompt_digest(prompt)
    assert (accepted.completion.policy_version, accepted.completion.finish_reason) == (3, "search:completed")
    # The search's own re-check passed, the pool's did not: no reward.
    rejected = search_attempt("a1", 0, PROBLEM, prompt, 3, FOUND, Verdict(Status.INVALID, "axioms"), cfg)
    assert not rejected.verified and rejected.reward == 0.0 and rejected.rollout_status == "invalid"


def test_a_search_without_a_proof_is_a_failed_attempt_and_a_lost_one_no_attempt_at_all(cfg):
    nothing = search_attempt("a2", 0, PROBLEM, "p", 0, NOTHING, search_verdict(NOTHING), cfg)
    assert (nothing.proof, nothing.verdict, nothing.reward) == (None, None, 0.0)
    assert nothing.extraction_error == f"{NOT_FOUND}:time" and nothing.rollout_status == "invalid"
    died = search_attempt("a3", 0, PROBLEM, "p", 0, DIED, search_verdict(DIED), cfg)
    assert died.rollout_status == "system_error" and died.reward == 0.0 and died.proof == ""
    refused = search_attempt("a4", 0, PROBLEM, "p", 0, REFUSED, search_verdict(REFUSED), cfg)
    assert refused.rollout_status == "invalid" and refused.proof == ""


def test_the_solve_rate_of_search_attempts_leaves_out_the_machinerys_failures(cfg):
    """s = accepted / (attempts with a judgement): 1 of the 3 judged here, the lost search left out."""
    attempts = [search_attempt("a0", 0, PROBLEM, "p", 0, FOUND, Verdict(Status.VALID, "ok"), cfg),
                search_attempt("a1", 0, PROBLEM, "p", 0, NOTHING, None, cfg),
                search_attempt("a2", 0, PROBLEM, "p", 0, REFUSED, search_verdict(REFUSED), cfg),
                search_attempt("a3", 0, PROBLEM, "p", 0, DIED, search_verdict(DIED), cfg)]
    assert solve_rates(attempts) == {PROBLEM.id: pytest.approx(1 / 3)}


class AnsweringPool:
    """A verifier pool that answers each check at the next poll with the verdict given for its id."""

    def __init__(self, verdicts):
        self.verdicts, self.submitted, self._waiting = verdicts, [], []

    @property
    def outstanding(self):
        return len(self._waiting)

    def submit(self, task):
        self.submitted.append(task)
        self._waiting.append(task)

    def poll(self, timeout=0.0):
        answered, self._waiting = [(task, self.verdicts[task.id]) for task in self._waiting], []
        return answered


def test_a_found_proof_is_stored_with_the_pools_verdict_and_a_search_without_one_at_once(tmp_path, cfg):
    """The search's own re-check accepted the proof; the pool refuses it: the attempt is the pool's."""
    (tmp_path / "iter_0000").mkdir()
    pool = AnsweringPool({"conjecture/c/a0": Verdict(Status.INVALID, "axioms")})
    ctx = SimpleNamespace(cfg=cfg, store=SimpleNamespace(run_dir=tmp_path),
                          weights=SimpleNamespace(current={"solver": SimpleNamespace(version=2)}),
                          rt=SimpleNamespace(pool=pool, prompter=SimpleNamespace(solver=lambda h, s: f"{h}|{s}")),
                          monitor=SimpleNamespace(verified=lambda status, queue: None))
    stored, ended = [], []
    attempts = SearchAttempts(ctx, 0, SimpleNamespace(append=stored.append),
                              {"conjecture/c/a0": PROBLEM, "conjecture/c/a1": PROBLEM}, ended.append)
    attempts.searched(ProofTask("conjecture/c/a1", PROBLEM.header, PROBLEM.statement, ""), NOTHING)
    assert [a.id for a in stored] == ["conjecture/c/a1"] and pool.submitted == []
    attempts.searched(ProofTask("conjecture/c/a0", PROBLEM.header, PROBLEM.statement, ""), FOUND)
    attempts.finish()
    [checked] = pool.submitted
    assert (checked.id, checked.statement, checked.proof) == ("conjecture/c/a0", PROBLEM.statement, FOUND["proof"])
    refused = stored[1]
    assert (refused.id, refused.verdict.reason, refused.reward, refused.verified) == ("conjecture/c/a0", "axioms",
                                                                                     0.0, False)
    assert refused.completion.policy_version == 2 and refused.completion.prompt_sha256 == prompt_digest(
        f"{PROBLEM.header}|{PROBLEM.statement}")
    assert ended == stored and (attempts.verifications, attempts.tokens) == (1, 26)
    records = read_search_records(searches_path(tmp_path, 0))
    assert (records["conjecture/c/a0"].status, records["conjecture/c/a0"].pool_checked) == ("invalid", True)
    assert (records["conjecture/c/a1"].status, records["conjecture/c/a1"].pool_checked) == (NOT_FOUND, False)


def test_the_search_and_its_tactics_take_the_solver_nodes_settings(cfg):
    settings = search_settings(cfg.solver.search, "rocq", 5.0, 30.0)
    assert (settings.width, settings.lemma_seconds, settings.tactic_seconds, settings.recheck_seconds) == (
        cfg.solver.search.width, 5.0, 5.0, 30.0)  # a tactic never longer than the search
    # null finishers: the language's own; a list: that list
    assert cfg.solver.search.finishers is None and settings.finishers == ROCQ_FINISHERS
    assert search_settings(cfg.solver.search, "lean", 5.0, 30.0).finishers == LEAN_FINISHERS
    named = dataclasses.replace(cfg.solver.search, finishers=["auto"])
    assert search_settings(named, "lean", 5.0, 30.0).finishers == ("auto",)
    sampling = tactic_sampling(cfg.solver.search, cfg.sampling.solver)
    assert (sampling.n, sampling.temperature, sampling.seed) == (cfg.solver.search.width,
                                                                 cfg.sampling.solver.temperature, None)


def test_a_search_record_keeps_the_steps_of_a_found_path_and_reads_back(tmp_path):
    record = search_record("a0", PROBLEM.id, FOUND, "valid", pool_checked=True)
    assert record.steps == (("forall n : nat, n + 0 = n", "intros n."), ("n : nat\nn + 0 = n", "lia"))
    assert (record.model_calls, record.samples, record.tokens, record.expanded) == (2, 4, 13, 2)
    assert record.found and record.proved
    assert search_record("a1", PROBLEM.id, NOTHING, NOT_FOUND, False).steps == ()
    path = tmp_path / "prove_searches.jsonl"
    redone = SearchRecord("a1", PROBLEM.id, "time", NOT_FOUND, False, 1, 2, 3, 4, 5.0)
    lines = [record.to_json(), search_record("a1", PROBLEM.id, DIED, "system_error", False).to_json(),
             {"attempt_id": "a9"}, redone.to_json()]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"attempt_id": "a2", "pro')
    # The later line of a redone search wins; a damaged line and a torn tail are left out.
    assert read_search_records(path) == {"a0": record, "a1": redone}
    assert read_search_records(tmp_path / "none.jsonl") == {}


def test_the_steps_trained_on_are_those_of_accepted_proofs_with_a_positive_weight(cfg):
    def attempt(aid, verdict, iteration=0):
        made = search_attempt(aid, iteration, PROBLEM, "p", 0, FOUND, verdict, cfg)
        return made

    valid, ok = Verdict(Status.VALID, "ok"), "valid"
    records = {0: {"a0": search_record("a0", PROBLEM.id, FOUND, ok, True),
                   "a1": search_record("a1", PROBLEM.id, FOUND, ok, True),
                   "a2": search_record("a2", PROBLEM.id, FOUND, "invalid", True)},
               1: {"a0": search_record("a0", PROBLEM.id, result(states=["s"], tactics=["auto."]), ok, True)}}
    chosen = [(attempt("a0", valid), 0.5), (attempt("a1", valid), 0.0),
              (attempt("a2", Verdict(Status.INVALID, "x")), 1.0), (attempt("a0", valid, iteration=1), 1.0),
              (attempt("a5", valid), 1.0)]  # no record: nothing to train on
    assert chosen_steps(chosen, records, TACTIC_LANGUAGES["rocq"].step_text) == [
        StepChoice(PROBLEM.id, "forall n : nat, n + 0 = n", "intros n.", 0.5),
        StepChoice(PROBLEM.id, "n : nat\nn + 0 = n", "lia.", 0.5),  # a finisher, written as a sentence
        StepChoice(PROBLEM.id, "s", "auto.", 1.0)]


def test_a_lean_searchs_steps_are_trained_as_the_tactics_it_ran(cfg):
    lean = result(tactics=["intro n", " omega "], states=["⊢ ∀ (n : ℕ), n + 0 = n", "n : ℕ\n⊢ n + 0 = n"])
    chosen = [(search_attempt("a0", 0, PROBLEM, "p", 0, lean, Verdict(Status.VALID, "ok"), cfg), 1.0)]
    records = {0: {"a0": search_record("a0", PROBLEM.id, lean, "valid", True)}}
    assert [s.tactic for s in chosen_steps(chosen, records, TACTIC_LANGUAGES["lean"].step_text)] == ["intro n", "omega"]
    example = step_example(CharTokenizer(), StepChoice("t1", "n : ℕ\n⊢ n + 0 = n", "omega", 1.0), "lean")
    assert example.prompt_ids == [ord(c) for c in PromptSet("lean").tactic("n : ℕ\n⊢ n + 0 = n", "")]


class CharTokenizer:
    """One id per character; no chat template, so a prompt is its own text."""

    eos_token_id = 0
    chat_template = None
    bos_token = None
    bos_token_id = None

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [ord(c) for c in text]}


def test_a_step_is_the_provers_tactic_prompt_and_the_tactic_then_eos():
    example = step_example(CharTokenizer(), StepChoice("t1", "n : nat\nn + 0 = n", "lia.", 0.5), "rocq")
    assert example.prompt_ids == [ord(c) for c in PromptSet("rocq").tactic("n : nat\nn + 0 = n", "")]
    assert example.completion_ids == [ord("l"), ord("i"), ord("a"), ord("."), 0]
    assert (example.weight, example.group_id, example.old_logprobs) == (0.5, "t1", None)


def test_steps_are_trained_with_reward_weighted_nll_whatever_the_objective():
    entry = objective(STEP_OBJECTIVE)
    assert entry.loss is weighted_nll and not entry.needs_old_logprobs and not entry.whole_groups


def test_the_metrics_of_an_iterations_searches(cfg):
    attempts = [search_attempt(aid, 0, PROBLEM, "p", 0, FOUND, None, cfg) for aid in ("a0", "a1", "a2", "a3")]
    records = {"a0": search_record("a0", PROBLEM.id, FOUND, "valid", True),
               "a1": search_record("a1", PROBLEM.id, REFUSED, "invalid", False),
               "a2": search_record("a2", PROBLEM.id, NOTHING, NOT_FOUND, False),
               "a3": search_record("a3", PROBLEM.id, DIED, "system_error", False),
               "gone": search_record("gone", PROBLEM.id, FOUND, "valid", True)}  # no committed attempt
    assert search_metrics(attempts, records, step_examples=2, anchor_examples=3) == {
        "search/attempts": 4, "search/found": 2, "search/pool_checked": 1, "search/proved": 1,
        "search/system_errors": 1, "search/model_calls": 6, "search/samples": 12, "search/tokens": 39,
        "search/expanded": 6, "search/mean_seconds": 4.5 / 4, "search/step_examples": 2,
        "search/anchor_examples": 3}


POOL = (("s1", "intros."), ("s2", "lia."), ("s3", "auto."))


def test_anchor_steps_sample_the_pool_without_replacement_then_pass_over_it_again():
    assert anchor_steps(POOL, 0, seed=1) == [] and anchor_steps((), 5, seed=1) == []
    two = anchor_steps(POOL, 2, seed=1)
    assert len({s.state for s in two}) == 2 and all((s.problem_id, s.weight) == (ANCHOR, 1.0) for s in two)
    assert anchor_steps(POOL, 2, seed=1) == two                      # seeded
    seven = anchor_steps(POOL, 7, seed=1)
    # two whole passes over the three steps, then one more: each step two or three times
    assert sorted(Counter(s.state for s in seven).values()) == [2, 2, 3]
    assert {(s.state, s.tactic) for s in seven} == set(POOL)


def test_anchors_are_replayed_in_proportion_to_the_found_steps_only_with_a_corpus(cfg, tmp_path):
    from sgs.corpus.records import FileRecord, Step, TheoremRecord, shard_path, write_shard
    goals = "n : nat\n============================\nn + 0 = n"
    theorem = TheoremRecord(library="lib", file="A.v", name="t", line=1, statement="Lemma t n : n + 0 = n.",
                            proof="Proof.\nintros.\nlia.\nQed.", ending="Qed", split="train",
                            steps=[Step(tactic=t, kind="tactic", goals=goals, num_goals=1, line=i + 2)
                                   for i, t in enumerate(["intros.", "lia."])])
    write_shard(shard_path(tmp_path, "lib", "A.v"),
                FileRecord(library="lib", file="A.v", module="Lib.A", split="train", status="ok", theorems=1),
                [theorem])
    assert [(state, tactic) for state, tactic in anchor_pool(str(tmp_path))] == [(goals, "intros."), (goals, "lia.")]
    assert replayed_anchor_steps(cfg, 0, found=4) == []                                     # no anchor corpus
    anchored = dataclasses.replace(cfg, solver=dataclasses.replace(cfg.solver, anchor_corpus=str(tmp_path),
                                                                   anchor_ratio=0.5))
    assert replayed_anchor_steps(anchored, 0, found=0) == []                                # no update: no anchors
    assert [s.tactic for s in replayed_anchor_steps(anchored, 0, found=3)] in (["intros.", "lia."],
                                                                               ["lia.", "intros."])


def test_generations_count_a_search_as_its_model_calls():
    """100 attempt and conjecture records so far (30 this iteration), 20 + 10 of them searches that
    made 50 + 25 model calls: 100 - 30 + 75 generations, 30 - 20 + 50 of them this iteration."""
    this = {"search/attempts": 20, "search/model_calls": 50}
    earlier = [{"search/attempts": 10, "search/model_calls": 25}, {"generations": 7}]
    assert generation_counts(100, 30, this, earlier) == (145, 60)
    assert generation_counts(100, 30, {}, [{}]) == (100, 30)  # sample mode: unchanged


def test_every_mode_has_an_entry_and_its_attempts_per_problem(cfg):
    assert set(SOLVER_MODES) == set(SelfPlaySolverMode)
    assert solver_mode(cfg).attempts_per_problem(cfg) == 4
    sampled = C.validate(compose_cfg("method.num_solver_samples=6"))
    assert solver_mode(sampled).attempts_per_problem(sampled) == 6
