"""The review phase: solve rates of the conjectures, the p70 selection, the
Guide's reviews of the kept ones (most already drawn during the prove phase),
and the Conjecturer's rewards and weights (SPEC §1.2 step 5)."""

from __future__ import annotations

from collections.abc import Sequence

from sgs.loop.context import RunContext, review_sample_id
from sgs.machinery.engines import Sample
from sgs.machinery.runtime import sampling_settings
from sgs.machinery.streaming import Request
from sgs.method.rewards import conjecturer_reward, conjecturer_weights, guide_batch_rewards, keep_conjectures
from sgs.method.roles import extract_guide_scores
from sgs.state.phase_log import PhaseLog, PhaseStats
from sgs.state.records import Conjecture, ConjectureScore, solve_rates


def review(ctx: RunContext, iteration: int, phase_log: PhaseLog) -> PhaseStats:
    method = ctx.cfg.method
    conjectures = [c for c in ctx.store.conjectures(iteration) if c.statement is not None]
    stored = phase_log.ids("conjecture_score")
    if all(c.id in stored for c in conjectures):
        return PhaseStats()
    rates = solve_rates(ctx.store.attempts(iteration))
    rate = [rates.get(c.id) for c in conjectures]
    kept = keep_conjectures(rate, method.conjecture_keep_quantile)

    reviewed = [c for c, k in zip(conjectures, kept) if k] if method.use_guide else []
    outputs, drawn = guide_outputs(ctx, iteration, reviewed)
    extractions = [extract_guide_scores(text) for text in outputs]
    guide = guide_batch_rewards([e.value if e.ok else None for e in extractions])
    reviews = {c.id: (text, e, r) for c, text, e, r in zip(reviewed, outputs, extractions, guide.rewards)}

    rewards = [conjecturer_reward(r, reviews[c.id][2] if method.use_guide else None) if k else None
               for c, r, k in zip(conjectures, rate, kept)]
    weights = conjecturer_weights(rewards, [c.completion.num_tokens for c in conjectures],
                                  ctx.cfg.sampling.conjecturer.max_tokens, method.reward_normalisation,
                                  method.overlong_fraction)
    for c, r, k, reward, weight in zip(conjectures, rate, kept, rewards, weights):
        if c.id in stored:
            continue  # a resumed phase: this score was written before the kill
        text, extraction, r_guide = reviews.get(c.id, (None, None, None))
        scores = extraction.value if extraction is not None and extraction.ok else None
        phase_log.append(ConjectureScore(
            conjecture_id=c.id,
            # No real verdict at all (only system errors): s is unknown and nothing selects it.
            solve_rate=0.0 if r is None else r,
            kept=k,
            relevance=None if scores is None else int(scores.relevance),
            redundancy=None if scores is None else int(scores.redundancy),
            complexity=None if scores is None else int(scores.complexity),
            guide_output=text,
            guide_parse_error=None if extraction is None or extraction.ok else extraction.failure.value,
            r_guide=r_guide,
            reward=0.0 if reward is None else reward,
            weight=0.0 if weight is None else weight,
        ))
    return drawn


def guide_outputs(ctx: RunContext, iteration: int, conjectures: Sequence[Conjecture]
                  ) -> tuple[list[str], PhaseStats]:
    """The Guide's review of each conjecture, and what drawing them took.
    Seeded, so a resumed review phase reproduces the reviews of the scores it
    already stored."""
    if not conjectures:
        return [], PhaseStats()
    requests = [Request(prompt=ctx.rt.prompter.guide(ctx.store.target(c.target_id), c.statement),
                        sample_ids=[review_sample_id(c.id)], item=c) for c in conjectures]
    settings = sampling_settings(ctx.cfg.sampling.guide, n=1, seed=ctx.seed(iteration, "review"))
    outputs: dict[str, str] = {}

    def on_sample(request: Request, sample_id: str, sample: Sample) -> None:
        outputs[request.item.id] = sample.text

    drawn = ctx.draw(iteration, "review", "guide", requests, settings, on_sample)
    return [outputs[c.id] for c in conjectures], drawn
