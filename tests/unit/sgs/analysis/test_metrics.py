"""Per-iteration metrics computed from stored records (sgs.analysis.metrics)."""

from __future__ import annotations

import json

import pytest

from lean_env.verdict import Status, Verdict
from sgs.analysis.metrics import (
    NO_PROOF,
    PhaseStats,
    attempt_outcome,
    conjecture_metrics,
    iteration_metrics,
    mean,
    pass_at_k,
    solve_rate_histogram,
    system_error_rate,
    verification_outcomes,
    system_error_causes,
    verifier_metrics,
    reason_key,
    resolved_wandb_mode,
    sample_tables,
    seq_len_capped,
    seq_len_capped_metrics,
    wandb_run_id,
)
from sgs.state.records import Attempt, Completion, Conjecture, ConjectureScore, prompt_digest, solve_rates
from sgs.state.store import REQUIRED_METRICS


def completion(entropy: float = 0.5, tokens: int = 3) -> Completion:
    return Completion(prompt_sha256=prompt_digest("p"), text="t", token_ids=[1] * tokens, logprobs=[-0.1] * tokens,
                      policy_version=0, finish_reason="stop", entropy=entropy)


def attempt(problem: str, index: int, status: str | None, kind: str = "target", reward: float | None = None,
            entropy: float = 0.5) -> Attempt:
    if reward is None:
        reward = 1.0 if status == "valid" else 0.0
    return Attempt(id=f"{problem}/{index}", iteration=0, problem_id=problem, problem_kind=kind,
                   completion=completion(entropy), proof=None if status is None else "Proof. auto. Qed.",
                   extraction_error="no_code_block" if status is None else None,
                   verdict=None if status is None else Verdict(Status(status)), reward=reward)


def conjecture(cid: str, statement: str | None, error: str | None = None, entropy: float = 1.0) -> Conjecture:
    return Conjecture(id=cid, iteration=0, target_id="t", completion=completion(entropy), statement=statement,
                      extraction_error=error)


def score(cid: str, rate: float, kept: bool, r_guide: float | None = None, reward: float = 0.0,
          parse_error: str | None = None) -> ConjectureScore:
    reviewed = r_guide is not None
    return ConjectureScore(conjecture_id=cid, solve_rate=rate, kept=kept, relevance=3 if reviewed else None,
                           redundancy=0 if reviewed else None, complexity=1 if reviewed else None,
                           guide_output="review" if reviewed else None, guide_parse_error=parse_error,
                           r_guide=r_guide, reward=reward, weight=1.0 if kept else 0.0)


ATTEMPTS = [
    attempt("a", 0, "valid"), attempt("a", 1, "invalid"), attempt("a", 2, None), attempt("a", 3, "timeout"),
    attempt("b", 0, "invalid"), attempt("b", 1, "system_error"), attempt("b", 2, "invalid"), attempt("b", 3, None),
    attempt("c", 0, "system_error"), attempt("c", 1, "system_error"),
    attempt("x", 0, "valid", kind="conjecture"), attempt("x", 1, "valid", kind="conjecture"),
]


def test_outputs_without_a_proof_count_as_failed_attempts():
    assert attempt_outcome(ATTEMPTS[2]) == NO_PROOF
    rates = solve_rates(ATTEMPTS)
    assert rates == {"a": 0.25, "b": 0.0, "c": None, "x": 1.0}


def test_samples_cut_short_of_max_tokens_count_as_capped_at_the_sequence_limit():
    def cut(tokens: int, reason: str) -> Completion:
        return Completion(prompt_sha256=prompt_digest("p"), text="t", token_ids=[1] * tokens,
                          logprobs=[-0.1] * tokens, policy_version=0, finish_reason=reason, entropy=0.5)

    # Capped: "length" short of max_tokens=8; not: stopped on EOS, or cut at max_tokens itself.
    completions = [cut(5, "length"), cut(7, "length"), cut(5, "stop"), cut(8, "length"), cut(8, "stop")]
    assert seq_len_capped(completions, 8) == 2
    attempts = [attempt("a", 0, "valid")]
    conjectures = [conjecture("c0", None, "no_code_block")]
    metrics = seq_len_capped_metrics(attempts, conjectures, {"solver": 3, "conjecturer": 3})
    assert metrics == {"seq_len_capped/solver": 0, "seq_len_capped/conjecturer": 0}
    capped = [Conjecture(id="c1", iteration=0, target_id="t", completion=cut(2, "length"), statement=None,
                         extraction_error="no_code_block")]
    assert seq_len_capped_metrics(attempts, capped, {"solver": 3, "conjecturer": 3})["seq_len_capped/conjecturer"] == 1


def test_pass_at_k_is_over_the_training_targets_sampled():
    targets = [a for a in ATTEMPTS if a.problem_kind == "target"]
    # a, b and c were sampled, a verified: 1/3; d (expert iteration left it out) is not counted.
    assert pass_at_k(targets, ["a", "b", "c", "d"]) == pytest.approx(1 / 3)
    # Only training targets count: b is held out here.
    assert pass_at_k(targets, ["a", "c"]) == 0.5
    # A verified conjecture says nothing about the targets: no target sampled, nothing to measure.
    assert pass_at_k(ATTEMPTS, ["x"]) is None
    assert pass_at_k(ATTEMPTS, []) is None


def judged(status: str, reason: str = "", audit: str = "") -> Attempt:
    return Attempt(id=f"{status}/{reason}/{audit}", iteration=0, problem_id="a", problem_kind="target",
                   completion=completion(), proof="Proof. auto. Qed.", extraction_error=None,
                   verdict=Verdict(Status(status), reason=reason, audit=audit), reward=0.0)


def test_verifier_metrics_count_reasons_and_audits_by_hand():
    attempts = [
        judged("valid", "ok", audit="agree"), judged("valid", "ok"), judged("valid", "ok", audit="inconclusive"),
        judged("invalid", "audit_disagreement", audit="disagree"),
        judged("invalid", "banned:Unset Guard Checking"), judged("invalid", "banned:Unset Guard Checking"),
        judged("invalid", "prover_error"), judged("timeout", "timeout"),
        judged("system_error", "worker_lost"),  # infrastructure, not a judgement: counted apart
        attempt("a", 9, None),  # no proof extracted, no verdict
    ]
    assert verifier_metrics(attempts) == {
        "verifier/audited": 3, "verifier/audit_disagreements": 1, "verifier/audit_inconclusive": 1,
        "verifier/rejected/audit_disagreement": 1, "verifier/rejected/banned:Unset_Guard_Checking": 2,
        "verifier/rejected/prover_error": 1, "verifier/rejected/timeout": 1,
        "verifier/system_error/worker_lost": 1,
    }
    assert verifier_metrics([]) == {"verifier/audited": 0, "verifier/audit_disagreements": 0,
                                    "verifier/audit_inconclusive": 0}


def test_system_error_causes_name_the_commonest_reasons_with_their_first_message():
    def broken(reason: str, *messages: str) -> Verdict:
        return Verdict(Status.SYSTEM_ERROR, reason=reason, messages=list(messages))

    verdicts = [broken("crash", "coqtop exited:\n  Cannot find library Coq.Init.Prelude"), broken("crash", "other"),
                broken("worker_lost"), broken("crash"), broken("header_timeout", "x" * 300),
                Verdict(Status.INVALID, reason="prover_error", messages=["not a system error"])]
    # Ties in the order first seen; a reason without a message stands alone; messages cut to 200 characters.
    assert system_error_causes(verdicts, most=2) == (
        "crash (3): coqtop exited: Cannot find library Coq.Init.Prelude; worker_lost (1)")
    assert system_error_causes(verdicts).endswith("; worker_lost (1); header_timeout (1): " + "x" * 200)
    assert system_error_causes([Verdict(Status.VALID, reason="ok")]) == ""


@pytest.mark.parametrize("reason, key", [("banned:Unset Guard Checking", "banned:Unset_Guard_Checking"),
                                         ("a/b  c", "a_b_c"), ("  ", "unknown"), ("prover_error", "prover_error")])
def test_reason_keys_are_one_key_segment(reason, key):
    assert reason_key(reason) == key


def test_verification_outcomes_and_the_system_error_rate():
    outcomes = verification_outcomes(ATTEMPTS)
    assert outcomes == {"valid": 3, "invalid": 3, "timeout": 1, "system_error": 3, NO_PROOF: 2}
    assert system_error_rate(outcomes) == pytest.approx(3 / 10)
    assert system_error_rate(verification_outcomes([])) == 0.0


def test_histogram_bins_by_correct_attempts_out_of_k():
    assert solve_rate_histogram([0.0, 0.25, 0.25, 1.0, None], 4) == {"0": 1, "1": 2, "2": 0, "3": 0, "4": 1}
    # With system errors a rate is not a multiple of 1/k; it goes to the nearest bin.
    assert solve_rate_histogram([1 / 3], 4) == {"0": 0, "1": 1, "2": 0, "3": 0, "4": 0}


def test_mean_ignores_undefined_values():
    assert mean([]) is None
    assert mean([1.0, None, float("nan"), 3.0]) == 2.0


def test_conjecture_counts_rewards_and_collapse_signals():
    conjectures = [
        conjecture("c1", "Theorem c1 : forall n : nat, n = n \\/ n = 0."),
        conjecture("c2", "Theorem c2 : 1 = 1."),
        conjecture("c3", "Theorem c3 : 2 = 2."),
        conjecture("c4", None, "no_code_block"),
        conjecture("c5", None, "duplicate_conjecture"),
        conjecture("c6", None, "elaboration_invalid"),
    ]
    scores = [score("c1", 0.25, True, r_guide=6.0, reward=4.5), score("c2", 0.5, True, r_guide=4.0, reward=2.0,
                                                                       parse_error="missing_tag"),
              score("c3", 1.0, False)]
    m = conjecture_metrics(conjectures, scores, "rocq")
    assert (m["conjectures_sampled"], m["conjectures_extracted"], m["conjectures_attempted"],
            m["conjectures_kept"]) == (6, 5, 3, 2)
    assert m["conjecture_rejected/no_code_block"] == m["conjecture_rejected/duplicate_conjecture"] == 1
    assert m["mean_guide_score"] == 5.0 and m["guide_reviews"] == 2 and m["guide_parse_failures"] == 1
    assert m["mean_r_solve"] == pytest.approx((0.75 + 0.5 + 0.0) / 3)
    assert m["mean_conjecturer_reward"] == pytest.approx(6.5 / 3)
    assert m["mean_conjecturer_reward_kept"] == pytest.approx(3.25)
    assert m["disjunctive_share"] == pytest.approx(1 / 3)
    assert m["mean_conclusion_length"] > 0


def test_without_conjectures_the_means_are_undefined():
    m = conjecture_metrics([], [], "rocq")
    assert m["conjectures_kept"] == 0
    assert m["mean_guide_score"] is None and m["disjunctive_share"] is None


def test_an_iteration_line_has_the_required_keys_and_is_valid_json():
    line = iteration_metrics(
        iteration=2, attempts=ATTEMPTS, conjectures=[conjecture("x", "Theorem x : 1 = 1.", entropy=2.0)],
        scores=[score("x", 1.0, False)], training_ids=["a", "b", "c"], k=4, language="rocq", generations=40,
        cumulative_solve_rate=0.5, phases={"prove": PhaseStats(seconds=2.0, tokens=100, verifications=10),
                                           "record": PhaseStats(seconds=0.0)},
        training={"solver": {"loss": 0.25, "num_examples": 3}},
    )
    assert all(key in line for key in REQUIRED_METRICS)
    assert line["generations"] == 40 and line["generations_this_iteration"] == len(ATTEMPTS) + 1
    assert line["pass_at_k"] == pytest.approx(1 / 3)
    assert line["solver_entropy"] == 0.5 and line["conjecturer_entropy"] == 2.0
    assert line["solve_rate_hist/target/1"] == 1 and line["solve_rate_hist/conjecture/4"] == 1
    assert line["verification/no_proof"] == 2
    assert line["tokens_per_second/prove"] == 50.0 and line["verifications_per_second/prove"] == 5.0
    assert line["phase_seconds/record"] == 0.0 and "tokens_per_second/record" not in line
    assert line["train/solver/loss"] == 0.25
    assert json.loads(json.dumps(line, allow_nan=False)) == line


def test_wandb_ids_are_made_once_and_kept_in_the_run_directory(tmp_path):
    first = wandb_run_id(tmp_path / "a")
    assert wandb_run_id(str(tmp_path / "a")) == first != wandb_run_id(tmp_path / "b")
    # a moved run directory keeps its id: it lives in the directory, not in its path
    (tmp_path / "a").rename(tmp_path / "moved")
    assert wandb_run_id(tmp_path / "moved") == first


def test_sample_tables_show_conjectures_with_their_parent_and_scores():
    conjectures = [conjecture(f"c{i}", f"Theorem c{i} : {i} = {i}.") for i in range(40)]
    scores = {c.id: score(c.id, 0.25, True) for c in conjectures}
    tables = sample_tables(3, conjectures, scores, ATTEMPTS, {"t": "Theorem t : True."}, rows=5)
    columns, rows = tables["conjectures"]
    assert len(rows) == 5 and len({r[0] for r in rows}) == 5
    first = dict(zip(columns, rows[0]))
    assert first["target"] == "t" and first["target_statement"] == "Theorem t : True."
    assert first["solve_rate"] == 0.25 and first["kept"] is True
    # seeded by the iteration: the same rows again
    assert sample_tables(3, conjectures, scores, ATTEMPTS, {}, rows=5)["conjectures"][1][0][0] == rows[0][0]
    proof_columns, proof_rows = tables["proofs"]
    assert len(proof_rows) == min(5, len(ATTEMPTS)) and "outcome" in proof_columns


def test_wandb_goes_online_only_with_a_key():
    assert resolved_wandb_mode("auto", {}) == "offline"
    assert resolved_wandb_mode("auto", {"WANDB_API_KEY": "k"}) == "online"
    assert resolved_wandb_mode("disabled", {"WANDB_API_KEY": "k"}) == "disabled"
    assert resolved_wandb_mode("offline", {"WANDB_API_KEY": "k"}) == "offline"
