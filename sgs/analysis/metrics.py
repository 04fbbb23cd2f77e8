"""Per-iteration metrics (SPEC §1.6), computed from the stored records, and
where they are sent (wandb, the Ray dashboard).

The metric functions are pure: they read records of one iteration and return
plain numbers, so ``metrics.jsonl`` can be recomputed from a run directory.
Every value is a finite number, an int, or None when it is undefined (a mean
over nothing), so each line is valid JSON.  Keys are flat; a ``/`` groups
related keys (``verification/timeout``), which wandb shows as one panel.
"""

from __future__ import annotations

import math
import os
import random
import re
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lean_env.verdict import Status, Verdict
from sgs.config import LoggingConfig
from sgs.method.roles import Failure, conclusion_length, has_disjunctive_conclusion
from sgs.state.phase_log import PhaseStats
from sgs.state.records import Attempt, Completion, Conjecture, ConjectureScore, solve_rates

#: Rejection reasons meaning the output held no well-formed statement (the
#: other reasons, duplicates and failed elaboration, come after extraction).
_PARSE_FAILURES = frozenset(failure.value for failure in Failure)
#: Outcome of an attempt whose output held no proof to check.
NO_PROOF = "no_proof"
#: Verification outcomes in the order they are reported.
OUTCOMES = (Status.VALID.value, Status.INVALID.value, Status.TIMEOUT.value, Status.SYSTEM_ERROR.value, NO_PROOF)


# --------------------------------------------------------------------------
# Attempts
# --------------------------------------------------------------------------


def attempt_outcome(attempt: Attempt) -> str:
    """The verdict status, or ``no_proof`` when nothing could be extracted."""
    return NO_PROOF if attempt.verdict is None else attempt.verdict.status.value


def pass_at_k(attempts: Iterable[Attempt], training_ids: Sequence[str]) -> float | None:
    """Share of the training targets the attempts sampled with at least one
    verified attempt: over the iteration's batch, or, under expert iteration,
    over the targets it sampled (those with too few stored proofs), never over
    targets it did not try.  None when no training target was sampled."""
    training = set(training_ids)
    ours = [a for a in attempts if a.problem_kind == "target" and a.problem_id in training]
    sampled, solved = {a.problem_id for a in ours}, {a.problem_id for a in ours if a.verified}
    return len(solved) / len(sampled) if sampled else None


def format_rate(value: float | None) -> str:
    """A rate for people: three decimals, or ``n/a`` when it is undefined (None)."""
    return "n/a" if value is None else f"{value:.3f}"


def verification_outcomes(attempts: Iterable[Attempt]) -> dict[str, int]:
    """Attempts per outcome: valid, invalid, timeout, system_error, no_proof."""
    counts = Counter(attempt_outcome(a) for a in attempts)
    return {outcome: counts.get(outcome, 0) for outcome in OUTCOMES}


#: ``verifier/rejected/<reason>``: an iteration's rejected proofs by the verifier's reason.
REJECTED_PREFIX = "verifier/rejected"
#: ``verifier/system_error/<reason>``: an iteration's system errors by the verifier's reason.
SYSTEM_ERROR_PREFIX = "verifier/system_error"


def reason_key(reason: str) -> str:
    """A verdict reason as one metric-key segment: runs of whitespace and ``/``
    become ``_`` (``banned:Unset Guard Checking`` -> ``banned:Unset_Guard_Checking``),
    since ``/`` groups keys."""
    return re.sub(r"[\s/]+", "_", reason.strip()) or "unknown"


def verifier_metrics(attempts: Iterable[Attempt]) -> dict[str, int]:
    """The verifier's judgements of one iteration's proofs: the audit's counts
    (``verifier/audited``, ``verifier/audit_disagreements``,
    ``verifier/audit_inconclusive``), ``verifier/rejected/<reason>`` for every
    reason an ``invalid`` or ``timeout`` verdict gave, and
    ``verifier/system_error/<reason>`` for the system errors (not judgements of
    a proof, but what to look at when they rise; attempts with no extracted
    proof have no verdict).  A reason absent from an iteration did not occur in
    it.  A rising rejection reason is what reward hacking looks like: the Solver
    finding a shape the checks refuse."""
    verdicts = [a.verdict for a in attempts if a.verdict is not None]
    audits = Counter(v.audit for v in verdicts if v.audit)
    rejected = Counter(reason_key(v.reason) for v in verdicts if v.status in (Status.INVALID, Status.TIMEOUT))
    broken = Counter(reason_key(v.reason) for v in verdicts if v.status == Status.SYSTEM_ERROR)
    metrics = {"verifier/audited": sum(audits.values()), "verifier/audit_disagreements": audits["disagree"],
               "verifier/audit_inconclusive": audits["inconclusive"]}
    metrics.update({f"{REJECTED_PREFIX}/{reason}": count for reason, count in sorted(rejected.items())})
    metrics.update({f"{SYSTEM_ERROR_PREFIX}/{reason}": count for reason, count in sorted(broken.items())})
    return metrics


def system_error_causes(verdicts: Iterable[Verdict], most: int = 3) -> str:
    """The commonest reasons among ``verdicts``' system errors (ties in the
    order first seen), each with its count and the first message seen (cut to
    200 characters): what a user needs to see first when the prover breaks
    (``""`` when there are none)."""
    broken = [v for v in verdicts if v.status == Status.SYSTEM_ERROR]
    counts = Counter(v.reason or "unknown" for v in broken)
    first = {}
    for verdict in broken:
        first.setdefault(verdict.reason or "unknown", verdict.messages[0] if verdict.messages else "")
    parts = []
    for reason, count in counts.most_common(most):
        message = " ".join(first[reason].split())[:200]
        parts.append(f"{reason} ({count})" + (f": {message}" if message else ""))
    return "; ".join(parts)


def system_error_rate(outcomes: Mapping[str, int]) -> float:
    """System errors among the checked attempts (SPEC §1.6: must stay under 1%)."""
    checked = sum(outcomes[o] for o in OUTCOMES if o != NO_PROOF)
    return outcomes[Status.SYSTEM_ERROR.value] / checked if checked else 0.0


def solve_rate_histogram(rates: Iterable[float | None], k: int) -> dict[str, int]:
    """Problems per solve rate, binned by the number of correct attempts out of
    ``k`` (key ``"j"``, j = 0..k); problems with no real verdict are left out."""
    bins = Counter(round(rate * k) for rate in rates if rate is not None)
    return {str(j): bins.get(j, 0) for j in range(k + 1)}


def mean(values: Iterable[float]) -> float | None:
    """Mean of the finite values; None when there are none."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


def logprob_gap(learner: Sequence[float], engine: Sequence[float]) -> tuple[float, float]:
    """(mean, max) absolute per-token difference of two log-prob lists of one sequence."""
    if len(learner) != len(engine) or not learner:
        raise ValueError(f"log-prob lists of one non-empty sequence expected, got lengths {len(learner)} "
                         f"and {len(engine)}")
    gaps = [abs(a - b) for a, b in zip(learner, engine)]
    return sum(gaps) / len(gaps), max(gaps)


#: ``seq_len_capped/<role>``: an iteration's samples of the role that stopped
#: at the sequence limit before ``max_tokens``.
SEQ_LEN_CAPPED_PREFIX = "seq_len_capped"


def seq_len_capped(completions: Iterable[Completion], max_tokens: int) -> int:
    """Samples the engine stopped ("length") short of ``max_tokens``: their
    prompt left less room under the sequence limit, ``training.max_seq_len``
    for the trained roles (or the engine's context, if shorter).  The engines
    cap them so that the learner cuts nothing (``train/<role>/num_truncated``
    stays 0); this says how many were cut short instead."""
    return sum(c.finish_reason == "length" and c.num_tokens < max_tokens for c in completions)


def seq_len_capped_metrics(attempts: Iterable[Attempt], conjectures: Iterable[Conjecture],
                           max_tokens: Mapping[str, int]) -> dict[str, int]:
    """:func:`seq_len_capped` of the Solver's and the Conjecturer's samples
    (``max_tokens``: ``sampling.<role>.max_tokens`` by role)."""
    completions = {"solver": [a.completion for a in attempts], "conjecturer": [c.completion for c in conjectures]}
    return {f"{SEQ_LEN_CAPPED_PREFIX}/{role}": seq_len_capped(found, max_tokens[role])
            for role, found in completions.items()}


# --------------------------------------------------------------------------
# Conjectures
# --------------------------------------------------------------------------


def conjecture_metrics(conjectures: Sequence[Conjecture], scores: Sequence[ConjectureScore],
                       language: str) -> dict[str, Any]:
    """Counts, rejection reasons, Guide and reward statistics, collapse signals.

    ``sampled`` counts every Conjecturer sample, ``extracted`` those whose
    output held a well-formed statement, ``attempted`` those that also were
    new and (under ``method.unelaborated_conjectures=skip``) elaborated: the
    Solver attempted them; ``kept`` those selected for reward.
    """
    rejections = Counter(c.extraction_error for c in conjectures if c.extraction_error is not None)
    statements = [c.statement for c in conjectures if c.statement is not None]
    kept = [s for s in scores if s.kept]
    reviewed = [s for s in scores if s.guide_output is not None]
    metrics: dict[str, Any] = {
        "conjectures_sampled": len(conjectures),
        "conjectures_extracted": len(conjectures) - sum(n for r, n in rejections.items() if r in _PARSE_FAILURES),
        "conjectures_attempted": len(statements),
        "conjectures_kept": len(kept),
        "mean_guide_score": mean(s.r_guide for s in reviewed),
        "guide_reviews": len(reviewed),
        "guide_parse_failures": sum(s.guide_parse_error is not None for s in reviewed),
        # R_solve = 1 - s for kept conjectures, 0 for the rest (paper Alg. 1).
        "mean_r_solve": mean((1.0 - s.solve_rate) if s.kept else 0.0 for s in scores),
        "mean_conjecturer_reward": mean(s.reward for s in scores),
        "mean_conjecturer_reward_kept": mean(s.reward for s in kept),
        "disjunctive_share": mean(float(has_disjunctive_conclusion(st, language)) for st in statements),
        "mean_conclusion_length": mean(conclusion_length(st, language) for st in statements),
    }
    metrics.update({f"conjecture_rejected/{reason}": n for reason, n in sorted(rejections.items())})
    return metrics


# --------------------------------------------------------------------------
# One iteration
# --------------------------------------------------------------------------


def iteration_metrics(
    *,
    iteration: int,
    attempts: Sequence[Attempt],
    conjectures: Sequence[Conjecture],
    scores: Sequence[ConjectureScore],
    training_ids: Sequence[str],
    k: int,
    language: str,
    generations: int,
    cumulative_solve_rate: float,
    phases: Mapping[str, PhaseStats],
    training: Mapping[str, Mapping[str, float]],
) -> dict[str, Any]:
    """The ``metrics.jsonl`` line of one iteration.

    ``generations`` is the run's cumulative count (SPEC §1.1) and
    ``cumulative_solve_rate`` the solved share of the training targets, both
    as of the end of this iteration.  ``phases`` holds the phases this
    process ran (a phase finished before a resume has no timing);
    ``training`` the learner's numbers per trained role.
    """
    target_attempts = [a for a in attempts if a.problem_kind == "target"]
    conjecture_attempts = [a for a in attempts if a.problem_kind == "conjecture"]
    outcomes = verification_outcomes(attempts)
    metrics: dict[str, Any] = {
        "iteration": iteration,
        "generations": generations,
        "generations_this_iteration": len(attempts) + len(conjectures),
        "cumulative_solve_rate": cumulative_solve_rate,
        # Over the training targets sampled (targets_attempted), not all of them.
        "pass_at_k": pass_at_k(target_attempts, training_ids),
        "targets_attempted": len({a.problem_id for a in target_attempts}),
        "solver_samples": len(attempts),
        "mean_solver_reward": mean(a.reward for a in attempts),
        "system_error_rate": system_error_rate(outcomes),
        "solver_entropy": mean(a.completion.entropy for a in attempts),
        "conjecturer_entropy": mean(c.completion.entropy for c in conjectures),
        "solver_mean_tokens": mean(a.completion.num_tokens for a in attempts),
    }
    metrics.update(conjecture_metrics(conjectures, scores, language))
    metrics.update({f"verification/{o}": n for o, n in outcomes.items()})
    metrics.update(verifier_metrics(attempts))
    for kind, group in (("target", target_attempts), ("conjecture", conjecture_attempts)):
        histogram = solve_rate_histogram(solve_rates(group).values(), k)
        metrics.update({f"solve_rate_hist/{kind}/{j}": n for j, n in histogram.items()})
    for phase, stats in phases.items():
        metrics[f"phase_seconds/{phase}"] = stats.seconds
        if stats.tokens and stats.seconds > 0:
            metrics[f"tokens_per_second/{phase}"] = stats.tokens / stats.seconds
        if stats.verifications and stats.seconds > 0:
            metrics[f"verifications_per_second/{phase}"] = stats.verifications / stats.seconds
    for role, numbers in training.items():
        metrics.update({f"train/{role}/{key}": value for key, value in numbers.items()})
    return metrics


# --------------------------------------------------------------------------
# Sinks
# --------------------------------------------------------------------------


#: Rows of each per-iteration sample table sent to wandb.
TABLE_ROWS = 32
#: The run directory's file that holds its wandb run id.
WANDB_ID_FILE = "wandb_run_id"


def sample_tables(
    iteration: int,
    conjectures: Sequence[Conjecture],
    scores: Mapping[str, ConjectureScore],
    attempts: Sequence[Attempt],
    target_statements: Mapping[str, str],
    rows: int = TABLE_ROWS,
) -> dict[str, tuple[list[str], list[list[Any]]]]:
    """Seeded random samples of the iteration's conjectures (with their parent
    target, Guide scores and solve rate) and Solver attempts, as
    ``{table name: (columns, rows)}``: what a researcher reads to see what the
    numbers are made of."""
    rng = random.Random(iteration)

    def pick(items: Sequence[Any]) -> list[Any]:
        return items if len(items) <= rows else [items[i] for i in sorted(rng.sample(range(len(items)), rows))]

    attempted = [c for c in conjectures if c.statement is not None]
    conjecture_rows = []
    for c in pick(attempted):
        score = scores.get(c.id)
        conjecture_rows.append([
            c.id, c.target_id, target_statements.get(c.target_id), c.statement,
            None if score is None else score.solve_rate, None if score is None else score.kept,
            None if score is None else score.relevance, None if score is None else score.redundancy,
            None if score is None else score.complexity, None if score is None else score.r_guide,
            None if score is None else score.reward,
        ])
    attempt_rows = [[a.id, a.problem_kind, a.problem_id, attempt_outcome(a), a.reward, a.completion.num_tokens,
                     a.proof if a.proof is not None else a.completion.text] for a in pick(list(attempts))]
    return {
        "conjectures": (["id", "target", "target_statement", "conjecture", "solve_rate", "kept", "relevance",
                         "redundancy", "complexity", "r_guide", "reward"], conjecture_rows),
        "proofs": (["id", "kind", "problem", "outcome", "reward", "tokens", "proof_or_output"], attempt_rows),
    }


def sample_histograms(attempts: Sequence[Attempt], scores: Sequence[ConjectureScore]) -> dict[str, list[float]]:
    """The value lists behind the iteration's histograms."""
    rates = [r for r in solve_rates(attempts).values() if r is not None]
    return {
        "solve_rates": rates,
        "guide_scores": [s.r_guide for s in scores if s.r_guide is not None],
        "conjecturer_rewards": [s.reward for s in scores],
        "solver_tokens": [a.completion.num_tokens for a in attempts],
    }


def wandb_run_id(run_dir: str | Path) -> str:
    """The run directory's wandb id: made once, at the run's first start, and
    kept in ``<run_dir>/wandb_run_id``, so a resumed run (even from a moved or
    copied directory) goes on logging to the same wandb run."""
    path = Path(run_dir) / WANDB_ID_FILE
    if path.is_file():
        stored = path.read_text().strip()
        if stored:
            return stored
    run_id = uuid.uuid4().hex[:16]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{WANDB_ID_FILE}.tmp")
    tmp.write_text(run_id + "\n")
    os.replace(tmp, path)
    return run_id


def resolved_wandb_mode(mode: str, environ: Mapping[str, str] = os.environ) -> str:
    """``logging.wandb_mode`` as wandb takes it: ``auto`` is online when a key is configured."""
    if mode == "auto":
        return "online" if environ.get("WANDB_API_KEY") else "offline"
    return mode


class MetricsSink:
    """Sends each iteration's metrics, tables and histograms to wandb (offline
    unless a key is configured).  The Ray dashboard's gauges are :mod:`sgs.machinery.monitor`'s."""

    def __init__(self, logging: LoggingConfig, run_dir: str | Path, *, name: str, config: Mapping[str, Any]):
        self._wandb = None
        if logging.wandb_mode != "disabled":
            import wandb

            self._wandb = wandb.init(
                project=logging.wandb_project,
                entity=logging.wandb_entity,
                mode=resolved_wandb_mode(logging.wandb_mode),
                dir=str(run_dir),
                id=wandb_run_id(run_dir),
                name=name,
                config=dict(config),
                resume="allow",
            )

    def log(self, metrics: Mapping[str, Any], tables: Mapping[str, tuple[list[str], list[list[Any]]]] | None = None,
            histograms: Mapping[str, list[float]] | None = None) -> None:
        """One iteration: its metrics line, and optionally its sample tables
        (:func:`sample_tables`) and histogram values (:func:`sample_histograms`)."""
        if self._wandb is not None:
            import wandb

            logged: dict[str, Any] = {k: v for k, v in metrics.items() if v is not None}
            for name, (columns, rows) in (tables or {}).items():
                logged[f"samples/{name}"] = wandb.Table(columns=columns, data=rows)
            for name, values in (histograms or {}).items():
                if values:
                    logged[f"histograms/{name}"] = wandb.Histogram(values)
            self._wandb.log(logged, step=metrics["iteration"])

    def close(self) -> None:
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None
