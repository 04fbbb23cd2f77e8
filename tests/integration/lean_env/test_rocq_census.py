"""The axiom census (lean_env.rocq.census) against the real coqtop and
coqchk: skipping ``Print Assumptions`` on a clean census never changes a
verdict.  Parsing their answers, and the census's queue and slots on
censuses that run no process: ``tests/unit/lean_env/test_rocq_census_parsing.py``.

A census of the default header re-checks about 190 libraries (20 s or more);
the tests share one cache directory per session so that it runs once."""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import subprocess
import threading

import psutil
import pytest

from lean_env.rocq import RocqBackend, RocqConfig
from lean_env.rocq.census import CENSUS_NICE
from lean_env.verdict import ProofTask, Status
from tests.integration.lean_env.test_rocq_backend import HEADER, HOSTILE

CENSUS_WAIT = 900

# -- against coqtop and coqchk ---------------------------------------------------

def task(statement: str, proof: str, header: str = HEADER) -> ProofTask:
    return ProofTask(id="t", header=header, statement=statement, proof=proof)


def outcome(backend: RocqBackend, statement: str, proof: str, header: str = HEADER) -> tuple[Status, str]:
    verdict = backend.check_proof(task(statement, proof, header), 60)
    return verdict.status, verdict.reason


@pytest.fixture(scope="session")
def census_dir(tmp_path_factory) -> str:
    """One census cache for the whole test session."""
    return str(tmp_path_factory.mktemp("census"))


@pytest.fixture(scope="session")
def coqchk() -> str:
    from tests.conftest import require_binary
    return require_binary("coqchk")


@pytest.fixture(scope="session")
def library_dir(tmp_path_factory, coqtop, coqchk) -> str:
    """Small compiled libraries (logical root ``Lib``) with things a census must see."""
    root = tmp_path_factory.mktemp("lib")
    sources = {
        # an SProp inductive that Print Assumptions 8.16 reports as relying on UIP,
        # hidden behind a constant so that only its reduction shows it is in SProp
        "Strict.v": "Definition MySort := SProp.\nInductive hidden : MySort := hc.\n",
        # a library that turns guard checking off in whoever imports it
        "Unguarded.v": "#[export] Unset Guard Checking.\nDefinition marker := 0.\n",
        "Plain.v": "Definition double (n : nat) := n + n.\n",
    }
    for name, text in sources.items():
        (root / name).write_text(text)
        subprocess.run(["coqc", "-Q", str(root), "Lib", name], cwd=root, check=True, capture_output=True)
    return str(root)


@pytest.fixture
def make_backend(coqtop, census_dir):
    """Backends sharing the session's census cache (closed at the end)."""
    made: list[RocqBackend] = []

    def make(**options) -> RocqBackend:
        options.setdefault("census_cache_dir", census_dir)
        options.setdefault("census_audit_fraction", 0.0)
        b = RocqBackend(RocqConfig(coqtop=coqtop, timeout=60, **options))
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


def censused(backend: RocqBackend, header: str = HEADER):
    """Load ``header`` (with a trivial check), wait for its census and return it."""
    assert backend.check_proof(task("Theorem warm : True.", "Proof. exact I. Qed.", header), 60).valid
    assert backend.census is not None and backend.census.wait(CENSUS_WAIT)
    return backend.census.result(backend._session.environment)


@pytest.fixture(scope="module")
def clean_backend(coqtop, census_dir):
    """A backend whose census of the default header is known (and clean)."""
    b = RocqBackend(RocqConfig(coqtop=coqtop, timeout=60, census_cache_dir=census_dir, census_audit_fraction=0.0))
    censused(b)
    yield b
    b.close()


@pytest.fixture(scope="module")
def audited_backend(coqtop):
    """A backend that checks every proof with Print Assumptions."""
    b = RocqBackend(RocqConfig(coqtop=coqtop, timeout=60, axiom_census=False))
    yield b
    b.close()


VALID = [
    ("Theorem t : forall n m : nat, n + m = m + n.", "Proof. intros. lia. Qed."),
    ("Theorem t : forall a b : nat, (a + b) * (a + b) = a * a + 2 * a * b + b * b.", "Proof. intros. ring. Qed."),
    ("Theorem t : forall (A : Type) (l : list A), l ++ [] = l.",
     "Proof. intros A l. induction l as [|x xs IH]; simpl; [reflexivity | rewrite IH; reflexivity]. Qed."),
    ("Theorem t : forall P Q : Prop, P /\\ Q -> Q /\\ P.", "Proof. intuition. Qed."),
    ("Theorem t : True.", "Proof. abstract exact I. Qed."),
    ("Theorem t : forall n : nat, n <= n * n.", "Proof. intros n. destruct n; simpl; lia. Qed."),
]
WRONG = [
    ("Theorem t : forall n m : nat, n + m = m + n.", "Proof. intros. reflexivity. Qed."),
    ("Theorem t : True /\\ True.", "Proof. split. exact I. Qed."),
    ("Theorem t : False.", "Proof. exact ((fix f (n : nat) : False := f n) 0). Qed."),
]


@pytest.mark.rocq
@pytest.mark.slow
def test_the_default_header_is_clean_and_lia_proofs_skip_print_assumptions(clean_backend):
    assert clean_backend.census.is_clean(clean_backend._session.environment)
    environment = clean_backend._session.environment
    assert {"Coq.micromega.Lia", "Coq.Init.Prelude"} <= {lib.name for lib in environment.libraries}
    before = clean_backend.assumption_checks
    for i in range(3):
        verdict = clean_backend.check_proof(task(f"Theorem t : forall n, n + {i} = {i} + n.",
                                                 "Proof. intros. lia. Qed."), 60)
        assert verdict.valid, verdict.messages
    assert clean_backend.assumption_checks == before


@pytest.mark.rocq
@pytest.mark.slow
def test_verdicts_are_the_same_with_and_without_the_census(clean_backend, audited_backend):
    cases = [(s, p) for s, p, _ in HOSTILE] + VALID + WRONG
    before = clean_backend.assumption_checks
    for statement, proof in cases:
        assert outcome(clean_backend, statement, proof) == outcome(audited_backend, statement, proof), proof
    assert clean_backend.assumption_checks == before
    assert audited_backend.assumption_checks >= len(VALID)


@pytest.mark.rocq
@pytest.mark.slow
def test_the_tactic_api_skips_print_assumptions_too(clean_backend):
    before = clean_backend.assumption_checks
    assert clean_backend.start_proof(HEADER, "Theorem t : forall n : nat, n + 0 = n.").kind == "goals"
    done = clean_backend.run_tactic("intros. lia.")
    assert done.kind == "finished" and done.verdict is not None and done.verdict.valid
    assert clean_backend.assumption_checks == before


@pytest.mark.rocq
@pytest.mark.slow
def test_a_second_backend_reuses_the_cached_census(clean_backend, make_backend, census_dir):
    again = make_backend()
    assert outcome(again, "Theorem t : forall n, n + 1 = S n.", "Proof. intros. lia. Qed.") == (Status.VALID, "ok")
    # the census was read from disk when the header loaded: no coqchk, no Print Assumptions
    assert again.census.coqchk_runs == 0 and again.assumption_checks == 0
    key = again._session.environment.key
    assert key == clean_backend._session.environment.key
    with open(os.path.join(census_dir, f"census-{key}.json")) as f:
        entry = json.load(f)
    assert entry["axioms"] == [] and entry["unsafe"] == [] and len(entry["libraries"]) > 100


@pytest.mark.rocq
@pytest.mark.slow
def test_a_header_with_an_axiom_keeps_print_assumptions(make_backend):
    header = "Require Import Coq.Logic.Classical_Prop."
    statement, proof = "Theorem t : forall P : Prop, P \\/ ~ P.", "Proof. exact classic. Qed."
    strict = make_backend()
    census = censused(strict, header)
    assert census is not None and census.axioms == ("Coq.Logic.Classical_Prop.classic",)
    assert outcome(strict, statement, proof, header) == (Status.INVALID, "axioms")
    assert outcome(strict, "Theorem t : True.", "Proof. exact I. Qed.", header) == (Status.VALID, "ok")
    assert strict.assumption_checks == 3       # the warm-up check included
    permissive = make_backend(allowed_axioms=["classic"])
    assert outcome(permissive, statement, proof, header) == (Status.VALID, "ok")
    assert permissive.census.coqchk_runs == 0 and permissive.assumption_checks == 1


@pytest.mark.rocq
def test_an_inductive_coqchk_does_not_report_still_makes_the_census_unclean(make_backend, library_dir):
    """Print Assumptions 8.16 reports SProp inductives of the UIP shape, which
    coqchk's summary does not mention; the census finds them itself, even when
    the sort is hidden behind a definition."""
    header = "Require Import Lib.Strict."
    statement, proof = "Theorem t : True.", "Proof. exact ((fun _ : hidden => I) hc). Qed."
    censusing = make_backend(extra_args=["-Q", library_dir, "Lib"])
    census = censused(censusing, header)
    assert census is not None and not census.clean
    assert any("Lib.Strict.hidden" in finding for finding in census.unsafe)
    assert census.axioms == () and censusing.census.coqchk_runs == 0    # no need to run coqchk
    audited = make_backend(extra_args=["-Q", library_dir, "Lib"], axiom_census=False)
    assert outcome(censusing, statement, proof, header) == outcome(audited, statement, proof, header) \
        == (Status.INVALID, "axioms")


@pytest.mark.rocq
def test_stdlib_strict_prop_is_unclean(make_backend):
    census = censused(make_backend(), "Require Import Coq.Logic.StrictProp.")
    assert census is not None and any("Coq.Logic.StrictProp.sUnit" in finding for finding in census.unsafe)


@pytest.mark.rocq
def test_a_header_that_turns_guard_checking_off_keeps_print_assumptions(make_backend, library_dir):
    header = "Require Import Lib.Unguarded."
    statement, proof = "Theorem t : False.", "Proof. exact ((fix f (n : nat) : False := f n) 0). Qed."
    # fix is refused as bug-prone unless allowed; allowed, the unguarded fixpoint still fails Print Assumptions
    b = make_backend(extra_args=["-Q", library_dir, "Lib"], allow_bug_prone_features=["fixpoints"])
    assert outcome(b, statement, proof, header) == (Status.INVALID, "axioms")
    assert b.assumption_checks == 1 and "Guard Checking" in b._session.environment.reason


@pytest.mark.rocq
def test_declarations_made_at_start_up_keep_print_assumptions(make_backend, tmp_path):
    startup = tmp_path / "startup.v"
    startup.write_text("Axiom cheat : False.\n")
    b = make_backend(extra_args=["-l", str(startup)])
    assert outcome(b, "Theorem t : False.", "Proof. exact cheat. Qed.", header="") == (Status.INVALID, "axioms")
    assert b.assumption_checks == 1 and b._session.environment.key == ""


@pytest.mark.rocq
def test_without_coqchk_every_proof_gets_print_assumptions(make_backend, tmp_path):
    b = make_backend(coqchk=str(tmp_path / "no-such-coqchk"))
    assert b.census is None
    cases = VALID[:2] + WRONG[:1] + [("Theorem t : False.", "Proof. Admitted.")]
    assert [outcome(b, s, p) for s, p in cases] == [(Status.VALID, "ok")] * 2 + [
        (Status.INVALID, "prover_error"), (Status.INVALID, "banned:Admitted")]
    assert b.assumption_checks == 2


@pytest.mark.rocq
def test_a_census_that_times_out_is_not_cached_and_changes_nothing(make_backend, tmp_path):
    b = make_backend(census_cache_dir=str(tmp_path), census_timeout=0.5)
    assert b.check_proof(task("Theorem t : True.", "Proof. exact I. Qed."), 60).valid
    assert b.census.wait(60)
    assert b.census.result(b._session.environment) is None
    assert not list(tmp_path.glob("census-*.json"))
    assert outcome(b, *VALID[0]) == (Status.VALID, "ok") and b.assumption_checks == 2


@pytest.mark.rocq
def test_workers_take_a_census_once_and_the_others_read_it(make_backend, library_dir, tmp_path):
    """While one worker holds a census's lock the others wait, then read what
    it wrote instead of running coqchk again."""
    header = "Require Import Lib.Plain."
    first = make_backend(census_cache_dir=str(tmp_path), extra_args=["-Q", library_dir, "Lib"])
    assert censused(first, header).clean and first.census.coqchk_runs == 1
    key = first._session.environment.key
    entry = tmp_path / f"census-{key}.json"
    saved = entry.read_text()
    entry.unlink()
    with open(tmp_path / f"census-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)            # a worker busy with this census
        second = make_backend(census_cache_dir=str(tmp_path), extra_args=["-Q", library_dir, "Lib"])
        assert second.check_proof(task("Theorem t : True.", "Proof. exact I. Qed.", header), 60).valid
        assert not second.census.wait(1)             # waiting for the lock
        entry.write_text(saved)                      # what that worker wrote
    assert second.census.wait(60)
    assert second.census.coqchk_runs == 0 and second.census.is_clean(second._session.environment)


@pytest.mark.rocq
def test_an_unreadable_cache_entry_is_taken_again(make_backend, tmp_path):
    first = make_backend(census_cache_dir=str(tmp_path))
    assert censused(first, header="").clean
    entry = next(tmp_path.glob("census-*.json"))
    entry.write_text('{"version": "1", "key": "garbage"')
    again = make_backend(census_cache_dir=str(tmp_path))
    assert censused(again, header="").clean and again.census.coqchk_runs == 1
    assert json.loads(entry.read_text())["key"] == again._session.environment.key


@pytest.mark.rocq
@pytest.mark.slow
def test_audited_proofs_still_run_print_assumptions(make_backend):
    backend = make_backend(census_audit_fraction=1.0)
    censused(backend)
    before = backend.assumption_checks
    assert backend.check_proof(task("Theorem t : forall n, n + 1 = S n.", "Proof. intros. lia. Qed."), 60).valid
    assert backend.assumption_checks == before + 1 and backend.census is not None


@pytest.mark.rocq
def test_an_audit_that_disagrees_rejects_the_proof_and_switches_the_census_off(make_backend, monkeypatch):
    classical = "Require Import Classical_Prop."
    backend = make_backend(census_audit_fraction=1.0)
    # pretend the census wrongly called the Classical environment clean
    monkeypatch.setattr(type(backend.census), "is_clean", lambda self, env: True)
    verdict = backend.check_proof(task("Theorem t : forall P : Prop, P \\/ ~ P.", "Proof. intros. apply classic. Qed.",
                                       classical), 60)
    assert (verdict.status, verdict.reason) == (Status.INVALID, "axioms")
    assert backend.census is None


#: standard-library modules with light censuses, none loading another, so
#: that every set of them is a distinct set of loaded libraries
LIGHT_MODULES = ["Coq.Bool.Bool", "Coq.Logic.Decidable", "Coq.Relations.Relations", "Coq.Program.Basics",
                 "Coq.Bool.Sumbool", "Coq.Logic.Eqdep_dec", "Coq.Sets.Ensembles", "Coq.Unicode.Utf8",
                 "Coq.Program.Tactics", "Coq.Logic.FunctionalExtensionality", "Coq.Sets.Relations_1",
                 "Coq.Logic.Eqdep", "Coq.Logic.ProofIrrelevance"]
#: where the census's coqtop and coqchk run (their scratch directories)
CENSUS_DIRS = ("lean_env-coqtop-census-", "lean_env-census-")


def census_processes() -> dict[int, int]:
    """The census processes this test process started: pid -> niceness."""
    found = {}
    me = psutil.Process()
    for p in me.children(recursive=True):
        try:
            # not census processes: the sandbox's idle wrappers around a session's coqtop, a
            # child of this very process between fork and exec (already in the scratch directory),
            # and ``nice`` itself in the instant before it lowers its priority and execs the prover
            if p.name() in ("unshare", "nice") or "lean_env-init" in p.cmdline() or p.cmdline() == me.cmdline():
                continue
            if os.path.basename(p.cwd()).startswith(CENSUS_DIRS):
                found[p.pid] = p.nice()
        except psutil.Error:
            pass
    return found


def many_header_cases(count: int):
    """``count`` distinct headers, each with its checks: (statement, proof, expected outcome)."""
    sets = itertools.chain.from_iterable(itertools.combinations(LIGHT_MODULES, k) for k in (1, 2, 3))
    for i, modules in enumerate(itertools.islice(sets, count)):
        checks = [(f"Theorem t : forall n : nat, n + {i} = n + {i}.", "Proof. intros. reflexivity. Qed.",
                   (Status.VALID, "ok"))]
        if i % 7 == 0:
            checks.append((f"Theorem t : {i} + 1 = {i}.", "Proof. reflexivity. Qed.", (Status.INVALID, "prover_error")))
        if "Coq.Logic.FunctionalExtensionality" in modules:
            checks.append(("Theorem t : forall f g : nat -> nat, (forall x, f x = g x) -> f = g.",
                           "Proof. intros f g h. apply functional_extensionality. exact h. Qed.",
                           (Status.INVALID, "axioms")))
        if "Coq.Logic.ProofIrrelevance" in modules:
            checks.append(("Theorem t : forall (P : Prop) (p q : P), p = q.",
                           "Proof. intros. apply proof_irrelevance. Qed.", (Status.INVALID, "axioms")))
        yield " ".join(f"Require Import {m}." for m in modules), checks


@pytest.mark.rocq
def test_many_headers_run_a_bounded_number_of_low_priority_censuses(make_backend, tmp_path):
    """100 distinct headers, checked by two workers that share a census cache
    (one census slot): never more than one census process at once, each at
    low priority, and every verdict right."""
    cases = list(many_header_cases(100))
    assert len({header for header, _ in cases}) == 100
    workers = [make_backend(census_cache_dir=str(tmp_path), census_max_concurrent=1) for _ in range(2)]
    seen: dict[int, int] = {}
    most = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal most
        while not done.wait(0.03):
            now = census_processes()
            most = max(most, len(now))
            seen.update(now)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    wrong = []
    try:
        for i, (header, checks) in enumerate(cases + cases[:10]):     # the first ten again, censused by then
            for statement, proof, expected in checks:
                got = outcome(workers[i % 2], statement, proof, header)
                if got != expected:
                    wrong.append((header, proof, got))
    finally:
        done.set()
        sampler.join()
    assert not wrong
    assert seen and most == 1
    own = os.getpriority(os.PRIO_PROCESS, 0)
    assert all(nice >= own + CENSUS_NICE or nice == 19 for nice in seen.values()), seen
