"""Targets from LeanDojo data (:mod:`sgs.state.leandojo`): a LeanDojo Benchmark 4
file and a traced file built from lean_dojo's own classes, both over the small
Lean project in ``tests/data/leandojo/demo``; the ``targets.source`` loader;
``tools/trace_targets.py`` and ``python -m sgs`` as subprocesses.

No Lean runs here: the fixture's positions are checked against lean_dojo's
``LeanFile`` slicing, and the traced theorems are lean_dojo ``TracedTheorem``
objects over AST nodes built the way its tracer builds them; only the
repository objects (which reach GitHub when made) are stand-ins."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from lean_env.lean.checks import mask_comments_and_literals
from sgs.config import TargetsConfig
from sgs.state.leandojo import (LeanSourceFile, LeanTarget, Skipped, collect, convert, convert_benchmark,
                                traced_theorem_source)
from sgs.state.targets import TargetError, read_targets
from tests.paths import DATA as TEST_DATA
from tests.paths import REPO

DATA = TEST_DATA / "leandojo"
CHECKOUT = DATA / "demo"
BENCHMARK = DATA / "benchmark4_demo.json"
TOOL = REPO / "tools" / "trace_targets.py"

HEADER = "import Mathlib.Data.Nat.Defs\nimport Demo.Defs\n\nopen Nat\nuniverse u\nvariable {α : Type u}\n"
#: what the demo project's theorems become
EXPECTED = {
    "Demo.double_eq_add": (HEADER, "theorem Demo.double_eq_add (n : ℕ) : double n = n + n := by"),
    "Demo.add_zero'": (HEADER, "theorem Demo.add_zero' (n : ℕ) : n + 0 = n := by"),
    "Demo.zero_add'": (HEADER, "theorem Demo.zero_add' (n : ℕ) :\n    0 + n = n := by"),
    "Demo.length_self": (HEADER, "theorem Demo.length_self (l : List α) : l.length = l.length := by"),
    "Demo.let_in_type": (HEADER, "theorem Demo.let_in_type (x : ℕ) :\n    let y := x + 1\n    y = x + 1 := by"),
    "Demo.card_range": (HEADER + "open Finset\n", "theorem Demo.card_range (n : ℕ) : (range n).card = n := by"),
    "le_succ_self'": (HEADER.replace("variable {α : Type u}", "variable (m : ℕ)"),
                      "theorem le_succ_self' : m ≤ m + 1 := by"),
    "abs_self_eq": (HEADER.replace("variable {α : Type u}\n", ""), "theorem abs_self_eq (a : ℤ) :\n    |a| = |a| := by"),
}
#: the theorems that cannot be stated on their own, and why
EXPECTED_SKIPS = {
    "Demo.triple_zero": "file_local_name", "Demo.mul_zero_eqns": "no_statement", "Demo.two_pos": "file_local_notation",
    "Demo.triple": "not_a_theorem", "Demo.renamed_since": "name_mismatch", "Demo.gone": "source_missing",
    "Demo.past_the_end": "bad_position",
}


def entries() -> list[dict]:
    return json.loads(BENCHMARK.read_text(encoding="utf-8"))


def as_table(targets: list[LeanTarget]) -> dict[str, tuple[str, str]]:
    return {t.id: (t.header, t.theorem) for t in targets}


# -- the conversion -----------------------------------------------------------------------------


def test_the_fixture_positions_are_lean_dojo_positions():
    """Each entry's span, cut by lean_dojo's own ``LeanFile[start:end]``, is the declaration it
    names, and :class:`LeanSourceFile` reads the same (line, column) convention."""
    lean_dojo = pytest.importorskip("lean_dojo")
    lean_file = lean_dojo.LeanFile(CHECKOUT.resolve(), Path("Demo/Basic.lean"))
    ours = LeanSourceFile((CHECKOUT / "Demo/Basic.lean").read_text(encoding="utf-8"))
    checked = 0
    for entry in entries():
        if entry["full_name"] in ("Demo.gone", "Demo.past_the_end"):
            continue
        span = lean_file[lean_dojo.Pos(*entry["start"]):lean_dojo.Pos(*entry["end"])]
        assert ours.text[ours.offset(*entry["start"]):ours.offset(*entry["end"])] == span
        assert entry["full_name"].rpartition(".")[2] in span or entry["full_name"] == "Demo.renamed_since"
        checked += 1
    assert checked == 13


def test_benchmark_entries_become_targets():
    targets, skipped = convert_benchmark(entries(), str(BENCHMARK), CHECKOUT)
    assert as_table(targets) == EXPECTED
    assert {s.full_name: s.reason for s in skipped} == EXPECTED_SKIPS
    [local] = [s for s in skipped if s.reason == "file_local_name"]
    assert "`triple`" in local.detail
    first = next(t for t in targets if t.id == "Demo.double_eq_add")
    assert first.to_json()["url"] == "https://github.com/example/demo" and first.location.start == (20, 1)


def test_only_sorry_keeps_the_theorems_left_unproved():
    targets, skipped = convert_benchmark(entries(), str(BENCHMARK), CHECKOUT, only_sorry=True)
    assert [t.id for t in targets] == ["Demo.add_zero'", "Demo.card_range"]
    assert sum(s.reason == "no_sorry" for s in skipped) == 8


def test_hostile_and_malformed_entries():
    good = entries()[0]
    escaping = {**good, "file_path": "../../etc/passwd.lean"}
    targets, skipped = convert_benchmark([good, good, escaping], "f.json", CHECKOUT)
    assert [t.id for t in targets] == ["Demo.double_eq_add"]
    assert [s.reason for s in skipped] == ["duplicate_id", "bad_file_path"]
    with pytest.raises(ValueError, match=r"f.json entry 1: field 'start' must be \[line, column\]"):
        convert_benchmark([good, {**good, "start": "20:1"}], "f.json", CHECKOUT)
    with pytest.raises(ValueError, match="f.json entry 0: not a LeanDojo Benchmark 4 entry"):
        convert_benchmark([{"id": "x", "header": "", "theorem": "theorem x : True := by"}], "f.json", CHECKOUT)


def convert_text(text: str, full_name: str, only_sorry: bool = False) -> LeanTarget | Skipped:
    """Convert the declaration on the last line that starts with a keyword of ``text``."""
    from sgs.state.leandojo import TheoremLocation, TheoremSource

    lines = text.split("\n")
    start = max(i for i, line in enumerate(lines) if line.startswith(("theorem", "lemma", "private", "@[")))
    location = TheoremLocation("u", "c", "A.lean", full_name, (start + 1, 1), (len(lines), len(lines[-1]) + 1))
    return convert(TheoremSource(location, LeanSourceFile(text)), only_sorry)


@pytest.mark.parametrize("text, full_name, expected", [
    ("import A\nnamespace N\nprivate theorem secret : True := trivial", "_private.A.0.N.secret",
     "theorem N.secret : True := by"),
    ("import A\nnamespace N\ntheorem _root_.top : True := by trivial", "top", "theorem top : True := by"),
    ("import A\ntheorem w : Inhabited Nat where\n  default := 0", "w", "no_statement"),
    ("import A\nmutual\ntheorem m : True := by trivial", "m", "mutual_block"),
    ("prelude\ntheorem p : True := by trivial", "p", "prelude_file"),
    ("import A\ntheorem c (h : \"a -- b\" = s) :\n    True := -- why\n  by trivial", "c",
     'theorem c (h : "a -- b" = s) :\n    True := by'),
    ("import A\ntheorem s (n : Nat) : n = n := by\n  sorry", "s", "theorem s (n : Nat) : n = n := by"),
])
def test_conversion_rules(text, full_name, expected):
    result = convert_text(text, full_name)
    assert (result.theorem if isinstance(result, LeanTarget) else result.reason) == expected


def test_sorry_counts_only_as_a_token_of_the_proof():
    assert convert_text("import A\ntheorem s : True := by\n  exact sorry_free", "s", only_sorry=True).reason == "no_sorry"
    assert convert_text("import A\ntheorem s : True := by\n  -- sorry\n  trivial", "s", True).reason == "no_sorry"
    assert isinstance(convert_text("import A\ntheorem s : True := by\n  sorry", "s", True), LeanTarget)


def test_masking_comments_only_keeps_literals():
    text = 'theorem x : "a -- b" = s -- note\n  /- c -/ := by'
    assert mask_comments_and_literals(text, literals=False).code == (
        'theorem x : "a -- b" = s        \n          := by')
    assert '"' not in mask_comments_and_literals(text).code


# -- traced theorems, from lean_dojo's classes ------------------------------------------------------


class RepoStandIn:
    """TEST DOUBLE for ``lean_dojo.LeanGitRepo``, whose constructor asks GitHub about the
    repository: only the two fields a traced theorem reads."""

    url = "https://github.com/example/demo"
    commit = "0123456789abcdef0123456789abcdef01234567"


def traced_file():
    """A lean_dojo ``TracedFile`` of ``Demo/Basic.lean`` with the AST its tracer builds for the
    declarations (positions from the benchmark fixture; each proof where its text begins)."""
    ast = pytest.importorskip("lean_dojo.data_extraction.ast")
    lean_dojo = pytest.importorskip("lean_dojo")
    root = CHECKOUT.resolve()
    lean_file = lean_dojo.LeanFile(root, Path("Demo/Basic.lean"))
    text = (CHECKOUT / "Demo/Basic.lean").read_text(encoding="utf-8")
    proof_text = {"Demo.double_eq_add": "by\n  unfold", "Demo.add_zero'": "by\n  sorry", "Demo.zero_add'": "Nat.zero_add",
                  "Demo.length_self": "rfl", "Demo.triple_zero": "by\n  simp", "Demo.let_in_type": "by\n  intro",
                  "Demo.mul_zero_eqns": "| 0", "Demo.card_range": "by\n  sorry", "Demo.two_pos": "by\n  decide",
                  "le_succ_self'": "by omega", "abs_self_eq": "by\n  rfl"}
    lines = text.split("\n")

    def pos(index: int):
        line = text.count("\n", 0, index)
        return lean_dojo.Pos(line + 1, index - sum(len(l) + 1 for l in lines[:line]) + 1)

    def node(cls, start, end, children=(), **fields):
        return cls(lean_file, start, end, list(children), **fields)

    declarations = []
    for entry in entries()[:11]:
        full_name = entry["full_name"]
        start, end = lean_dojo.Pos(*entry["start"]), lean_dojo.Pos(*entry["end"])
        begin = sum(len(l) + 1 for l in lines[:start.line_nb - 1])
        proof_at = text.index(proof_text[full_name], begin)
        keyword = "lemma" if full_name == "Demo.zero_add'" else "theorem"
        atom = node(ast.AtomNode, start, start, leading="", trailing=" ", val=keyword)
        if proof_text[full_name].startswith("|"):
            value = node(ast.CommandDeclvaleqnsNode, pos(proof_at), end)
        else:
            assign = text.rindex(":=", begin, proof_at)
            value = node(ast.CommandDeclvalsimpleNode, pos(assign), end,
                         [node(ast.AtomNode, pos(assign), pos(assign + 2), leading="", trailing=" ", val=":="),
                          node(ast.TermBytacticNode, pos(proof_at), end)])
        parts = [atom, node(ast.CommandDeclidNode, None, None), node(ast.CommandDeclsigNode, None, None), value]
        short = full_name.rpartition(".")[2]
        if keyword == "lemma":  # Mathlib's `lemma`: declModifiers, then the group the keyword opens
            declaration = node(ast.MathlibTacticLemmaNode, start, end,
                               [node(ast.CommandDeclmodifiersNode, start, start),
                                node(ast.GroupNode, None, None, parts)], name=short, full_name=full_name)
        else:
            declaration = node(ast.CommandTheoremNode, start, end, parts, name=short, full_name=full_name)
        declarations.append(declaration)
    file_node = node(ast.FileNode, lean_file.start_pos, lean_file.end_pos, declarations)
    stand_in = SimpleNamespace(repo=RepoStandIn(), dependencies={})
    return lean_dojo.TracedFile(root, RepoStandIn(), lean_file, file_node, [], traced_repo=stand_in)


def test_traced_theorems_become_the_same_targets():
    """lean_dojo's ``TracedFile.get_traced_theorems()`` and ``TracedTheorem.locate_proof()`` give
    the proof's start; the targets equal the benchmark path's (which scans for the `:=`)."""
    traced = traced_file()
    theorems = traced.get_traced_theorems()
    assert len(theorems) == 11
    file = LeanSourceFile("\n".join(traced.lean_file.code))
    targets, skipped = collect(convert(traced_theorem_source(t, file)) for t in theorems)
    assert as_table(targets) == EXPECTED
    assert {s.full_name: s.reason for s in skipped} == {
        name: reason for name, reason in EXPECTED_SKIPS.items() if name in
        ("Demo.triple_zero", "Demo.mul_zero_eqns", "Demo.two_pos")}


# -- the targets.source loader -----------------------------------------------------------------------


def test_the_loader_reads_a_benchmark_file_with_its_checkout():
    found = read_targets(TargetsConfig(source=str(BENCHMARK), lean_repo_dir=str(CHECKOUT)), "lean")
    assert [t.id for t in found.targets] == list(EXPECTED)
    assert {t.id: (t.header, t.statement) for t in found.targets} == EXPECTED
    assert found.kind == "LeanDojo Benchmark 4 entries" and len(found.skipped) == len(EXPECTED_SKIPS)
    assert "8 (0 held out)" in found.summary(str(BENCHMARK)) and "7 entries skipped" in found.summary("x")
    limited = read_targets(TargetsConfig(source=str(BENCHMARK), lean_repo_dir=str(CHECKOUT), limit=2), "lean")
    assert [t.id for t in limited.targets] == ["Demo.double_eq_add", "Demo.add_zero'"]


def test_the_tool_output_is_a_target_file(tmp_path):
    targets, _ = convert_benchmark(entries(), str(BENCHMARK), CHECKOUT)
    out = tmp_path / "demo.targets.jsonl"
    out.write_text("".join(json.dumps(t.to_json()) + "\n" for t in targets), encoding="utf-8")
    found = read_targets(TargetsConfig(source=str(out)), "lean")
    assert {t.id: (t.header, t.statement) for t in found.targets} == EXPECTED and found.kind == "targets"


@pytest.mark.parametrize("config, language, message", [
    ({}, "lean", "is a LeanDojo Benchmark 4 file, whose entries hold no statement text; set targets.lean_repo_dir"),
    ({"lean_repo_dir": "/no/such/dir"}, "lean", "targets.lean_repo_dir='/no/such/dir' is not a directory"),
    ({"lean_repo_dir": str(CHECKOUT)}, "rocq", "LeanDojo Benchmark 4 entries hold Lean theorems"),
])
def test_the_loader_names_what_is_missing(config, language, message):
    with pytest.raises(TargetError) as error:
        read_targets(TargetsConfig(source=str(BENCHMARK), **config), language)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_file_of_the_wrong_shape_is_one_line(tmp_path):
    binary = tmp_path / "bad.json"
    binary.write_bytes(b"\xff\xfe[")
    with pytest.raises(TargetError, match=r"bad.json: not UTF-8 text"):
        read_targets(TargetsConfig(source=str(binary)), "lean")
    mixed = tmp_path / "mixed.json"
    mixed.write_text(json.dumps([entries()[0], {"id": "x"}]))
    with pytest.raises(TargetError, match=r"mixed.json entry 1: not a LeanDojo Benchmark 4 entry"):
        read_targets(TargetsConfig(source=str(mixed), lean_repo_dir=str(CHECKOUT)), "lean")
    nothing = tmp_path / "nothing.json"
    nothing.write_text(json.dumps([e for e in entries() if e["full_name"] in EXPECTED_SKIPS]))
    with pytest.raises(TargetError, match=r"holds no targets \(7 entries skipped: "):
        read_targets(TargetsConfig(source=str(nothing), lean_repo_dir=str(CHECKOUT)), "lean")


# -- the commands, as subprocesses ---------------------------------------------------------------------


def run(argv: list[str], timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "disabled", **env}
    return subprocess.run(argv, cwd=REPO, env=environment, capture_output=True, text=True, timeout=timeout)


def test_trace_without_lean_fails_fast_naming_what_is_missing(tmp_path):
    if shutil.which("lake"):
        pytest.skip("a Lean toolchain is installed here: tracing would start")
    proc = run([sys.executable, str(TOOL), "https://github.com/example/demo", "main", "--out", str(tmp_path / "t.jsonl")])
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.splitlines()
    assert line.startswith("trace_targets: error: cannot trace https://github.com/example/demo here: missing ")
    assert "`lake` is not on PATH" in line and "--from-benchmark FILE --source-dir CHECKOUT" in line
    assert not (tmp_path / "t.jsonl").exists()


@pytest.mark.parametrize("argv, message", [
    ([], "give REPO and COMMIT to trace, or --from-benchmark FILE --source-dir CHECKOUT"),
    (["https://github.com/example/demo"], "give REPO and COMMIT"),
    (["/no/such/repo", "main"], "REPO '/no/such/repo' is neither a Git URL nor a local Git repository"),
    (["--from-benchmark", str(BENCHMARK)], "--from-benchmark needs --source-dir CHECKOUT"),
    (["--from-benchmark", "/no/such.json", "--source-dir", str(CHECKOUT)], "--from-benchmark /no/such.json: no such file"),
    (["x", "y", "--from-benchmark", str(BENCHMARK), "--source-dir", str(CHECKOUT)], "not both"),
    (["--from-benchmark", str(BENCHMARK), "--source-dir", str(CHECKOUT), "--bogus"], "unrecognized arguments: --bogus"),
    (["--from-benchmark", str(REPO / "pyproject.toml"), "--source-dir", str(CHECKOUT)], "pyproject.toml: not valid JSON"),
])
def test_usage_errors_are_one_line_and_exit_2(argv, message):
    proc = run([sys.executable, str(TOOL), *argv])
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.splitlines()
    assert message in line and "Traceback" not in proc.stderr


def test_the_tool_converts_a_benchmark_file(tmp_path):
    out = tmp_path / "demo.jsonl"
    proc = run([sys.executable, str(TOOL), "--from-benchmark", str(BENCHMARK), "--source-dir", str(CHECKOUT),
                "--out", str(out)])
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert {r["id"]: (r["header"], r["theorem"]) for r in rows} == EXPECTED
    assert all(r["commit"] == RepoStandIn.commit and r["file_path"] == "Demo/Basic.lean" for r in rows)
    listed = [json.loads(line) for line in (tmp_path / "demo.skipped.jsonl").read_text().splitlines()]
    assert {r["full_name"]: r["reason"] for r in listed} == EXPECTED_SKIPS
    assert proc.stdout.splitlines()[-1].startswith(f"wrote 8 targets to {out}; skipped 7 (")
    sorry = run([sys.executable, str(TOOL), "--from-benchmark", str(BENCHMARK), "--source-dir", str(CHECKOUT),
                 "--out", str(tmp_path / "sorry.jsonl"), "--only-sorry"])
    assert sorry.returncode == 0, sorry.stderr
    assert [json.loads(line)["id"] for line in (tmp_path / "sorry.jsonl").read_text().splitlines()] == [
        "Demo.add_zero'", "Demo.card_range"]
    assert sorry.stdout.rstrip().endswith("; 8 theorems without `sorry` left out")


def test_python_m_sgs_reads_a_benchmark_file_before_anything_starts(tmp_path):
    """The README's command: the targets are read and counted, then the paper setting stops at the
    requirements check (no GPU, no Lean here), before Ray; without a checkout, one line and exit 2."""
    command = [sys.executable, "-m", "sgs", "+experiment=standard", f"targets.source={BENCHMARK}",
               "prover.lean.project_dir=/nonexistent", f"run_dir={tmp_path / 'run'}"]
    proc = run([*command, f"targets.lean_repo_dir={CHECKOUT}"])
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert (f"targets: 8 (0 held out) from {BENCHMARK} (LeanDojo Benchmark 4 entries); 7 entries skipped ("
            in proc.stdout)
    assert "Started a local Ray instance" not in proc.stdout + proc.stderr
    missing = run(command)
    assert missing.returncode == 2, missing.stderr[-3000:]
    [line] = [line for line in missing.stderr.splitlines() if line.strip()]
    assert line.startswith(f"targets.source: {BENCHMARK} is a LeanDojo Benchmark 4 file") and "lean_repo_dir" in line


def test_the_trace_mode_converts_the_repositorys_own_theorems(tmp_path, monkeypatch, capsys):
    """``tools/trace_targets.py REPO COMMIT`` past the prerequisite check, in process: lean_dojo's
    ``LeanGitRepo`` and ``trace`` replaced by TEST DOUBLES (tracing needs Lean) that hand back the
    traced file above, plus a theorem of a dependency that must be left out."""
    import subprocess as sp

    import lean_dojo

    from tools import trace_targets

    own = traced_file().get_traced_theorems()
    dependency = SimpleNamespace(repo=SimpleNamespace(url="https://github.com/leanprover-community/mathlib4",
                                                      commit="f" * 40))
    traced = SimpleNamespace(get_traced_theorems=lambda: [dependency, *own])
    monkeypatch.setattr(trace_targets, "missing_for_trace", lambda repo: [])
    monkeypatch.setattr(lean_dojo, "LeanGitRepo", lambda url, commit: RepoStandIn())
    monkeypatch.setattr(lean_dojo, "trace", lambda repo: traced)
    out = tmp_path / "demo.jsonl"
    assert trace_targets.main([RepoStandIn.url, RepoStandIn.commit, "--out", str(out)]) == 0
    assert {json.loads(line)["id"] for line in out.read_text().splitlines()} == set(EXPECTED)
    assert capsys.readouterr().out.startswith(f"wrote 8 targets to {out}; skipped 3 (")

    def failing_trace(repo):
        raise sp.CalledProcessError(1, "lake build")

    monkeypatch.setattr(lean_dojo, "trace", failing_trace)
    assert trace_targets.main([RepoStandIn.url, RepoStandIn.commit, "--out", str(tmp_path / "x.jsonl")]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"trace_targets: tracing {RepoStandIn.url} at {RepoStandIn.commit} failed: CalledProcessError")
