"""The prove and review phases run in process, in well under a second, on
test doubles (``tests/doubles.py``) of the two actor pools: ``TableEngines``
stands for an :class:`~sgs.machinery.engines.EngineGroup` (it answers each
prompt from a function of the prompt and the sample index) and
``TableVerifier`` for a :class:`~lean_env.pool.VerifierPool` (a proof is
valid when a function of it says so).  Everything between them is the real
code: the phase, the run context's sample caches,
:mod:`sgs.machinery.streaming`, the store.

The end-to-end runs (``tests/e2e/test_loop.py``) check the same phases against
real Ray actors and Rocq in minutes; these check the phases' bookkeeping
(every attempt once, rewards, early Guide reviews, resume after a killed
driver) in milliseconds.  The conjecture and training phases are
``tests/unit/sgs/loop/test_conjecture_and_train_in_process.py``'s, the whole loop
``tests/unit/sgs/loop/test_loop_in_process.py``'s.
"""

from __future__ import annotations

import pytest

from lean_env.streaming_pool import StreamingPool
from sgs.config import MethodConfig
from sgs.loop.context import to_completion
from sgs.loop.prove import prove
from sgs.loop.review import review
from sgs.machinery.engines import SamplingSettings
from sgs.state.records import Attempt, Conjecture, Target
from sgs.state.store import Store
from tests.doubles import Killed, TableEngines, TableVerifier, table_context

HEADER = "Require Import Arith."
TARGETS = [Target(id=f"t{i}", header=HEADER, statement=f"Theorem t{i} : {i} + 0 = {i}.") for i in range(6)]
K = 4


def proof_for(prompt: str, index: int, version: int = 0) -> str:
    """The Solver: even-numbered targets and conjectures get a proof that the
    verifier accepts on samples 0 and 1; everything else a wrong one."""
    good = index < 2 and any(f"t{i} " in prompt or f"c{i} " in prompt for i in (0, 2, 4))
    return f"```coq\nProof.\n  {'reflexivity' if good else 'idtac'}.\nQed.\n```"


def review_for(prompt: str, index: int, version: int = 0) -> str:
    """The Guide: the same review of everything (in no format it was asked for)."""
    return "relevance: 4\ncleanliness: 5"


def open_store(tmp_path) -> Store:
    return Store.open(tmp_path / "run", TARGETS, {"test": "phases in process"})


def solver_only() -> MethodConfig:
    return MethodConfig(batch_size=len(TARGETS), num_solver_samples=K, conjectures_per_target=0, use_guide=False)


def test_the_test_doubles_are_streaming_pools():
    assert isinstance(TableEngines(proof_for), StreamingPool)
    assert isinstance(TableVerifier(lambda task: True), StreamingPool)


def test_every_target_gets_k_attempts_with_their_verdicts_and_rewards(tmp_path):
    with open_store(tmp_path) as store:
        engines, pool = TableEngines(proof_for), TableVerifier(lambda task: "reflexivity" in task.proof)
        stats = prove(table_context(store, solver_only(), {"solver": engines}, pool), 0,
                      store.begin_phase(0, "prove"))
        store.mark_done(0, "prove")
        found = store.attempts(0)
    assert len(found) == len(TARGETS) * K and len({a.id for a in found}) == len(found)
    valid = {a.id for a in found if a.verdict is not None and a.verdict.valid}
    assert valid == {f"target/t{i}/a{j}" for i in (0, 2, 4) for j in (0, 1)}
    assert all(a.reward > 0 for a in found if a.id in valid)
    assert all(a.reward <= 0 for a in found if a.id not in valid)
    assert len(pool.checked) == len(found) and engines.samples_drawn == len(found)
    assert stats.tokens == sum(a.completion.num_tokens for a in found) and stats.verifications == len(found)


def test_a_sample_without_a_proof_is_stored_unchecked_with_no_reward(tmp_path):
    with open_store(tmp_path) as store:
        engines = TableEngines(lambda prompt, j, version: "I give up" if j == 0 else proof_for(prompt, j))
        pool = TableVerifier(lambda task: True)
        prove(table_context(store, solver_only(), {"solver": engines}, pool), 0, store.begin_phase(0, "prove"))
        store.mark_done(0, "prove")
        found = {a.id: a for a in store.attempts(0)}
    first = found["target/t0/a0"]
    assert first.proof is None and first.verdict is None and first.extraction_error == "no_code_block"
    assert first.reward <= 0 and len(pool.checked) == len(TARGETS) * (K - 1)


@pytest.mark.parametrize("chunks_before_the_kill", [0, 1, 3, 5])
def test_a_killed_prove_phase_resumes_without_redoing_or_losing_an_attempt(tmp_path, chunks_before_the_kill):
    with open_store(tmp_path) as store:
        killed = TableEngines(proof_for, die_after=chunks_before_the_kill)
        pool = TableVerifier(lambda task: "reflexivity" in task.proof)
        with pytest.raises(Killed):
            prove(table_context(store, solver_only(), {"solver": killed}, pool), 0, store.begin_phase(0, "prove"))
    # A new driver on the same run directory: what was stored is kept, the rest is drawn once.
    with Store.open(tmp_path / "run", None, {"test": "phases in process"}) as store:
        log = store.begin_phase(0, "prove")
        stored = sum(isinstance(record, Attempt) for record in log.recovered)
        assert stored == chunks_before_the_kill * K
        again = TableEngines(proof_for)
        prove(table_context(store, solver_only(), {"solver": again}, pool), 0, log)
        store.mark_done(0, "prove")
        found = store.attempts(0)
    assert sorted(a.id for a in found) == sorted(f"target/{t.id}/a{j}" for t in TARGETS for j in range(K))
    assert again.samples_drawn == len(TARGETS) * K - stored
    assert sum(a.verdict is not None and a.verdict.valid for a in found) == 6


def with_conjectures(store: Store, iteration: int) -> list[Conjecture]:
    """Two conjectures per target, already through the conjecture phase (c0 ... c11)."""
    log = store.begin_phase(iteration, "conjecture")
    made = []
    for index in range(2 * len(TARGETS)):
        target = TARGETS[index // 2]
        statement = f"Theorem c{index} : {index} = {index}."
        written = TableEngines(lambda prompt, j, version: f"```coq\n{statement}\nAdmitted.\n```").sample(
            f"state {target.id}", 0, SamplingSettings(n=1, max_tokens=256))
        made.append(Conjecture(id=f"it{iteration}/{target.id}/c{index}", iteration=iteration, target_id=target.id,
                               completion=to_completion(f"state {target.id}", written), statement=statement,
                               extraction_error=None))
        log.append(made[-1])
    store.mark_done(iteration, "conjecture")
    return made


def sgs_method() -> MethodConfig:
    return MethodConfig(batch_size=len(TARGETS), num_solver_samples=K, conjectures_per_target=2, use_guide=True)


def test_the_guide_reviews_during_the_prove_phase_and_the_review_phase_draws_nothing_new(tmp_path):
    with open_store(tmp_path) as store:
        with_conjectures(store, 0)
        solver, guide = TableEngines(proof_for), TableEngines(review_for)
        pool = TableVerifier(lambda task: "reflexivity" in task.proof)
        ctx = table_context(store, sgs_method(), {"solver": solver, "guide": guide}, pool)
        proved = prove(ctx, 0, store.begin_phase(0, "prove"))
        store.mark_done(0, "prove")
        # Conjectures c0, c2 and c4 have solve rate 2/4 (they could earn a reward): reviewed early;
        # the others (0/4) could not, and are not reviewed at all.
        early = guide.samples_drawn
        assert early == 3
        reviewed = review(ctx, 0, store.begin_phase(0, "review"))
        store.mark_done(0, "review")
        assert guide.samples_drawn == early      # the review phase found every review in its cache
        assert reviewed.tokens == 0 and proved.tokens > 0
        scores = store.conjecture_scores(0)
    kept = {cid for cid, score in scores.items() if score.kept}
    assert kept and all(scores[cid].guide_output is not None for cid in kept)
    assert kept <= {f"it0/t{i // 2}/c{i}" for i in (0, 2, 4)}
