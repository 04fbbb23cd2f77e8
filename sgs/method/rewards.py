"""Rewards for the Solver and the Conjecturer, as pure functions (SPEC §1.2-§1.4).

Everything here works on plain Python values so that it can be tested by hand
and reused by the loop, the learner and the metrics alike:

* solve rates and the p70 selection of conjectures (§1.2 steps 4-5);
* the Guide reward R_guide from its three sub-scores, with the batch-mean
  fallback for reviews that cannot be used (§1.4);
* the Conjecturer reward R = R_guide * (1 - s) and its min-max normalisation,
  under the reference code's rule or the paper's rule (§1.2 step 7);
* the soft overlong penalty and the ban on the ``try`` tactic (§1.3);
* the per-attempt Solver reward that combines verdict, ``try`` rule and penalty.

Verdict statuses are the values of :class:`lean_env.verdict.Status`
(``valid``, ``invalid``, ``timeout``, ``system_error``); plain strings with
those values are accepted too.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from lean_env.verdict import Status

Language = Literal["lean", "rocq"]
NormalisationRule = Literal["reference", "paper"]

KEEP_QUANTILE = 0.7
OVERLONG_THRESHOLD = 0.8
GUIDE_REWARD_MAX = 8.0

_STATUSES = frozenset(status.value for status in Status)


# --------------------------------------------------------------------------
# Solve rates and the selection of conjectures
# --------------------------------------------------------------------------


def _check_status(status: str) -> Status:
    if status not in _STATUSES:
        raise ValueError(f"unknown verdict status {status!r}; expected one of {sorted(_STATUSES)}")
    return Status(status)


def solve_rate(statuses: Sequence[str]) -> float | None:
    """Fraction of one problem's attempts that verified.

    A ``system_error`` means the infrastructure failed and says nothing about
    the proof (SPEC §3.2), so such attempts are left out of both counts: the
    rate is valid / (valid + invalid + timeout).  With k = 8 and no
    infrastructure failures this is the paper's correct / k.  Returns None
    when no attempt has a real verdict: the problem's difficulty is unknown
    and it must not be selected for anything.
    """
    checked = [_check_status(status) for status in statuses]
    judged = [status for status in checked if status is not Status.SYSTEM_ERROR]
    if not judged:
        return None
    return sum(status is Status.VALID for status in judged) / len(judged)


def _check_rate(rate: float | None) -> None:
    if rate is not None and not 0.0 <= rate <= 1.0:
        raise ValueError(f"solve rate must lie in [0, 1] (or be None), got {rate!r}")


def keep_threshold(rates: Sequence[float | None], quantile: float = KEEP_QUANTILE) -> float:
    """The p70 cut of SPEC §1.2 step 5.

    Among the rates strictly inside (0, 1), sorted ascending, the value at
    index floor(quantile * n); 0.0 when there is none, which keeps nothing.
    None entries (no real verdict) take no part.
    """
    if not 0.0 <= quantile < 1.0:
        raise ValueError(f"quantile must lie in [0, 1), got {quantile!r}")
    for rate in rates:
        _check_rate(rate)
    inside = sorted(rate for rate in rates if rate is not None and 0.0 < rate < 1.0)
    if not inside:
        return 0.0
    return inside[math.floor(quantile * len(inside))]


def keep_conjectures(rates: Sequence[float | None], quantile: float = KEEP_QUANTILE) -> list[bool]:
    """Which conjectures earn a reward: 0 < s <= p70, ties at p70 kept.

    s = 0 (too hard), s = 1 and s > p70 (too easy) and None (unknown) are not
    kept.  Because solve rates are multiples of 1/k, ties are common and the
    effective cut is looser than 70%; this is the reference code's rule.
    """
    threshold = keep_threshold(rates, quantile)
    return [rate is not None and 0.0 < rate <= threshold for rate in rates]


# --------------------------------------------------------------------------
# The Guide reward
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class GuideScores:
    """The three sub-scores parsed from one Guide review (SPEC §1.4)."""

    relevance: float  # 0..5
    redundancy: float  # 0 or 1; 1 = some premise is not needed
    complexity: float  # 0..4, complexity of the conclusion


_SUB_SCORE_RANGES = {"relevance": (0, 5), "redundancy": (0, 1), "complexity": (0, 4)}


def guide_reward(scores: GuideScores) -> float | None:
    """R_guide in 0..8, or None when the review cannot be used.

    R_guide = 0 if complexity >= 3, else relevance + (2 - complexity) + (1 - redundancy).
    A sub-score that is not an integer or lies outside its rubric range
    (relevance 0..5, redundancy 0/1, complexity 0..4) counts as a parse
    failure rather than being clamped: the Guide did not follow its rubric, so
    its number carries no meaning.  For in-range scores the sum is never
    negative, so the spec's max(0, .) needs no code.
    """
    for name, (low, high) in _SUB_SCORE_RANGES.items():
        value = getattr(scores, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return None
        if not math.isfinite(value) or value != int(value) or not low <= value <= high:
            return None
    if scores.complexity >= 3:
        return 0.0
    return float(scores.relevance + (2 - scores.complexity) + (1 - scores.redundancy))


@dataclass(frozen=True)
class GuideBatch:
    """R_guide for every reviewed conjecture of one batch, failures imputed."""

    rewards: list[float]
    num_failures: int  # reviews that were unparsable or out of range; log this


def guide_batch_rewards(reviews: Sequence[GuideScores | None]) -> GuideBatch:
    """R_guide per review, replacing unusable reviews by the batch mean.

    ``None`` is a review the parser could not read; a review with an
    out-of-range sub-score is treated the same way.  Both are replaced by the
    mean R_guide of this batch's usable reviews, or 0 when none is usable.
    """
    parsed = [None if review is None else guide_reward(review) for review in reviews]
    usable = [reward for reward in parsed if reward is not None]
    fallback = sum(usable) / len(usable) if usable else 0.0
    return GuideBatch(
        rewards=[fallback if reward is None else reward for reward in parsed],
        num_failures=len(parsed) - len(usable),
    )


# --------------------------------------------------------------------------
# Penalties
# --------------------------------------------------------------------------


def overlong_penalty(
    num_tokens: int, max_tokens: int, threshold: float = OVERLONG_THRESHOLD
) -> float:
    """Soft overlong penalty: 0 up to threshold*max_tokens, then linear down to -1.

    penalty = -(len - 0.8 max) / (0.2 max), floored at -1.  ``num_tokens`` is
    the number of generated tokens (the prompt does not count).
    """
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive, got {max_tokens!r}")
    if num_tokens < 0:
        raise ValueError(f"num_tokens must be non-negative, got {num_tokens!r}")
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must lie in (0, 1), got {threshold!r}")
    start = threshold * max_tokens
    if num_tokens <= start:
        return 0.0
    return max(-1.0, -(num_tokens - start) / (max_tokens - start))


def apply_overlong_penalty(
    reward: float, num_tokens: int, max_tokens: int, threshold: float = OVERLONG_THRESHOLD
) -> float:
    """The reward, replaced by the overlong penalty when that is negative."""
    penalty = overlong_penalty(num_tokens, max_tokens, threshold)
    return penalty if penalty < 0.0 else reward


# Characters that continue a name, so that `try` next to them is part of a
# longer token.  Lean names may contain ' ! ? (`get!`, `try?` is its own
# tactic); Rocq names only '.  A leading `.` makes `try` a field or a
# qualified-name component (`Foo.try`), never the tactic.
_NAME_CHARS = {"lean": r"\w'!?", "rocq": r"\w'"}
_TRY_PATTERNS = {
    language: re.compile(rf"(?<![{chars}.])try(?![{chars}])")
    for language, chars in _NAME_CHARS.items()
}
_BLOCK_COMMENT = {"lean": ("/-", "-/"), "rocq": ("(*", "*)")}


def strip_comments_and_strings(text: str, language: Language) -> str:
    """Replace comments and string literals by a space, in one left-to-right scan.

    Lean: ``-- ...`` to the end of the line, nested ``/- ... -/`` (doc
    comments included), ``"..."`` with backslash escapes, and «guillemet»
    names.  Rocq: nested ``(* ... *)`` and ``"..."`` where ``""`` is an
    escaped quote.  An unterminated comment or string runs to the end.  A
    space (not nothing) keeps the tokens on either side apart.
    """
    if language not in _BLOCK_COMMENT:
        raise ValueError(f"unknown language {language!r}; expected 'lean' or 'rocq'")
    opener, closer = _BLOCK_COMMENT[language]
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith(opener, i):
            depth, i = 1, i + len(opener)
            while i < n and depth:
                if text.startswith(opener, i):
                    depth, i = depth + 1, i + len(opener)
                elif text.startswith(closer, i):
                    depth, i = depth - 1, i + len(closer)
                else:
                    i += 1
            out.append(" ")
        elif language == "lean" and text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end == -1 else end
            out.append(" ")
        elif text[i] == '"':
            i += 1
            while i < n:
                if language == "lean" and text[i] == "\\":
                    i += 2
                elif text[i] == '"':
                    if language == "rocq" and text.startswith('""', i):
                        i += 2
                    else:
                        i += 1
                        break
                else:
                    i += 1
            out.append(" ")
        elif language == "lean" and text[i] == "«":
            end = text.find("»", i)
            i = n if end == -1 else end + 1
            out.append(" ")
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def uses_try_tactic(proof: str, language: Language) -> bool:
    """Whether the proof uses the `try` tactic, matched as a word in code.

    Comments and strings are stripped first; `try` glued to name characters
    (`retry`, `entry`, `symmetry`, `try_foo`, Lean's `try?`) or following a
    `.` is a different token.  The reference code's substring test is what
    this replaces.
    """
    code = strip_comments_and_strings(proof, language)
    return _TRY_PATTERNS[language].search(code) is not None


# --------------------------------------------------------------------------
# The Conjecturer reward and its normalisation
# --------------------------------------------------------------------------


def conjecturer_reward(rate: float, guide: float | None = None) -> float:
    """R = R_guide * (1 - s) for a kept conjecture; R = 1 - s without a Guide."""
    if not 0.0 < rate < 1.0:
        raise ValueError(f"a kept conjecture has 0 < s < 1, got solve rate {rate!r}")
    if guide is None:
        return 1.0 - rate
    if not 0.0 <= guide <= GUIDE_REWARD_MAX:
        raise ValueError(f"R_guide must lie in [0, {GUIDE_REWARD_MAX}], got {guide!r}")
    return guide * (1.0 - rate)


def min_max_normalise(rewards: Sequence[float]) -> list[float]:
    """(r - min) / (max - min); every weight is 1 when all rewards are equal."""
    for reward in rewards:
        if not math.isfinite(reward):
            raise ValueError(f"rewards must be finite, got {reward!r}")
    if not rewards:
        return []
    low, high = min(rewards), max(rewards)
    if high == low:
        return [1.0] * len(rewards)
    return [(reward - low) / (high - low) for reward in rewards]


def normalise_conjecturer_rewards(
    rewards: Sequence[float | None], rule: NormalisationRule = "reference"
) -> list[float | None]:
    """Training weights for the conjectures of one iteration.

    ``rewards`` has one entry per conjecture the Solver attempted this
    iteration: R from :func:`conjecturer_reward` if it was kept, None if not.
    The result is aligned with it; None means "not in the training batch".

    * ``"reference"`` (default, the released code): only kept conjectures are
      trained on; min-max over them, so the weakest kept one gets weight 0;
      all equal gives every kept conjecture weight 1.
    * ``"paper"`` (App. G.5): every attempted conjecture joins the batch and
      the ones not kept have R = 0.  Min-max over that whole batch; with a
      zero present this is r / max.  If all rewards are equal, the ones with a
      positive reward get weight 1 and zero rewards get 0: a batch where
      nothing earned a reward teaches nothing.  Non-kept conjectures
      contribute no gradient but do count in the loss normaliser.
    """
    if rule == "reference":
        kept = [reward for reward in rewards if reward is not None]
        weights = iter(min_max_normalise(kept))
        return [None if reward is None else next(weights) for reward in rewards]
    if rule == "paper":
        batch = [0.0 if reward is None else reward for reward in rewards]
        if batch and min(batch) == max(batch):
            return [1.0 if reward > 0.0 else 0.0 for reward in batch]
        return min_max_normalise(batch)
    raise ValueError(f"unknown normalisation rule {rule!r}; expected 'reference' or 'paper'")


def conjecturer_weights(
    rewards: Sequence[float | None],
    num_tokens: Sequence[int],
    max_tokens: int,
    rule: NormalisationRule = "reference",
    overlong_threshold: float = OVERLONG_THRESHOLD,
) -> list[float | None]:
    """Loss weights of the Conjecturer's generations, in this order:

    1. normalise the rewards by ``rule`` (:func:`normalise_conjecturer_rewards`);
    2. for each generation in the training batch, a negative overlong penalty
       replaces the normalised weight (the reference code's order), so an
       overlong conjecture is pushed down rather than merely given weight 0.

    ``num_tokens`` is aligned with ``rewards``; None still means "not trained on".
    """
    if len(num_tokens) != len(rewards):
        raise ValueError(f"got {len(rewards)} rewards but {len(num_tokens)} token counts")
    weights = normalise_conjecturer_rewards(rewards, rule)
    return [
        None if w is None else apply_overlong_penalty(w, tokens, max_tokens, overlong_threshold)
        for w, tokens in zip(weights, num_tokens)
    ]


# --------------------------------------------------------------------------
# The Solver reward
# --------------------------------------------------------------------------


def solver_reward(
    status: str,
    proof: str,
    num_tokens: int,
    max_tokens: int,
    language: Language,
    *,
    penalize_try: bool = True,
    overlong_threshold: float = OVERLONG_THRESHOLD,
) -> float | None:
    """The reward of one Solver attempt, applied in this order:

    1. verdict: ``valid`` -> 1, ``invalid`` / ``timeout`` -> 0,
       ``system_error`` -> None (no reward at all: it never becomes signal);
    2. ``try`` rule: a proof that uses the `try` tactic gets 0;
    3. overlong penalty: when negative it replaces whatever came before, so a
       long proof is penalised whether it verified, failed or used `try`.

    This is the reference code's order.  Which rewarded attempts are trained
    on is the objective's choice (:mod:`sgs.method.objectives`).
    """
    verdict = _check_status(status)
    if verdict is Status.SYSTEM_ERROR:
        return None
    reward = 1.0 if verdict is Status.VALID else 0.0
    if penalize_try and uses_try_tactic(proof, language):
        reward = 0.0
    return apply_overlong_penalty(reward, num_tokens, max_tokens, overlong_threshold)
