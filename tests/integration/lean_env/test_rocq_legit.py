"""Correct proofs in unusual but legitimate styles are ``valid``.

The corpus is ``tests/data/rocq_legit.toml`` (each case says which style it
exercises).  Every case runs against real Rocq on one backend built the way
a verifier pool's worker builds its own (:class:`lean_env.backends.BackendSpec`),
so all of them share one persistent coqtop session, as proofs do in a run.
A slow test also sends every case through the audit (``coqc`` + ``coqchk``).

Run: ``pytest tests/integration/lean_env/test_rocq_legit.py`` (needs ``coqtop``; ``-m slow`` adds the audit).
"""

from __future__ import annotations

import os
import tomllib
from concurrent.futures import ThreadPoolExecutor

import pytest

from lean_env.backends import BackendSpec
from lean_env.rocq.checks import RocqTextError, validate_proof, validate_statement
from lean_env.verdict import ProofTask, Status, Verdict
from tests.integration.lean_env.test_rocq_commands import hammer_installed
from tests.paths import DATA

CORPUS = DATA / "rocq_legit.toml"
DEFAULT_HEADER = "Require Import Arith Lia List.\nImport ListNotations."


def load_cases() -> list[dict]:
    cases = tomllib.loads(CORPUS.read_text("utf-8"))["case"]
    for case in cases:
        assert set(case) <= {"style", "header", "statement", "proof", "needs"}, case
        assert case["style"].strip() and case["statement"] and case["proof"], case
    return cases


CASES = load_cases()


def task_of(case: dict) -> ProofTask:
    return ProofTask(id=validate_statement(case["statement"]).name, header=case.get("header", DEFAULT_HEADER),
                     statement=case["statement"], proof=case["proof"])


def case_id(case: dict) -> str:
    return validate_statement(case["statement"]).name


def test_the_corpus_is_large_and_names_are_distinct():
    assert len(CASES) >= 50
    names = [case_id(case) for case in CASES]
    assert len(set(names)) == len(names)


def needs(case: dict) -> frozenset[str]:
    """The known-bug features the case uses (refused unless allowed)."""
    return frozenset(case.get("needs", ()))


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_text_checks_accept_every_case(case):
    validate_proof(case["proof"], allowed=needs(case))


@pytest.mark.parametrize("case", [case for case in CASES if needs(case)], ids=case_id)
def test_a_case_that_uses_a_known_bug_feature_is_refused_by_default(case):
    with pytest.raises(RocqTextError) as refused:
        validate_proof(case["proof"])
    assert refused.value.reason in {f"known_bug:{feature}" for feature in needs(case)}


@pytest.fixture(scope="module")
def backend(coqtop):
    # the census is tested elsewhere; without it every valid proof also gets
    # Print Assumptions, the stricter path.  The features of the few cases that
    # reach Coq's known bugs are allowed, so that those cases are checked too.
    options = {"coqtop": coqtop, "axiom_census": False, "timeout": 60,
               "allow_bug_prone_features": sorted(set().union(*map(needs, CASES)))}
    built = BackendSpec("rocq", options).create()
    yield built
    built.close()


@pytest.mark.rocq
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_every_case_is_valid_against_real_rocq(backend, case):
    if "Hammer" in case.get("header", "") and not hammer_installed():
        message = "CoqHammer is not installed (apt-get install libcoq-hammer; tools/setup.sh does it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}, and CI=true requires it")
        pytest.skip(message)
    verdict = backend.check_proof(task_of(case), 60)
    assert (verdict.status, verdict.reason) == (Status.VALID, "ok"), (case["style"], verdict.messages)


@pytest.mark.rocq
def test_a_very_long_valid_script_is_valid(backend):
    # the context stays small: Coq prints the goal after every sentence
    steps = "".join(f"assert (H : {i} + n = n + {i}) by apply Nat.add_comm.\nclear H.\n" for i in range(500))
    proof = f"Proof.\nintros n.\n{steps}lia.\nQed."
    task = ProofTask(id="long", header=DEFAULT_HEADER, statement="Theorem long_script : forall n : nat, n + 0 = n.",
                     proof=proof)
    assert len(validate_proof(proof)) == 1_004
    verdict = backend.check_proof(task, 120)
    assert (verdict.status, verdict.reason) == (Status.VALID, "ok"), verdict.messages


@pytest.fixture(scope="module")
def audits(backend) -> dict[str, Verdict]:
    """Every case's audit verdict by name.  Each audit is three processes in a
    sandbox of its own, so they run side by side, one per core."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as workers:
        verdicts = workers.map(lambda case: backend.audit(task_of(case), 120), CASES)
        return dict(zip(map(case_id, CASES), verdicts))


@pytest.mark.rocq
@pytest.mark.slow
@pytest.mark.full  # make test-full; not in CI (the audit's agreement is checked in CI by the killed-and-resumed run)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_audit_agrees_on_every_case(audits, case):
    verdict = audits[case_id(case)]
    assert (verdict.status, verdict.reason) == (Status.VALID, "ok"), (case["style"], verdict.messages)
