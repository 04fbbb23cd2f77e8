"""The sweep comparison (sgs/analysis/compare.py, command tools/compare.py) on
hand-written run directories whose differences are known."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from sgs.analysis.compare import compare, followup, main, render_markdown, to_json
from sgs.analysis.run_curves import baseline_followup
from sgs.analysis.report import read_run
from sgs.analysis.scaling import scaling_curve
from sgs.state.store import Store
from tests.paths import REPO
from lean_env.verdict import Status, Verdict
from sgs.analysis.run_closeness import run_closeness
from sgs.state.records import Attempt, Conjecture, Target
from tests.unit.sgs.analysis.test_report import (
    HEADER, TARGETS, _attempt, _completion, _conjecture, _metrics, _phase, _score)


def metrics_run(run_dir: Path, experiment: str, seed: int, rates, generations) -> Path:
    """A run directory as far as the comparison reads it: its config and metrics lines."""
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"experiment": experiment, "seed": seed, "method": {
        "use_guide": experiment == "standard", "train_conjecturer": experiment == "standard"}}))
    lines = [{"iteration": i, "generations": int(g), "cumulative_solve_rate": float(r)}
             for i, (g, r) in enumerate(zip(generations, rates))]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run_dir


def sweep(root: Path, gains: dict[str, float], seeds=(0, 1, 2)) -> Path:
    """Methods whose curves differ by a known gain on a law, with an offset shared by
    the runs of one seed (paired starts) and a smaller noise of each run's own."""
    generations = np.arange(1, 7) * 2_000
    for job, (method, gain) in enumerate(gains.items()):
        for seed in seeds:
            offset = np.random.default_rng(seed).normal(0, 0.03)
            own = np.random.default_rng(100 + 10 * job + seed).normal(0, 0.01)
            rates = (scaling_curve(generations, r0=0.3, asymptote=0.6 + gain, c_mid=6_000, exponent=1.5)
                     + offset + own)
            metrics_run(root / f"{job}_{seed}", method, seed, rates, generations + 100 * job)
    return root


def test_a_sweep_is_grouped_by_experiment_and_the_known_gain_is_found(tmp_path):
    root = sweep(tmp_path / "sweep", {"standard": 0.1, "reinforce_half_solver_only": 0.0, "no_guide": 0.0})
    runs = [read_run(p) for p in sorted(root.iterdir())]
    c = compare(runs, budgets=3)
    assert c.baseline == "reinforce_half_solver_only"
    assert set(c.methods) == {"standard", "reinforce_half_solver_only", "no_guide"}
    assert c.methods["standard"].seeds == [0, 1, 2]
    # budgets: from the latest first point (2,200) to the earliest last point (12,000)
    assert c.budgets == pytest.approx([2_200, 7_100, 12_000])
    standard = c.differences["standard"]
    assert all(d.paired for d in standard)
    assert standard[-1].interval.excludes_zero and standard[-1].interval.mean > 0.05
    assert not c.differences["no_guide"][-1].interval.excludes_zero
    # each method meets the baseline over the range both cover: standard from 2,100
    assert c.pair_budgets["standard"] == pytest.approx([2_100, 7_050, 12_000])
    # laptop-sized curves: the fits are refused, with the reason in the table
    assert c.methods["standard"].fits.asymptote_over_seeds is None


def test_a_lever_that_changes_the_starting_weights_is_compared_unpaired(tmp_path):
    """Same seeds on both sides, but a wider model starts from other iteration-0 samples:
    Welch's interval, and the reading notes name the settings that differ.  A lever
    that only changes self-play training (its learning rate) still pairs."""
    root = sweep(tmp_path / "sweep", {"lever_none": 0.0, "lever_wider_model": 0.05, "lever_lr_low": 0.0})
    for run_dir in root.iterdir():
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        wider, low_rate = config["experiment"] == "lever_wider_model", config["experiment"] == "lever_lr_low"
        config["model"] = {"name": "tiny", "tiny": {"hidden_size": 256 if wider else 128},
                           "learning_rate_scale": 33.3 if low_rate else 100.0}
        (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    c = compare([read_run(p) for p in sorted(root.iterdir())], baseline="lever_none", budgets=3)
    assert not any(d.paired for d in c.differences["lever_wider_model"])
    assert all(d.paired for d in c.differences["lever_lr_low"])
    (note,) = [n for n in c.notes if "start differently" in n]
    assert "lever_wider_model" in note and "model.tiny" in note and "learning_rate_scale" not in note
    assert "Welch" in render_markdown(c) and note in render_markdown(c)


def test_a_run_whose_config_cannot_be_read_is_left_out_with_a_note(tmp_path):
    """Its experiment is unknown: grouped under its folder's name it would pose as a method
    (and, sorting first, as the baseline)."""
    root = sweep(tmp_path / "sweep", {"standard": 0.1, "reinforce_half_solver_only": 0.0})
    (root / "0_0" / "config.yaml").write_text("experiment: [unclosed\n")
    out = tmp_path / "out"
    assert main([str(root), "--budgets", "2", "--out", str(out)]) == 0
    numbers = json.loads((out / "comparison.json").read_text())
    assert set(numbers["methods"]) == {"standard", "reinforce_half_solver_only"}
    assert numbers["methods"]["standard"]["seeds"] == [1, 2]
    assert any("0_0: its config names no experiment" in note for note in numbers["notes"])


def test_the_command_writes_tables_figures_and_json(tmp_path):
    root = sweep(tmp_path / "sweep", {"standard": 0.1, "reinforce_half_solver_only": 0.0})
    proc = subprocess.run([sys.executable, "-m", "tools.compare", str(root), "--budgets", "2",
                           "--out", str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "| standard | 0,1,2 |" in proc.stdout and "paired by seed (n=3)" in proc.stdout
    page = (tmp_path / "out" / "comparison.md").read_text()
    assert "## Against reinforce_half_solver_only at equal generation budgets" in page
    tex = (tmp_path / "out" / "comparison.tex").read_text()
    assert r"\begin{tabular}" in tex and r"reinforce\_half\_solver\_only" in tex
    numbers = json.loads((tmp_path / "out" / "comparison.json").read_text())
    assert numbers["differences"]["standard"][-1]["paired"] is True
    for figure in ("solve_rate.png", "difference.png", "figure1.png", "diagnostics.png"):
        assert (tmp_path / "out" / figure).stat().st_size > 10_000
    assert "## Scaling-law fits" in page and "## Diagnostics per iteration" in page


def test_long_curves_get_fits_with_the_robustness_refits_and_a_figure_1(tmp_path):
    """Twenty points per run on laws with known asymptotes, cut at 4,000 generations."""
    generations = np.arange(1, 21) * 2_000
    for job, (method, asymptote) in enumerate({"standard": 0.7, "reinforce_half_solver_only": 0.6}.items()):
        for seed in (0, 1):
            rates = scaling_curve(generations, r0=0.3, asymptote=asymptote, c_mid=8_000, exponent=1.5)
            noise = np.random.default_rng(10 * job + seed).normal(0, 0.002, len(rates))
            metrics_run(tmp_path / "sweep" / f"{job}_{seed}", method, seed, np.maximum.accumulate(rates + noise),
                        generations)
    out = tmp_path / "out"
    assert main([str(tmp_path / "sweep"), "--min-generations", "4000", "--out", str(out)]) == 0
    numbers = json.loads((out / "comparison.json").read_text())
    for method, asymptote in (("standard", 0.7), ("reinforce_half_solver_only", 0.6)):
        fits = numbers["methods"][method]["fits"]
        for seed in ("0", "1"):
            # re-centred at 4,000 generations, the law's own A is recovered
            assert fits[seed]["fit"]["asymptote"] == pytest.approx(asymptote, abs=0.03)
            assert all(r["fit"] is not None for r in fits[seed]["truncated"].values())
            assert fits[seed]["asymptote_spread"]["count"] >= 90
    page = (out / "comparison.md").read_text()
    assert "| standard | seed mean | 19 |" in page and "fitted past 4,000 generations" in page
    assert (out / "figure1.png").stat().st_size > 10_000


def test_figure_1_draws_seeds_that_start_and_end_at_different_budgets(tmp_path):
    """As SGS's seeds do (iteration 0's conjectures vary): each band spans the budgets
    every seed of its method covers."""
    for job, method in enumerate(("standard", "reinforce_half_solver_only")):
        for seed, (start, last) in enumerate(((2_000, 24_000), (2_600, 30_000))):
            generations = np.linspace(start, last, 12)
            rates = scaling_curve(generations, r0=0.3, asymptote=0.6, c_mid=8_000, exponent=1.5)
            metrics_run(tmp_path / "sweep" / f"{job}_{seed}", method, seed, rates, generations)
    out = tmp_path / "out"
    assert main([str(tmp_path / "sweep"), "--min-generations", "4000", "--out", str(out)]) == 0
    assert (out / "figure1.png").stat().st_size > 10_000


def test_parallel_sampling_lies_beside_sgs_and_the_rl_baseline(tmp_path):
    """The paper's Figure 1 as a sweep: SGS, the RL baseline and parallel sampling (the
    starting Solver, never trained), each compared with the baseline seed by seed."""
    root = sweep(tmp_path / "sweep", {"standard": 0.1, "reinforce_half_solver_only": 0.0, "parallel_sampling": -0.1})
    out = tmp_path / "out"
    assert main([str(root), "--budgets", "2", "--out", str(out)]) == 0
    numbers = json.loads((out / "comparison.json").read_text())
    assert numbers["baseline"] == "reinforce_half_solver_only"
    assert numbers["methods"]["parallel_sampling"]["seeds"] == [0, 1, 2]
    last = numbers["differences"]["parallel_sampling"][-1]
    assert last["paired"] and last["n"] == 3 and last["high"] < 0  # below RL at the largest common budget
    page = (out / "comparison.md").read_text()
    assert "| parallel_sampling | 0,1,2 |" in page and "| parallel_sampling | 12,100 |" in page  # the range it shares with the baseline
    for figure in ("solve_rate.png", "difference.png"):
        assert (out / figure).stat().st_size > 10_000


@pytest.mark.parametrize("case, message", [
    ("missing", "no such directory"),
    ("same_seed", "several runs with the same seed"),
    ("baseline", "baseline 'nope' is not among the experiments"),
    ("disjoint", "share no range of generations"),
])
def test_runs_that_cannot_be_compared_exit_2_with_one_line(tmp_path, capsys, case, message):
    root = tmp_path / "sweep"
    args = [str(root)]
    if case == "same_seed":
        metrics_run(root / "a", "standard", 0, [0.1, 0.2], [100, 200])
        metrics_run(root / "b", "standard", 0, [0.1, 0.2], [100, 200])
    elif case == "baseline":
        metrics_run(root / "a", "standard", 0, [0.1, 0.2], [100, 200])
        args += ["--baseline", "nope"]
    elif case == "disjoint":
        metrics_run(root / "a", "standard", 0, [0.1, 0.2], [100, 200])
        metrics_run(root / "b", "no_guide", 0, [0.1, 0.2], [300, 400])
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and "\n" not in err


def mechanism_run(run_dir: Path, experiment: str, solved: dict[str, int], trained: dict[str, int]) -> Path:
    """Three iterations; ``solved``: target -> iteration of its first valid proof;
    ``trained``: target -> iteration whose conjecture of it was kept and trained on."""
    conjecturer = experiment == "standard"
    store = Store.open(run_dir, TARGETS, {"experiment": experiment, "seed": 0, "method": {
        "use_guide": conjecturer, "train_conjecturer": conjecturer, "num_solver_samples": 1}})
    for it in range(3):
        ours = [t for t, i in trained.items() if i == it] if conjecturer else []
        _phase(store, it, "conjecture", [_conjecture(it, f"c{it}_{t}", t) for t in ours])
        _phase(store, it, "prove", [_attempt(it, t.id, 0, solved.get(t.id) == it) for t in TARGETS if not t.held_out])
        _phase(store, it, "review", [_score(f"c{it}_{t}", kept=True, weight=1.0) for t in ours])
        store.append_metrics(_metrics(it, 10 * (it + 1), sum(i <= it for i in solved.values()) / 3))
        _phase(store, it, "record")
    store.close()
    return run_dir


def test_the_mechanism_counts_targets_solved_after_their_conjectures_were_trained_on(tmp_path):
    sgs = read_run(mechanism_run(tmp_path / "sgs", "standard", solved={"t_a": 2, "t_b": 1},
                                 trained={"t_a": 0, "t_b": 1, "t_c": 0}))
    base = read_run(mechanism_run(tmp_path / "rl", "reinforce_half_solver_only", solved={"t_a": 0, "t_c": 2},
                                  trained={}))
    follow = followup(sgs)
    # t_a: trained in 0, solved in 2 (after); t_b: trained in 1, solved in 1 (not after); t_c: never solved
    assert follow.trained_targets == {"t_a": 0, "t_b": 1, "t_c": 0}
    assert follow.solved_after == {"t_a"} and follow.share == pytest.approx(1 / 3)
    # The baseline had solved t_a by iteration 0 already (not eligible); t_b unsolved, t_c solved in 2.
    assert baseline_followup(follow, base) == (2, 1)
    c = compare([sgs, base])
    assert c.methods["standard"].followup == (3, 1)
    assert c.baseline_followup["standard"] == (2, 1)
    # The paper's Figure 13: the baseline never solved t_b; SGS did
    assert (c.never_solved["standard"].targets, c.never_solved["standard"].solved) == (1, 1)
    assert followup(base).trained_targets == {}


def attempts_run(run_dir: Path, experiment: str, rates, generations, targets_attempted) -> Path:
    """A run that records how many training targets each iteration attempted (k = 8)."""
    metrics_run(run_dir, experiment, 0, rates, generations)
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    config["method"]["num_solver_samples"] = 8
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for line, attempted in zip(lines, targets_attempted):
        line["targets_attempted"] = attempted
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run_dir


def test_methods_are_also_compared_per_sample_on_the_targets(tmp_path):
    # SGS spends twice the baseline's generations per iteration (conjectures), but the same
    # 10 targets x 8 samples: per target sample it leads by 0.1 at every iteration, per generation
    # it trails (at 160 generations: SGS 0.3 after one iteration, the baseline 0.4 after two).
    sgs = read_run(attempts_run(tmp_path / "sgs", "standard", [0.3, 0.5, 0.6], [160, 320, 480], [10, 10, 10]))
    base = read_run(attempts_run(tmp_path / "rl", "reinforce_half_solver_only", [0.2, 0.4, 0.5], [80, 160, 240],
                                 [10, 10, 10]))
    c = compare([sgs, base], budgets=3)
    assert c.target_budgets["standard"] == pytest.approx([80, 160, 240])
    assert [d.interval.mean for d in c.target_differences["standard"]] == pytest.approx([0.1, 0.1, 0.1])
    assert c.pair_budgets["standard"] == pytest.approx([160, 200, 240])
    assert c.differences["standard"][0].interval.mean == pytest.approx(0.3 - 0.4)
    text = render_markdown(c)
    assert "at equal samples on the targets" in text and "budget (target samples)" in text
    assert to_json(c)["target_sample_differences"]["standard"][1]["target_samples"] == pytest.approx(160)
    # Runs that do not record the targets they attempted are compared per generation only.
    plain = compare([read_run(metrics_run(tmp_path / "a", "standard", 0, [0.3, 0.5], [160, 320])),
                     read_run(metrics_run(tmp_path / "b", "reinforce_half_solver_only", 0, [0.2, 0.4], [80, 160]))])
    assert plain.target_differences == {} and "at equal samples on the targets" not in render_markdown(plain)


def _proved(problem: str, kind: str, proof: str) -> Attempt:
    return Attempt(id=f"{problem}#0", iteration=0, problem_id=problem, problem_kind=kind, completion=_completion(),
                   proof=proof, extraction_error=None, verdict=Verdict(Status.VALID), reward=1.0)


def test_closeness_of_the_trained_on_conjectures_over_the_whole_run(tmp_path):
    targets = [Target(id="t_a", header=HEADER, statement="Theorem t_a : forall n : nat, n + 0 = n."),
               Target(id="t_b", header=HEADER, statement="Theorem t_b : forall l : list nat, length l >= 0.")]
    store = Store.open(tmp_path / "run", targets, {"experiment": "standard", "seed": 0, "method": {
        "use_guide": True, "train_conjecturer": True, "num_solver_samples": 1}})
    ours = Conjecture(id="c0", iteration=0, target_id="t_a", completion=_completion(),
                      statement="Theorem c0 : forall m : nat, m + 0 = m.", extraction_error=None)
    dropped = Conjecture(id="c1", iteration=0, target_id="t_b", completion=_completion(),
                         statement="Theorem c1 : 1 = 1.", extraction_error=None)
    _phase(store, 0, "conjecture", [ours, dropped])
    _phase(store, 0, "prove", [_proved("t_a", "target", "Proof. intros n. apply plus_n_O. Qed."),
                               _proved("t_b", "target", "Proof. intros l. lia. Qed."),
                               _proved("c0", "conjecture", "Proof. intros m. apply plus_n_O. Qed."),
                               _proved("c1", "conjecture", "Proof. reflexivity. Qed.")])
    _phase(store, 0, "review", [_score("c0", kept=True, weight=1.0), _score("c1", kept=False, weight=0.0)])
    store.append_metrics(_metrics(0, 10, 1.0, targets_attempted=2))
    _phase(store, 0, "record")
    store.close()
    found = run_closeness(tmp_path / "run")
    # Only c0 was trained on.  Its statement is t_a's up to names: {$v0 + , 0 : = forall nat};
    # against t_b's {$v0 , 0 : >= forall length list nat}: 6 shared of 11.
    assert (found.statements.items, found.statements.own) == (1, pytest.approx(1.0))
    assert found.statements.other == pytest.approx(6 / 11)
    # c0's proof names {intros m apply plus_n_O}: 3 of t_a's {intros n apply plus_n_O}, 1 of t_b's {intros l lia}
    assert (found.proofs.items, found.proofs.own, found.proofs.other) == (1, pytest.approx(3 / 4), pytest.approx(1 / 3))
    c = compare([read_run(tmp_path / "run")])
    assert "How close the conjectures stayed to their targets" in render_markdown(c)
    assert to_json(c)["methods"]["standard"]["closeness"][0]["proofs"]["own"] == pytest.approx(3 / 4)
