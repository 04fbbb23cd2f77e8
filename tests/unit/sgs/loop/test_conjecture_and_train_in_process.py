"""The conjecture and training phases run in process, in well under a second,
on the test doubles of ``tests/doubles.py``: the Conjecturer's samples, their
parsing, the statement checks (through ``TableVerifier``), the dedup, the
Guide's scores and the kept conjectures; and what the training phase hands
the learner (``TableLearner`` records every job: which samples, with which
weights or advantages, from which weights, into which checkpoint), and how
the trained weights reach the engines.

Everything between the doubles is the real code.  The end-to-end runs of
``tests/e2e/test_loop.py`` check the same against Ray, Ray Train and Rocq in
minutes, on a model whose samples are random; here every sample is chosen,
so each outcome is written out by hand.
"""

from __future__ import annotations

import json
import re

import pytest

from lean_env.verdict import ProofTask
from sgs.config import MethodConfig
from sgs.loop.context import DUPLICATE_CONJECTURE, DUPLICATE_OF_TARGET, MATCHES_BENCHMARK, RunContext
from sgs.loop.weights import TRAIN_METRICS_FILE
from sgs.method.roles import CONJECTURE_NAME_PREFIX
from sgs.state.benchmarks import Benchmark
from sgs.state.records import Target
from sgs.state.store import Store
from tests.doubles import (
    Killed, TableEngines, TableLearner, TablePrompter, TableVerifier, checkpoint_logprobs, run_phase, table_context)

HEADER = "Require Import Arith."
TARGETS = [Target(id=f"t{i}", header=HEADER, statement=f"Theorem t{i} : {i} + 0 = {i}.") for i in range(6)]
HELD_OUT = Target(id="held", header=HEADER, statement="Theorem held : forall n : nat, 0 + n = n.", held_out=True)
BENCHMARK = Benchmark(name="bench", language="rocq", source="bench.jsonl", problems=(
    Target(id="b1", header=HEADER, statement="Theorem b1 : forall a b : nat, a * b = b * a."),))
K = 4


def open_store(tmp_path, targets=(*TARGETS, HELD_OUT)) -> Store:
    return Store.open(tmp_path / "run", list(targets), {"test": "conjecture and train in process"})


def target_index(prompt: str) -> int:
    return int(re.search(r"Theorem t(\d) ", prompt).group(1))


# --------------------------------------------------------------------------
# The conjecture phase


#: What the Conjecturer writes as sample j for target i, and what becomes of
#: it: (screening with dedup "canonical" and elaboration checks,
#: with dedup "exact" and no elaboration check); "kept" keeps the statement.
CONJECTURES = [
    ("Theorem mine : forall n : nat, n + {i} = {i} + n.", "kept", "kept"),
    # sample 0 again up to renaming: a duplicate, unless compared as text
    ("Lemma other : forall m : nat, m + {i} = {i} + m.", DUPLICATE_CONJECTURE, "kept"),
    # the target itself, renamed
    ("Theorem again : {i} + 0 = {i}.", DUPLICATE_OF_TARGET, "kept"),
    (None, "no_code_block", "no_code_block"),
    # ill-typed: the prover refuses it when asked
    ("Theorem bad : {i} + true = {i}.", "elaboration_invalid", "kept"),
    # the held-out target, renamed: held-out statements are compared up to renaming whatever the dedup
    ("Theorem h : forall k : nat, 0 + k = k.", DUPLICATE_OF_TARGET, DUPLICATE_OF_TARGET),
    # a benchmark problem, renamed (evaluation.contamination=exclude)
    ("Theorem b : forall x y : nat, x * y = y * x.", MATCHES_BENCHMARK, MATCHES_BENCHMARK),
    # the same claim for every target: the first target's is kept, the others are duplicates
    ("Theorem shared : forall n : nat, n * 1 = n.", "kept for t0", "kept for t0"),
]


def conjecturer(prompt: str, index: int, version: int) -> str:
    """The Conjecturer double: sample ``index`` for target i is row ``index`` of :data:`CONJECTURES`."""
    statement = CONJECTURES[index][0]
    if statement is None:
        return "I cannot think of one."
    return f"```coq\n{statement.format(i=target_index(prompt))}\nAdmitted.\n```"


def conjecture_method(dedup: str = "canonical", elaboration: str = "skip") -> MethodConfig:
    return MethodConfig(batch_size=len(TARGETS), num_solver_samples=K, conjectures_per_target=len(CONJECTURES),
                        use_guide=False, train_conjecturer=False, conjecture_dedup=dedup,
                        unelaborated_conjectures=elaboration)


def well_typed(task: ProofTask) -> bool:
    return "true" not in task.statement


def conjecture_phase(store: Store, method: MethodConfig, engines: TableEngines, pool: TableVerifier,
                     iteration: int = 0) -> dict[str, tuple[str | None, str | None]]:
    """Run the conjecture phase; each record's id -> (statement, rejection)."""
    ctx = table_context(store, method, {"conjecturer": engines}, pool, benchmark=BENCHMARK)
    run_phase(ctx, iteration, "conjecture")
    return {c.id: (c.statement, c.extraction_error) for c in store.conjectures(iteration)}


def expected_outcome(target: int, index: int, column: int) -> str:
    outcome = CONJECTURES[index][column]
    if outcome == "kept for t0":
        return "kept" if target == 0 else DUPLICATE_CONJECTURE
    return outcome


@pytest.mark.parametrize("dedup, elaboration, column", [("canonical", "skip", 1), ("exact", "attempt", 2)])
def test_each_conjecture_is_parsed_screened_checked_and_renamed(tmp_path, dedup, elaboration, column):
    """Every Conjecturer sample becomes one record with the statement or the
    reason it was rejected; only new, well-formed statements go to the prover
    (and only when ``method.unelaborated_conjectures=skip``), renamed."""
    with open_store(tmp_path) as store:
        engines, pool = TableEngines(conjecturer), TableVerifier(lambda task: True, elaborates=well_typed)
        found = conjecture_phase(store, conjecture_method(dedup, elaboration), engines, pool)
    assert engines.prompts == [f"conjecture for: {t.statement}" for t in TARGETS]  # held out: never
    expected = {f"it0/t{i}/c{j}": expected_outcome(i, j, column)
                for i in range(len(TARGETS)) for j in range(len(CONJECTURES))}
    assert {cid: "kept" if error is None else error for cid, (statement, error) in found.items()} == expected
    kept = {cid: statement for cid, (statement, error) in found.items() if error is None}
    assert all(statement.startswith(f"Theorem {CONJECTURE_NAME_PREFIX}") for statement in kept.values())
    assert kept["it0/t3/c0"].endswith(": forall n : nat, n + 3 = 3 + n.")
    checked = {task.id: task for task in pool.statements}
    if elaboration == "skip":
        # The new statements and the ill-typed ones, nothing the screening had rejected.
        assert sorted(checked) == sorted([cid for cid in expected if cid.endswith(("/c0", "/c4"))] + ["it0/t0/c7"])
        assert all(task.proof == "" and task.header == HEADER for task in checked.values())
        assert checked["it0/t3/c0"].statement == kept["it0/t3/c0"]
    else:
        assert checked == {}
    assert pool.checked == []  # no proof was asked for


def test_the_conjecturer_writes_only_for_the_targets_unsolved_before_the_iteration(tmp_path):
    """Iteration 1's Conjecturer is asked about the targets iteration 0 left
    unsolved, each ``conjectures_per_target`` times; unconditioned, with the fixed prompt."""
    with open_store(tmp_path) as store:
        evens = TableEngines(lambda prompt, j, v: "```coq\nProof. lia. Qed.\n```" if target_index(prompt) % 2 == 0
                             else "```coq\nProof. auto. Qed.\n```")
        pool = TableVerifier(lambda task: "lia" in task.proof)
        run_phase(table_context(store, conjecture_method(), {"solver": evens}, pool), 0, "prove")
        method = conjecture_method()
        method.conjecturer_prompt = "unconditioned"
        engines = TableEngines(lambda prompt, j, v: f"```coq\nTheorem c : {j} = {j}.\nAdmitted.\n```")
        found = conjecture_phase(store, method, engines, TableVerifier(lambda task: True), iteration=1)
    assert {cid.split("/")[1] for cid in found} == {"t1", "t3", "t5"}
    assert len(found) == 3 * len(CONJECTURES) and engines.prompts == ["conjecture"] * 3


@pytest.mark.parametrize("chunks_before_the_kill", [0, 1, 4])
def test_a_killed_conjecture_phase_resumes_to_the_same_records_drawing_nothing_twice(tmp_path,
                                                                                     chunks_before_the_kill):
    """A driver killed mid-phase: the resumed phase keeps what was stored,
    takes what was drawn but not stored from the sample cache, and still
    rejects a later target's copy of a statement stored before the kill."""
    with open_store(tmp_path / "whole") as store:
        uninterrupted = conjecture_phase(store, conjecture_method(), TableEngines(conjecturer),
                                         TableVerifier(lambda task: True, elaborates=well_typed))
    with open_store(tmp_path) as store:
        killed = TableEngines(conjecturer, die_after=chunks_before_the_kill)
        with pytest.raises(Killed):  # the last chunk's statement checks unanswered: in the cache only
            conjecture_phase(store, conjecture_method(), killed,
                             TableVerifier(lambda task: True, elaborates=well_typed, lag=1))
    with Store.open(tmp_path / "run", None, {"test": "conjecture and train in process"}) as store:
        again = TableEngines(conjecturer)
        resumed = conjecture_phase(store, conjecture_method(), again,
                                   TableVerifier(lambda task: True, elaborates=well_typed))
    assert resumed == uninterrupted
    assert killed.samples_drawn + again.samples_drawn == len(TARGETS) * len(CONJECTURES)


# --------------------------------------------------------------------------
# Review and training: one iteration whose every number is known


#: How many of the Solver's k samples prove target i's conjecture, and the
#: solve rate that makes: 0, 1/4, 1/4, 2/4, 3/4, 4/4.
PROVED = [0, 1, 1, 2, 3, 4]


def one_conjecture(prompt: str, index: int, version: int) -> str:
    """Target i's Conjecturer states ``i * n = n * i`` with n = PROVED[i]."""
    i = target_index(prompt)
    return f"```coq\nTheorem mine : {i} * {PROVED[i]} = {PROVED[i]} * {i}.\nAdmitted.\n```"


def solver(prompt: str, index: int, version: int) -> str:
    """Proves ``i * n = n * i`` on its first n samples; never a target."""
    found = re.search(r"\* (\d) =", prompt)
    good = found is not None and index < int(found.group(1))
    return f"```coq\nProof.\n  {'ring' if good else 'idtac'}.\nQed.\n```"


def guide(prompt: str, index: int, version: int) -> str:
    """Relevance i for target i's conjecture, no redundant premise, complexity 1: R_guide = i + 2."""
    return (f"<begin_relevance_score>{target_index(prompt)}<end_relevance_score>\n"
            "<begin_redundancy_score>0<end_redundancy_score>\n"
            "<begin_conclusion_complexity_score>1<end_conclusion_complexity_score>")


def sgs_method(**changes) -> MethodConfig:
    return MethodConfig(**{"batch_size": len(TARGETS), "num_solver_samples": K, "conjectures_per_target": 1,
                           "use_guide": True, **changes})


def one_iteration(store: Store, method: MethodConfig, learner: TableLearner | None = None,
                  phases=("conjecture", "prove", "review"), conjecturer=one_conjecture, solver=solver) -> RunContext:
    engines = {"conjecturer": TableEngines(conjecturer), "solver": TableEngines(solver),
               "guide": TableEngines(guide)}
    ctx = table_context(store, method, engines, TableVerifier(lambda task: "ring" in task.proof), learner)
    for phase in phases:
        run_phase(ctx, 0, phase)
    return ctx


def test_the_guide_scores_the_kept_conjectures_and_their_weights_follow(tmp_path):
    """Solve rates 0, 1/4, 1/4, 2/4, 3/4, 1: p70 of those inside (0, 1) is 2/4,
    so t1-t3's conjectures are kept; the Guide reviews t1-t4's (early, as
    soon as their rates are final; t4's for nothing), and R = R_guide (1 - s)
    = 2.25, 3, 2.5 min-max normalise to weights 0, 1, 1/3."""
    with open_store(tmp_path) as store:
        ctx = one_iteration(store, sgs_method())
        scores = {cid.split("/")[1]: score for cid, score in store.conjecture_scores(0).items()}
    assert ctx.rt.engines["guide"].samples_drawn == 4
    assert {t: s.solve_rate for t, s in scores.items()} == {f"t{i}": n / K for i, n in enumerate(PROVED)}
    assert sorted(t for t, s in scores.items() if s.kept) == ["t1", "t2", "t3"]
    assert all((s.guide_output is not None) == s.kept for s in scores.values())
    assert [(scores[t].relevance, scores[t].complexity, scores[t].r_guide) for t in ("t1", "t2", "t3")] == [
        (1, 1, 3.0), (2, 1, 4.0), (3, 1, 5.0)]
    assert [scores[t].reward for t in ("t1", "t2", "t3")] == [2.25, 3.0, 2.5]
    assert [scores[t].weight for t in ("t1", "t2", "t3")] == pytest.approx([0.0, 1.0, 1 / 3])
    assert all(s.reward == s.weight == 0.0 for t, s in scores.items() if not s.kept)


def test_the_learner_gets_the_solvers_selection_and_the_kept_conjectures_with_their_weights(tmp_path):
    """REINFORCE½ trains on the valid proofs of problems with 0 < s <= 1/2
    (t1-t3's conjectures: 1 + 1 + 2 proofs, weight 1); the Conjecturer on its
    kept conjectures with the review's weights; both from the base weights in
    one learner run, each into its iteration's checkpoint, on exactly the
    tokens that were sampled from exactly the prompts that were rendered."""
    learner = TableLearner()
    with open_store(tmp_path) as store:
        ctx = one_iteration(store, sgs_method(), learner, phases=("conjecture", "prove", "review", "train"))
        attempts = {a.id: a for a in store.attempts(0)}
        conjectures = {c.id: c for c in store.conjectures(0)}
        [[solver_job, conjecturer_job]] = learner.calls
        assert solver_job.output_dir == str(store.checkpoint_dir("solver", 0))
        assert conjecturer_job.output_dir == str(store.checkpoint_dir("conjecturer", 0))
        numbers = {role: json.loads((store.checkpoint_dir(role, 0) / TRAIN_METRICS_FILE).read_text())
                   for role in ("solver", "conjecturer")}
    proofs = [a for a in attempts.values() if a.verdict is not None and a.verdict.valid
              and a.problem_id.split("/")[1] in ("t1", "t2", "t3")]
    assert len(proofs) == 4
    assert (solver_job.objective, conjecturer_job.objective) == ("reinforce_half", "conjecturer")
    assert sorted((e.group_id, e.completion_ids, e.weight) for e in solver_job.examples) == sorted(
        (a.problem_id, a.completion.token_ids, 1.0) for a in proofs)
    prompter = TablePrompter()
    for example in solver_job.examples:
        statement = conjectures[example.group_id].statement
        assert example.prompt_ids == prompter.token_ids(prompter.solver(HEADER, statement))
    assert [(conjectures[f"it0/t{i}/c0"].completion.token_ids, weight) for i, weight in ((1, 0.0), (2, 1.0), (3, 1 / 3))
            ] == [(e.completion_ids, pytest.approx(e.weight)) for e in conjecturer_job.examples]
    assert solver_job.base_checkpoint == conjecturer_job.base_checkpoint == "base"
    assert solver_job.seed != conjecturer_job.seed
    # The engines now serve what the learner wrote, and the probe says so (gap 0).
    for role, job in (("solver", solver_job), ("conjecturer", conjecturer_job)):
        assert ctx.rt.engines[role].loaded == [(job.output_dir, 1)]
        assert ctx.weights.current[role].version == 1
    assert [numbers[role]["probe_logprob_gap_mean"] for role in numbers] == [0.0, 0.0]
    assert [numbers[role]["num_examples"] for role in numbers] == [4, 3]
    assert ctx.rt.placement.learner_runs == [("solver", 0), ("conjecturer", 0)]
    assert ctx.rt.engines["guide"].loaded == []  # the Guide is not trained


def test_cispo_trains_on_whole_groups_with_their_advantages_and_the_samplers_logprobs(tmp_path):
    """CISPO: every attempt of the problems with 0 < s < 1 (t1-t4's
    conjectures), as one group per problem, positive advantages for the
    valid proofs and negative for the others, with the sampler's log-probs."""
    learner = TableLearner()
    with open_store(tmp_path) as store:
        one_iteration(store, sgs_method(solver_objective="cispo", train_conjecturer=False, use_guide=False),
                      learner, phases=("conjecture", "prove", "review", "train"))
        attempts = {(a.problem_id, tuple(a.completion.token_ids)): a for a in store.attempts(0)}
    [[job]] = learner.calls
    assert job.objective == "cispo"
    groups = {}
    for example in job.examples:
        groups.setdefault(example.group_id.split("/")[1], []).append(example)
    assert sorted(groups) == ["t1", "t2", "t3", "t4"] and all(len(g) == K for g in groups.values())
    for group in groups.values():
        assert sum(e.weight for e in group) == pytest.approx(0.0, abs=1e-4)
        for example in group:
            attempt = attempts[example.group_id, tuple(example.completion_ids)]
            assert example.old_logprobs == attempt.completion.logprobs
            assert (example.weight > 0) == attempt.verdict.valid


def test_a_conjecturer_batch_that_earned_no_reward_is_not_trained(tmp_path):
    """No conjecture is ever proved, so none is kept: under the paper's
    normalisation every attempted one joins the batch at weight 0, which
    teaches nothing; the learner trains the Solver alone."""
    learner = TableLearner()
    with open_store(tmp_path) as store:
        ctx = one_iteration(
            store, sgs_method(reward_normalisation="paper"), learner, ("conjecture", "prove", "review", "train"),
            conjecturer=lambda prompt, j, v: f"```coq\nTheorem c : {target_index(prompt)} * 0 = 0.\nAdmitted.\n```",
            solver=lambda prompt, j, v: "```coq\nProof. ring. Qed.\n```" if j == 0 and "Theorem t1 " in prompt
            else "```coq\nProof. idtac. Qed.\n```")
        scores = store.conjecture_scores(0).values()
        assert len(scores) == len(TARGETS) and not any(s.kept or s.weight for s in scores)
        assert store.checkpoint_iterations("conjecturer") == [] and store.checkpoint_iterations("solver") == [0]
    [[job]] = learner.calls
    assert job.objective == "reinforce_half" and [e.group_id for e in job.examples] == ["t1"]
    assert ctx.rt.engines["conjecturer"].loaded == [] and ctx.weights.current["conjecturer"].version == 0


def test_parallel_sampling_starts_no_learner_and_keeps_the_engines_weights(tmp_path):
    """Objective ``none``: the training phase finds nothing to train and calls no learner."""
    learner = TableLearner()
    method = MethodConfig(batch_size=len(TARGETS), num_solver_samples=K, solver_objective="none",
                          conjectures_per_target=0, train_conjecturer=False, use_guide=False)
    with open_store(tmp_path) as store:
        ctx = table_context(store, method, {"solver": TableEngines(solver)},
                            TableVerifier(lambda task: True), learner)
        for phase in ("conjecture", "prove", "review", "train"):
            run_phase(ctx, 0, phase)
        assert len(store.attempts(0)) == len(TARGETS) * K and not store.checkpoint_iterations("solver")
    assert learner.calls == [] and ctx.rt.engines["solver"].loaded == []
    assert ctx.weights.current["solver"].version == 0


def test_a_prompt_rendered_differently_at_training_time_stops_the_phase(tmp_path):
    """Prompt templates edited mid-run would train on prompts the samples were
    not drawn from: the training phase refuses before the learner starts."""
    learner = TableLearner()
    with open_store(tmp_path) as store:
        ctx = one_iteration(store, sgs_method(), learner)
        ctx.rt.prompter.solver = lambda header, statement: f"Prove this: {statement}"
        with pytest.raises(RuntimeError, match="re-rendered prompt differs"):
            run_phase(ctx, 0, "train")
    assert learner.calls == []


def test_the_probe_of_the_learners_weights_matches_only_the_same_checkpoint():
    """The doubles' probe: the engines show a gap unless they load what the learner wrote."""
    assert checkpoint_logprobs("a", 3) == checkpoint_logprobs("a", 3) != checkpoint_logprobs("b", 3)
