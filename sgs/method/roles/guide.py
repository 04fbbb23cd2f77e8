"""Extract the three sub-scores from a Guide review (SPEC §1.4).

Each score sits between its own tags, e.g.
``<begin_relevance_score>4<end_relevance_score>``.  A review may mention the
tags more than once (while reasoning about the format, say); the last
complete pair counts: the last end tag and the last begin tag before it.

The content, trimmed, must be a plain decimal integer (``3``, not ``3.0``,
``three`` or ``**3**``) inside the rubric's range; anything else is a failure
rather than being rounded or clamped, because a Guide that broke the format
carries no reliable number.  R_guide itself is computed in
:mod:`sgs.method.rewards`.
"""

from __future__ import annotations

import re

from sgs.method.rewards import GuideScores
from sgs.method.roles.result import Extraction, Failure, screen_output

#: sub-score -> (tag name, lowest, highest)
SCORE_TAGS = {
    "relevance": ("relevance_score", 0, 5),
    "redundancy": ("redundancy_score", 0, 1),
    "complexity": ("conclusion_complexity_score", 0, 4),
}

_INTEGER = re.compile(r"[+-]?[0-9]+")
# More significant digits than this are out of any range; int() is never
# asked to convert them (Python refuses beyond 4,300 digits).
_MAX_DIGITS = 9


def extract_guide_scores(output: str) -> Extraction[GuideScores]:
    """The three sub-scores of one Guide review, or the first failure met
    (in the order relevance, redundancy, complexity)."""
    failure = screen_output(output)
    if failure:
        return Extraction.fail(failure)
    scores = {}
    for field, (tag, low, high) in SCORE_TAGS.items():
        begin_tag, end_tag = f"<begin_{tag}>", f"<end_{tag}>"
        end = output.rfind(end_tag)
        begin = output.rfind(begin_tag, 0, end) if end >= 0 else -1
        if begin < 0:
            return Extraction.fail(Failure.MISSING_TAG, tag)
        content = output[begin + len(begin_tag):end].strip()
        if not _INTEGER.fullmatch(content):
            return Extraction.fail(Failure.NOT_AN_INTEGER, tag)
        too_long = len(content.lstrip("+-").lstrip("0")) > _MAX_DIGITS
        if too_long or not low <= int(content) <= high:
            return Extraction.fail(Failure.OUT_OF_RANGE, tag)
        scores[field] = int(content)
    return Extraction.success(GuideScores(**scores))
