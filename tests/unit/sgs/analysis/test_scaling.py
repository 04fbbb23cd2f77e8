"""Scaling-law fit (SPEC §1.6): recovery of known parameters, the cut, refusals,
the robustness refits, reading runs, and the command."""

import json
import math

import numpy as np
import pytest

import sgs.analysis.scaling
from sgs.analysis.scaling import (
    FitRefusal,
    MetricsError,
    fit_scaling_law,
    fit_with_robustness,
    find_runs,
    load_curve,
    main,
    scaling_curve,
    spread,
)

# The known law the synthetic runs follow.
R0, A, C_MID, B = 0.3, 0.8, 3e5, 1.2


def synthetic_curve(points: int = 40, noise: float = 0.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A run from 1e4 to 3e6 generations that follows the known law re-centred
    at its first point past the 100k cut (the paper's protocol): R0 there,
    C counted from there; before it, a fast early rise to R0."""
    generations = np.geomspace(1e4, 3e6, points)
    origin = origin_of(generations)
    rates = np.where(generations >= origin,
                     scaling_curve(np.maximum(generations - origin, 0.0), r0=R0, asymptote=A, c_mid=C_MID,
                                   exponent=B),
                     np.linspace(0.1, R0, points))
    rates = rates + np.random.default_rng(seed).normal(0.0, noise, points)
    rates[generations == origin] = R0
    return generations, rates


def origin_of(generations: np.ndarray) -> float:
    """The first point at or past the 100k cut."""
    return float(generations[generations >= 100_000][0])


def write_run(run_dir, generations, rates) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"iteration": i, "generations": int(g), "cumulative_solve_rate": float(r), "pass_at_k": 0.1})
             for i, (g, r) in enumerate(zip(generations, rates))]
    (run_dir / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))


# -- the model --------------------------------------------------------------

def test_curve_hand_computed_values():
    # At C_mid the curve is half-way from R0 to A; at 2 C_mid with B = 1, (C_mid / C)^B = 1/2.
    values = scaling_curve([0, 1e5, 2e5], r0=0.2, asymptote=0.6, c_mid=1e5, exponent=1.0)
    assert values == pytest.approx([0.2, 0.4, 0.2 + 0.4 / 1.5])
    # B = 2 at C = C_mid / 3: (C_mid / C)^B = 9.
    assert scaling_curve([1e5 / 3], r0=0.2, asymptote=0.6, c_mid=1e5, exponent=2.0) == pytest.approx([0.2 + 0.4 / 10])


def test_curve_does_not_overflow_far_from_the_midpoint():
    values = scaling_curve([1.0, 1e300], r0=0.1, asymptote=0.9, c_mid=1e6, exponent=50.0)
    assert values == pytest.approx([0.1, 0.9])


# -- the fit ------------------------------------------------------------------

def test_noiseless_curve_recovers_the_parameters():
    generations, rates = synthetic_curve()
    fit = fit_scaling_law(generations, rates)
    assert fit.r0 == R0
    assert fit.asymptote == pytest.approx(A, rel=1e-5)
    assert fit.c_mid == pytest.approx(C_MID, rel=1e-4)
    assert fit.exponent == pytest.approx(B, rel=1e-4)
    assert fit.rmse < 1e-6
    past_cut = generations[generations >= 100_000]
    assert fit.points == len(past_cut) == 24
    assert (fit.first_generations, fit.last_generations) == (past_cut[0], past_cut[-1])
    assert fit.origin == origin_of(generations)
    assert fit.predict([fit.origin, fit.origin + C_MID, 1e12]) == pytest.approx([R0, (R0 + A) / 2, A], abs=1e-5)


def test_without_recentering_c_is_the_runs_own_count_and_r0_its_first_rate():
    generations = np.geomspace(1e4, 3e6, 40)
    rates = scaling_curve(generations, r0=R0, asymptote=A, c_mid=C_MID, exponent=B)
    rates[0] = R0
    fit = fit_scaling_law(generations, rates, recenter=False)
    assert (fit.r0, fit.origin) == (R0, 0.0)
    assert fit.asymptote == pytest.approx(A, rel=1e-5) and fit.c_mid == pytest.approx(C_MID, rel=1e-4)
    assert fit.exponent == pytest.approx(B, rel=1e-4)
    assert fit_with_robustness(generations, rates, recenter=False).fit == fit


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_noisy_curve_recovers_the_parameters_within_tolerance(seed):
    generations, rates = synthetic_curve(noise=0.005, seed=seed)
    fit = fit_scaling_law(generations, rates)
    assert fit.asymptote == pytest.approx(A, abs=0.02)
    assert fit.c_mid == pytest.approx(C_MID, rel=0.1)
    assert fit.exponent == pytest.approx(B, abs=0.15)
    assert 0.002 < fit.rmse < 0.008  # about the noise's standard deviation


def test_points_below_the_cut_do_not_influence_the_fit():
    generations, rates = synthetic_curve()
    garbage = rates.copy()
    garbage[1:][generations[1:] < 100_000] = 0.95  # wild values below the cut
    assert fit_scaling_law(generations, garbage) == fit_scaling_law(generations, rates)


def test_the_cut_is_configurable_and_keeps_a_point_exactly_at_it():
    generations = np.array([1e4, 5e4, 1e5, 2e5, 4e5, 8e5, 1.6e6, 3.2e6])
    rates = scaling_curve(generations, r0=R0, asymptote=A, c_mid=C_MID, exponent=B)
    rates[0] = R0
    assert fit_scaling_law(generations, rates).points == 6  # 1e5 itself is kept
    assert fit_scaling_law(generations, rates, min_generations=50_000).points == 7
    with pytest.raises(FitRefusal, match="only 4 of the 8 points are at or above 200,001"):
        fit_scaling_law(generations, rates, min_generations=200_001)


def test_r0_is_the_rate_at_the_first_point_past_the_cut_unless_given():
    generations, rates = synthetic_curve()
    assert generations[0] < 100_000 and rates[0] != R0
    assert fit_scaling_law(generations, rates).r0 == R0
    fit = fit_scaling_law(generations, rates, r0=0.25)
    assert fit.r0 == 0.25
    assert fit.predict([0.0, fit.origin]) == pytest.approx([0.25, 0.25])


def test_too_few_points_past_the_cut_is_refused_with_the_counts():
    generations = np.array([1e4, 5e4, 9e4, 1e5, 2e5, 4e5, 8e5, 1.6e6])  # 5 at or above the cut
    rates = np.linspace(0.3, 0.6, len(generations))
    with pytest.raises(FitRefusal) as refused:
        fit_scaling_law(generations, rates)
    assert refused.value.reason == ("only 5 of the 8 points are at or above 100,000 generations; a fit needs at "
                                    "least 6 (3 parameters plus 3 residual degrees of freedom)")
    report = fit_with_robustness(generations, rates)
    assert report.fit is None
    assert report.reason == refused.value.reason
    # R0 is the rate at the first point past the cut, 1e5.
    assert (report.points, report.points_past_cut, report.r0) == (8, 5, pytest.approx(rates[3]))
    assert report.truncated == {} and report.subset_asymptotes == () and report.asymptote_spread is None


def test_empty_curve_is_a_refusal_not_an_error():
    report = fit_with_robustness([], [])
    assert report.fit is None and report.reason == "the curve has no points" and report.r0 is None


def test_all_solved_at_the_start_is_refused():
    generations = np.geomspace(1e5, 1e6, 10)
    with pytest.raises(FitRefusal, match="R0 is already 1"):
        fit_scaling_law(generations, np.ones(10))


def test_flat_curve_is_refused_because_c_mid_and_b_are_undetermined():
    generations = np.geomspace(1e4, 3e6, 20)
    with pytest.raises(FitRefusal, match="does not rise past the cut"):
        fit_scaling_law(generations, np.full(20, 0.4))


def test_non_convergence_is_refused_with_the_solvers_message(monkeypatch):
    def no_convergence(*args, **kwargs):
        raise RuntimeError("Optimal parameters not found: The maximum number of function evaluations is exceeded.")

    monkeypatch.setattr(sgs.analysis.scaling, "curve_fit", no_convergence)
    generations, rates = synthetic_curve()
    with pytest.raises(FitRefusal, match="did not converge on 24 points: Optimal parameters not found"):
        fit_scaling_law(generations, rates)
    assert fit_with_robustness(generations, rates).reason.startswith("the least-squares fit did not converge")


def test_asymptote_stays_within_its_bounds():
    # A curve still climbing steeply at its end: unbounded least squares puts A at about 1.035.
    generations = np.geomspace(1e5, 1e6, 12)
    rates = np.linspace(0.5, 0.99, 12)
    fit = fit_scaling_law(generations, rates)
    assert fit.asymptote == pytest.approx(1.0, abs=1e-6)  # held at the bound
    assert fit.c_mid > 0 and fit.exponent > 0


@pytest.mark.parametrize("generations, rates, message", [
    ([1e5, 2e5], [0.1], "one length"),
    ([2e5, 1e5], [0.1, 0.2], "must not decrease"),
    ([1e5, 2e5], [0.1, 1.2], r"in \[0, 1\]"),
    ([-1.0, 2e5], [0.1, 0.2], "must not be negative"),
    ([1e5, float("nan")], [0.1, 0.2], "finite"),
])
def test_input_that_is_not_a_curve_is_an_error(generations, rates, message):
    with pytest.raises(ValueError, match=message):
        fit_scaling_law(generations, rates)
    with pytest.raises(ValueError, match=message):
        fit_with_robustness(generations, rates)


def test_min_generations_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        fit_scaling_law([1e5], [0.1], min_generations=0)


# -- robustness -------------------------------------------------------------

def test_noiseless_refits_agree_and_the_subset_spread_is_tiny():
    generations, rates = synthetic_curve()
    report = fit_with_robustness(generations, rates)
    assert report.reason is None
    assert list(report.truncated) == [0.1, 0.2, 0.3]
    # 24 points past the cut: drop round(2.4) = 2, round(4.8) = 5, round(7.2) = 7.
    assert [refit.points for refit in report.truncated.values()] == [22, 19, 17]
    for refit in report.truncated.values():
        assert refit.reason is None
        assert refit.fit.points == refit.points
        assert refit.fit.r0 == R0  # the run's R0, not the truncated curve's
        assert refit.fit.asymptote == pytest.approx(A, rel=1e-4)
    assert len(report.subset_asymptotes) == 100 and report.subset_failures == ()
    assert report.asymptote_spread.count == 100
    assert report.asymptote_spread.mean == pytest.approx(A, rel=1e-4)
    assert report.asymptote_spread.std < 1e-4


def test_noise_widens_the_subset_spread():
    clean = fit_with_robustness(*synthetic_curve()).asymptote_spread
    noisy = fit_with_robustness(*synthetic_curve(noise=0.005)).asymptote_spread
    assert noisy.std > 1e-3 > 10 * clean.std
    assert noisy.min <= noisy.p5 <= noisy.mean <= noisy.p95 <= noisy.max
    assert noisy.max - noisy.min > 0.01


def test_subsets_are_reproducible_by_seed():
    curve = synthetic_curve(noise=0.005)
    first = fit_with_robustness(*curve, subsets=10, seed=3)
    assert fit_with_robustness(*curve, subsets=10, seed=3).subset_asymptotes == first.subset_asymptotes
    assert fit_with_robustness(*curve, subsets=10, seed=4).subset_asymptotes != first.subset_asymptotes


def test_refits_with_too_few_points_are_skipped_with_their_reason():
    generations = np.concatenate([[1e4], np.geomspace(1e5, 3e6, 7)])  # 7 points past the cut
    rates = scaling_curve(generations, r0=R0, asymptote=A, c_mid=C_MID, exponent=B)
    rates[0] = R0
    report = fit_with_robustness(generations, rates)
    assert report.fit is not None
    # Dropping round(0.7) = 1 or round(1.4) = 1 point leaves 6; round(2.1) = 2 leaves 5.
    assert report.truncated[0.1].fit is not None and report.truncated[0.2].fit is not None
    assert report.truncated[0.3].fit is None
    assert report.truncated[0.3].reason.startswith("dropping the last 30% of 7 points leaves 5; a fit needs at least 6")
    assert report.subsets_skipped.startswith("a random half of the 7 points past the cut has 4; a fit needs at least 6")
    assert report.subset_asymptotes == () and report.asymptote_spread is None


def test_spread_hand_computed():
    s = spread([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (s.count, s.mean, s.min, s.max) == (5, 3.0, 1.0, 5.0)
    assert s.std == pytest.approx(math.sqrt(2.5))  # sample variance: 10 / 4
    assert (s.p5, s.p95) == pytest.approx((1.2, 4.8))  # 0.05 and 0.95 of the way along 4 gaps
    with pytest.raises(ValueError, match="at least 2"):
        spread([1.0])


def test_report_json_is_plain_json():
    report = fit_with_robustness(*synthetic_curve(), subsets=5)
    data = json.loads(json.dumps(report.to_json()))
    assert data["fit"]["asymptote"] == pytest.approx(A, rel=1e-4)
    assert list(data["truncated"]) == ["0.1", "0.2", "0.3"]
    assert data["asymptote_spread"]["count"] == 5 and len(data["subset_asymptotes"]) == 5


# -- reading runs -------------------------------------------------------------

def test_load_curve_reads_the_points_in_order(tmp_path):
    write_run(tmp_path, [1000, 3000, 6000], [0.1, 0.15, 0.2])
    assert load_curve(tmp_path) == ([1000, 3000, 6000], [0.1, 0.15, 0.2])


def test_load_curve_of_an_empty_file_is_an_empty_curve(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")
    assert load_curve(tmp_path) == ([], [])


def test_load_curve_without_metrics_names_the_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"{tmp_path}: no metrics.jsonl"):
        load_curve(tmp_path)


@pytest.mark.parametrize("bad_line, message", [
    ('{"iteration": 2, "generations": 9000', "not valid JSON"),
    ('{"iteration": 2, "generations": 9000}', "missing cumulative_solve_rate"),
    ('[1, 2]', "expected a JSON object"),
    ('{"iteration": 2, "generations": "9000", "cumulative_solve_rate": 0.3}', "non-negative integers"),
    ('{"iteration": 2, "generations": 9000, "cumulative_solve_rate": 1.5}', r"in \[0, 1\]"),
    ('{"iteration": 1, "generations": 9000, "cumulative_solve_rate": 0.3}', "iteration 1 follows iteration 1"),
    ('{"iteration": 2, "generations": 2000, "cumulative_solve_rate": 0.3}', "fell from 3000 to 2000"),
])
def test_malformed_line_names_the_file_and_line(tmp_path, bad_line, message):
    write_run(tmp_path, [1000, 3000], [0.1, 0.2])
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write(bad_line + "\n")
    with pytest.raises(MetricsError, match=message) as error:
        load_curve(tmp_path)
    assert str(error.value).startswith(f"{tmp_path / 'metrics.jsonl'}:3: ")


def test_find_runs_on_a_run_directory(tmp_path):
    write_run(tmp_path, [1000], [0.1])
    write_run(tmp_path / "nested", [1000], [0.1])
    assert find_runs(tmp_path) == [tmp_path]


def test_find_runs_on_a_sweep_lists_jobs_in_numeric_order(tmp_path):
    for job in ["0", "1", "2", "10"]:
        write_run(tmp_path / "sweep" / job, [1000], [0.1])
    (tmp_path / "sweep" / "3").mkdir()  # a job that has not finished an iteration
    (tmp_path / "sweep" / ".hydra").mkdir()
    sweep = tmp_path / "sweep"
    assert find_runs(sweep) == [sweep / "0", sweep / "1", sweep / "2", sweep / "10"]
    assert find_runs(tmp_path) == find_runs(sweep)  # any depth


def test_find_runs_on_a_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such directory"):
        find_runs(tmp_path / "absent")
    assert find_runs(tmp_path) == []


# -- the command --------------------------------------------------------------

def test_command_prints_the_fit_and_its_robustness(tmp_path, capsys):
    write_run(tmp_path / "run", *synthetic_curve())
    assert main([str(tmp_path / "run"), "--subsets", "20"]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path / 'run'}: 40 points, 24 at or above 100,000 generations" in out
    assert "R0 = 0.3000  A = 0.8000  C_mid = 300,000  B = 1.200  rmse = 0.0000" in out
    assert "without the last 10% (22 points): A = 0.8000" in out
    assert "without the last 30% (17 points): A = 0.8000" in out
    assert "A over 20 random halves (20 fitted): mean 0.8000  std 0.0000" in out


def test_command_reports_a_refusal_and_succeeds(tmp_path, capsys):
    write_run(tmp_path / "short", [1000, 50_000, 120_000, 200_000], [0.1, 0.2, 0.3, 0.35])
    assert main([str(tmp_path / "short")]) == 0
    assert "no fit: only 2 of the 4 points are at or above 100,000 generations; a fit needs at least 6" \
        in capsys.readouterr().out


def test_command_on_a_sweep_with_json_output(tmp_path, capsys):
    write_run(tmp_path / "sweep" / "0", *synthetic_curve())
    write_run(tmp_path / "sweep" / "1", [1000], [0.1])
    out_file = tmp_path / "fits.json"
    options = ["--subsets", "3", "--json", str(out_file)]
    assert main([str(tmp_path / "sweep"), *options]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path / 'sweep' / '0'}: 40 points, 24 at or above 100,000 generations" in out
    assert f"{tmp_path / 'sweep' / '1'}: 1 point, 0 at or above 100,000 generations" in out
    data = json.loads(out_file.read_text())
    assert list(data) == [str(tmp_path / "sweep" / "0"), str(tmp_path / "sweep" / "1")]
    assert data[str(tmp_path / "sweep" / "0")]["fit"]["asymptote"] == pytest.approx(A, rel=1e-4)
    assert data[str(tmp_path / "sweep" / "0")]["subsets"] == 3
    assert data[str(tmp_path / "sweep" / "1")]["fit"] is None


def test_command_exits_2_on_a_missing_directory(tmp_path, capsys):
    assert main([str(tmp_path / "absent")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"error: {tmp_path / 'absent'}: no such directory\n"


def test_command_exits_2_on_a_directory_without_runs(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "no metrics.jsonl in it or below it" in capsys.readouterr().err


def test_command_exits_2_on_a_malformed_metrics_file_before_printing_anything(tmp_path, capsys):
    write_run(tmp_path / "good", *synthetic_curve())
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metrics.jsonl").write_text('{"iteration": 0}\n')
    assert main([str(tmp_path / "good"), str(tmp_path / "bad")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{tmp_path / 'bad' / 'metrics.jsonl'}:1: missing generations, cumulative_solve_rate" in captured.err


def test_command_rejects_bad_options(tmp_path):
    for options in (["--subsets", "-1"], ["--min-generations", "0"]):
        with pytest.raises(SystemExit) as exited:
            main([str(tmp_path), *options])
        assert exited.value.code == 2
