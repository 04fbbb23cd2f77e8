"""Targets traced from real Rocq projects, checked in their own context.

The projects are the five CoqGym developments in ``<repo>/../shared/data/rocq_projects``
(read-only: the tracer builds in a directory of its own).  The normal suite traces
search-trees with ``tools/trace_rocq_targets.py`` as a subprocess, checks a seeded sample
of its targets both ways with real coqtop, and runs the tool and ``python -m sgs`` on bad
input; ``-m full`` traces all five projects and checks every target both ways.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lean_env.rocq.backend import RocqBackend
from lean_env.rocq.config import RocqConfig
from lean_env.rocq.load_path import LoadPathError, parse_load_path
from lean_env.rocq.session import RocqSession
from lean_env.verdict import ProofTask, Status
from sgs.state.rocq_declarations import find_declarations
from tests.paths import REPO

PROJECTS = REPO.parent / "shared" / "data" / "rocq_projects"
TOOL = REPO / "tools" / "trace_rocq_targets.py"

#: per project: targets traced, and the declarations skipped per reason (docs/rocq_projects.md)
EXPECTED = {
    "search-trees": (33, {"human proof fails at the top level": 13, "proof refused": 3}),
    "group-theory": (48, {"needs axioms": 25, "human proof fails at the top level": 11,
                          "a section Let proved by tactics": 10, "proof given as a term": 2}),
    "constructive-geometry": (3, {"needs axioms": 91, "a section Let proved by tactics": 1}),
    "propcalc": (4, {"needs axioms": 57, "proof refused": 5}),
    "generic-environments": (2, {"needs axioms": 244, "proof given as a term": 12,
                                 "human proof fails at the top level": 9, "proof refused": 2}),
}
#: the same with --allow-project-axioms
EXPECTED_WITH_PROJECT_AXIOMS = {
    "search-trees": EXPECTED["search-trees"],
    "group-theory": (71, {"human proof fails at the top level": 11, "a section Let proved by tactics": 10,
                          "proof given as a term": 2, "needs axioms": 2}),
    "constructive-geometry": (94, {"a section Let proved by tactics": 1}),
    "propcalc": (55, {"human proof fails at the top level": 6, "proof refused": 5}),
    "generic-environments": (244, {"human proof fails at the top level": 11, "proof given as a term": 12,
                                   "proof refused": 2}),
}


def needs_projects() -> None:
    if not PROJECTS.is_dir():
        pytest.skip(f"the Rocq test projects are not here: {PROJECTS} (the shared folder sits beside the checkout)")


def run(argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "disabled"}
    return subprocess.run(argv, cwd=REPO, env=environment, capture_output=True, text=True, timeout=timeout)


def trace(project: Path, out: Path, build_dir: Path, *options: str) -> subprocess.CompletedProcess:
    return run([sys.executable, str(TOOL), str(project), "--out", str(out), "--build-dir", str(build_dir), *options])


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def task(row: dict, proof: str) -> ProofTask:
    return ProofTask(row["id"], row["header"], row["statement"], proof, tuple(tuple(e) for e in row["load_path"]))


def reason_counts(skipped: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in skipped:
        reason = row["reason"].split(":")[0]
        counts[reason] = counts.get(reason, 0) + 1
    return counts


#: proofs of none of the traced statements: one that leaves the goal open, one that is refused
WRONG_PROOFS = ("Proof.\nidtac.\nQed.", "Proof.\nAdmitted.")


def check_both_ways(targets: list[dict], allowed_axioms: tuple[str, ...] = ()) -> list[str]:
    """Each target with its own human proof (must be valid) and with the wrong
    proofs (must be invalid); the failures, in words."""
    failures = []
    with RocqBackend(RocqConfig(spare=False, allowed_axioms=allowed_axioms)) as backend:
        for row in targets:
            verdict = backend.check_proof(task(row, row["proof"]), 120)
            if verdict.status is not Status.VALID:
                failures.append(f"{row['id']}: human proof {verdict.status.value} {verdict.reason} {verdict.messages}")
            for wrong in WRONG_PROOFS:
                verdict = backend.check_proof(task(row, wrong), 120)
                if verdict.status is not Status.INVALID:
                    failures.append(f"{row['id']}: {wrong!r} {verdict.status.value} {verdict.reason}")
    return failures


@pytest.fixture(scope="module")
def search_trees(tmp_path_factory, require_rocq):
    """search-trees traced by the tool (about 10-20 s here, most of it the build)."""
    needs_projects()
    folder = tmp_path_factory.mktemp("search-trees")
    out = folder / "targets.jsonl"
    proc = trace(PROJECTS / "search-trees", out, folder / "build")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, out, folder / "build"


def test_search_trees_is_traced_with_its_counts(search_trees):
    proc, out, build = search_trees
    targets, skipped = rows(out), rows(out.with_name("targets.skipped.jsonl"))
    count, reasons = EXPECTED["search-trees"]
    assert (len(targets), reason_counts(skipped)) == (count, reasons)
    assert "Make: not used: -extra test extraction.vo" in proc.stderr   # the old rule is reported and skipped
    assert proc.stdout.startswith(f"wrote {count} targets (")
    by_id = {t["id"]: t for t in targets}
    insert = by_id["SearchTrees.Adding.insert_l"]
    assert insert["statement"].startswith("Lemma insert_l") and insert["proof"].startswith("Proof.")
    assert insert["load_path"] == [["-R", str(build), "SearchTrees"]]
    assert insert["project"]["dir"] == str(build) and len(insert["project"]["digest"]) == 64
    assert insert["source"] == {"project": str((PROJECTS / "search-trees").resolve()), "file": "Adding.v",
                                "line": insert["source"]["line"]}
    for target in targets:
        text = (PROJECTS / "search-trees" / target["source"]["file"]).read_text(encoding="utf-8")
        if "context" in target:
            # in a section: the file before the declaration, then the section closed
            # (then the section's hints about none of its variables, which ended with it)
            assert target["context"].startswith("section ")
            before = target["header"][:target["header"].rindex("\nEnd " + target["context"][8:] + ".\n")]
            # ... up to the declaration's own line (its proof may be the same text as an earlier one's)
            keyword, name = target["statement"].split()[0], target["id"].rsplit(".", 1)[1]
            assert text.startswith(before) and text[len(before):].lstrip().startswith(f"{keyword} {name}")
        else:
            # the header is exactly the file before the declaration: nothing of it or after it
            assert text.startswith(target["header"]) and text[len(target["header"]):].startswith(target["statement"])
            assert target["proof"] not in target["header"]
    # held out by file: every file's targets are all held out or none are
    held = {}
    for target in targets:
        held.setdefault(target["source"]["file"], set()).add(target["held_out"])
    assert all(len(flags) == 1 for flags in held.values()) and any(True in f for f in held.values())
    refused = {s["id"]: s["reason"] for s in skipped if s["reason"].startswith("proof refused")}
    assert refused == {"SearchTrees.Adding.insert": "proof refused: known_bug:fixpoints",
                       "SearchTrees.List2Trees.list2trees": "proof refused: banned:Lemma",
                       "SearchTrees.Searching.sch": "proof refused: banned:Hint"}


def test_a_sample_round_trips(search_trees):
    """Human proofs valid, wrong proofs invalid, the audit agrees, in a coqtop
    started with the project's load path (the whole project: ``-m full``)."""
    _, out, _ = search_trees
    targets = rows(out)
    sample = random.Random(0).sample(targets, 5)
    assert check_both_ways(sample) == []
    with RocqBackend(RocqConfig(spare=False)) as backend:
        audited = backend.audit(task(sample[0], sample[0]["proof"]), 120)
    assert audited.status is Status.VALID, audited


def test_the_axiom_census_covers_project_headers(search_trees, tmp_path):
    """A project header's own declarations are compiled and re-checked by
    the census, so proofs under a clean one skip Print Assumptions; an axiom
    of the header's own is found, and proofs under it keep the query.  The
    libraries' census is taken once for both headers."""
    _, out, _ = search_trees
    [row] = [t for t in rows(out) if t["id"] == "SearchTrees.Adding.insert_l"]
    with_axiom = dict(row, header=row["header"] + "\nAxiom cheat : False.\n", statement="Lemma uses_cheat : False.")
    config = RocqConfig(spare=False, census_cache_dir=str(tmp_path), census_audit_fraction=0.0)
    with RocqBackend(config) as backend:
        assert backend.check_proof(task(row, row["proof"]), 120).valid
        assert backend.census.wait(900)
        environment = backend._session.environment
        assert environment.header and environment.load_path == ("-R", row["load_path"][0][1], "SearchTrees")
        assert backend.census.result(environment).clean
        before = backend.assumption_checks
        assert backend.check_proof(task(row, row["proof"].replace("Proof.", "Proof.\nidtac.", 1)), 120).valid
        assert backend.assumption_checks == before

        assert backend.check_proof(task(with_axiom, "Proof. exact cheat. Qed."), 120).reason == "axioms"
        assert backend.census.wait(900)
        census = backend.census.result(backend._session.environment)
        assert census.axioms == ("SgsCensus.Header.cheat",) and census.unsafe == ()
        assert backend._session.environment.library_key == environment.library_key
        assert backend.census.coqchk_runs == 3   # the libraries once, each header once
        before = backend.assumption_checks
        clean_proof = task(dict(with_axiom, statement="Lemma t : True."), "Proof. exact I. Qed.")
        assert backend.check_proof(clean_proof, 120).valid and backend.assumption_checks == before + 1
        assert backend.check_proof(task(with_axiom, "Proof.\nexact cheat.\nQed."), 120).reason == "axioms"


def test_python_m_sgs_refuses_targets_of_another_project_version(tmp_path, require_rocq):
    project = tmp_path / "project"
    project.mkdir()
    (project / "_CoqProject").write_text("-R . Tiny\nA.v\n")
    (project / "A.v").write_text("Definition two := 2.\nLemma two_is_two : two = 2.\nProof. reflexivity. Qed.\n")
    build = tmp_path / "build"
    assert trace(project, tmp_path / "old.jsonl", build).returncode == 0
    [target] = rows(tmp_path / "old.jsonl")
    assert check_both_ways([target]) == []
    # the project changes and is traced again into the same build directory
    (project / "A.v").write_text("Definition two := 1 + 1.\nLemma two_is_two : two = 2.\nProof. reflexivity. Qed.\n")
    assert trace(project, tmp_path / "new.jsonl", build).returncode == 0
    command = [sys.executable, "-m", "sgs", "iterations=1", f"run_dir={tmp_path / 'run'}"]
    old = run([*command, f"targets.source={tmp_path / 'old.jsonl'}"], timeout=300)
    assert old.returncode == 2, old.stderr[-2000:]
    assert "was traced from another version of the project" in old.stderr and "Traceback" not in old.stderr
    shutil.rmtree(build)
    gone = run([*command, f"targets.source={tmp_path / 'new.jsonl'}"], timeout=300)
    assert gone.returncode == 2 and "does not exist" in gone.stderr, gone.stderr[-2000:]


def tiny_project(root: Path, text: str) -> Path:
    root.mkdir()
    (root / "_CoqProject").write_text("-R . Bad\nGood.v\nBad.v\n")
    (root / "Good.v").write_text("Lemma fine : True.\nProof. exact I. Qed.\n")
    (root / "Bad.v").write_text(text)
    return root


@pytest.mark.parametrize("make, message", [
    (lambda tmp: tmp, "is not a Rocq project: it has no _CoqProject or Make file"),
    (lambda tmp: tiny_project(tmp / "p", "Require Import Bad.Good.\nLemma oops : True.\nProof. exact 0. Qed.\n"),
     "does not build (1 of 2 files failed): Bad.v: line 3: Error: "),
    (lambda tmp: tiny_project(tmp / "p", "Lemma oops : True.\nProof. exact I. Qed.\n(* a comment never closed\n"),
     "does not build (1 of 2 files failed): Bad.v: line 4: Error: Syntax Error: Lexer: Unterminated comment"),
])
def test_bad_projects_are_one_clear_error_and_nothing_is_written(tmp_path, make, message, require_rocq):
    out = tmp_path / "out" / "targets.jsonl"
    out.parent.mkdir()
    out.write_text("earlier\n")
    proc = trace(make(tmp_path), out, tmp_path / "build")
    assert proc.returncode == 2, proc.stderr[-2000:]
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("trace_rocq_targets: error:")]
    assert message in line and "Traceback" not in proc.stderr
    assert out.read_text() == "earlier\n" and sorted(p.name for p in out.parent.iterdir()) == ["targets.jsonl"]


def test_declarations_and_their_skip_reasons():
    found, skipped = find_declarations(
        "Lemma a : True.\nProof. exact I. Qed.\n"
        "Lemma b : True.\n exact I.\nDefined.\n"                         # no Proof.: it is added
        "Lemma c : True := I.\n"
        "Section S.\nVariable n : nat.\nLemma d : n = n.\nProof. reflexivity. Qed.\nEnd S.\n"
        "Module M.\nLemma e : True.\nProof. exact I. Qed.\nEnd M.\n"
        "Module Type T.\nLemma f : True.\nProof. exact I. Qed.\nEnd T.\n"
        "Lemma g : True.\nProof.\nAdmitted.\n"
        "Local Lemma h : True.\nProof. exact I. Qed.\n"
        "Lemma i : let x := 1 in x = x.\nProof. reflexivity. Qed.\n"      # a let is not a term proof
        "Theorem j : True.\nProof.\n Lemma inner : True. Proof. exact I. Qed.\n exact inner.\nQed.\n")
    assert [(d.name, d.line, d.proof) for d in found] == [
        ("a", 1, "Proof. exact I. Qed."), ("b", 3, "Proof.\nexact I.\nDefined."),
        ("d", 9, "Proof. reflexivity. Qed."), ("e", 13, "Proof. exact I. Qed."), ("f", 17, "Proof. exact I. Qed."),
        ("i", 25, "Proof. reflexivity. Qed."),
        ("j", 27, "Proof.\n Lemma inner : True. Proof. exact I. Qed.\n exact inner.\nQed.")]
    # in blocks: checked at the top level (tests/e2e/test_rocq_trace_blocks.py has the details)
    assert [(d.name, d.context) for d in found if d.generalised] == [
        ("d", "section S"), ("e", "module M"), ("f", "module type T")]
    assert [(s.name, s.reason) for s in skipped] == [
        ("c", "proof given as a term"), ("g", "not proved (Admitted)"), ("h", "attributes or a locality")]


@pytest.mark.parametrize("value, message", [
    ([["-I", "/tmp", "A"]], "flag '-I' is not one of -R, -Q"),
    ([["-R", "relative", "A"]], "must be an absolute path"),
    ([["-R", "/no/such/folder", "A"]], "does not exist"),
    ([["-R", "/tmp", "A..B"]], "is not Coq identifiers separated by dots"),
    ([["-R", "/tmp", "-top"]], "is not Coq identifiers separated by dots"),
    ([["-R", "/tmp", "Coq.Init"]], "may not start with 'Coq'"),
    ([["-R", "/tmp", "Top"]], "may not start with 'Top'"),
    ([["-R", "/tmp"]], "must be [flag, directory, name] strings"),
    ("-R /tmp A", "must be a list"),
])
def test_a_load_path_is_checked_as_hostile_input(value, message):
    with pytest.raises(LoadPathError, match=None) as raised:
        parse_load_path(value)
    assert message in str(raised.value)


def test_a_bad_load_path_is_a_system_error_and_part_of_the_key(require_rocq):
    plain = ProofTask("t", "", "Lemma t : True.", "Proof. exact I. Qed.")
    bound = ProofTask("t", "", "Lemma t : True.", "Proof. exact I. Qed.", (("-R", "/no/such/folder", "A"),))
    assert plain.key("v") != bound.key("v")
    with RocqBackend(RocqConfig(spare=False, axiom_census=False)) as backend:
        verdict = backend.check_proof(bound, 30)
    assert (verdict.status, verdict.reason) == (Status.SYSTEM_ERROR, "load_path")


def test_a_session_moves_forward_between_prefix_headers(require_rocq):
    """Entering a longer header runs only the new sentences; entering a
    shorter one goes back, and what came after it is gone."""
    config = RocqConfig()
    session = RocqSession(config.argv(), env=config.child_env(), limits=config.limits(), name="coqtop")
    sent: list[str] = []
    run = session.run

    def counting(sentence: str, deadline: float):
        sent.append(sentence)
        return run(sentence, deadline)

    session.run = counting
    try:
        import time
        deadline = time.monotonic() + 60
        session.wait_ready(deadline)
        first = ("Definition a := 1.", "Definition b := a.")
        assert session.enter(first, deadline) is None
        assert session.enter((*first, "Definition c := b."), deadline) is None
        assert sent == [*first, "Definition c := b."]
        sent.clear()
        assert session.enter(first, deadline) is None
        assert [s for s in sent if not s.startswith("BackTo")] == []
        assert not session.run("Check c.", deadline).ok and session.run("Check b.", deadline).ok
        sent.clear()
        assert session.enter(("Definition a := 1.", "Definition z := a."), deadline) is None
        assert [s for s in sent if not s.startswith("BackTo")] == ["Definition z := a."]
        assert not session.run("Check b.", deadline).ok
    finally:
        session.kill()


@pytest.mark.full
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_traced_target_round_trips(name, tmp_path, require_rocq):
    """All five projects traced, by default and with --allow-project-axioms,
    their counts as in docs/rocq_projects.md, and every target checked both
    ways: those without ``allowed_axioms`` (every default target) with no axiom
    allowed, the others with the setting the tool prints (see the docs for
    the time it takes)."""
    needs_projects()
    out = tmp_path / "targets.jsonl"
    proc = trace(PROJECTS / name, out, tmp_path / "build")
    assert proc.returncode == 0, proc.stderr[-3000:]
    targets, skipped = rows(out), rows(out.with_name("targets.skipped.jsonl"))
    assert (len(targets), reason_counts(skipped)) == EXPECTED[name]
    assert all("allowed_axioms" not in t for t in targets)
    proc = trace(PROJECTS / name, out, tmp_path / "build", "--allow-project-axioms")
    assert proc.returncode == 0, proc.stderr[-3000:]
    targets, skipped = rows(out), rows(out.with_name("targets.skipped.jsonl"))
    assert (len(targets), reason_counts(skipped)) == EXPECTED_WITH_PROJECT_AXIOMS[name]
    plain = [t for t in targets if "allowed_axioms" not in t]
    relying = [t for t in targets if "allowed_axioms" in t]
    allowed = tuple(sorted({name for t in relying for name in t["allowed_axioms"]}))
    assert (f"prover.allowed_axioms=[{','.join(allowed)}]" in proc.stdout) == bool(relying)
    assert len(plain) == EXPECTED[name][0]
    assert check_both_ways(plain) == []
    assert check_both_ways(relying, allowed) == []


def test_a_long_header_shows_its_end_in_the_solver_prompt():
    from sgs.method.roles.render import HEADER_OMITTED, MAX_PROMPT_HEADER_CHARS, PromptSet, prompt_header

    header = "".join(f"Definition d{i} := {i}.\n" for i in range(500))
    shown = prompt_header(header)
    assert shown.startswith(HEADER_OMITTED + "\nDefinition d") and shown.endswith("Definition d499 := 499.")
    assert len(shown) <= len(HEADER_OMITTED) + 1 + MAX_PROMPT_HEADER_CHARS
    assert prompt_header("Require Import Arith.\n") == "Require Import Arith."
    assert "Definition d0 :=" not in PromptSet("rocq").solver(header, "Lemma t : d499 = 499.")
