"""The standard library's cases and their ``coqc`` ground truth, reused from
:mod:`tools.rocq_stdlib_corpus` (not redone here).

That tool turns each theorem of the standard library it can state on its
own into a *case* (a header that loads what the theorem needs, the renamed
statement, the original proof) and asks plain ``coqc`` whether the proof is
closed under the global context (4,111 of 6,199 are; the answers are cached
on disk, so asking again costs nothing).  The replay finds every proof of a
file; this module attaches to each the tool's case and verdict when the tool
has one for it, matched by the theorem's original name and line.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from pathlib import Path
from typing import Optional

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class StdlibCase:
    """A case and its ground truth."""

    #: plain ``coqc``'s verdict: ``closed``, ``axioms``, ``rejected``, ``timeout``, ``header_error``
    truth: str
    #: the case as a verifier task: ``header``, ``statement``, ``proof``
    task: dict


def stdlib_cases(theories: Path, file: str) -> dict[tuple[str, int], StdlibCase]:
    """The tool's cases of one standard-library file, by (original name, line);
    empty when the tool is not importable here (an installed ``sgs`` without the
    checkout's ``tools/``) or fails on the file."""
    checkout = str(Path(__file__).resolve().parents[2])
    if checkout not in sys.path:     # `tools` is a folder of the checkout, not an installed package
        sys.path.append(checkout)
    try:
        from tools.rocq_stdlib_corpus import Extraction, extract_file
        from tools.rocq_stdlib_truth import ground_truth
    except ImportError as e:    # pragma: no cover - only outside a checkout
        log.warning("no standard-library ground truth: %s", e)
        return {}
    found = Extraction()
    try:
        extract_file(theories, Path(file), found)
        truths = ground_truth(found.cases, jobs=1)
    except Exception as e:     # the tool's trouble must not stop the replay: the case is optional
        log.warning("no ground truth for %s: %s", file, e)
        return {}
    return {(c.original, c.line): StdlibCase(truths[c.key].status,
                                             {"header": c.header, "statement": c.statement, "proof": c.proof})
            for c in found.cases}


def match(cases: dict[tuple[str, int], StdlibCase], name: str, line: int) -> Optional[StdlibCase]:
    """The case of the theorem ``name`` declared at ``line`` (the tool counts the
    line of the declaration's first token, as the replay does)."""
    return cases.get((name, line))
