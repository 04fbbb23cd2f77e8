"""Whole iterations of :class:`~sgs.loop.iteration.Loop` in process, in well
under a second each, on the test doubles of ``tests/doubles.py``: every
phase in order, the records, metrics lines and checkpoints they leave, new
weights reaching the engines, and a driver killed between phases or in the
middle of one (the Conjecturer's, the Solver's or the Guide's engines, or
the learner, dying) whose resumed run ends exactly where an uninterrupted
run does, having drawn nothing twice.

The run directory is checked by ``check_run`` of ``tests/loop_support.py``, the
same checks the end-to-end runs pass; what only those runs can show (Ray's
actors and placement groups, Ray Train's training, Rocq's verdicts, the
command line, wandb and the report) is theirs.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from sgs.config import CONFIG_DIR, MethodConfig, SGSConfig
from sgs.loop.iteration import Loop
from sgs.loop.phases import PHASES
from sgs.loop.weights import TRAIN_METRICS_FILE, current_weights
from sgs.machinery.runtime import Checkpoint
from sgs.state.benchmarks import Benchmark
from sgs.state.records import Target
from sgs.state.store import Store
from tests.doubles import (
    Killed, TableEngines, TableLearner, TableVerifier, default_config, experiment_method, table_runtime)
from tests.loop_support import check_run

HEADER = "Require Import Arith."
TARGETS = [*(Target(id=f"t{i}", header=HEADER, statement=f"Theorem t{i} : {i} + 0 = {i}.") for i in range(4)),
           Target(id="held", header=HEADER, statement="Theorem held : 9 + 0 = 9.", held_out=True)]
K = 4
#: How many of its k samples the Solver proves target i with, on the base weights and once trained:
#: t0 always (too easy to train on), t1 half, t2 only once trained, t3 never.
TARGET_PROOFS = {0: (4, 4), 1: (2, 2), 2: (0, 1), 3: (0, 0)}
#: The solve rate of target i's conjecture (the Solver proves ``i * n = n * i`` on its first n samples).
CONJECTURE_PROOFS = [1, 2, 3, 1]
#: Evaluated every second iteration; the Solver proves it on its first sample.
BENCHMARK = Benchmark(name="bench", language="rocq", source="bench.jsonl", problems=(
    Target(id="b1", header=HEADER, statement="Theorem b1 : forall n : nat, n * 1 = n."),))
STORE_CONFIG = {"test": "loop in process"}


def solver(prompt: str, index: int, version: int) -> str:
    """The Solver double: see :data:`TARGET_PROOFS` and :data:`CONJECTURE_PROOFS`."""
    target = re.search(r"Theorem t(\d) :", prompt)
    conjecture = re.search(r"\* (\d) =", prompt)
    if target is not None:
        good = index < TARGET_PROOFS[int(target.group(1))][min(version, 1)]
    else:
        good = conjecture is not None and index < int(conjecture.group(1))
    return f"```coq\nProof.\n  {'ring' if good else 'idtac'}.\nQed.\n```"


def conjecturer(prompt: str, index: int, version: int) -> str:
    """Target i's Conjecturer double: ``i * n = n * i`` (n from :data:`CONJECTURE_PROOFS`), then an
    ill-typed claim, then the benchmark's problem renamed; without a target, target 0's."""
    target = re.search(r"Theorem t(\d) ", prompt)
    i = 0 if target is None else int(target.group(1))
    n = CONJECTURE_PROOFS[i]
    claim = [f"{i} * {n} = {n} * {i}", f"{i} + true = {i}", "forall m : nat, m * 1 = m"][index]
    return f"```coq\nTheorem mine : {claim}.\nAdmitted.\n```"


def guide(prompt: str, index: int, version: int) -> str:
    """The Guide double: relevance i for target i's conjecture, no redundancy, complexity 1."""
    i = re.search(r"for Theorem t(\d) ", prompt).group(1)
    return (f"<begin_relevance_score>{i}<end_relevance_score>\n<begin_redundancy_score>0<end_redundancy_score>\n"
            "<begin_conclusion_complexity_score>1<end_conclusion_complexity_score>")


def loop_config() -> SGSConfig:
    cfg = default_config()
    cfg.iterations = 2
    cfg.method = MethodConfig(num_solver_samples=K, conjectures_per_target=3)  # the standard method
    cfg.evaluation.every, cfg.evaluation.ks, cfg.evaluation.samples_per_problem = 2, [1, 2], 2
    return cfg


class Driver:
    """One ``python -m sgs`` process on test doubles: its store, engines
    (started on the run's current weights, as :mod:`sgs.launch` starts them),
    verifier, learner and :class:`Loop`.  ``die``: keyword arguments for the
    doubles that kill it (``solver=``/``conjecturer=``/``guide=``: chunks
    before the engines die; ``learner=``: the call that dies)."""

    def __init__(self, run_dir: Path, cfg: SGSConfig | None = None, **die: int):
        self.cfg = cfg if cfg is not None else loop_config()
        self.store = Store.open(run_dir, TARGETS, STORE_CONFIG)
        weights = {role: current_weights(self.store, role, "base") for role in ("solver", "conjecturer")}
        weights["guide"] = Checkpoint("base", 0)
        write = {"solver": solver, "conjecturer": conjecturer, "guide": guide}
        self.engines = {role: TableEngines(write[role], die.get(role), checkpoint=weights[role].path,
                                           version=weights[role].version) for role in write}
        self.learner = TableLearner(die_on_call=die.get("learner"))
        # Verdicts lag a chunk behind: a driver killed mid-phase leaves samples drawn but not stored.
        self.pool = TableVerifier(lambda task: "ring" in task.proof,
                                  elaborates=lambda task: "true" not in task.statement, lag=1)
        self.runtime = table_runtime(self.engines, self.pool, self.learner)
        self.metrics_sent: list[int] = []
        self.loop = Loop(self.cfg, self.store, self.runtime, weights, run_name="in-process", benchmark=BENCHMARK,
                         on_metrics=lambda metrics, tables, histograms: self.metrics_sent.append(metrics["iteration"]))

    def run(self, kill_before: tuple[int, str] | None = None) -> str | None:
        """Run to the end, or until the driver is killed (then None); the store is closed either way.
        ``kill_before``: the driver dies as that phase of that iteration starts."""
        if kill_before is not None:
            started = self.loop.monitor.phase_started

            def phase_started(iteration, phase, versions):
                if (iteration, phase) == kill_before:
                    raise Killed()
                started(iteration, phase, versions)

            self.loop.monitor.phase_started = phase_started
        try:
            return self.loop.run()
        except Killed:
            return None
        finally:
            self.store.close()

    def drawn(self) -> dict[str, int]:
        return {role: engines.samples_drawn for role, engines in self.engines.items()}


#: Metrics that depend on the clock or on the run having been resumed.
VOLATILE = re.compile(r"(phase_seconds|tokens_per_second|verifications_per_second)/|faults/driver_resumes$|"
                      r"train/\w+/weight_load_seconds$")


def outcome(run_dir: Path, learners: list[TableLearner]) -> dict:
    """What a run leaves, paths relative to its directory: every record, the
    metrics lines (clock and resume counts aside), the checkpoints, and the
    jobs of every learner call that finished."""
    def relative(path: str) -> str:
        return str(Path(path).relative_to(run_dir)) if path.startswith(str(run_dir)) else path

    with Store.open(run_dir, None, STORE_CONFIG) as store:
        records = {it: ([a.to_json() for a in sorted(store.attempts(it), key=lambda a: a.id)],
                        [c.to_json() for c in sorted(store.conjectures(it), key=lambda c: c.id)],
                        {cid: s.to_json() for cid, s in store.conjecture_scores(it).items()}) for it in range(2)}
        metrics = [{k: v for k, v in m.items() if not VOLATILE.search(k)} for m in store.metrics()]
        checkpoints = {role: store.checkpoint_iterations(role) for role in ("solver", "conjecturer")}
        best = store.best_checkpoint("solver")
    jobs = [(job.objective, relative(job.base_checkpoint), relative(job.output_dir), job.seed,
             [(e.prompt_ids, e.completion_ids, e.weight, e.old_logprobs, e.group_id) for e in job.examples])
            for learner in learners for call in learner.finished for job in call]
    return {"records": records, "metrics": metrics, "checkpoints": checkpoints, "best": best, "jobs": jobs}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """Two iterations by one driver: its outcome and what its engines drew."""
    run_dir = tmp_path_factory.mktemp("uninterrupted") / "run"
    driver = Driver(run_dir)
    assert driver.run() == "all 2 iterations are done"
    return outcome(run_dir, [driver.learner]), driver.drawn()


def test_two_iterations_run_every_phase_and_leave_a_complete_run_directory(tmp_path):
    """Two iterations of the standard method: every phase committed, records
    as the end-to-end runs' check demands, the Solver sampling iteration 1
    with the weights iteration 0 trained, which prove target t2 at last; the
    benchmark kept out of the conjectures, and evaluated after iteration 1."""
    driver = Driver(tmp_path / "run")
    assert driver.run() == "all 2 iterations are done"
    store = check_run(tmp_path / "run", iterations=2, conjectures_per_target=3)
    try:
        metrics = store.metrics()
        assert [m["cumulative_solve_rate"] for m in metrics] == [0.5, 0.75]
        assert driver.metrics_sent == [0, 1]
        # Iteration 1's Conjecturer writes only for the targets still unsolved.
        assert {c.target_id for c in store.conjectures(1)} == {"t2", "t3"}
        errors = [c.extraction_error for c in store.conjectures(1)]
        assert errors.count("elaboration_invalid") == errors.count("matches_benchmark") == 2
        assert [m["conjectures_matching_benchmark"] for m in metrics] == [4, 2]
        # The benchmark, evaluated with the weights the Solver serves after iteration 1's update.
        assert "eval/pass@1" not in metrics[0] and (metrics[1]["eval/pass@1"], metrics[1]["eval/pass@2"]) == (0.5, 1.0)
        summary = json.loads((tmp_path / "run" / "evals" / "iter_0001" / "summary.json").read_text())
        assert (summary["problems"], summary["n"], summary["policy_version"]) == (1, 2, 2)
        assert store.checkpoint_iterations("solver") == [0, 1] and store.best_checkpoint("solver") == 1
        solver_dirs = [str(store.checkpoint_dir("solver", it)) for it in range(2)]
        assert all(metrics[it]["train/solver/num_examples"] > 0 for it in range(2))
    finally:
        store.close()
    # Iteration 1 trains from iteration 0's weights, and each checkpoint reaches the engines.
    [first, second] = driver.learner.calls
    assert [job.base_checkpoint for job in first] == ["base", "base"]
    assert second[0].base_checkpoint == solver_dirs[0] and second[0].output_dir == solver_dirs[1]
    assert driver.engines["solver"].loaded == [(solver_dirs[0], 1), (solver_dirs[1], 2)]
    assert driver.runtime.placement.actors_recorded == 2  # once per record phase


def test_a_finished_run_resumed_does_nothing(tmp_path):
    """Run again on a finished directory, the loop stops at once: nothing drawn, nothing trained."""
    Driver(tmp_path / "run").run()
    again = Driver(tmp_path / "run")
    assert again.run() == "all 2 iterations are done"
    assert again.drawn() == {"solver": 0, "conjecturer": 0, "guide": 0} and again.learner.calls == []


@pytest.mark.parametrize("kill_before", [(0, phase) for phase in PHASES[1:]] + [(1, phase) for phase in PHASES],
                         ids=lambda point: f"before-{point[1]}-{point[0]}")
def test_a_driver_killed_between_phases_resumes_to_the_same_run(tmp_path, uninterrupted, kill_before):
    """Killed as a phase starts: the next driver runs the phases left, on the
    weights the finished training phases made, and the run ends as an
    uninterrupted one, every sample drawn once."""
    first = Driver(tmp_path / "run")
    assert first.run(kill_before=kill_before) is None
    with Store.open(tmp_path / "run", None, STORE_CONFIG) as store:
        assert store.resume_point(PHASES) == kill_before
    second = Driver(tmp_path / "run")
    assert second.run() == "all 2 iterations are done"
    expected, drawn = uninterrupted
    assert outcome(tmp_path / "run", [first.learner, second.learner]) == expected
    assert {role: first.drawn()[role] + second.drawn()[role] for role in drawn} == drawn
    assert first.metrics_sent + second.metrics_sent == [0, 1]
    # The lines the second driver wrote count its resume; the phases the first one ran have no timing there.
    killed_in, phase = kill_before
    with Store.open(tmp_path / "run", None, STORE_CONFIG) as store:
        metrics = store.metrics()
    assert [m["faults/driver_resumes"] for m in metrics] == [int(it >= killed_in) for it in range(2)]
    timed = {key.split("/")[1] for key in metrics[killed_in] if key.startswith("phase_seconds/")}
    assert timed == set(PHASES[PHASES.index(phase):]) - {"record"}  # a line is written before its phase ends


#: Each driver dies in iteration 1: after the chunks iteration 0 returned plus a few (iteration 0 has
#: 4 Conjecturer prompts, 4 + 4 Solver prompts and 4 early Guide reviews), or in the learner's second call.
MID_PHASE_KILLS = {"conjecture": {"conjecturer": 4 + 1}, "prove": {"solver": 8 + 3},
                   "prove, early reviews": {"guide": 4 + 1}, "train": {"learner": 2}}


@pytest.mark.parametrize("killed", MID_PHASE_KILLS)
def test_a_driver_killed_mid_phase_resumes_to_the_same_run_drawing_nothing_twice(tmp_path, uninterrupted, killed):
    """Killed in the middle of a phase: the resumed phase keeps what was
    stored, takes what was drawn but not stored from its sample cache, and
    (training) ignores the half-written checkpoint, training again from the
    weights the last finished training phase made."""
    first = Driver(tmp_path / "run", **MID_PHASE_KILLS[killed])
    assert first.run() is None
    phase = killed.split(",")[0]
    with Store.open(tmp_path / "run", None, STORE_CONFIG) as store:
        assert store.resume_point(PHASES) == (1, phase)
        if phase != "train":  # the phase had stored records, or drawn samples, when it died
            assert store.sample_cache_path(1, phase).exists() or (store.run_dir / "iter_0001" /
                                                                  f"{phase}.partial.jsonl").exists()
    second = Driver(tmp_path / "run")
    if phase == "train":
        assert second.engines["solver"].version == 1  # iteration 0's weights, not the half-written ones
    assert second.run() == "all 2 iterations are done"
    expected, drawn = uninterrupted
    assert outcome(tmp_path / "run", [first.learner, second.learner]) == expected
    assert {role: first.drawn()[role] + second.drawn()[role] for role in drawn} == drawn
    check_run(tmp_path / "run", iterations=2, conjectures_per_target=3).close()


#: Every experiment of ``conf/experiment/``.
EXPERIMENTS = sorted(path.stem for path in (CONFIG_DIR / "experiment").glob("[!_]*.yaml"))


@pytest.fixture(params=EXPERIMENTS)
def method(request) -> MethodConfig:
    """An experiment's method, as ``+experiment=...`` composes it, with k = 4."""
    return replace(experiment_method(request.param), num_solver_samples=K)


def test_every_experiments_method_runs_two_iterations(tmp_path, method):
    """Each experiment's method leaves a complete run directory, samples and
    trains the roles its switches name, and no other."""
    cfg = loop_config()
    cfg.method = method
    driver = Driver(tmp_path / "run", cfg)
    assert driver.run() == "all 2 iterations are done"
    replayed = method.solver_objective == "ei"  # check_run knows the objectives that select among rollouts
    store = (Store.open(tmp_path / "run", None, STORE_CONFIG) if replayed else
             check_run(tmp_path / "run", iterations=2, conjectures_per_target=method.conjectures_per_target,
                       objective=method.solver_objective))
    try:
        trained = {role: [Path(job.output_dir).name for job in driver.learner.jobs(role)]
                   for role in ("solver", "conjecturer")}
        if replayed:
            # Expert iteration trains on the stored proofs of the last iterations, the current one included.
            for it in range(2):
                proofs = [p for p in store.solved_registry.recent_proofs(it - method.ei_replay_iterations + 1)
                          if p.iteration <= it and p.reward != 0.0]
                [job] = [job for job in driver.learner.jobs("solver") if job.output_dir.endswith(f"iter_{it:04d}")]
                tokens = {a.id: a.completion.token_ids for i in range(it + 1) for a in store.attempts(i)}
                assert sorted(e.completion_ids for e in job.examples) == sorted(tokens[p.attempt_id] for p in proofs)
            assert trained["solver"] == ["iter_0000", "iter_0001"]
        prompts = set(driver.engines["conjecturer"].prompts)
        scores = [s for it in range(2) for s in store.conjecture_scores(it).values()]
    finally:
        store.close()
    assert bool(trained["solver"]) == (method.solver_objective != "none")
    assert bool(trained["conjecturer"]) == method.train_conjecturer
    assert bool(driver.drawn()["conjecturer"]) == (method.conjectures_per_target > 0)
    assert bool(driver.drawn()["guide"]) == method.use_guide == any(s.guide_output is not None for s in scores)
    if method.conjectures_per_target:
        unconditioned = method.conjecturer_prompt == "unconditioned"
        assert (prompts == {"conjecture"}) == unconditioned


#: How trained weights reach the engines: (``resources`` changes, whether the learner's sending fails).
WEIGHT_PATHS = {
    "checkpoint reloaded": ({}, False),
    "engines asleep while training": ({"sleep_engines_during_training": True}, False),
    "sent by the learner": ({"weight_transfer": "direct"}, False),
    "sending failed": ({"weight_transfer": "direct"}, True),
    "asleep, so not sent": ({"weight_transfer": "direct", "sleep_engines_during_training": True}, False),
}


@pytest.mark.parametrize("path", WEIGHT_PATHS)
def test_trained_weights_reach_the_engines_as_the_resources_say(tmp_path, path):
    """Each checkpoint reaches the engines before they sample again: reloaded
    at once, or when they wake after the training phase (engines never
    sample asleep), or sent by the learner (fresh engines when that failed;
    nothing is sent to sleeping engines); the probe then agrees with the
    learner (``check_run``)."""
    changes, sending_fails = WEIGHT_PATHS[path]
    cfg = loop_config()
    for key, value in changes.items():
        setattr(cfg.resources, key, value)
    driver = Driver(tmp_path / "run", cfg)
    driver.learner.sending_fails = sending_fails
    assert driver.run() == "all 2 iterations are done"
    solver = driver.engines["solver"]
    checkpoints = [(str(tmp_path / "run" / "checkpoints" / "solver" / f"iter_{it:04d}"), it + 1) for it in range(2)]
    sent = "weight_transfer" in changes and "sleep_engines_during_training" not in changes
    how = "rebuilt" if sent and sending_fails else "adopted" if sent else "loaded"
    assert {"loaded": solver.loaded, "adopted": solver.adopted, "rebuilt": solver.rebuilt} == {
        kind: checkpoints if kind == how else [] for kind in ("loaded", "adopted", "rebuilt")}
    asleep = [(event, it, phase) for it in range(2) for event, phase in (("sleep", "train"), ("wake", "record"))]
    assert driver.runtime.placement.engine_events == (asleep if "sleep_engines_during_training" in changes else [])
    with Store.open(tmp_path / "run", None, STORE_CONFIG) as store:
        restarts = store.metrics()[-1]["faults/engine_restarts/solver"]
        versions = [{a.completion.policy_version for a in store.attempts(it)} for it in range(2)]
        numbers = [json.loads((store.checkpoint_dir("solver", it) / TRAIN_METRICS_FILE).read_text())
                   for it in range(2)]
    assert versions == [{0}, {1}] and [n["probe_logprob_gap_mean"] for n in numbers] == [0.0, 0.0]
    assert [n["weights_sent_directly"] for n in numbers] == [float(how == "adopted")] * 2
    assert restarts == (2 if how == "rebuilt" else 0)  # the engines started afresh count as restarts


def test_runs_with_one_seed_share_the_base_weights_samples_of_the_targets(tmp_path, monkeypatch):
    """``sampling.share_start_samples``: a second run with the same seed and
    base weights (another experiment, as in a sweep) takes iteration 0's
    Solver samples of the targets from the shared start cache, and draws
    only what is its own: its conjectures' attempts, and every later iteration."""
    monkeypatch.setenv("SGS_CACHE_DIR", str(tmp_path / "cache"))
    runs = []
    for name, use_guide in (("first", True), ("second", False)):  # standard, then no_guide
        cfg = loop_config()
        cfg.sampling.share_start_samples = True
        cfg.method.use_guide = use_guide
        runs.append(Driver(tmp_path / name, cfg))
        assert runs[-1].run() == "all 2 iterations are done"
    first, second = runs
    assert second.drawn()["solver"] == first.drawn()["solver"] - (len(TARGETS) - 1) * K
    starts = []
    for name in ("first", "second"):
        with Store.open(tmp_path / name, None, STORE_CONFIG) as store:
            starts.append([a.to_json() for a in sorted(store.attempts(0), key=lambda a: a.id)
                           if a.problem_kind == "target"])
    assert starts[0] and starts[0] == starts[1]
