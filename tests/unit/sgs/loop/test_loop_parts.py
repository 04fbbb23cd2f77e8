"""The loop's parts in process, without Ray, a prover or the command:
batching, seeds, record ids, screening conjectures, the objectives' view of
attempts, parallel sampling (nothing selected, no learner, engines that never
sleep, the shared start samples), the Conjecturer's batch, which checkpoint a
run resumes on, target files, prompts, the prover's recipe and colocated
engines' GPUs.  ``python -m sgs`` itself: ``tests/e2e/test_loop.py``."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from lean_env.verdict import Status, Verdict
from sgs.config import (
    MethodConfig, ProverConfig, ResourcesConfig, RocqSettings, SGSConfig, TargetsConfig, TinyModelSettings)
from sgs.loop import train
from sgs.loop.conjecture import screen_conjecture
from sgs.loop.context import (
    DUPLICATE_CONJECTURE, DUPLICATE_OF_TARGET, MATCHES_BENCHMARK, Problem, RunContext, attempt_id, conjecture_id,
    derived_seed)
from sgs.loop.phases import PHASES, TRAINING_PHASE
from sgs.loop.train import in_conjecturer_batch, select_solver_samples
from sgs.loop.weights import EngineWeights, current_weights
from sgs.state.records import Attempt, Completion, ConjectureScore, prompt_digest
from sgs.state.targets import batch_targets
from sgs.method.registry import objective as registered
from sgs.method.roles import CONJECTURE_NAME_PREFIX, canonical_form
from sgs.machinery.prompts import Prompter, chat_prompt
from sgs.machinery.runtime import Checkpoint, backend_spec, colocated_gpu_ids
from sgs.state.store import Store
from sgs.state.targets import TargetError, held_out_by_hash, load_targets
from tests.loop_support import HEADER, make_targets, write_jsonl
from tests.doubles import TableLearner


# --------------------------------------------------------------------------
# Pure helpers
# --------------------------------------------------------------------------


def test_the_batch_is_every_training_target_or_a_seeded_subsample():
    targets = make_targets()
    training = [t for t in targets if not t.held_out]
    assert batch_targets(targets, None, seed=0, iteration=3) == training
    assert batch_targets(targets, 100, seed=0, iteration=3) == training
    sub = batch_targets(targets, 3, seed=0, iteration=3)
    assert len(sub) == 3 and all(not t.held_out for t in sub)
    assert sub == batch_targets(targets, 3, seed=0, iteration=3)  # the same on a resume
    assert [t for t in training if t in sub] == sub  # source order kept
    others = {tuple(t.id for t in batch_targets(targets, 3, seed=0, iteration=i)) for i in range(10)}
    assert len(others) > 1  # each iteration draws its own batch


def test_derived_seeds_are_stable_and_distinct():
    assert derived_seed(0, 1, "prove") == derived_seed(0, 1, "prove")
    seeds = {derived_seed(s, i, p) for s in (0, 1) for i in (0, 1) for p in ("prove", "review")}
    assert len(seeds) == 8


def test_record_ids_name_problem_and_sample():
    target = Problem("target", "add_0", HEADER, "Theorem add_0 : True.")
    conj = Problem("conjecture", conjecture_id(2, "add_0", 0), HEADER, "Theorem c : True.")
    ids = {attempt_id(target, 0), attempt_id(target, 1), attempt_id(conj, 0), attempt_id(conj, 1)}
    assert len(ids) == 4
    assert conjecture_id(2, "add_0", 0) != conjecture_id(3, "add_0", 0) != conjecture_id(2, "add_0", 1)


def test_conjectures_are_screened_for_form_and_novelty_up_to_renaming():
    target_forms = {canonical_form(t.statement, "rocq") for t in make_targets()}
    seen: set[str] = set()

    def screen(claim: str) -> tuple[str | None, str | None]:
        return screen_conjecture(f"```coq\n{claim}\nAdmitted.\n```", "rocq", target_forms, seen)

    assert screen("no statement here") == (None, "not_a_theorem")
    assert screen_conjecture("no code block", "rocq", target_forms, seen) == (None, "no_code_block")
    # The held-out target with its names changed is still the target.
    assert screen("Lemma mine : forall k : nat, 0 + k = k.") == (None, DUPLICATE_OF_TARGET)
    statement, rejection = screen("Theorem first : forall n : nat, n + 1 = S n.")
    assert rejection is None and statement.startswith(f"Theorem {CONJECTURE_NAME_PREFIX}")
    assert statement.endswith(": forall n : nat, n + 1 = S n.")
    assert screen("Theorem again : forall m : nat, m + 1 = S m.") == (None, DUPLICATE_CONJECTURE)
    assert len(seen) == 1


def test_conjectures_stating_a_benchmark_problem_are_excluded_up_to_renaming():
    benchmark = {canonical_form("Theorem bench_1 : forall a b : nat, a * b = b * a.", "rocq")}
    seen: set[str] = set()
    output = "```coq\nLemma swap : forall x y : nat, x * y = y * x.\nAdmitted.\n```"
    assert screen_conjecture(output, "rocq", set(), seen, benchmark) == (None, MATCHES_BENCHMARK)
    # In flag mode nothing is excluded: the loop only counts the match.
    statement, rejection = screen_conjecture(output, "rocq", set(), seen)
    assert rejection is None and canonical_form(statement, "rocq") in benchmark


def _attempt(problem: str, index: int, status: str | None, reward: float, kind: str = "target") -> Attempt:
    completion = Completion(prompt_sha256=prompt_digest("p"), text="x", token_ids=[1, 2], logprobs=[-0.1, -0.2],
                            policy_version=0, finish_reason="stop", entropy=0.5)
    verdict = None if status is None else Verdict(Status(status))
    return Attempt(id=f"{problem}/{index}", iteration=0, problem_id=problem, problem_kind=kind,
                   completion=completion, proof=None if status is None else "Proof. lia. Qed.",
                   extraction_error="no_code_block" if status is None else None, verdict=verdict, reward=reward)


def test_objectives_count_unparsable_outputs_as_failures_and_drop_system_errors():
    attempts = [
        # a: 1 valid of 4 judged (the system error does not count): s = 0.25
        _attempt("a", 0, "valid", 1.0), _attempt("a", 1, None, 0.0), _attempt("a", 2, "invalid", 0.0),
        _attempt("a", 3, "timeout", 0.0), _attempt("a", 4, "system_error", 0.0),
        # b: all valid, s = 1: too easy for REINFORCE½ and no CISPO signal
        _attempt("b", 0, "valid", 1.0), _attempt("b", 1, "valid", 1.0),
    ]
    half = select_solver_samples(attempts, registered("reinforce_half"))
    assert [(s.index, s.weight) for s in half] == [(0, 1.0)]
    assert {s.index for s in select_solver_samples(attempts, registered("reinforce"))} == {0, 5, 6}
    cispo = select_solver_samples(attempts, registered("cispo"))
    assert {s.index for s in cispo} == {0, 1, 2, 3}  # the whole group but the system error
    assert cispo[0].weight > 0 > cispo[1].weight


#: The method of +experiment=parallel_sampling.
PARALLEL_SAMPLING = MethodConfig(solver_objective="none", conjectures_per_target=0, train_conjecturer=False,
                                 use_guide=False)


def test_parallel_sampling_selects_nothing_and_starts_no_learner():
    """Objective ``none``: what REINFORCE½ would train on is left alone, and the
    training phase ends without starting a learner run."""
    attempts = [_attempt("a", 0, "valid", 1.0), _attempt("a", 1, "invalid", 0.0)]
    assert select_solver_samples(attempts, registered("reinforce_half"))
    assert select_solver_samples(attempts, registered("none")) == []

    learner = TableLearner()
    store = SimpleNamespace(attempts=lambda iteration: attempts, conjectures=lambda iteration: [])
    train.train_policies(SimpleNamespace(cfg=SGSConfig(method=PARALLEL_SAMPLING), store=store,
                                         rt=SimpleNamespace(learner=learner)), 0, None)
    assert learner.calls == []


class _SleepyEngines:
    """An engine group that counts its naps."""

    def __init__(self):
        self.naps = 0

    def sleep(self, level: int) -> None:
        self.naps += 1

    def wake_up(self) -> None:
        pass


@pytest.mark.parametrize("method, naps", [
    (MethodConfig(conjectures_per_target=0, train_conjecturer=False, use_guide=False), 1),  # the RL baseline
    (PARALLEL_SAMPLING, 0),
])
def test_engines_sleep_for_the_learner_only_when_some_role_trains(method, naps):
    cfg = SGSConfig(method=method, resources=ResourcesConfig(sleep_engines_during_training=True))
    engines = _SleepyEngines()
    runtime = SimpleNamespace(engines={"solver": engines}, placement=SimpleNamespace(engine_states=lambda *args: None))
    weights = EngineWeights(cfg, None, runtime, {"solver": Checkpoint("base", 0)})
    weights.sleep(0, TRAINING_PHASE)
    weights.wake(0, "record")
    assert engines.naps == naps


def test_only_iteration_0_shares_its_samples_between_runs(tmp_path, monkeypatch):
    """Parallel sampling serves the base weights in every iteration; only iteration 0's
    samples go to the shared start cache (which each run reads whole)."""
    monkeypatch.setenv("SGS_CACHE_DIR", str(tmp_path / "cache"))
    weights = SimpleNamespace(current={"solver": Checkpoint(str(tmp_path / "base"), 0)})
    ctx = RunContext(SGSConfig(method=PARALLEL_SAMPLING), SimpleNamespace(targets=[]),
                     SimpleNamespace(prompter=SimpleNamespace(token_ids=len)), weights, None, run_name="r",
                     benchmark=None)
    assert ctx.start_samples(0).path.parent == tmp_path / "cache" / "starts"
    assert ctx.start_samples(1) is None


def _score(kept: bool, weight: float) -> ConjectureScore:
    return ConjectureScore(conjecture_id="c", solve_rate=0.5, kept=kept, relevance=None, redundancy=None,
                           complexity=None, guide_output=None, guide_parse_error=None, r_guide=None,
                           reward=0.5 if kept else 0.0, weight=weight)


def test_conjecturer_batch_follows_the_normalisation_rule():
    assert in_conjecturer_batch(_score(True, 0.0), "reference")
    assert not in_conjecturer_batch(_score(False, 0.0), "reference")
    assert in_conjecturer_batch(_score(False, 0.0), "paper")


def test_a_run_resumes_on_the_newest_checkpoint_whose_training_phase_is_done(tmp_path):
    with Store.open(tmp_path / "run", make_targets(), {"x": 1}) as store:
        assert current_weights(store, "solver", "base") == Checkpoint("base", 0)
        for phase in PHASES:
            store.mark_done(0, phase)
        store.checkpoint_dir("solver", 0).mkdir(parents=True)
        for phase in PHASES[:3]:
            store.mark_done(1, phase)
        # Iteration 1's training was killed half-way: its directory does not count.
        store.checkpoint_dir("solver", 1).mkdir(parents=True)
        assert current_weights(store, "solver", "base") == Checkpoint(str(store.checkpoint_dir("solver", 0)), 1)
        assert current_weights(store, "conjecturer", "base") == Checkpoint("base", 0)


# --------------------------------------------------------------------------
# Targets, prompts, settings
# --------------------------------------------------------------------------


def test_rocq_targets_keep_their_held_out_flags_and_honour_limit_and_ids(tmp_path):
    rows = [{"id": t.id, "header": t.header, "statement": t.statement, "proof": None, "difficulty": 1,
             "topic": "x", "held_out": t.held_out} for t in make_targets()]
    source = str(write_jsonl(tmp_path / "t.jsonl", rows))
    targets = load_targets(TargetsConfig(source=source), "rocq")
    assert targets == make_targets()
    limited = load_targets(TargetsConfig(source=source, limit=2, held_out_ids=["four"]), "rocq")
    assert [(t.id, t.held_out) for t in limited] == [("add_0", False), ("four", True)]


def test_lean_targets_read_the_d3k_layout_and_drop_a_trailing_sorry(tmp_path):
    d3k = {"iterations": [], "target_statements": {
        "a1": {"id": "a1", "header": "import Mathlib\n", "theorem": "theorem a1 : 1 = 1 := by", "proofs": []},
        "b2": {"id": "b2", "header": "import Mathlib\n", "theorem": "theorem b2 : 2 = 2 := by sorry"},
    }}
    (tmp_path / "d3k.json").write_text(json.dumps(d3k))
    targets = load_targets(TargetsConfig(source=str(tmp_path / "d3k.json")), "lean")
    assert [t.statement for t in targets] == ["theorem a1 : 1 = 1 := by", "theorem b2 : 2 = 2 := by"]
    (tmp_path / "list.json").write_text(json.dumps(list(d3k["target_statements"].values())))
    assert load_targets(TargetsConfig(source=str(tmp_path / "list.json")), "lean") == targets


def test_the_held_out_fraction_depends_on_the_ids_only():
    ids = [f"t{i}" for i in range(2000)]
    held = [i for i in ids if held_out_by_hash(i, 0.2)]
    assert 300 < len(held) < 500
    assert held == [i for i in ids if held_out_by_hash(i, 0.2)]
    assert not any(held_out_by_hash(i, 0.0) for i in ids)


@pytest.mark.parametrize("rows, message", [
    ([{"id": "a", "header": "H"}], "field 'statement' must be a string"),
    ([{"id": 3, "header": "H", "statement": "S"}], "field 'id' must be a string"),
    ([{"id": "a", "header": "H", "statement": "S", "held_out": "yes"}], "'held_out' must be a boolean"),
    ([], "holds no targets"),
])
def test_malformed_target_files_are_explained(tmp_path, rows, message):
    source = str(write_jsonl(tmp_path / "t.jsonl", rows))
    with pytest.raises(TargetError, match=message):
        load_targets(TargetsConfig(source=source), "rocq")


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from sgs.machinery.models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", [], TinyModelSettings(), seed=0)


def test_prompts_are_one_chat_turn_that_tokenises_with_a_single_bos(tiny_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    prompter = Prompter("rocq", tokenizer)
    target = make_targets()[0]
    prompt = prompter.solver(target.header, target.statement)
    assert target.statement in prompt and prompt.endswith("<|assistant|>\n")
    ids = prompter.token_ids(prompt)
    assert ids.count(tokenizer.bos_token_id) == 1 and ids[0] == tokenizer.bos_token_id
    assert prompter.conjecturer(None) == prompter.conjecturer(None) != prompter.conjecturer(target)
    assert "Theorem c : True." in prompter.guide(target, "Theorem c : True.")
    # A base model without a chat template gets the role text as it is.
    tokenizer.chat_template = None
    assert chat_prompt(tokenizer, "Prove it.") == "Prove it."


def test_prover_settings_become_the_verifier_backend_recipe():
    prover = ProverConfig(backend="rocq", language="rocq", timeout=7.0, default_targets="x",
                          rocq=RocqSettings(coqtop="/opt/coqtop", allow_bug_prone_features=["fixpoints"]))
    spec = backend_spec(prover)
    assert spec.name == "rocq"
    assert spec.options == {"timeout": 7.0, "allowed_axioms": [], "coqtop": "/opt/coqtop",
                            "allow_bug_prone_features": ["fixpoints"]}
    hammer = dataclasses.replace(prover, rocq=RocqSettings(tactic_libraries=["From Hammer Require Import Tactics."]))
    assert backend_spec(hammer).options["tactic_libraries"] == ["From Hammer Require Import Tactics."]


def test_colocated_engines_are_pinned_round_robin_over_the_node_gpus():
    cfg = SGSConfig()  # the paper's standard method: Solver, Conjecturer and Guide engines
    cfg.resources = ResourcesConfig(solver_engines=4, conjecturer_engines=2, guide_engines=2,
                                    colocate_engines_with_learner=True)
    assert colocated_gpu_ids(cfg, 8) == {"solver": [0, 1, 2, 3], "conjecturer": [4, 5], "guide": [6, 7]}
    assert colocated_gpu_ids(cfg, 4) == {"solver": [0, 1, 2, 3], "conjecturer": [0, 1], "guide": [2, 3]}
    with pytest.raises(RuntimeError, match="needs a node with GPUs"):
        colocated_gpu_ids(cfg, 0)
    cfg.resources.colocate_engines_with_learner = False
    assert colocated_gpu_ids(cfg, 8) == {}
