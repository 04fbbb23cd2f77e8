"""The Lean verifier under attack, and on legitimate proofs in unusual styles.

Lean cannot be installed on the machines these tests run on, so the REPL is the
replay test double (``lean_replay.py``) answering with the responses the real
REPL recorded in ``../shared/fixtures/lean_repl/``:

* ``data/lean_attacks.toml``: attacks refused by the pre-filter, each under the
  statement of a recorded Mathlib theorem on one backend; after every one,
  the same backend must still judge that theorem's recorded proof valid, no
  prover process may have been added, and no file written;
* :data:`RECORDED` and :data:`AXIOM_ROUTES`: attacks that pass the pre-filter
  and are stopped by Lean's own answer.  The first kind replays answers Lean
  gave (recorded transcripts); the second replays the recorded proof with a
  ``#print axioms`` answer *inferred* from the format Lean prints
  (``'NAME' depends on axioms: [...]``, src/Lean/Elab/Print.lean; no
  transcript prints axioms), naming the axiom each route leaves behind;
* ``data/lean_legit.toml``: correct proofs in unusual styles, which the
  pre-filter must pass.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import psutil
import pytest

from lean_env.lean.checks import check_body
from lean_env.verdict import ProofTask, Status
from tests.lean.lean_support import needs_fixtures, replay_backend, requests, split_at_by
from tests.paths import LEAN

DATA = LEAN / "data"
ATTACKS = tomllib.loads((DATA / "lean_attacks.toml").read_text(encoding="utf-8"))["case"]
LEGIT = tomllib.loads((DATA / "lean_legit.toml").read_text(encoding="utf-8"))["case"]

MATHLIB = "mathlib/H20231020"


def mathlib_task(body: str | None = None) -> ProofTask:
    """The recorded Mathlib theorem ``mathd_numbertheory_188``, with its recorded proof or ``body``."""
    header = requests(MATHLIB)[0]["cmd"]
    statement, recorded = split_at_by(requests(MATHLIB)[1]["cmd"])
    return ProofTask("p", header=header, statement=statement, proof=recorded if body is None else body)


def new_processes(baseline: set[int], ours: int | None) -> set[int]:
    """Processes under this one that were not in ``baseline``, leaving out what
    processes of the baseline other than ``ours`` (the REPL) started: a Ray
    cluster an earlier test left running starts workers of its own."""
    others = baseline - {ours}
    found = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.pid not in baseline and not any(p.pid in others for p in child.parents()):
                found.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def test_the_catalogue_is_documented():
    assert len(ATTACKS) + len(RECORDED) + len(AXIOM_ROUTES) >= 40
    for case in ATTACKS:
        assert {"name", "body", "reason", "attack", "source"} <= case.keys(), case
        assert case["attack"].strip() and case["source"].strip(), case["name"]
    assert len({case["name"] for case in ATTACKS}) == len(ATTACKS)


#: the classes of issue 43 (a red team against the pre-filter), by the prefix of their case names
ISSUE_43_CLASSES = ["escaped_name_", "dot_bullet_", "interpolated_", "desync_", "recovery_"]


@pytest.mark.parametrize("prefix", ISSUE_43_CLASSES)
def test_every_issue_43_class_has_several_variants(prefix):
    cases = [case for case in ATTACKS if case["name"].startswith(prefix) and "issue 43" in case["source"]]
    assert len(cases) >= 3, prefix


@needs_fixtures
def test_attacks_are_refused_and_leave_the_backend_sound(tmp_path, monkeypatch):
    """One backend for all cases, as one pool worker sees them one after another."""
    monkeypatch.chdir(tmp_path)
    with replay_backend(MATHLIB) as backend:
        assert backend.check_proof(mathlib_task(), timeout=30).status is Status.VALID
        processes = {child.pid for child in psutil.Process().children(recursive=True)}
        for case in ATTACKS:
            verdict = backend.check_proof(mathlib_task(case["body"]), timeout=30)
            assert (verdict.status, verdict.reason) == (Status.INVALID, case["reason"]), case["name"]
            # The next proof on the same backend is judged as before: no poisoned session.
            assert backend.check_proof(mathlib_task(), timeout=30).status is Status.VALID, case["name"]
            assert not new_processes(processes, backend.pid), case["name"]
            assert list(tmp_path.iterdir()) == [], case["name"]
    assert not (Path("/tmp") / "pwned").exists()


#: Attacks that pass the pre-filter and that Lean itself rejects, from recorded transcripts:
#: (transcript, what the proof tries).
RECORDED = [
    ("self_proof_check", "prove the theorem by citing itself (circular proof)"),
    ("self_proof_exact_check", "close the goal with `exact` of the theorem being proved"),
]


@needs_fixtures
@pytest.mark.parametrize("name, attack", RECORDED)
def test_recorded_attacks_are_rejected_by_lean(name, attack):
    statement, body = split_at_by(requests(name)[0]["cmd"])
    with replay_backend(name, header="") as backend:
        verdict = backend.check_proof(ProofTask(name, "", statement, body), timeout=30)
    assert (verdict.status, verdict.reason) == (Status.INVALID, "prover_error"), attack


#: Routes by which a proof that passes the pre-filter can still depend on an unsound axiom,
#: with the axioms Lean would print (inferred answers) and the reason the verdict must give.
AXIOM_ROUTES = [
    ("propext,sorryAx", "sorry", "sorryAx reached through a lemma or elaborator that inserted sorry"),
    ("propext,Classical.choice,Lean.ofReduceBool,Quot.sound", "axioms",
     "native evaluation through a definition (Lean up to v4.28: Lean.ofReduceBool)"),
    ("propext,Lean.trustCompiler", "axioms", "compiler trust (Lean.trustCompiler)"),
    ("propext,mathd_numbertheory_188._native.native_decide.ax_1_1", "axioms",
     "native_decide from Lean v4.29: one auxiliary axiom per computation (lean4 PR #12217)"),
    ("propext,cheat", "axioms", "an axiom declared by a conjecture's header or an imported file"),
    ("silent", "axioms_unknown", "no axioms line at all (messages suppressed or log cleared): fail closed"),
]


@needs_fixtures
@pytest.mark.parametrize("axioms, reason, attack", AXIOM_ROUTES)
def test_unsound_axioms_are_rejected_whatever_the_route(axioms, reason, attack):
    with replay_backend(MATHLIB, axioms=axioms) as backend:
        verdict = backend.check_proof(mathlib_task(), timeout=30)
    assert (verdict.status, verdict.reason) == (Status.INVALID, reason), attack


@pytest.mark.parametrize("case", LEGIT, ids=[case["style"] for case in LEGIT])
def test_legitimate_styles_pass_the_prefilter(case):
    normalized = check_body(case["body"])
    assert isinstance(normalized, str), (case["style"], normalized)
    # Normalising changes layout only: the same tokens in the same order.
    assert normalized.split() == case["body"].replace("\t", " ").split()


def test_the_legitimate_corpus_is_large_enough():
    assert len(LEGIT) >= 25 and all(case["style"].strip() for case in LEGIT)


@needs_fixtures
def test_recorded_mathlib_proofs_are_valid_through_the_replay():
    """The recorded proofs themselves (the legitimate baseline the attacks are measured against)."""
    header = requests(MATHLIB)[0]["cmd"]
    with replay_backend(MATHLIB) as backend:
        for index in (1, 2, 3):
            statement, body = split_at_by(requests(MATHLIB)[index]["cmd"])
            assert backend.check_proof(ProofTask(f"p{index}", header, statement, body), timeout=30).status \
                is Status.VALID
