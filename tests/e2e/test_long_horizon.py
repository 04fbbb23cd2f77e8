"""``make long-horizon`` as a user runs it (docs/long_horizon.md): its runs are found by
experiment and seed, a run whose curve is flat is finished without Ray or a model, and the
comparison with its fits comes out.  The sweep's runs are written here by hand, already
flat, so the command takes seconds."""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict
from pathlib import Path

import pytest

from sgs.loop.phases import PHASES
from sgs.state.store import Store
from tests.paths import REPO

EXPERIMENTS = ("standard", "reinforce_half_solver_only")
#: The overrides ``make long-horizon`` gives every job (besides experiment, seed and run_dir).
SWEEP = ["model=tiny", "prover=rocq", "resources=local_cpu", "scale=laptop", "logging.progress_bars=false",
         "iterations=40", "stop.flat_iterations=5", "stop.min_iterations=20"]


def flat_run(run_dir: Path, experiment: str, seed: int, gain: float) -> None:
    """A run of 22 recorded iterations whose last 5 added nothing."""
    recorded_run(run_dir, [f"+experiment={experiment}", f"seed={seed}", *SWEEP], 22, gain)


def recorded_run(run_dir: Path, overrides: list[str], iterations: int, gain: float) -> None:
    """A run of the config the overrides compose, with ``iterations`` finished iterations whose
    solve rate rises by ``gain`` over the first 16."""
    from hydra import compose, initialize_config_dir

    from sgs.__main__ import read_run_targets
    from sgs.config import CONFIG_DIR, CONFIG_NAME, validate

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = validate(compose(config_name=CONFIG_NAME, overrides=[*overrides, f"run_dir={run_dir}"]))
    with Store.open(run_dir, read_run_targets(cfg), asdict(cfg)) as store:
        for iteration in range(iterations):
            rate = 0.35 + gain * min(iteration, 16) / 16
            for phase in PHASES:
                if phase == "record":
                    store.append_metrics({"iteration": iteration, "generations": 2_000 * (iteration + 1),
                                          "cumulative_solve_rate": rate, "pass_at_k": rate, "conjectures_kept": 3,
                                          "mean_guide_score": 0.5, "system_error_rate": 0.0,
                                          **{f"phase_seconds/{name}": 10.0 for name in PHASES}})
                store.mark_done(iteration, phase)


@pytest.mark.slow
def test_make_long_horizon_finds_its_finished_runs_and_compares_them(tmp_path):
    sweep = tmp_path / "long"
    for experiment, gain in zip(EXPERIMENTS, (0.2, 0.15)):
        flat_run(sweep / f"{experiment}_seed0", experiment, 0, gain)
    proc = subprocess.run(["make", "long-horizon", f"LONG_DIR={sweep}", "LONG_SEEDS=0",
                           f"LONG_EXPERIMENTS={','.join(EXPERIMENTS)}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = "the cumulative solve rate has not risen for 5 iterations (stop.flat_iterations=5) after 22 iterations"
    assert proc.stdout.count(said) == 2, proc.stdout[-3000:]
    assert "Started a local Ray instance" not in proc.stdout + proc.stderr
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == sorted(["comparison", *(f"{e}_seed0" for e in EXPERIMENTS)])
    numbers = json.loads((sweep / "comparison" / "comparison.json").read_text())
    fit = numbers["methods"]["standard"]["fits"]["0"]
    # cut at 5,000 generations: iterations 2-21 (20 points) are fitted
    assert fit["min_generations"] == 5_000 and fit["points_past_cut"] == 20 and fit["fit"] is not None
    assert numbers["differences"]["standard"][-1]["mean"] == pytest.approx(0.05)
    assert (sweep / "comparison" / "figure1.png").is_file()
    # five phases of 10 s, 22 iterations
    assert "| 50 (50–50; 0.3 h in all) |" in (sweep / "comparison" / "comparison.md").read_text()


@pytest.mark.slow
def test_make_long_horizon_levers_finds_its_finished_runs_and_compares_them_with_lever_none(tmp_path):
    sweep = tmp_path / "levers"
    for lever, gain in (("none", 0.1), ("two_conjectures", 0.15)):
        recorded_run(sweep / f"lever_{lever}_seed0", ["+experiment=standard", f"+lever={lever}", "seed=0",
                                                      *SWEEP[:5], "iterations=12"], 12, gain)
    proc = subprocess.run(["make", "long-horizon-levers", f"LEVER_DIR={sweep}", "LEVER_SEEDS=0",
                           "LEVERS=none,two_conjectures"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("all 12 iterations are done") == 2, proc.stdout[-3000:]
    assert "Started a local Ray instance" not in proc.stdout + proc.stderr
    numbers = json.loads((sweep / "comparison" / "comparison.json").read_text())
    assert numbers["baseline"] == "lever_none"
    # after 12 iterations the rates have risen by 11/16 of the gains: 0.05 x 11/16 apart
    assert numbers["differences"]["lever_two_conjectures"][-1]["mean"] == pytest.approx(0.05 * 11 / 16)
