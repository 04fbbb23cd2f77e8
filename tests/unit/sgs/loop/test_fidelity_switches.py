"""The paper's behaviour where SGS deviates from it, one switch each, on
hand-built cases in both settings: which conjectures the Solver attempts
(``method.unelaborated_conjectures``), when a conjecture is a duplicate
(``method.conjecture_dedup``), which proofs count towards expert iteration's
16 (``method.ei_solved_count``); and what the run summary, the report and
``python -m sgs.evaluate`` say about a run."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from lean_env.verdict import Status, Verdict
from sgs.analysis.evaluation import BenchmarkResult, ProblemResult, format_table
from sgs.analysis.report.runs import RunData, read_run
from sgs.config import UNELABORATED_CONJECTURES, ConjectureDedup, EiSolvedCount, MethodConfig, UnelaboratedConjectures
from sgs.launch import generation_count
from sgs.loop import conjecture as phase
from sgs.loop.context import DUPLICATE_CONJECTURE, DUPLICATE_OF_TARGET, MATCHES_BENCHMARK, RunContext
from sgs.loop.prove import problems
from sgs.loop.weights import checkpoint_version, write_checkpoint_version
from sgs.machinery.engines import SamplingSettings
from sgs.method.roles import STATEMENT_FORMS, canonical_form, exact_form
from sgs.state.records import Attempt, Completion, Target, prompt_digest
from sgs.state.solved import PROOF_KEYS, SolvedRegistry, StoredProof
from sgs.state.store import Store

HEADER = "Require Import Arith."
TRAINING = Target(id="t_add", header=HEADER, statement="Theorem t_add : forall n : nat, n + 0 = n.")
HELD_OUT = Target(id="t_held", header=HEADER, statement="Theorem t_held : forall k : nat, 0 + k = k.", held_out=True)
OTHER = Target(id="t_mul", header=HEADER, statement="Theorem t_mul : forall n : nat, n * 1 = n.")


def test_every_setting_has_its_implementation():
    assert set(phase.ELABORATION_CHECK) == set(UNELABORATED_CONJECTURES) == set(UnelaboratedConjectures)
    assert set(STATEMENT_FORMS) == set(ConjectureDedup)
    assert set(PROOF_KEYS) == set(EiSolvedCount)


# --------------------------------------------------------------------------
# method.conjecture_dedup
# --------------------------------------------------------------------------


def coq(claim: str) -> str:
    return f"```coq\n{claim}\nAdmitted.\n```"


def test_exact_form_is_the_text_and_canonical_form_ignores_names():
    renamed = "Lemma mine : forall m : nat, m + 0 = m."
    assert exact_form(f"  {TRAINING.statement}\n", "rocq") == TRAINING.statement
    assert exact_form(renamed, "rocq") != exact_form(TRAINING.statement, "rocq")
    assert canonical_form(renamed, "rocq") == canonical_form(TRAINING.statement, "rocq")


@pytest.mark.parametrize("dedup", list(ConjectureDedup))
def test_duplicates_up_to_renaming_or_as_text(dedup):
    form = STATEMENT_FORMS[dedup]
    targets = {form(t.statement, "rocq") for t in (TRAINING, HELD_OUT)}
    held_out = {canonical_form(HELD_OUT.statement, "rocq")}
    benchmark = {canonical_form("Theorem b1 : forall a b : nat, a * b = b * a.", "rocq")}
    seen: set[str] = set()

    def screen(claim: str) -> str | None:
        return phase.screen_conjecture(coq(claim), "rocq", targets, seen, benchmark, dedup=dedup,
                                       held_out_forms=held_out)[1]

    canonical = dedup == "canonical"
    # A training target copied as it is, and renamed (a new statement only as text).
    assert screen(TRAINING.statement) == DUPLICATE_OF_TARGET
    assert screen("Lemma mine : forall m : nat, m + 0 = m.") == (DUPLICATE_OF_TARGET if canonical else None)
    # A renamed held-out target or benchmark problem never passes: matched up to renaming either way.
    assert screen("Lemma mine2 : forall j : nat, 0 + j = j.") == DUPLICATE_OF_TARGET
    assert screen("Lemma swap : forall x y : nat, x * y = y * x.") == MATCHES_BENCHMARK
    # Conjectures of one iteration among themselves.
    assert screen("Theorem c1 : forall x : nat, x * 1 = x.") is None
    assert screen("Theorem c2 : forall y : nat, y * 1 = y.") == (DUPLICATE_CONJECTURE if canonical else None)
    assert screen("Theorem c1 : forall x : nat, x * 1 = x.") == DUPLICATE_CONJECTURE


# --------------------------------------------------------------------------
# The conjecture phase: method.unelaborated_conjectures, and dedup on resume
# --------------------------------------------------------------------------


class CheckingPool:
    """The verifier pool's statement checks: a statement elaborates unless it mentions ``bogus``."""

    def __init__(self):
        self.submitted = []

    def submit_statement(self, task):
        self.submitted.append(task)


def sample(text: str) -> SimpleNamespace:
    return SimpleNamespace(text=text, token_ids=[1, 2], logprobs=[-0.1, -0.2], policy_version=0,
                           finish_reason="stop", entropy=0.5)


def run_context(store: Store, method: MethodConfig, outputs: dict[str, list[str]], delivered: int | None = None
                ) -> tuple[RunContext, CheckingPool]:
    """A context whose Conjecturer writes ``outputs[target id][j]`` as sample j (only the first
    ``delivered`` samples of each request: a phase killed midway) and whose pool checks statements."""
    cfg = SimpleNamespace(method=method, seed=0, prover=SimpleNamespace(language="rocq"),
                          evaluation=SimpleNamespace(contamination="exclude"),
                          logging=SimpleNamespace(progress_bars=False))
    pool = CheckingPool()
    runtime = SimpleNamespace(pool=pool, prompter=SimpleNamespace(conjecturer=lambda target: f"state {target.id}"))
    ctx = RunContext(cfg, store, runtime, weights=None, monitor=None, run_name="test", benchmark=None)

    def draw(iteration, name, role, requests, settings, on_sample, on_verdict):
        for request in requests:
            for sample_id in request.sample_ids[:delivered]:
                index = int(sample_id.rsplit("/c", 1)[1])
                on_sample(request, sample_id, sample(outputs[request.item.id][index]))
        for task in pool.submitted:
            on_verdict(task, Verdict(Status.INVALID if "bogus" in task.statement else Status.VALID))

    ctx.draw = draw
    return ctx, pool


@pytest.fixture
def no_settings(monkeypatch):
    monkeypatch.setattr(phase, "conjecturer_settings", lambda cfg, seed: None)


@pytest.mark.parametrize("setting", list(UnelaboratedConjectures))
def test_a_conjecture_that_does_not_elaborate_is_attempted_only_under_attempt(tmp_path, no_settings, setting):
    method = MethodConfig(unelaborated_conjectures=setting)
    outputs = {"t_add": [coq("Theorem ok : forall n : nat, n + 1 = S n.")],
               "t_mul": [coq("Theorem bad : forall n : nat, bogus n.")],
               "t_held": []}
    with Store.open(tmp_path / "run", [TRAINING, OTHER, HELD_OUT], {"method": setting}) as store:
        ctx, pool = run_context(store, method, outputs)
        phase.conjecture(ctx, 0, store.begin_phase(0, "conjecture"))
        store.mark_done(0, "conjecture")
        found = {c.target_id: c for c in store.conjectures(0)}
        attempted = [p.id for p in problems(ctx, 0) if p.kind == "conjecture"]
    assert found["t_add"].statement is not None
    if setting == "skip":
        # Both statements were checked; the one that fails gets no Solver attempt.
        assert len(pool.submitted) == 2
        assert found["t_mul"].statement is None and found["t_mul"].extraction_error == "elaboration_invalid"
        assert attempted == [found["t_add"].id]
    else:
        # Nothing is checked before proving: every conjecture gets its k attempts (and generations).
        assert pool.submitted == []
        assert "bogus" in found["t_mul"].statement and found["t_mul"].extraction_error is None
        assert attempted == [found["t_add"].id, found["t_mul"].id]


@pytest.mark.parametrize("dedup", list(ConjectureDedup))
def test_a_resumed_phase_compares_new_conjectures_with_the_stored_ones_as_written(tmp_path, no_settings, dedup):
    """The stored statements are renamed; a resumed phase must still know what the Conjecturer wrote."""
    method = MethodConfig(conjectures_per_target=3, conjecture_dedup=dedup)
    first, same, renamed = (coq("Theorem c : forall x : nat, x * 2 = x + x."),
                            coq("Theorem c : forall x : nat, x * 2 = x + x."),
                            coq("Theorem d : forall y : nat, y * 2 = y + y."))
    outputs = {"t_add": [first, same, renamed]}
    with Store.open(tmp_path / "run", [TRAINING], {"dedup": dedup}) as store:
        ctx, _ = run_context(store, method, outputs, delivered=1)
        phase.conjecture(ctx, 0, store.begin_phase(0, "conjecture"))  # killed after sample 0: no marker
    with Store.open(tmp_path / "run", None, {"dedup": dedup}) as store:
        ctx, _ = run_context(store, method, outputs)
        phase.conjecture(ctx, 0, store.begin_phase(0, "conjecture"))
        store.mark_done(0, "conjecture")
        rejections = [c.extraction_error for c in sorted(store.conjectures(0), key=lambda c: c.id)]
    assert rejections == [None, DUPLICATE_CONJECTURE, DUPLICATE_CONJECTURE if dedup == "canonical" else None]


# --------------------------------------------------------------------------
# method.ei_solved_count
# --------------------------------------------------------------------------


def proof(text: str, iteration: int = 0, attempt: str = "a0", target: str = "t_add") -> StoredProof:
    return StoredProof(target_id=target, iteration=iteration, attempt_id=attempt, proof=text, reward=1.0)


def test_distinct_counts_a_proof_text_once_and_all_counts_every_verified_attempt():
    found = [proof("lia.", attempt="a0"), proof("  lia.\n", attempt="a1"), proof("auto.", attempt="a2"),
             proof("lia.", iteration=1, attempt="a0")]  # attempt ids repeat across iterations
    distinct = SolvedRegistry([TRAINING], counting="distinct")
    assert distinct.admissible(found) == [found[0], found[2]]
    every = SolvedRegistry([TRAINING], counting="all")
    assert every.admissible(found) == found
    # The cap holds either way: the first found are kept.
    assert SolvedRegistry([TRAINING], max_proofs=2, counting="all").admissible(found) == found[:2]


def test_a_registry_replays_proofs_admitted_under_the_other_counting():
    """A run resumed with the setting changed rebuilds its registry from what each phase admitted."""
    registry = SolvedRegistry([TRAINING], counting="distinct")
    registry.add([proof("lia.", attempt="a0"), proof("lia.", attempt="a1")])  # admitted under ``all``
    assert len(registry.proofs("t_add")) == 2
    # New proofs follow the registry's own rule: a third "lia." is a repeat, "auto." is new.
    assert registry.admissible([proof("lia.", attempt="a2"), proof("auto.", attempt="a3")]) == [
        proof("auto.", attempt="a3")]
    with pytest.raises(ValueError, match="does not admit"):
        registry.add([proof("omega.", attempt="a0")])  # that attempt is stored already
    with pytest.raises(ValueError, match="does not admit"):
        SolvedRegistry([TRAINING], max_proofs=1).add([proof("a.", attempt="a0"), proof("b.", attempt="a1")])


def verified(iteration: int, index: int, text: str) -> Attempt:
    completion = Completion(prompt_sha256=prompt_digest("p"), text=text, token_ids=[1], logprobs=[-0.1],
                            policy_version=0, finish_reason="stop", entropy=0.0)
    return Attempt(id=f"target/t_add/a{index}", iteration=iteration, problem_id="t_add", problem_kind="target",
                   completion=completion, proof=text, extraction_error=None, verdict=Verdict(Status.VALID),
                   reward=1.0)


@pytest.mark.parametrize("counting, sampled_again", [("distinct", True), ("all", False)])
def test_expert_iteration_samples_a_target_solved_fewer_than_16_times(tmp_path, counting, sampled_again):
    """Sixteen verified attempts that all found one proof: solved 16 times, or once."""
    with Store.open(tmp_path / "run", [TRAINING, OTHER], {"c": counting}, proof_counting=counting) as store:
        log = store.begin_phase(0, "prove")
        for index in range(16):
            log.append(verified(0, index, "Proof. lia. Qed."))
        store.mark_done(0, "prove")
        assert len(store.solved_registry.proofs("t_add")) == (1 if counting == "distinct" else 16)
    # The count survives a resume (the registry is rebuilt from the phase markers).
    with Store.open(tmp_path / "run", None, {"c": counting}, proof_counting=counting) as store:
        ctx = SimpleNamespace(cfg=SimpleNamespace(method=MethodConfig(solver_objective="ei"), seed=0), store=store)
        sampled = [p.id for p in problems(ctx, 1)]
    assert sampled == (["t_add", "t_mul"] if sampled_again else ["t_mul"])


def test_the_registry_keeps_max_proofs_per_target_and_reports_read_it_so(tmp_path):
    """method.max_proofs_per_target reaches the registry: with 4, a target stops being
    sampled by expert iteration after four proofs, in the run and after a resume, and the
    report rebuilds the same registry (no proof refused as damage)."""
    config = {"method": {"ei_solved_count": "all", "max_proofs_per_target": 4}}
    with Store.open(tmp_path / "run", [TRAINING, OTHER], config, proof_counting="all", max_proofs=4) as store:
        log = store.begin_phase(0, "prove")
        for index in range(6):
            log.append(verified(0, index, "Proof. lia. Qed."))
        store.mark_done(0, "prove")
        assert len(store.solved_registry.proofs("t_add")) == 4
    with Store.open(tmp_path / "run", None, config, proof_counting="all", max_proofs=4) as store:
        method = MethodConfig(solver_objective="ei", ei_solved_count="all", max_proofs_per_target=4)
        ctx = SimpleNamespace(cfg=SimpleNamespace(method=method, seed=0), store=store)
        assert [p.id for p in problems(ctx, 1)] == ["t_mul"]
    run = read_run(tmp_path / "run")
    assert run.solved_at == {"t_add": 0} and not run.notes


# --------------------------------------------------------------------------
# What a run says about itself
# --------------------------------------------------------------------------


@pytest.mark.parametrize("setting", list(UnelaboratedConjectures))
def test_the_summary_and_the_report_say_how_generations_were_counted(setting):
    said = f"{UNELABORATED_CONJECTURES[setting]} (method.unelaborated_conjectures={setting})"
    cfg = SimpleNamespace(method=MethodConfig(unelaborated_conjectures=setting))
    assert generation_count(cfg) == f"every Conjecturer and Solver sample: {said}"
    run = RunData(run_dir=Path("run"), experiment="standard", config={"method": {"unelaborated_conjectures": setting}},
                  metrics=[], training_target_ids=[], solved_at={}, conjecture_target={}, scores={}, held_out=[],
                  benchmarks=[])
    assert run.generation_count == said


def test_a_run_from_before_the_setting_skipped_unelaborated_conjectures():
    run = RunData(run_dir=Path("run"), experiment="standard", config={"method": {}}, metrics=[],
                  training_target_ids=[], solved_at={}, conjecture_target={}, scores={}, held_out=[], benchmarks=[])
    assert run.unelaborated_conjectures == "skip"
    assert run.generation_count.startswith(UNELABORATED_CONJECTURES["skip"])


# --------------------------------------------------------------------------
# The policy version of an evaluated checkpoint
# --------------------------------------------------------------------------


def test_a_checkpoint_says_its_own_version(tmp_path):
    copy = tmp_path / "copied_checkpoint"
    copy.mkdir()
    assert checkpoint_version(copy) is None  # weights from outside a run: not known, not 0
    write_checkpoint_version(copy, 5)
    assert checkpoint_version(copy) == 5 and checkpoint_version(str(copy) + "/") == 5
    assert checkpoint_version("deepseek-ai/DeepSeek-Prover-V2-7B") is None  # a hub id


def test_a_checkpoint_without_the_file_is_placed_by_its_run_directory(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    with Store.open(run_dir, [TRAINING], {"c": 1}) as store:
        after_4 = store.checkpoint_dir("solver", 4)
        after_4.mkdir(parents=True)
        assert checkpoint_version(after_4) is None  # iteration 4's training never finished
        store.mark_done(4, "train")
    assert checkpoint_version(after_4) == 5  # the policy after iteration 4
    monkeypatch.chdir(tmp_path)
    assert checkpoint_version("run/checkpoints/solver/iter_0004") == 5


def test_an_evaluation_of_unknown_version_says_so():
    statuses = {"valid": 1, "invalid": 0, "timeout": 0, "system_error": 0, "no_proof": 0}
    result = BenchmarkResult(benchmark="b", checkpoint="elsewhere", policy_version=None, language="rocq", ks=(1,),
                             confidence=0.95, settings=SamplingSettings(n=1, seed=0),
                             problems=(ProblemResult("p", statuses),), seconds=0.0)
    assert "checkpoint: elsewhere (policy version unknown)" in format_table(result)
    assert json.loads(json.dumps(result.to_json()))["policy_version"] is None
    assert "(policy version 5)" in format_table(replace(result, policy_version=5))
