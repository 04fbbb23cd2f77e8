"""Correct proofs must pass: the Coq standard library's own proofs.

:mod:`tools.rocq_stdlib_corpus` turns every top-level theorem of the
standard library sources installed with Debian's ``coq`` into a task (the
file's requirements and the file itself as header, the statement renamed,
the original proof), and plain ``coqc`` with ``Print Assumptions`` says
which of them are correct proofs of closed theorems.  Every such case must be
``valid`` once the features with known prover bugs are allowed
(``allow_bug_prone_features``); with the default settings every one must be
valid or refused with a ``known_bug:*`` reason (the price of that defence,
printed).  And no case that ``coqc`` says needs an axiom may be valid.

CI checks a fixed, seeded sample of 53 cases from five files (about 30 s);
``make test-full`` checks the whole corpus: 6,199 cases, 4,111 of them closed
(18-32 minutes here once the ``coqc`` ground truth is cached under
``~/.cache/sgs/rocq_stdlib_corpus``; computing it takes about 50 minutes
more, two ``coqc`` at a time).

Run: ``pytest tests/integration/lean_env/test_rocq_stdlib_corpus.py`` (needs ``coqc`` and
``coqtop`` and the standard library's ``.v`` files; ``-m full`` for the
whole corpus).
"""

from __future__ import annotations

import collections
import os
import random
import re
import time
from pathlib import Path

import pytest

from lean_env.rocq import RocqBackend, RocqConfig
from lean_env.verdict import Status
from tests.conftest import require_binary
from tools import rocq_stdlib_corpus as corpus

#: what the permissive backend allows on top of the defaults
BUG_PRONE = ("fixpoints", "vm_reduction")
#: the CI sample: files with cheap headers, between them every kind of case
#: (plain modules, scopes, ``fix`` proofs, ``vm_compute``/``<:`` proofs, axioms)
SAMPLE_FILES = ("Arith/PeanoNat.v", "ZArith/Zcomplements.v", "Bool/Bool.v", "Strings/Ascii.v",
                "Logic/Classical_Prop.v")
PER_FILE = 9
SAMPLE_SEED = 29
#: proof text that uses a feature with known prover bugs (the sample takes every such case)
KNOWN_BUG_WORDS = re.compile(r"\b(?:fix|cofix|vm_compute|native_compute|Compute)\b|<<?:")


def theories() -> Path:
    require_binary("coqc")
    found = corpus.coq_lib() / "theories"
    if not any(found.glob("Init/*.v")):
        message = f"the standard library's .v sources are not installed under {found}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}, and CI=true requires them")   # as tests.conftest.require_binary
        pytest.skip(message)
    return found


class Checked:
    """Cases, their ground truth and the verifier's verdicts on them.

    The default settings check every closed case and ``axiom_cases`` of the
    cases that need an axiom.  The permissive settings (:data:`BUG_PRONE`
    allowed) check every closed case when ``permissive_all``, else only the
    closed cases the default settings did not find valid: allowing a feature
    only lifts a text refusal, so what is valid under the defaults is valid
    under the permissive settings too (``make test-full`` saves a second
    pass over thousands of cases this way; the CI sample checks both ways).
    """

    def __init__(self, cases: list[corpus.Case], coqtop: str, *, jobs: int, axiom_cases: int,
                 permissive_all: bool) -> None:
        started = time.monotonic()
        self.cases = cases
        self.truths = corpus.ground_truth(cases, jobs=jobs)
        self.truth_seconds = time.monotonic() - started
        self.closed = [c for c in cases if self.truths[c.key].status == "closed"]
        needs_axioms = [c for c in cases if self.truths[c.key].status == "axioms"]
        #: a seeded draw of the cases that need an axiom (most are slow real analysis)
        self.with_axioms = random.Random(SAMPLE_SEED).sample(needs_axioms, min(axiom_cases, len(needs_axioms)))
        started = time.monotonic()
        self.default = self._check(coqtop, (), self.closed + self.with_axioms)
        again = self.closed if permissive_all else [c for c in self.closed if not valid(self.default[c.key])]
        self.permissive = {c.key: self.default[c.key] for c in self.closed}
        self.permissive.update(self._check(coqtop, BUG_PRONE, again))
        self.check_seconds = time.monotonic() - started

    @staticmethod
    def _check(coqtop: str, allow: tuple[str, ...], cases: list[corpus.Case]) -> dict:
        # without the axiom census every valid proof also gets Print Assumptions:
        # the stricter path, and no coqchk census per header
        backend = RocqBackend(RocqConfig(coqtop=coqtop, axiom_census=False, timeout=120,
                                         allow_bug_prone_features=allow), worker="stdlib-corpus")
        try:
            return corpus.check_cases(backend, cases)
        finally:
            backend.close()

    def summary(self) -> str:
        truths = collections.Counter(t.status for t in self.truths.values())
        refused = collections.Counter(self.default[c.key].reason for c in self.closed)
        return (f"{len(self.cases)} cases, coqc: {dict(truths)} ({self.truth_seconds:.0f} s); "
                f"the closed cases' verdicts with the default settings: {dict(refused)} "
                f"({self.check_seconds:.0f} s of checking)")


def failures(verdicts: dict, cases: list[corpus.Case], ok) -> list[str]:
    return [f"{c.key}: {verdicts[c.key].reason}: {' | '.join(verdicts[c.key].messages)[:300]}"
            for c in cases if not ok(verdicts[c.key])]


def valid(verdict) -> bool:
    return (verdict.status, verdict.reason) == (Status.VALID, "ok")


def valid_or_known_bug(verdict) -> bool:
    return valid(verdict) or (verdict.status is Status.INVALID and verdict.reason.startswith("known_bug:"))


# -- pure: the extraction -------------------------------------------------------

def test_cases_keep_the_original_proof_and_rename_the_theorem():
    root = theories()
    found = corpus.extract(root, [Path("Arith/PeanoNat.v"), Path("Arith/Between.v")])
    by_name = {c.original: c for c in found.cases}
    case = by_name["even_spec"]      # inside Module Nat, after Import Private_Parity
    assert case.header.splitlines()[-3:] == ["Require Import Coq.Arith.PeanoNat.", "Import Coq.Arith.PeanoNat.Nat.",
                                             "Import Private_Parity."]
    assert case.statement.startswith("Lemma sgs_case_") and "even_spec" not in case.statement
    assert case.proof.startswith("Proof.") and case.proof.rstrip().endswith("Qed.")
    assert case.proof in (root / case.source).read_text("utf-8")
    assert len({c.key for c in found.cases}) == len(found.cases)
    # Between.v: theorems over section variables, and a proof given as a term
    assert found.skipped["section_variables"] > 0 and found.skipped["proof_term"] > 0


def test_the_trusted_splitter_agrees_with_the_strict_one_where_both_split():
    root = theories()
    for relative in corpus.source_files(root, ["Arith/*.v", "Bool/*.v"]):
        text = (root / relative).read_text("utf-8")
        try:
            exact = corpus.split_sentences(text)
        except corpus.RocqTextError:
            continue
        assert [s.text for s in corpus.split_sentences(text, trusted=True)] == [s.text for s in exact], relative


# -- against coqc and coqtop ---------------------------------------------------------

@pytest.fixture(scope="module")
def sample(coqtop) -> Checked:
    found = corpus.extract(theories(), [Path(f) for f in SAMPLE_FILES])
    # every case that uses a bug-prone feature, and a seeded draw of the others from each file
    bug_prone = [c for c in found.cases if KNOWN_BUG_WORDS.search(c.proof)]
    draw = random.Random(SAMPLE_SEED)
    drawn = []
    for source in SAMPLE_FILES:
        pool = [c for c in found.cases if c.source == source and c not in bug_prone]
        drawn += draw.sample(pool, min(PER_FILE, len(pool)))
    return Checked(sorted(bug_prone + drawn, key=lambda c: (c.source, c.line)), coqtop, jobs=1, axiom_cases=10,
                   permissive_all=True)


@pytest.mark.rocq
def test_the_sample_is_mostly_closed_and_covers_known_bug_features(sample):
    print(sample.summary())
    assert len(sample.closed) >= 35, sample.summary()
    assert sample.with_axioms, "the sample should hold a case that needs an axiom"
    reasons = {sample.default[c.key].reason for c in sample.closed}
    assert {"known_bug:fixpoints", "known_bug:vm_reduction"} <= reasons, sample.summary()


@pytest.mark.rocq
def test_every_closed_sample_case_is_valid_when_bug_prone_features_are_allowed(sample):
    assert not failures(sample.permissive, sample.closed, valid)


@pytest.mark.rocq
def test_the_default_settings_refuse_closed_sample_cases_only_for_known_bugs(sample):
    assert not failures(sample.default, sample.closed, valid_or_known_bug)


@pytest.mark.rocq
def test_no_sample_case_that_needs_an_axiom_is_valid(sample):
    assert not [c.key for c in sample.with_axioms if sample.default[c.key].valid]


# -- the whole corpus (make test-full) ------------------------------------------------

def whole_corpus_test(test):
    """Real Rocq, slow, ``make test-full`` only; the shared fixture took 18-32
    minutes here with the coqc ground truth cached, and the ground truth about
    50 minutes more (two coqc at a time, on a 2-core machine shared with other jobs)."""
    for mark in (pytest.mark.rocq, pytest.mark.slow, pytest.mark.full, pytest.mark.timeout(7200)):
        test = mark(test)
    return test


@pytest.fixture(scope="module")
def whole(coqtop) -> Checked:
    root = theories()
    found = corpus.extract(root, corpus.source_files(root))
    print(f"skipped: {dict(found.skipped)}")
    return Checked(found.cases, coqtop, jobs=2, axiom_cases=100, permissive_all=False)


@whole_corpus_test
def test_the_whole_corpus_has_over_a_thousand_closed_cases(whole):
    print(whole.summary())
    assert len(whole.closed) >= 1_000, whole.summary()


@whole_corpus_test
def test_every_closed_case_is_valid_when_bug_prone_features_are_allowed(whole):
    wrong = failures(whole.permissive, whole.closed, valid)
    assert not wrong, f"{len(wrong)} of {len(whole.closed)} refused:\n" + "\n".join(wrong[:50])


@whole_corpus_test
def test_the_default_settings_refuse_closed_cases_only_for_known_bugs(whole):
    wrong = failures(whole.default, whole.closed, valid_or_known_bug)
    refused = collections.Counter(whole.default[c.key].reason for c in whole.closed if not valid(whole.default[c.key]))
    print(f"the default settings refuse {sum(refused.values())} of {len(whole.closed)} closed cases: {dict(refused)}")
    assert not wrong, f"{len(wrong)} of {len(whole.closed)} refused:\n" + "\n".join(wrong[:50])


@whole_corpus_test
def test_no_case_that_needs_an_axiom_is_valid(whole):
    assert not [c.key for c in whole.with_axioms if whole.default[c.key].valid]
