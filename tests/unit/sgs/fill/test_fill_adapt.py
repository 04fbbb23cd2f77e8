"""``sgs.fill --adapt``: the cache keys, the stages' reuse, the self-play command and the
flags' checks, on fakes (no training, no Ray, no prover)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

import sgs.prover.train
from sgs.fill import adapt as adapt_module
from sgs.fill.__main__ import UsageError, parse_args
from sgs.fill.adapt import (ADAPT_METHODS, AdaptError, AdaptInputError, AdaptSettings, Stage, check_cache,
                            newest_solver_checkpoint, selfplay_command, selfplay_key, selfplay_stage, supervised_key,
                            supervised_stage)
from sgs.fill.report import Row, summary_line

SETTINGS = AdaptSettings(iterations=2)


def test_the_supervised_key_ignores_what_only_self_play_uses():
    key = supervised_key("p" * 64, "w" * 64, SETTINGS)
    assert key == supervised_key("p" * 64, "w" * 64, replace(SETTINGS, iterations=7, method="rl",
                                                            overrides=("scale=laptop",)))
    changed = [supervised_key("q" * 64, "w" * 64, SETTINGS), supervised_key("p" * 64, "v" * 64, SETTINGS),
               supervised_key("p" * 64, "w" * 64, replace(SETTINGS, minutes=6.0)),
               supervised_key("p" * 64, "w" * 64, replace(SETTINGS, seed=1)),
               supervised_key("p" * 64, "w" * 64, replace(SETTINGS, learning_rate=1e-3))]
    assert len({key, *changed}) == 6


def test_the_self_play_key_follows_the_stage_before_and_its_own_settings(monkeypatch):
    key = selfplay_key("s1", SETTINGS)
    assert key == selfplay_key("s1", replace(SETTINGS, minutes=99.0))   # already in the stage before's key
    changed = [selfplay_key("s2", SETTINGS), selfplay_key("s1", replace(SETTINGS, iterations=3)),
               selfplay_key("s1", replace(SETTINGS, method="rl")), selfplay_key("s1", replace(SETTINGS, seed=1)),
               selfplay_key("s1", replace(SETTINGS, overrides=("method.num_solver_samples=4",))),
               selfplay_key("s1", replace(SETTINGS, anchor_ratio=1.0))]
    assert len({key, *changed}) == 7
    # the stage's fixed settings count too: a cache made with other defaults is not reused
    monkeypatch.setattr(adapt_module, "SELFPLAY_OVERRIDES", adapt_module.SELFPLAY_OVERRIDES[:-1])
    assert selfplay_key("s1", SETTINGS) != key


def test_the_self_play_command_is_the_methods_experiment_at_the_laptop_scale(tmp_path):
    command = selfplay_command(replace(SETTINGS, method="rl", overrides=("method.num_solver_samples=4",)),
                               targets=tmp_path / "t.jsonl", start="/ckpt", run_dir=tmp_path / "run",
                               allowed_axioms=("P.A.x'", "Top.y"), corpus=tmp_path / "corpus")
    assert command[1:4] == ["-m", "sgs", "+experiment=reinforce_half_solver_only"]
    assert {"model=rocq_prover", "prover=rocq", "resources=local_cpu", "scale=laptop", "warmstart.mode=never",
            "evaluation.k=0", f"targets.source={tmp_path / 't.jsonl'}", "model.path=/ckpt", "iterations=2",
            "seed=0", f"run_dir={tmp_path / 'run'}", "solver.mode=search"} <= set(command)
    # a prime inside double quotes, as Hydra's grammar reads it
    assert 'prover.allowed_axioms=["P.A.x\'","Top.y"]' in command
    assert command[-1] == "method.num_solver_samples=4"   # the user's settings last: they win
    assert ADAPT_METHODS["sgs"].experiment == "standard" and ADAPT_METHODS["supervised"].experiment is None
    assert not any(item.startswith("solver.anchor") for item in command)
    anchored = selfplay_command(replace(SETTINGS, anchor_ratio=0.5), targets=tmp_path / "t.jsonl", start="/ckpt",
                                run_dir=tmp_path / "run", allowed_axioms=(), corpus=tmp_path / "corpus")
    assert f'solver.anchor_corpus="{tmp_path / "corpus"}"' in anchored and "solver.anchor_ratio=0.5" in anchored


def test_a_cache_folder_that_cannot_be_written_is_bad_input(tmp_path):
    check_cache(tmp_path / "new" / "deeper")            # made later, under a folder that can be written
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        with pytest.raises(AdaptInputError, match="cannot be written"):
            check_cache(locked / "cache")
    finally:
        locked.chmod(0o755)
    (tmp_path / "file").write_text("")
    with pytest.raises(AdaptInputError, match="is not a folder"):
        check_cache(tmp_path / "file" / "cache")


def test_a_finished_stage_is_read_back_and_nothing_is_trained(tmp_path, monkeypatch):
    folder = tmp_path / "sup"
    folder.mkdir()
    made = Stage("supervised", str(folder / "checkpoint"), 61.0, 2.0, detail={"steps": 40})
    (folder / "adapted.json").write_text(json.dumps(asdict(made)))

    def refuse(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(sgs.prover.train, "train", refuse)
    stage = supervised_stage(folder, tmp_path / "corpus", SETTINGS, log=lambda line: None)
    assert stage == replace(made, cached=True)
    assert stage.describe() == "supervised 61 s, 2.0 CPU-min, steps 40 (cached: nothing trained now)"


def test_an_unfinished_stage_trains_and_records_its_cost(tmp_path, monkeypatch):
    seen = {}

    def fake_train(options, log):
        seen["options"] = options
        return {"seconds": 90.0, "steps": 12, "examples": 300, "epochs": 1.5}

    monkeypatch.setattr(sgs.prover.train, "train", fake_train)
    (tmp_path / "corpus").mkdir()
    stage = supervised_stage(tmp_path / "sup", tmp_path / "corpus", SETTINGS, log=lambda line: None)
    assert seen["options"].init == "pkg://sgs/data/rocq_prover" and seen["options"].minutes == 5.0
    # a project without examples of its own still keeps 32 of the roles' lines, no more
    roles = tmp_path / "sup" / "roles.jsonl"
    assert seen["options"].warmstart == str(roles) and len(roles.read_text().splitlines()) == 32
    assert (stage.name, stage.cpu_minutes, stage.cached) == ("supervised", 1.5, False)
    assert stage.detail == {"steps": 12, "examples": 300, "epochs": 1.5}
    assert json.loads((tmp_path / "sup" / "adapted.json").read_text())["checkpoint"] == str(
        tmp_path / "sup" / "checkpoint")


def test_the_checkpoint_kept_is_the_solvers_last_complete_one(tmp_path):
    run = tmp_path / "run"
    for i, complete in ((0, True), (1, True), (2, False)):
        folder = run / "checkpoints" / "solver" / f"iter_{i:04d}"
        folder.mkdir(parents=True)
        if complete:
            (folder / "config.json").write_text("{}")
    assert newest_solver_checkpoint(run, iterations=3) == run / "checkpoints" / "solver" / "iter_0001"
    assert newest_solver_checkpoint(run, iterations=1) == run / "checkpoints" / "solver" / "iter_0000"
    assert newest_solver_checkpoint(tmp_path / "none", iterations=1) is None


def test_adapt_without_proofs_skips_the_supervised_stage(tmp_path, monkeypatch):
    project = type("P", (), {"root": tmp_path / "proj"})()
    monkeypatch.setattr("sgs.state.rocq_project.source_digest", lambda root: "d" * 64)
    monkeypatch.setattr("sgs.fill.knowledge.project_steps", lambda project, build: (tmp_path / "c", 0))
    monkeypatch.setattr(adapt_module, "weights_digest", lambda checkpoint: "w" * 64)
    monkeypatch.setattr(adapt_module, "supervised_stage", lambda *a: pytest.fail("no proofs to learn from"))
    result = adapt_module.adapt(project, tmp_path / "build", [], (), (), replace(SETTINGS, method="supervised"),
                                cache=tmp_path / "cache", log=lambda line: None)
    assert result.checkpoint == "pkg://sgs/data/rocq_prover" and result.stages == ()
    assert result.describe() == "supervised: skipped (the project has no finished proof to learn from)"


@pytest.mark.parametrize("argv, message", [
    (["p", "--adapt", "0"], "--adapt must be a positive number of self-play iterations, got 0"),
    (["p", "--adapt", "-2"], "got -2"),
    (["p", "--adapt", "x"], "invalid int value"),
    (["p", "--adapt-minutes", "3"], "--adapt-minutes go with --adapt ITERATIONS"),
    (["p", "--adapt", "1", "--adapt-minutes", "0"], "argument --adapt-minutes: '0' is not a positive finite number"),
    (["p", "--time-per-lemma", "inf"], "argument --time-per-lemma: 'inf' is not a positive finite number"),
    (["p", "--adapt", "1", "--proposer", "knn"], "--proposer knn does not use it"),
    (["p", "--proposer", "gpt"], "invalid choice"),
    (["p", "--adapt", "1", "--adapt-set", "noequals"], "--adapt-set takes KEY=VALUE"),
    (["p", "--adapt-anchor", "1"], "--adapt-anchor go with --adapt ITERATIONS"),
    (["p", "--adapt", "1", "--adapt-anchor", "nan"], "argument --adapt-anchor: 'nan' is not a positive finite number"),
    (["p", "--adapt", "1", "--adapt-method", "ppo"], "invalid choice"),
    (["p", "--rounds", "automation,hammer"], "--rounds: unknown hammer"),
])
def test_bad_adapt_flags_are_refused_before_anything_runs(argv, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        parse_args(argv)


def test_the_adapt_flags_become_the_settings(tmp_path):
    args = parse_args(["p", "--adapt", "3", "--adapt-method", "rl", "--adapt-minutes", "2.5", "--seed", "1",
                       "--adapt-set", "a.b=1", "--adapt-cache", str(tmp_path / "c"), "--adapt-anchor", "0.5"])
    assert args.adaptation == AdaptSettings(iterations=3, method="rl", minutes=2.5, seed=1, overrides=("a.b=1",),
                                            anchor_ratio=0.5)
    assert args.adapt_cache == (tmp_path / "c").resolve()
    assert parse_args(["p"]).adaptation is None


def test_the_summary_line_says_what_the_adaptation_cost():
    rows = [Row("A.v", 1, "a", "P.A.a", "statement", "proved", proof="Proof. easy. Qed.", prover="sample",
                checkpoint="/c/iter_0000"),
            Row("A.v", 5, "b", "P.A.b", "statement", "not_proved")]
    assert summary_line(rows, 30.2, "supervised 61 s, 2.0 CPU-min") == (
        "proved 1 of 2 admitted lemmas (1 not proved, 0 errors) in 30 s; adaptation: supervised 61 s, 2.0 CPU-min")
    assert rows[0].to_json()["checkpoint"] == "/c/iter_0000" and "checkpoint" not in rows[1].to_json()



def test_the_rounds_run_in_order_and_a_model_proof_names_its_checkpoint(monkeypatch):
    """attempt_all with fake runners: the model's plan, each round on the lemmas still open,
    a proof of the search named after the checkpoint, the runners' extra details accepted."""
    from lean_env.verdict import ProofTask
    from sgs.fill import attempts

    tasks = [ProofTask(name, "", f"Lemma {name} : True.", "") for name in ("a", "b", "c")]
    calls = []

    def baseline(prover, todo, *, seconds, workers, record, rocq_options):
        calls.append(("baseline", [t.id for t in todo], seconds))
        for task in todo:
            record(task, "Proof. easy. Qed." if task.id == "a" else None, 1.0, {"invalid": 1})

    def search(prover, todo, *, seconds, workers, corpus, checkpoint, record, rocq_options):
        calls.append(("search", [t.id for t in todo], [seconds(t) for t in todo]))
        for task in todo:
            record(task, "Proof. auto. Qed." if task.id == "b" else None, 2.0, {"valid": 1}, {"stats": {}})

    monkeypatch.setattr(attempts, "run_baseline", baseline)
    monkeypatch.setattr(attempts, "run_search", search)
    monkeypatch.setattr(attempts, "_sample", lambda todo, **kw: calls.append(("sample", [t.id for t in todo],
                                                                             kw["seconds"])))
    outcomes = attempts.attempt_all(tasks, seconds=10.0, workers=2, rocq_options={}, predictor="model",
                                    knn_corpus=None, checkpoint="/ckpt", rounds=("automation", "sample", "search"))
    # The search gets what the rounds before left: 10 s less the automation's 1 s (sampling, faked, spent none).
    assert [(ids, seconds) for _, ids, seconds in calls] == [(["a", "b", "c"], 2.5), (["b", "c"], 2.0),
                                                             (["b", "c"], [9.0, 9.0])]
    assert (outcomes["a"].prover, outcomes["a"].checkpoint) == ("automation", None)
    assert (outcomes["b"].prover, outcomes["b"].checkpoint, outcomes["b"].seconds) == ("search", "/ckpt", 3.0)
    assert outcomes["c"].proof is None and outcomes["c"].statuses == {"invalid": 1, "valid": 1}


@pytest.mark.parametrize("predictor, checkpoint", [("knn", None), ("knn+model", "/ckpt")])
def test_the_k_nn_alone_or_beside_the_model_proposes_from_the_projects_proofs(monkeypatch, predictor, checkpoint):
    """The search is asked for ``predictor`` with the k-NN's memory; a proof it finds names the
    checkpoint only when the model took part."""
    from lean_env.verdict import ProofTask
    from sgs.fill import attempts

    asked = []

    def search(prover, todo, *, seconds, workers, corpus, checkpoint, record, rocq_options):
        asked.append((prover.predictor, corpus, [seconds(t) for t in todo]))
        for task in todo:
            record(task, "Proof. auto. Qed.", 2.0, {"valid": 1})

    monkeypatch.setattr(attempts, "run_search", search)
    outcomes = attempts.attempt_all([ProofTask("a", "", "Lemma a : True.", "")], seconds=10.0, workers=1,
                                    rocq_options={}, predictor=predictor, knn_corpus=Path("/memory"),
                                    checkpoint="/ckpt", rounds=("search",))
    # the rounds left out hand their shares to the search: the whole 10 s
    assert asked == [(predictor, Path("/memory"), [10.0])]
    assert (outcomes["a"].prover, outcomes["a"].checkpoint) == ("search", checkpoint)


def test_the_search_gets_what_the_rounds_before_left_and_at_least_its_share():
    from sgs.fill.attempts import PLANS, search_seconds

    assert all(list(plan)[-1] == "search" for plan in PLANS.values())  # it takes what the others leave
    assert search_seconds(60.0, 0.4, 3.5) == 56.5      # the automation failed fast: 56.5 s left
    assert search_seconds(60.0, 0.4, 36.0) == 24.0     # every round used its share: the search its own
    assert search_seconds(60.0, 0.4, 50.0) == 24.0     # a round overran its share: the search keeps its own


def test_a_stopped_self_play_stage_resumes_in_its_own_run_directory(tmp_path, monkeypatch):
    """The first try stops (past its time: None; then a crash: exit 1), nothing is recorded as
    done; the next one runs the same command on the same run directory, which ``python -m sgs``
    resumes (tests/e2e/test_loop.py kills and resumes a real run), and only then is the stage kept."""
    folder, runs = tmp_path / "sgs-stage", []
    exits = iter([None, 1, 0])

    def fake_bounded(command, out, timeout):
        runs.append(list(command))
        code = next(exits)
        if code == 0:  # the resumed run finishes: a checkpoint and its metrics
            (folder / "run" / "checkpoints" / "solver" / "iter_0001").mkdir(parents=True)
            (folder / "run" / "checkpoints" / "solver" / "iter_0001" / "config.json").write_text("{}")
            (folder / "run" / "metrics.jsonl").write_text(json.dumps({"generations": 40,
                                                                      "cumulative_solve_rate": 0.5}) + "\n")
        return code

    monkeypatch.setattr(adapt_module, "_bounded", fake_bounded)
    folder.mkdir()
    stage = lambda: selfplay_stage(folder, tmp_path / "targets.jsonl", "/sup/checkpoint", (),  # noqa: E731
                                   tmp_path / "corpus", SETTINGS, log=lambda line: None)
    with pytest.raises(AdaptError, match="ran past .* run again to resume it"):
        stage()
    with pytest.raises(AdaptError, match="exit 1.* run again to resume it"):
        stage()
    assert not (folder / "adapted.json").exists()
    made = stage()
    assert runs[0] == runs[1] == runs[2] and f"run_dir={folder / 'run'}" in runs[0]
    assert made.checkpoint == str(folder / "run" / "checkpoints" / "solver" / "iter_0001")
    assert made.detail == {"iterations": 2, "generations": 40, "cumulative_solve_rate": 0.5, "solver_updated": True}
    assert (folder / "selfplay.log").read_text().count("$ ") == 3   # every try's command, one log
    assert stage() == replace(made, cached=True) and len(runs) == 3    # kept: not run again
