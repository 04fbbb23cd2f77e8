"""Provers that learn nothing: fixed Rocq automation, the yardstick of issue 44.

A baseline is a list of whole proofs tried on every target, each with an
equal share of the per-lemma time, plus the tactic libraries the checker
loads after the target's own header for it (``prover.rocq.tactic_libraries``:
CoqHammer's ``sauto`` serves targets whose project never loads CoqHammer; the
checker first makes sure the libraries leave the statement's meaning alone).
A target counts as proved when any of its proofs is valid under the usual
rules: each proof goes through the verifier pool like any model's.

Registered here, one entry per baseline, so the comparison command and its
tests never compare names.
"""

from __future__ import annotations

from dataclasses import dataclass

from lean_env.verdict import ProofTask

__all__ = ["Baseline", "BASELINES", "HAMMER_TACTICS", "AUTOMATION", "baseline_tasks", "target_of"]

#: CoqHammer's plain-tactic part (no external provers: ``hammer`` itself is refused)
HAMMER_TACTICS = "From Hammer Require Import Tactics."

#: Rocq's own automation, tried in turn: decision procedures first (cheap, and
#: they fail fast off their fragment), then the search tactics.
AUTOMATION = ("easy", "auto", "eauto", "tauto", "intuition", "congruence", "lia", "firstorder",
              "intros; auto", "intros; eauto", "intros; congruence", "intros; lia")


@dataclass(frozen=True)
class Baseline:
    #: the tactics, each tried as a whole proof ``Proof. <tactic>. Qed.``
    tactics: tuple[str, ...]
    #: ``Require`` sentences the checker loads after the target's header
    tactic_libraries: tuple[str, ...] = ()
    description: str = ""

    def seconds_each(self, seconds_per_lemma: float) -> float:
        """Each proof's share of the per-lemma budget."""
        return seconds_per_lemma / len(self.tactics)


BASELINES: dict[str, Baseline] = {
    "sauto": Baseline(("sauto",), (HAMMER_TACTICS,),
                      "CoqHammer's sauto alone, the whole budget"),
    "automation": Baseline(AUTOMATION, (),
                           f"{len(AUTOMATION)} Rocq automation tactics, an equal share of the budget each"),
}


def target_of(task_id: str, header: str, statement: str,
              load_path: tuple[tuple[str, str, str], ...] = ()) -> ProofTask:
    """A target as a task without a proof yet."""
    return ProofTask(id=task_id, header=header, statement=statement, proof="", load_path=load_path)


def baseline_tasks(target: ProofTask, baseline: Baseline) -> list[ProofTask]:
    """The whole proofs ``baseline`` tries on ``target``, one task each (ids ``<target>#<i>``)."""
    return [ProofTask(id=f"{target.id}#{i}", header=target.header, statement=target.statement,
                      proof=f"Proof.\n  {tactic}.\nQed.", load_path=target.load_path)
            for i, tactic in enumerate(baseline.tactics)]
