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

With :class:`PremisePrompts`, a tactic prompt also shows the lemmas BM25
ranks most relevant to the state (:mod:`sgs.prover.premises`), from the
training files and the earlier theorems of the step's own file (never the
theorem itself or a later one: what its author had in scope).  With
:class:`ProofPrompts`, it shows the proofs of the lemmas whose statements
are most like the state's goal (Rango's proof retrieval,
:mod:`sgs.prover.proof_retrieval`), from the same scope.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from sgs.corpus.records import TheoremRecord
from sgs.method.roles import PromptSet
from sgs.prover.premises import (PremiseIndex, first_goal, format_premises, mentioned_paths, modules_of,
                                 premises_from_theorems)
from sgs.prover.proof_retrieval import ProofIndex, format_proofs
from sgs.prover.steps import StepExample, load_theorems, theorem_steps
from sgs.state.warmstart import load_corpus

__all__ = ["TextExample", "MAX_STATE_CHARS", "MAX_PROOF_CHARS", "PremisePrompts", "ProofPrompts", "clip_state",
           "tactic_example", "proof_example", "training_examples"]

#: the longest proof state a prompt shows (the 90th percentile of the corpus is about 700)
MAX_STATE_CHARS = 1_200
#: whole-proof examples only for proofs up to this long (statement + script)
MAX_PROOF_CHARS = 1_000
#: retrieved premises shown in a tactic prompt, and the most characters they take
PREMISES_SHOWN = 6
PREMISE_CHARS = 600
#: retrieved proofs shown in a tactic prompt, and the most characters they take (whole proofs only)
PROOFS_SHOWN = 2
PROOF_CHARS = 600
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


class PremisePrompts:
    """The premise block of a tactic prompt, from an index of earlier theorems."""

    def __init__(self, index: PremiseIndex, shown: int = PREMISES_SHOWN, budget: int = PREMISE_CHARS) -> None:
        self.index, self.shown, self.budget = index, shown, budget

    @classmethod
    def from_corpus(cls, corpus: Path, libraries: Iterable[str] | None = None) -> "PremisePrompts":
        """Premises of the corpus's training files (what every held-out file may use)."""
        theorems = list(load_theorems(corpus, ("train",), libraries))
        return cls(PremiseIndex(premises_from_theorems(theorems, modules_of(corpus), mentioned_paths(theorems))))

    def block(self, state: str, library: str = "", file: str = "", line: int = 0) -> str:
        """The block for ``state``; with the step's ``file`` and theorem ``line``, the
        premises stated at or after that line in the same file are left out."""
        in_scope = _stated_before(self.index, library, file, line)
        return format_premises(self.index.rank(state, self.shown, in_scope), self.budget)


class ProofPrompts:
    """The block of similar earlier proofs in a tactic prompt, from an index of proved theorems."""

    def __init__(self, index: ProofIndex, shown: int = PROOFS_SHOWN, budget: int = PROOF_CHARS) -> None:
        self.index, self.shown, self.budget = index, shown, budget

    @classmethod
    def from_corpus(cls, corpus: Path, libraries: Iterable[str] | None = None) -> "ProofPrompts":
        """Proofs of the corpus's training files (what every held-out file may use)."""
        theorems = list(load_theorems(corpus, ("train",), libraries))
        return cls(ProofIndex.build(theorems, modules_of(corpus), mentioned_paths(theorems)))

    def block(self, state: str, library: str = "", file: str = "", line: int = 0) -> str:
        """The proofs whose statements are most like ``state``'s first goal (the statement
        itself at a proof's first step); scoped as :meth:`PremisePrompts.block`."""
        in_scope = _stated_before(self.index.premises, library, file, line)
        return format_proofs(self.index.retrieve(first_goal(state), self.shown, in_scope), self.budget)


def _stated_before(index: PremiseIndex, library: str, file: str, line: int):
    """With a step's ``file``: a filter of ``index``'s positions that leaves out what its
    file states at or after ``line`` (the theorem itself, later ones); without: None."""
    if not file:
        return None
    premises = index.premises
    return lambda i: not (premises[i].library == library and premises[i].file == file and premises[i].line >= line)


def tactic_example(step: StepExample, prompts: PromptSet, premises: str = "", proofs: str = "") -> TextExample:
    return TextExample(prompts.tactic(clip_state(step.state), premises, proofs), step.tactic, "tactic")


def proof_example(theorem: TheoremRecord, prompts: PromptSet) -> TextExample | None:
    """The Solver's question and answer for a finished proof short enough to show; else None."""
    if not theorem.closed or len(theorem.statement) + len(theorem.proof) > MAX_PROOF_CHARS:
        return None
    statement = theorem.statement.strip()
    return TextExample(prompts.solver("", statement), f"```coq\n{statement}\n{theorem.proof.strip()}\n```", "proof")


def _corpus_examples(theorems: Iterable[TheoremRecord], prompts: PromptSet, premises: PremisePrompts | None,
                     proofs: ProofPrompts | None) -> Iterator[TextExample]:
    for theorem in theorems:
        where = (theorem.library, theorem.file, theorem.line)
        for step in theorem_steps(theorem):
            yield tactic_example(step, prompts, premises.block(step.state, *where) if premises else "",
                                 proofs.block(step.state, *where) if proofs else "")
        whole = proof_example(theorem, prompts)
        if whole is not None:
            yield whole


def training_examples(corpus: Path, splits: Sequence[str], *, warmstart: str | None = None,
                      libraries: Iterable[str] | None = None, seed: int = 0,
                      premises: PremisePrompts | None = None, proofs: ProofPrompts | None = None) -> list[TextExample]:
    """Every example of the chosen corpus splits, plus the warm-start corpus
    (``warmstart``: a path or ``pkg://`` source; None leaves it out), shuffled
    with ``seed``; with ``premises``, tactic prompts show retrieved lemmas, with
    ``proofs`` the proofs of similar earlier lemmas."""
    prompts = PromptSet("rocq")
    examples = list(_corpus_examples(load_theorems(corpus, splits, libraries), prompts, premises, proofs))
    if warmstart is not None:
        examples += [TextExample(e.prompt, e.completion, "role") for e in load_corpus(warmstart)]
    random.Random(seed).shuffle(examples)
    return examples
