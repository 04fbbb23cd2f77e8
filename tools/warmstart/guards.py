"""What the corpus must not contain: held-out targets (by id, statement up
to renaming or numerals, or a specific reference proof), targets up to
renaming, and duplicates.  :func:`leakage_problems` checks finished corpus
lines; :class:`Guard` filters generated lemmas before they enter."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from sgs.method.roles import canonical_form, extract_proof

from .statements import ROCQ, Lemma

#: a held-out reference proof this long (tactics, whitespace collapsed) is
#: specific enough that seeing it verbatim would leak the target
LEAK_PROOF_CHARS = 30


def skeleton(statement: str) -> str:
    """The canonical form with every numeral replaced by ``#``."""
    return " ".join("#" if token.isdigit() else token for token in canonical_form(statement, ROCQ).split())


def _tactic_text(proof: str | None) -> str:
    """A proof's tactics with ``Proof.``/``Qed.`` dropped and whitespace collapsed."""
    if proof is None:
        return ""
    text = " ".join(proof.split())
    return text.removeprefix("Proof.").removesuffix("Qed.").strip()


@dataclass(frozen=True)
class Guard:
    """What the corpus must not contain, computed from the target set."""

    held_ids: frozenset[str]
    held_forms: frozenset[str]
    held_skeletons: frozenset[str]
    held_proofs: frozenset[str]
    target_forms: frozenset[str]

    @classmethod
    def from_targets(cls, targets: Sequence[Mapping]) -> "Guard":
        held = [t for t in targets if t["held_out"]]
        training_proofs = {_tactic_text(t["proof"]) for t in targets if not t["held_out"]}
        return cls(
            held_ids=frozenset(t["id"] for t in held),
            held_forms=frozenset(canonical_form(t["statement"], ROCQ) for t in held),
            held_skeletons=frozenset(skeleton(t["statement"]) for t in held),
            held_proofs=frozenset(p for t in held if len(p := _tactic_text(t["proof"])) >= LEAK_PROOF_CHARS
                                  and p not in training_proofs),
            target_forms=frozenset(canonical_form(t["statement"], ROCQ) for t in targets),
        )

    def statement_leaks(self, statement: str) -> bool:
        return (canonical_form(statement, ROCQ) in self.held_forms
                or skeleton(statement) in self.held_skeletons)

    def admits(self, lemma: Lemma) -> bool:
        """Whether a generated lemma may enter the corpus: not a target (up
        to renaming), no held-out skeleton, no held-out proof."""
        return (canonical_form(lemma.statement, ROCQ) not in self.target_forms
                and not self.statement_leaks(lemma.statement)
                and _tactic_text(lemma.proof) not in self.held_proofs)


def dedupe(lemmas: Iterable[Lemma], guard: Guard, seen: set[str]) -> list[Lemma]:
    """The admitted lemmas whose canonical form is not in ``seen`` (updated)."""
    kept = []
    for lemma in lemmas:
        form = canonical_form(lemma.statement, ROCQ)
        if form in seen or not guard.admits(lemma):
            continue
        seen.add(form)
        kept.append(lemma)
    return kept


def leakage_problems(examples: Sequence[Mapping], targets: Sequence[Mapping]) -> list[str]:
    """Every way ``examples`` (corpus lines) leak a held-out target."""
    guard = Guard.from_targets(targets)
    problems = []
    for i, example in enumerate(examples):
        where = f"line {i + 1} ({example['role']}, {example['source']})"
        if example["source"] in guard.held_ids or any(
                value in guard.held_ids for value in example["meta"].values() if isinstance(value, str)):
            problems.append(f"{where}: names a held-out target")
        for statement in statements_in(example):
            if guard.statement_leaks(statement):
                problems.append(f"{where}: states a held-out target (up to renaming or numerals)")
        for proof in proofs_in(example):
            if _tactic_text(proof) in guard.held_proofs:
                problems.append(f"{where}: holds a held-out reference proof")
    return problems


_COQ_BLOCK = re.compile(r"```coq\n(.*?)```", re.S)


def statements_in(example: Mapping) -> list[str]:
    """Every theorem statement a corpus line shows, in prompt or completion."""
    found = []
    for block in _COQ_BLOCK.findall(example["prompt"] + "\n" + example["completion"]):
        for line in block.splitlines():
            if line.startswith(("Theorem ", "Lemma ")):
                found.append(line.strip())
    return found


def proofs_in(example: Mapping) -> list[str]:
    """The proofs a corpus line holds: a solver completion's, a conjecture's
    checking proof."""
    proofs = []
    if example["role"] == "solver":
        extracted = extract_proof(example["completion"], ROCQ)
        if extracted.ok:
            proofs.append(extracted.value)
    if example["meta"].get("proof"):
        proofs.append(example["meta"]["proof"])
    return proofs
