"""The conjecture phase: the Conjecturer writes ``conjectures_per_target``
statements per unsolved training target.  Malformed ones, duplicates (of a
target or of an earlier conjecture, up to renaming or as text:
``method.conjecture_dedup``), statements of benchmark problems
(``evaluation.contamination=exclude``) and, under
``method.unelaborated_conjectures=skip``, statements that do not elaborate
are rejected, with the reason stored."""

from __future__ import annotations

import logging
from collections.abc import Set

from lean_env.verdict import ProofTask, Status, Verdict
from sgs.analysis.metrics import system_error_causes
from sgs.loop.context import (
    DUPLICATE_CONJECTURE, DUPLICATE_OF_TARGET, MATCHES_BENCHMARK, RunContext, conjecture_id, elaboration_failure,
    to_completion)
from sgs.machinery.engines import Sample
from sgs.machinery.runtime import conjecturer_settings
from sgs.machinery.streaming import Request
from sgs.method.roles import STATEMENT_FORMS, canonical_form, conjecture_name, extract_conjecture, rename_theorem
from sgs.state.records import Completion, Conjecture, Target
from sgs.state.phase_log import PhaseLog, PhaseStats
from sgs.state.targets import batch_targets

log = logging.getLogger(__name__)

#: ``method.unelaborated_conjectures``: whether a new statement must elaborate
#: (checked with a placeholder proof) before the Solver attempts it.
ELABORATION_CHECK = {"skip": True, "attempt": False}


def screen_conjecture(
    output: str, language: str, target_forms: Set[str], seen: set[str], excluded_forms: Set[str] = frozenset(),
    *, dedup: str = "canonical", held_out_forms: Set[str] = frozenset(),
) -> tuple[str | None, str | None]:
    """``(statement, None)`` for a well-formed conjecture that is new, or
    ``(None, rejection reason)``.

    New means: not a target and not an earlier conjecture of ``seen``, both
    compared in the form ``dedup`` names (:data:`STATEMENT_FORMS`: up to
    renaming, or as text), the form ``target_forms`` and ``seen`` hold; a new
    one's form is added to ``seen``.  Statements in ``held_out_forms``
    (held-out targets) or ``excluded_forms`` (evaluation problems) are
    rejected up to renaming (canonical forms), whatever ``dedup`` says.  The
    statement gets a fresh name derived from its canonical form: the model's
    own name could collide with a target's, or flatter the Guide.
    """
    extraction = extract_conjecture(output, language)
    if not extraction.ok:
        return None, extraction.failure.value
    form = STATEMENT_FORMS[dedup](extraction.value, language)
    canonical = canonical_form(extraction.value, language)
    if form in target_forms or canonical in held_out_forms:
        return None, DUPLICATE_OF_TARGET
    if canonical in excluded_forms:
        return None, MATCHES_BENCHMARK
    if form in seen:
        return None, DUPLICATE_CONJECTURE
    seen.add(form)
    return rename_theorem(extraction.value, conjecture_name(extraction.value, language), language), None


def conjecture(ctx: RunContext, iteration: int, phase_log: PhaseLog) -> PhaseStats:
    method, language = ctx.cfg.method, ctx.language
    solved = ctx.store.solved_registry
    unsolved = [t for t in batch_targets(ctx.store.targets, method.batch_size, ctx.cfg.seed, iteration)
                if not solved.is_solved(t.id, through_iteration=iteration - 1)]
    stored = phase_log.ids("conjecture")
    form = STATEMENT_FORMS[method.conjecture_dedup]
    # Compared as the Conjecturer wrote them: the stored statements are renamed.
    seen = {form(extract_conjecture(c.completion.text, language).value, language) for c in phase_log.recovered
            if isinstance(c, Conjecture) and c.statement is not None}
    conditioned = method.conjecturer_prompt == "target_conditioned"
    requests = [
        Request(prompt=ctx.rt.prompter.conjecturer(t if conditioned else None),
                sample_ids=[cid for j in range(method.conjectures_per_target)
                            if (cid := conjecture_id(iteration, t.id, j)) not in stored],
                item=t)
        for t in unsolved
    ]
    requests = [r for r in requests if r.sample_ids]
    checking: dict[str, tuple[Target, Completion, str]] = {}
    bar = ctx.bar(iteration, "conjecture", sum(len(r.sample_ids) for r in requests))

    def keep(cid: str, target: Target, completion: Completion, statement: str | None, error: str | None) -> None:
        phase_log.append(Conjecture(id=cid, iteration=iteration, target_id=target.id, completion=completion,
                                    statement=statement, extraction_error=error))
        bar.update()

    def on_sample(request: Request, cid: str, sample: Sample) -> None:
        target, completion = request.item, to_completion(request.prompt, sample)
        statement, rejection = screen_conjecture(sample.text, language, ctx.target_forms, seen, ctx.excluded_forms,
                                                 dedup=method.conjecture_dedup, held_out_forms=ctx.held_out_forms)
        if rejection is not None:
            return keep(cid, target, completion, None, rejection)
        if not ELABORATION_CHECK[method.unelaborated_conjectures]:
            return keep(cid, target, completion, statement, None)  # the Solver attempts it as it is
        checking[cid] = (target, completion, statement)
        ctx.rt.pool.submit_statement(ProofTask(id=cid, header=target.header, statement=statement, proof="",
                                               load_path=target.load_path))

    broken: list[Verdict] = []  # elaboration checks the prover could not answer

    def on_verdict(task: ProofTask, verdict: Verdict) -> None:
        target, completion, statement = checking.pop(task.id)
        if verdict.valid:
            keep(task.id, target, completion, statement, None)
        else:
            keep(task.id, target, completion, None, elaboration_failure(verdict.status))
            if verdict.status == Status.SYSTEM_ERROR:
                broken.append(verdict)

    drawn = PhaseStats()
    if requests:
        settings = conjecturer_settings(ctx.cfg, seed=ctx.seed(iteration, "conjecture"))
        drawn = ctx.draw(iteration, "conjecture", "conjecturer", requests, settings, on_sample, on_verdict)
    bar.close()
    if broken:
        # Not the Conjecturer's fault, and its statements are lost for this iteration: say why at once.
        log.warning("iteration %d: %d conjecture(s) could not be elaborated because the prover failed (system "
                    "error): %s", iteration, len(broken), system_error_causes(broken))
    return drawn
