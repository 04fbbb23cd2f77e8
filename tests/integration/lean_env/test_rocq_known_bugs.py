"""Coq 8.16.1's known soundness bugs against the verifier, with real Rocq.

The catalogue is ``tests/data/rocq_known_bugs.toml``: every entry of Rocq's
critical-bug list whose impacted versions include 8.16.1, with the exploit
where one is known and a proof body can reach the bug, and otherwise the text
a proof body would need.  For each case:

* the verifier (default settings) refuses it with the expected reason;
* where the case is an exploit, plain ``coqc`` + ``Print Assumptions`` shows
  what the exploit does on the installed Rocq (a proof of ``False`` closed
  under the global context, or one that 8.16.1 itself rejects), and with the
  feature it uses allowed (``allow_bug_prone_features``) the verifier calls
  it ``valid``: the refusal, not some other check, is what stops it;
* for the guard-checker exploits, the audit (``coqc`` + ``coqchk`` in a fresh
  sandbox) agrees with the wrong verdict, which is why the refusal is needed.

Run: ``pytest tests/integration/lean_env/test_rocq_known_bugs.py`` (needs ``coqtop``, ``coqc``, ``coqchk``).
"""

from __future__ import annotations

import contextlib
import subprocess
import tomllib
from pathlib import Path

import pytest

from lean_env.backends import BackendSpec
from lean_env.rocq.checks import REJECTION_REASONS
from lean_env.rocq.known_bugs import FEATURE_NAMES
from lean_env.rocq.output import parse_assumptions
from lean_env.verdict import ProofTask, Status
from tests.conftest import require_binary
from tests.paths import DATA

CATALOGUE = DATA / "rocq_known_bugs.toml"
DEFAULT_STATEMENT = "Theorem t : False."
FIELDS = {"entry", "issue", "impacted", "reachable", "how", "proof", "header", "statement", "reason", "coqc",
          "axioms", "needs"}
CASES = tomllib.loads(CATALOGUE.read_text("utf-8"))["case"]
EXPLOITS = [case for case in CASES if "coqc" in case]
PROVE_FALSE = [case for case in EXPLOITS if case["coqc"] != "rejected"]


def case_id(case: dict) -> str:
    return case["issue"].split(",")[0].split()[0].replace("rocq-prover/rocq", "rocq")


def task_of(case: dict) -> ProofTask:
    return ProofTask(id=case_id(case), header=case.get("header", ""), statement=case.get("statement", DEFAULT_STATEMENT),
                     proof=case["proof"])


def test_the_catalogue_is_well_formed():
    assert len(CASES) >= 20
    for case in CASES:
        assert set(case) <= FIELDS and {"entry", "issue", "impacted", "reachable", "how", "proof", "reason"} <= set(case)
        assert case["reason"] in REJECTION_REASONS, case["reason"]
        assert set(case.get("needs", ())) <= set(FEATURE_NAMES)
        assert case.get("coqc") in (None, "closed", "axioms", "rejected")
    # every exploit that proves False says which feature it needs
    assert all(case.get("needs") for case in PROVE_FALSE)


@contextlib.contextmanager
def rocq_backend(coqtop: str, **options):
    """A backend without the census (every valid proof gets Print Assumptions)."""
    built = BackendSpec("rocq", {"coqtop": coqtop, "axiom_census": False, "timeout": 60, **options}).create()
    try:
        yield built
    finally:
        built.close()


@pytest.fixture(scope="module")
def strict_backend(coqtop):
    with rocq_backend(coqtop) as built:
        yield built


@pytest.mark.rocq
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_every_case_is_refused_by_default(strict_backend, case):
    verdict = strict_backend.check_proof(task_of(case), 60)
    assert (verdict.status, verdict.reason) == (Status.INVALID, case["reason"]), (case["entry"], verdict.messages)


def coqc_verdict(case: dict, directory: Path) -> tuple[bool, frozenset[str]]:
    """Whether plain coqc accepts the case's file, and the axioms ``Print
    Assumptions`` lists for its theorem."""
    source = directory / f"{case_id(case).replace('#', '_')}.v"
    statement = case.get("statement", DEFAULT_STATEMENT)
    source.write_text(f"{case.get('header', '')}\n{statement}\n{case['proof']}\nPrint Assumptions t.\n")
    done = subprocess.run([require_binary("coqc"), "-q", source.name], cwd=directory, capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0:
        return False, frozenset()
    found = parse_assumptions(done.stdout)
    return True, frozenset(found.axioms) | frozenset(found.other)


@pytest.mark.rocq
@pytest.mark.parametrize("case", EXPLOITS, ids=case_id)
def test_plain_coqc_shows_what_the_exploit_does(case, tmp_path):
    accepted, assumptions = coqc_verdict(case, tmp_path)
    expected = {"closed": (True, frozenset()), "rejected": (False, frozenset()),
                "axioms": (True, frozenset(case.get("axioms", ())))}[case["coqc"]]
    assert (accepted, assumptions) == expected


@pytest.fixture(scope="module")
def trusting_backend(coqtop):
    """A backend that allows every known-bug feature, and the primitives the
    VM exploit's header declares (what a project using primitive integers
    would have to allow)."""
    axioms = sorted({axiom for case in CASES for axiom in case.get("axioms", ())})
    with rocq_backend(coqtop, allow_bug_prone_features=list(FEATURE_NAMES), allowed_axioms=axioms) as built:
        yield built


@pytest.mark.rocq
@pytest.mark.parametrize("case", PROVE_FALSE, ids=case_id)
def test_with_the_feature_allowed_the_proof_of_false_is_valid(trusting_backend, case):
    verdict = trusting_backend.check_proof(task_of(case), 60)
    assert (verdict.status, verdict.reason) == (Status.VALID, "ok"), verdict.messages


@pytest.mark.rocq
@pytest.mark.parametrize("case", [c for c in PROVE_FALSE if c["needs"] == ["fixpoints"]], ids=case_id)
def test_the_audit_does_not_catch_the_guard_checker_bugs(trusting_backend, case):
    # coqchk shares the kernel's guard checker
    verdict = trusting_backend.audit(task_of(case), 120)
    assert (verdict.status, verdict.reason) == (Status.VALID, "ok"), verdict.messages
