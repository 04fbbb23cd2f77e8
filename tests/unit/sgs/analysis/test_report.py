"""The run report (sgs/analysis/report/, command tools/report.py): what it reads from a run directory, the
numbers each figure shows, and the page.

The runs here are written through the real Store (its file layout, markers
and solved registry) with hand-made records, so every expected value is
known exactly.  The report of a real run is checked by the end-to-end tests
of tests/e2e/test_loop.py, through :func:`check_report` below.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from matplotlib.image import imread

from lean_env.verdict import Status, Verdict
from sgs.state.records import Attempt, Completion, Conjecture, ConjectureScore, Target, prompt_digest
from sgs.analysis.scaling import scaling_curve
from sgs.state.store import Store
from sgs.analysis.report.page import EXIT_NOT_A_RUN, main, report
from sgs.analysis.report.runs import (
    BENCHMARK_SUMMARY_FILE,
    HELD_OUT_FILE,
    BenchmarkEval,
    HeldOutEval,
    ReportError,
    benchmark_evals,
    find_run_dirs,
    held_out_evals,
    read_run,
    run_labels,
)
from sgs.analysis.report.series import (
    guide_parse_failure_rate,
    guide_score_counts,
    metric_group,
    metric_series,
    rejection_counts,
    solve_rate_curve,
    solve_rate_histogram,
    target_timeline,
)

#: Every figure the report draws, in page order.
FIGURES = ("solve_rate.png", "pass_at_k.png", "conjecturer_reward.png", "guide.png", "entropy.png",
           "solve_rate_hist.png", "collapse.png", "verification.png", "rejections.png", "phase_seconds.png",
           "targets.png")

HEADER = "Require Import Arith."
TARGETS = [Target(id=name, header=HEADER, statement=f"Theorem {name} : True.", held_out=name == "t_held")
           for name in ("t_a", "t_b", "t_c", "t_held")]


def check_report(page: Path) -> str:
    """Everything a written report must hold: the page and every figure,
    each a real image that the page shows.  Returns the page's text."""
    text = page.read_text(encoding="utf-8")
    for name in FIGURES:
        image = imread(page.parent / name)
        assert image.shape[0] > 100 and image.shape[1] > 100, name
        assert name in text
    return text


# ---------------------------------------------------------------------------
# A hand-written run


def _completion(text: str = "x") -> Completion:
    return Completion(prompt_sha256=prompt_digest("p"), text=text, token_ids=[1, 2, 3], logprobs=[-0.1] * 3,
                      policy_version=0, finish_reason="stop", entropy=0.5)


def _attempt(iteration: int, problem: str, index: int, valid: bool, kind: str = "target") -> Attempt:
    return Attempt(id=f"{problem}#{index}", iteration=iteration, problem_id=problem, problem_kind=kind,
                   completion=_completion(), proof=f"Proof. auto. (* {index} *) Qed.", extraction_error=None,
                   verdict=Verdict(Status.VALID if valid else Status.INVALID), reward=float(valid))


def _conjecture(iteration: int, cid: str, target: str, parsed: bool = True) -> Conjecture:
    return Conjecture(id=cid, iteration=iteration, target_id=target, completion=_completion(),
                      statement=f"Theorem {cid} : True." if parsed else None,
                      extraction_error=None if parsed else "no_code_block")


def _score(cid: str, *, kept: bool, weight: float, review: tuple[int, int, int] | None = None,
           parse_error: str | None = None) -> ConjectureScore:
    reviewed = review is not None or parse_error is not None
    relevance, redundancy, complexity = review or (None, None, None)
    return ConjectureScore(conjecture_id=cid, solve_rate=0.5, kept=kept, relevance=relevance, redundancy=redundancy,
                           complexity=complexity, guide_output="review" if reviewed else None,
                           guide_parse_error=parse_error, r_guide=0.8 if reviewed else None,
                           reward=0.4 if kept else 0.0, weight=weight)


def _metrics(iteration: int, generations: int, rate: float, **extra) -> dict:
    return {"iteration": iteration, "generations": generations, "cumulative_solve_rate": rate, "pass_at_k": rate,
            "conjectures_kept": 1, "mean_guide_score": 0.8, "system_error_rate": 0.0, **extra}


METRICS = [
    _metrics(0, 9, 1 / 3, solver_entropy=0.5, **{
        "verification/valid": 2, "verification/invalid": 4,
        "verifier/audited": 1, "verifier/audit_disagreements": 1,
        "verifier/rejected/prover_error": 3, "verifier/rejected/audit_disagreement": 1,
        "phase_seconds/prove": 2.0, "phase_seconds/review": 1.0,
        "solve_rate_hist/target/0": 2, "solve_rate_hist/target/1": 0, "solve_rate_hist/target/2": 1}),
    # Resumed after the prove phase: that phase has no timing.  The Guide's mean is undefined.
    _metrics(1, 15, 2 / 3, solver_entropy=0.25, mean_guide_score=None, **{
        "verification/valid": 2, "verification/invalid": 2,
        "verifier/audited": 1, "verifier/audit_disagreements": 0, "verifier/rejected/banned:Admitted": 2,
        "phase_seconds/review": 1.5,
        "solve_rate_hist/target/0": 1, "solve_rate_hist/target/1": 1, "solve_rate_hist/target/2": 0}),
]


def _phase(store: Store, iteration: int, phase: str, records=()) -> None:
    log = store.begin_phase(iteration, phase)
    for record in records:
        log.append(record)
    store.mark_done(iteration, phase)


def write_run(run_dir: Path, *, experiment: str = "standard", use_guide: bool = True) -> Store:
    """Two finished iterations and a third killed in its first phase; returns the open store.

    Iteration 0 proves t_a and trains on c0_a's conjecture; iteration 1 proves
    t_b and trains on c1_b (kept, its review unparsable) and c1_c (not kept,
    but weighted: the paper's normalisation).
    """
    config = {"experiment": experiment, "method": {"use_guide": use_guide, "train_conjecturer": True,
                                                   "num_solver_samples": 2}}
    store = Store.open(run_dir, TARGETS, config)
    _phase(store, 0, "conjecture", [_conjecture(0, "c0_a", "t_a"), _conjecture(0, "c0_b", "t_b"),
                                    _conjecture(0, "c0_c", "t_c", parsed=False)])
    _phase(store, 0, "prove", [_attempt(0, "t_a", 0, True), _attempt(0, "t_a", 1, False),
                               _attempt(0, "t_b", 0, False), _attempt(0, "t_c", 0, False),
                               _attempt(0, "c0_a", 0, True, "conjecture"), _attempt(0, "c0_b", 0, False, "conjecture")])
    _phase(store, 0, "review", [_score("c0_a", kept=True, weight=1.0, review=(4, 0, 1) if use_guide else None),
                                _score("c0_b", kept=False, weight=0.0)])
    store.append_metrics(METRICS[0])
    _phase(store, 0, "record")
    _phase(store, 1, "conjecture", [_conjecture(1, "c1_b", "t_b"), _conjecture(1, "c1_c", "t_c")])
    _phase(store, 1, "prove", [_attempt(1, "t_b", 0, True), _attempt(1, "t_c", 0, False),
                               _attempt(1, "c1_b", 0, True, "conjecture"), _attempt(1, "c1_c", 0, False, "conjecture")])
    _phase(store, 1, "review", [
        _score("c1_b", kept=True, weight=0.0, parse_error="missing_tag" if use_guide else None),
        _score("c1_c", kept=False, weight=-0.5)])
    store.append_metrics(METRICS[1])
    _phase(store, 1, "record")
    # Killed in iteration 2's first phase: its log is partial and must count for nothing.
    store.begin_phase(2, "conjecture").append(_conjecture(2, "c2_c", "t_c"))
    return store


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def run_dir(tmp_path) -> Path:
    run_dir = tmp_path / "run"
    write_run(run_dir).close()
    return run_dir


# ---------------------------------------------------------------------------
# Reading


def test_a_run_is_read_without_its_lock_and_left_unchanged(tmp_path):
    run_dir = tmp_path / "run"
    store = write_run(run_dir)  # still open: the lock is held and iteration 2's phase is running
    try:
        before = _snapshot(run_dir)
        run = read_run(run_dir)
        assert _snapshot(run_dir) == before
    finally:
        store.close()
    assert run.experiment == "standard"
    assert run.training_target_ids == ["t_a", "t_b", "t_c"]
    # The solved registry as the store rebuilds it: from the committed phases only.
    assert run.solved_at == {"t_a": 0, "t_b": 1}
    assert run.conjecture_target == {"c0_a": "t_a", "c0_b": "t_b", "c0_c": "t_c", "c1_b": "t_b", "c1_c": "t_c"}
    assert {it: [s.conjecture_id for s in scores] for it, scores in run.scores.items()} == {
        0: ["c0_a", "c0_b"], 1: ["c1_b", "c1_c"]}
    assert [m["iteration"] for m in run.metrics] == [0, 1]
    assert run.held_out == [] and run.benchmarks == []
    assert any("iter_0002/conjecture.partial.jsonl" in note for note in run.notes)


def test_damaged_files_are_noted_and_skipped(run_dir):
    with open(run_dir / "metrics.jsonl", "ab") as f:
        f.write(b'{"iteration": 2, "generat')  # a writer killed mid-line
    (run_dir / "iter_0001" / "phase_record.done").write_text("{not json")
    (run_dir / HELD_OUT_FILE).write_text("[")
    run = read_run(run_dir)
    assert [m["iteration"] for m in run.metrics] == [0, 1]
    assert run.solved_at == {"t_a": 0, "t_b": 1}  # the damaged marker admitted no proof
    notes = "\n".join(run.notes)
    assert "incomplete last line" in notes
    assert "phase_record.done: damaged phase marker" in notes
    assert f"{HELD_OUT_FILE}: not valid JSON" in notes


def test_held_out_and_benchmark_results_are_read_by_policy_version():
    stored = {"3": {"policy_version": 3, "k": 8, "targets": 4, "pass_at_k": 0.75, "valid": {}},
              "0": {"policy_version": 0, "k": 8, "targets": 4, "pass_at_k": 0.5, "valid": {}},
              "junk": {"k": 8}}
    assert held_out_evals(stored) == [HeldOutEval(0, 8, 4, 0.5), HeldOutEval(3, 8, 4, 0.75)]
    assert held_out_evals([]) == []
    summary = {"benchmark": "rocq-held-out", "policy_version": 2,
               "pass_at_k": {"1": {"k": 1, "pass_at_k": 0.25, "ci_low": 0.1, "ci_high": 0.4},
                             "8": {"k": 8, "pass_at_k": 0.5, "ci_low": 0.3, "ci_high": 0.7}}}
    assert benchmark_evals(summary) == [BenchmarkEval("rocq-held-out", 2, 1, 0.25, 0.1, 0.4),
                                        BenchmarkEval("rocq-held-out", 2, 8, 0.5, 0.3, 0.7)]
    assert benchmark_evals({"some": "other tool's summary"}) == []
    # Weights whose version the evaluation could not tell (from outside a run) say so.
    assert benchmark_evals({**summary, "policy_version": None})[0] == BenchmarkEval("rocq-held-out", None, 1, 0.25,
                                                                                    0.1, 0.4)


def test_the_held_out_file_name_is_the_one_the_run_writes():
    from sgs.analysis.evaluation import HELD_OUT_FILE as WRITTEN, SUMMARY_FILE


    assert (HELD_OUT_FILE, BENCHMARK_SUMMARY_FILE) == (WRITTEN, SUMMARY_FILE)


def test_runs_are_found_in_sweeps_and_labelled_by_experiment(tmp_path):
    for job, experiment in (("0", "standard"), ("1", "no_guide"), ("2", "standard")):
        write_run(tmp_path / "sweep" / job, experiment=experiment).close()
    runs = [read_run(path) for path in find_run_dirs([tmp_path / "sweep", tmp_path / "sweep" / "1"])]
    assert [run.run_dir.name for run in runs] == ["0", "1", "2"]  # a run named twice is read once
    assert run_labels(runs) == ["standard (0)", "no_guide", "standard (2)"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="not a run directory"):
        find_run_dirs([tmp_path / "empty"])
    with pytest.raises(ReportError, match="no such directory"):
        find_run_dirs([tmp_path / "missing"])


# ---------------------------------------------------------------------------
# What the figures show


def test_metric_series_and_groups():
    assert metric_series(METRICS, "solver_entropy") == ([0, 1], [0.5, 0.25])
    assert metric_series(METRICS, "mean_guide_score") == ([0], [0.8])  # undefined in iteration 1
    assert metric_series(METRICS, "disjunctive_share") == ([], [])
    assert metric_group(METRICS, "phase_seconds") == {"prove": [2.0, None], "review": [1.0, 1.5]}
    assert metric_group(METRICS, "verification") == {"valid": [2, 2], "invalid": [4, 2]}


def test_rejection_reasons_are_zero_where_absent_and_the_rare_ones_summed():
    assert rejection_counts(METRICS) == {"prover_error": [3, 0], "banned:Admitted": [0, 2],
                                         "audit_disagreement": [1, 0]}
    assert rejection_counts(METRICS, top=1) == {"prover_error": [3, 0], "other": [1, 2]}
    assert rejection_counts([{"iteration": 0}]) == {}


def test_solve_rate_histogram_is_bucket_by_iteration():
    hist = solve_rate_histogram(METRICS, "target")
    assert hist.iterations == [0, 1] and hist.buckets == [0, 1, 2]
    assert hist.counts.tolist() == [[2, 1], [0, 1], [1, 0]]
    empty = solve_rate_histogram(METRICS, "conjecture")
    assert empty.iterations == [] and empty.counts.shape == (0, 0)


def test_guide_sub_scores_and_parse_failures(run_dir):
    scores = read_run(run_dir).scores
    assert guide_score_counts(scores, "relevance") == {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 0}
    assert guide_score_counts(scores, "redundancy") == {0: 1, 1: 0}
    assert guide_score_counts(scores, "complexity") == {0: 0, 1: 1, 2: 0, 3: 0, 4: 0}
    # Iteration 0: one review, parsed; iteration 1: one review, unparsable.
    assert guide_parse_failure_rate(scores) == ([0, 1], [0.0, 1.0])


def test_target_timeline_marks_training_and_first_solves(run_dir):
    timeline = target_timeline(read_run(run_dir))
    assert timeline.target_ids == ["t_a", "t_b", "t_c"]  # by first solve, then unsolved
    assert timeline.iterations == [0, 1]
    # c0_a kept; c1_b kept (weight 0); c1_c not kept but weighted; c0_b neither.
    assert timeline.trained.tolist() == [[1, 0], [0, 1], [0, 1]]
    assert timeline.solved_at == [0, 1, None]


def test_a_frozen_conjecturer_trains_on_nothing(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir).close()
    config = (run_dir / "config.yaml").read_text().replace("train_conjecturer: true", "train_conjecturer: false")
    (run_dir / "config.yaml").write_text(config)
    timeline = target_timeline(read_run(run_dir))
    assert not timeline.trained.any() and timeline.solved_at == [0, 1, None]


def test_a_short_curve_has_no_fit_and_says_why():
    curve = solve_rate_curve(METRICS, min_generations=100_000)
    assert (curve.generations, curve.rates) == ([9, 15], [1 / 3, 2 / 3])
    assert curve.fit is None
    assert curve.no_fit_reason.startswith("only 0 of the 2 points are at or above 100,000 generations")


def test_a_long_curve_is_fitted_past_the_cut():
    generations = [50_000 * (i + 1) for i in range(14)]
    # The law re-centred at the first point past the cut (100k), as the fit models it; a faster rise before.
    rates = [0.1] + scaling_curve([g - 100_000 for g in generations[1:]], r0=0.2, asymptote=0.7, c_mid=150_000,
                                  exponent=1.5).tolist()
    metrics = [{"iteration": i, "generations": g, "cumulative_solve_rate": r}
               for i, (g, r) in enumerate(zip(generations, rates))]
    curve = solve_rate_curve(metrics, min_generations=100_000)
    assert curve.no_fit_reason is None
    assert curve.fit.points == 13 and curve.fit.asymptote == pytest.approx(0.7, abs=1e-3)
    assert curve.fit.c_mid == pytest.approx(150_000, rel=1e-2)
    assert curve.asymptote_spread.p5 == pytest.approx(0.7, abs=1e-3)  # exact data: every half agrees


# ---------------------------------------------------------------------------
# The page


def test_report_writes_every_figure_and_explains_what_is_missing(run_dir, tmp_path):
    (run_dir / HELD_OUT_FILE).write_text(json.dumps(
        {"0": {"policy_version": 0, "k": 2, "targets": 1, "pass_at_k": 0.0}}))
    (run_dir / "evals" / "iter_0001").mkdir(parents=True)  # where a run's evaluation.every puts its results
    (run_dir / "evals" / "iter_0001" / "summary.json").write_text(json.dumps(
        {"benchmark": "bench", "policy_version": 2,
         "pass_at_k": {"1": {"pass_at_k": 0.25, "ci_low": 0.0, "ci_high": 0.5}}}))
    (run_dir / "evals" / "outside").mkdir()
    (run_dir / "evals" / "outside" / "summary.json").write_text(json.dumps(
        {"benchmark": "bench", "policy_version": None,
         "pass_at_k": {"1": {"pass_at_k": 0.5, "ci_low": 0.0, "ci_high": 1.0}}}))
    assert read_run(run_dir).benchmarks == [BenchmarkEval("bench", None, 1, 0.5, 0.0, 1.0),
                                            BenchmarkEval("bench", 2, 1, 0.25, 0.0, 0.5)]
    page = report([run_dir], tmp_path / "out")
    assert page == tmp_path / "out" / "report.md"
    text = check_report(page)
    assert "| standard | " in text and "0.333 → 0.667" in text and "v0: 0.000" in text
    # The run predates method.unelaborated_conjectures: it skipped them, and the table says so.
    assert ("| every Conjecturer and Solver sample: conjectures that fail to elaborate get no Solver attempts "
            "(method.unelaborated_conjectures=skip) |") in text
    assert ("standard: bench pass@1 = 0.500 of weights whose policy version the evaluation could not tell: it has "
            "no place on the iteration axis") in text
    assert "no fit: only 0 of the 2 points are at or above 100,000 generations" in text
    assert ("no `phase_seconds/prove` in iteration(s) 1 "
            "(a phase finished before the run was resumed is not timed)") in text
    assert "iter_0002/conjecture.partial.jsonl" in text  # the killed phase is named, not counted
    assert "## 9. Rejection reasons" in text
    assert "the audit re-checked 2 valid proofs and disagreed on 1" in text
    # The mechanism: t_a's and t_b's conjectures were trained on in the iteration that
    # solved them, t_c's (weighted, not kept) in iteration 1, and t_c is still unsolved.
    assert "## The Conjecturer's mechanism" in text
    assert "standard: 0 of the 3 targets trained on through a conjecture were solved afterwards (0%)" in text
    assert "| standard | 1 | c1_c | t_c | not yet |" in text and "| standard | 0 | c0_a | t_a | iteration 0 |" in text


def test_an_ablation_sweep_shares_each_figure_and_html_escapes(tmp_path):
    write_run(tmp_path / "sweep" / "0").close()
    write_run(tmp_path / "sweep" / "1", experiment="no_guide<b>", use_guide=False).close()
    page = report([tmp_path / "sweep"], tmp_path / "out", page_format="html")
    text = check_report(page)
    assert page.name == "report.html"
    assert '<img src="guide.png"' in text
    assert "no_guide&lt;b&gt;: no Guide reviews (its experiment has no Guide)" in text
    assert "<b>" not in text


def test_a_run_with_no_finished_iteration_gives_empty_panels(tmp_path):
    run_dir = tmp_path / "run"
    Store.open(run_dir, TARGETS, {"experiment": "standard"}).close()
    text = check_report(report([run_dir], tmp_path / "out"))
    assert "standard: no finished iteration yet" in text


def test_the_command_writes_into_the_run_and_refuses_other_paths(run_dir, tmp_path, capsys):
    assert main([str(run_dir), "--format", "html", "--min-generations", "5"]) == 0
    page = run_dir / "report" / "report.html"
    assert capsys.readouterr().out.strip() == str(page)
    check_report(page)
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty")]) == EXIT_NOT_A_RUN
    assert f"error: {tmp_path / 'empty'}: not a run directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main([str(run_dir), "--min-generations", "0"])
    assert exit_info.value.code == 2


def test_the_run_only_warns_when_its_report_cannot_be_written(tmp_path, caplog):
    from sgs.launch import _write_report

    assert _write_report(tmp_path / "gone") is None
    assert "could not write the report of" in caplog.text and "no such directory" in caplog.text
