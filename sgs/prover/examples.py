"""The general prover's training text: (prompt, completion) pairs from the corpus.

Three kinds, in the prompts the product asks them in
(:class:`sgs.method.roles.PromptSet`):

* ``tactic``: a proof state -> the tactic the library's author wrote next (the
  tactic-level search's question);
* ``proof``: a statement -> its whole proof, in the Solver's format (one
  ```` ```coq ```` block from the statement to ``Qed.``), for proofs short
  enough to fit the model's context;
* ``role``: the warm-start corpus (:mod:`sgs.state.warmstart`), so the model
  keeps the three roles' output formats that self-play parses.

Long states are cut to :data:`MAX_STATE_CHARS`, keeping the focused goal's
conclusion and the hypotheses nearest it: those are what the next tactic
acts on, and a small model's context is short.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from sgs.corpus.records import TheoremRecord
from sgs.method.roles import PromptSet
from sgs.prover.steps import StepExample, load_theorems, theorem_steps
from sgs.state.warmstart import load_corpus

__all__ = ["TextExample", "MAX_STATE_CHARS", "MAX_PROOF_CHARS", "clip_state", "tactic_example",
           "proof_example", "training_examples"]

#: the longest proof state a prompt shows (the 90th percentile of the corpus is about 700)
MAX_STATE_CHARS = 1_200
#: whole-proof examples only for proofs up to this long (statement + script)
MAX_PROOF_CHARS = 1_000
#: the marker that separates hypotheses from the conclusion in Rocq's display
_RULE = "============================"


@dataclass(frozen=True)
class TextExample:
    prompt: str
    completion: str
    #: ``tactic``, ``proof`` or ``role``
    kind: str


def clip_state(state: str, limit: int = MAX_STATE_CHARS) -> str:
    """``state`` cut to ``limit`` characters: the first goal's conclusion whole
    (cut at its end if it alone is too long), then as many of its hypotheses
    as fit, nearest the conclusion first, then the other goals while room is
    left."""
    if len(state) <= limit:
        return state
    first, _, others = state.partition("\ngoal 2 is:")
    hypotheses, rule, conclusion = first.rpartition(_RULE)
    if not rule:
        return first[:limit]
    kept = [rule + conclusion]
    room = limit - len(kept[0])
    if room <= 0:
        return (rule + conclusion)[:limit]
    for line in reversed(hypotheses.rstrip("\n").splitlines()):
        if len(line) + 1 > room:
            break
        kept.insert(0, line)
        room -= len(line) + 1
    text = "\n".join(kept)
    if others and room > len("\ngoal 2 is:") + 20:
        text += ("\ngoal 2 is:" + others)[:room]
    return text


def tactic_example(step: StepExample, prompts: PromptSet, premises: str = "") -> TextExample:
    return TextExample(prompts.tactic(clip_state(step.state), premises), step.tactic, "tactic")


def proof_example(theorem: TheoremRecord, prompts: PromptSet) -> TextExample | None:
    """The Solver's question and answer for a finished proof short enough to show; else None."""
    if not theorem.closed or len(theorem.statement) + len(theorem.proof) > MAX_PROOF_CHARS:
        return None
    statement = theorem.statement.strip()
    return TextExample(prompts.solver("", statement), f"```coq\n{statement}\n{theorem.proof.strip()}\n```", "proof")


def _corpus_examples(theorems: Iterable[TheoremRecord], prompts: PromptSet) -> Iterator[TextExample]:
    for theorem in theorems:
        for step in theorem_steps(theorem):
            yield tactic_example(step, prompts)
        whole = proof_example(theorem, prompts)
        if whole is not None:
            yield whole


def training_examples(corpus: Path, splits: Sequence[str], *, warmstart: str | None = None,
                      libraries: Iterable[str] | None = None, seed: int = 0) -> list[TextExample]:
    """Every example of the chosen corpus splits, plus the warm-start corpus
    (``warmstart``: a path or ``pkg://`` source; None leaves it out), shuffled
    with ``seed``."""
    prompts = PromptSet("rocq")
    examples = list(_corpus_examples(load_theorems(corpus, splits, libraries), prompts))
    if warmstart is not None:
        examples += [TextExample(e.prompt, e.completion, "role") for e in load_corpus(warmstart)]
    random.Random(seed).shuffle(examples)
    return examples
