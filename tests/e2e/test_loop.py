"""The loop and the ``python -m sgs`` entry point, end to end: its refusals
before anything starts, then ``python -m sgs`` run as a subprocess with real
Ray actors, real Ray Train and real Rocq, checking the run directory.  The
loop's pure parts (batching, seeds, target files, prompt wrapping, settings,
the objectives' view of attempts, which checkpoint a run resumes on), in
process: ``tests/unit/sgs/loop/test_loop_parts.py``.

A randomly initialised tiny model never writes a proof, so nothing would be
trained.  The end-to-end runs therefore warm-start the tiny model (the run's
own warm-start stage, :mod:`sgs.sft`) on a small corpus written here that
teaches each role its format (a Solver proof from a small set of tactics, a
Conjecturer statement from a small set of claims, some of them false,
ill-typed or equal to a target, and Guide scores).  Its samples then verify
sometimes, so every phase has work.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sgs.loop.context import DUPLICATE_CONJECTURE, DUPLICATE_OF_TARGET, MATCHES_BENCHMARK
from sgs.loop.phases import PHASES
from sgs.loop.weights import TRAIN_METRICS_FILE
from sgs.method.roles import Failure, PromptSet
from sgs import sft
from sgs.sft import CACHE_SUBDIR, INFO_FILE
from sgs.state.store import Store
from tests.config_support import NO_DASHBOARD
from tests.conftest import MISSING_STDLIB, coqtop_without_stdlib
from tests.kill_support import run_until_then_kill
from tests.loop_support import HEADER, check_run, make_targets, write_jsonl
from tests.paths import REPO
from tests.unit.sgs.analysis.test_report import check_report


# --------------------------------------------------------------------------
# The entry point: refusals before anything starts
# --------------------------------------------------------------------------


def _sgs(*overrides: str, timeout: float = 120, **env_vars: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "WANDB_SILENT": "true", **env_vars}
    return subprocess.run([sys.executable, "-m", "sgs", *overrides], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_an_invalid_config_exits_2_naming_every_problem(tmp_path):
    proc = _sgs("iterations=0", "method.num_solver_samples=0", "resources.learner_restarts=-1",
                f"run_dir={tmp_path / 'run'}")
    assert proc.returncode == 2, proc.stderr
    assert "iterations=0 must be at least 1" in proc.stderr
    assert "method.num_solver_samples=0" in proc.stderr
    assert "resources.learner_restarts=-1 must be at least 0" in proc.stderr
    assert not (tmp_path / "run" / "config.yaml").exists()


def test_what_the_solver_objective_asks_of_the_config_exits_2_too(tmp_path):
    """Checked by the objective's entry (sgs.method.registry.config_problems), after the config's own checks."""
    proc = _sgs("method.solver_objective=cispo", "training.global_batch_size=12", f"run_dir={tmp_path / 'run'}")
    assert proc.returncode == 2, proc.stderr
    assert "training.global_batch_size=12 must be a multiple of method.num_solver_samples" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "run" / "config.yaml").exists()


def _imported(stderr: str) -> set[str]:
    """Every module a process run with ``-X importtime`` imported (it names them on stderr)."""
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


#: What a command line answered before the run starts must not have loaded.
HEAVY_MODULES = {"torch", "transformers", "ray", "vllm", "sgs.launch"}


def test_a_config_error_is_answered_before_torch_transformers_and_ray_load(tmp_path):
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "sgs", "iterations=0",
                           f"run_dir={tmp_path / 'run'}"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "iterations=0 must be at least 1" in proc.stderr
    imported = _imported(proc.stderr)
    assert {"hydra", "sgs.config"} <= imported
    assert not imported & HEAVY_MODULES


def test_a_missing_grammar_file_exits_2_naming_the_setting(tmp_path):
    missing = tmp_path / "statement.ebnf"
    proc = _sgs(f"sampling.conjecturer_grammar={missing}", f"run_dir={tmp_path / 'run'}")
    assert proc.returncode == 2, proc.stderr
    assert f"sampling.conjecturer_grammar='{missing}' is neither null, 'statement'" in proc.stderr
    assert not (tmp_path / "run" / "config.yaml").exists()


def test_missing_requirements_exit_3_before_ray_starts(tmp_path):
    proc = _sgs("prover.rocq.coqtop=/nonexistent/coqtop", f"run_dir={tmp_path / 'run'}")
    assert proc.returncode == 3, proc.stderr
    assert "coqtop not found" in proc.stderr
    assert "Started a local Ray instance" not in proc.stderr + proc.stdout


@pytest.mark.parametrize("phases, code, said", [
    # A run directory of SGS before 2026-11-27, which trained each role in a phase of its own:
    # this version cannot resume it.
    (("conjecture", "prove", "review", "train_solver"), 2,
     "run_dir: {run_dir} has finished phases ['train_solver'] that are not in this version"),
    (PHASES, 0, "{run_dir}: all 1 iterations are done"),
    # Three iterations recorded, the last two adding nothing: flat under stop.flat_iterations=2.
    (PHASES * 3, 0, "{run_dir}: the cumulative solve rate has not risen for 2 iterations "
                    "(stop.flat_iterations=2) after 3 iterations"),
])
def test_where_a_run_directory_stands_is_answered_before_torch_and_ray_load(tmp_path, phases, code, said):
    from dataclasses import asdict

    from hydra import compose, initialize_config_dir

    from sgs.__main__ import read_run_targets
    from sgs.config import CONFIG_DIR, CONFIG_NAME, validate

    run_dir = tmp_path / "run"
    iterations = max(1, len(phases) // len(PHASES))
    overrides = [f"iterations={10 * iterations if iterations > 1 else 1}", "stop.flat_iterations=2",
                 "logging.wandb_mode=disabled", f"run_dir={run_dir}"]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = validate(compose(config_name=CONFIG_NAME, overrides=overrides))
    with Store.open(run_dir, read_run_targets(cfg), asdict(cfg)) as store:
        for number, phase in enumerate(phases):
            iteration = number // len(PHASES)
            if phase == "record":
                store.append_metrics({"iteration": iteration, "generations": 100 * (iteration + 1),
                                      "cumulative_solve_rate": 0.25, "pass_at_k": 0.25, "conjectures_kept": 0,
                                      "mean_guide_score": None, "system_error_rate": 0.0})
            store.mark_done(iteration, phase)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "sgs", *overrides], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stderr[-3000:]
    assert said.format(run_dir=run_dir) in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and not _imported(proc.stderr) & HEAVY_MODULES


@pytest.mark.slow
def test_a_prover_that_cannot_check_stops_the_run_before_anything_is_sampled(tmp_path):
    # A coqtop that answers its version but cannot load its standard library: what a
    # half-installed Rocq looks like.  The run must say so at once: not after an
    # iteration, and not after the warm start (minutes of training on a GPU).
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    env = coqtop_without_stdlib(tmp_path / "bin")
    proc = _sgs("iterations=1", "logging.wandb_mode=disabled", NO_DASHBOARD, f"run_dir={run_dir}", timeout=300,
                PATH=env["PATH"], SGS_CACHE_DIR=str(cache))
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "this machine cannot run the config: the prover could not check the statement of target" in proc.stderr
    assert MISSING_STDLIB in proc.stderr and "Traceback" not in proc.stderr
    assert "warm start" not in proc.stdout and not (cache / "warmstart").exists()
    assert not (run_dir / "iter_0000").exists() or not any((run_dir / "iter_0000").iterdir())


def test_the_paper_setting_names_the_overrides_that_run_here(tmp_path):
    proc = _sgs("+experiment=standard", "prover.lean.project_dir=/nonexistent", f"run_dir={tmp_path / 'run'}")
    assert proc.returncode == 3, proc.stderr
    assert "Lean project directory not found" in proc.stderr
    assert "prover=rocq" in proc.stderr.splitlines()[-1]


# --------------------------------------------------------------------------
# End to end
# --------------------------------------------------------------------------

TACTICS = ["lia.", "auto.", "reflexivity.", "trivial.", "intros. lia.", "simpl. auto."]
#: Claims the warm Conjecturer states: provable ones, a false one, an
#: ill-typed one and one equal to the held-out target up to renaming.
CLAIMS = ["forall n : nat, n + 1 = S n", "forall m : nat, 0 + m = m", "3 + 4 = 7", "forall a b : nat, a + b = b + a",
          "forall n : nat, n * 1 = n", "forall n m : nat, n <= n + m", "forall n : nat, n + true = n",
          "forall n : nat, n = S n"]


def _solver_answer(rng: random.Random) -> str:
    return f"```coq\nProof.\n  {rng.choice(TACTICS)}\nQed.\n```"


def _conjecturer_answer(rng: random.Random) -> str:
    return f"```coq\nTheorem lemma{rng.randrange(9)} : {rng.choice(CLAIMS)}.\nAdmitted.\n```"


def _guide_answer(rng: random.Random) -> str:
    return (f"<begin_relevance_score>{rng.randrange(6)}<end_relevance_score>\n"
            f"<begin_redundancy_score>{rng.randrange(2)}<end_redundancy_score>\n"
            f"<begin_conclusion_complexity_score>{rng.randrange(3)}<end_conclusion_complexity_score>")


def write_warm_corpus(path: Path, lines: int = 240) -> Path:
    """A warm-start corpus (the format of :mod:`sgs.state.warmstart`) that teaches each
    role the format on the test targets (see the module docstring)."""
    rng = random.Random(0)
    roles = PromptSet("rocq")
    training = [t for t in make_targets() if not t.held_out]
    claims = [f"Theorem sgs_conjecture_{i} : {claim}." for i, claim in enumerate(CLAIMS)]
    rows = []
    for index in range(lines):
        target = rng.choice(training)
        if index % 3 == 0:
            row = ("solver", roles.solver(HEADER, rng.choice([target.statement, *claims])), _solver_answer(rng))
        elif index % 3 == 1:
            row = ("conjecturer", roles.conjecturer(target.statement), _conjecturer_answer(rng))
        else:
            row = ("guide", roles.guide(target.statement, rng.choice(claims)), _guide_answer(rng))
        rows.append(dict(zip(("role", "prompt", "completion"), row), source=target.id, meta={}))
    return write_jsonl(path, rows)


@pytest.fixture(scope="module")
def warm_run(tmp_path_factory, require_rocq, sgs_cache_dir):
    """Overrides that run the loop small and fast on the test targets, with the
    tiny model warm-started on the test corpus.  The warm start is made here,
    by ``python -m sgs.sft`` on one learner worker, into the session's cache,
    which every run then reads: whatever the order of the tests and their
    placements, they start from the same weights (see the docstring above),
    trained once."""
    root = tmp_path_factory.mktemp("warm")
    rows = [{"id": t.id, "header": t.header, "statement": t.statement, "held_out": t.held_out} for t in make_targets()]
    targets = write_jsonl(root / "targets.jsonl", rows)
    corpus = write_warm_corpus(root / "corpus.jsonl")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SGS_CACHE_DIR", str(sgs_cache_dir))  # the runs this module starts inherit it
        overrides = [
            "model=tiny", "prover=rocq", "resources=local_cpu", "scale=laptop", f"targets.source={targets}",
            f"warmstart.corpus={corpus}", "warmstart.epochs=8", "warmstart.learning_rate=3e-3",
            "warmstart.global_batch_size=16",
            "method.num_solver_samples=4", "evaluation.k=4",
            "sampling.solver.max_tokens=48", "sampling.conjecturer.max_tokens=64", "sampling.guide.max_tokens=96",
            "training.global_batch_size=8", "training.max_seq_len=512",
            "resources.verifier_workers=1", "logging.progress_bars=false",
            NO_DASHBOARD,
            # Free text, so that the warm Conjecturer's ill-typed claim reaches the
            # prover (the default run's test samples under the statement grammar).
            "sampling.conjecturer_grammar=null",
        ]
        # A second module's fixture (another xdist worker) waits on the cache's lock, then reads it.
        made = subprocess.run([sys.executable, "-m", "sgs.sft", *overrides], cwd=REPO, capture_output=True, text=True,
                              timeout=600, env={**os.environ, "RAY_AUTH_MODE": "disabled"})
        assert made.returncode == 0, made.stderr[-3000:]
        assert "warm-up: Solver pass@4" in made.stdout
        yield overrides


@pytest.mark.slow
def test_the_warm_start_command_answers_from_the_cache_without_starting_ray(warm_run, monkeypatch, capsys):
    """The fixture's command made (or found) the warm start and its report; asked again, it
    reads both and starts no Ray cluster (which would take 10-35 s here)."""
    def refuse(*args, **kwargs):
        raise AssertionError("python -m sgs.sft started Ray for a cached warm start")

    monkeypatch.setattr(sft, "start_ray", refuse)
    assert sft.main(warm_run) == 0
    said = capsys.readouterr().out
    assert "(cached," in said and "warm-up: Solver pass@4" in said


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two runs and, when it is the first to need it, the warm start: 400 s alone here
def test_standard_run_killed_mid_phase_resumes_without_counting_twice(tmp_path, warm_run):
    # Started as a user starts it: from their own directory, with a relative run
    # directory (like the default, runs/<time>).
    run_dir = tmp_path / "run"
    # A benchmark stating two of the warm Conjecturer's claims: its conjectures
    # are kept away from it, and it is evaluated at the end of iteration 1.
    benchmark = write_jsonl(tmp_path / "bench.jsonl", [
        {"id": "b1", "header": HEADER, "statement": "Theorem b1 : forall k : nat, k * 1 = k."},
        {"id": "b2", "header": HEADER, "statement": "Theorem b2 : 3 + 4 = 7."},
    ])
    # One conjecture per target: what screening makes of varied conjectures (duplicates,
    # ill-typed claims, benchmark statements) is tested deterministically in process
    # (tests/unit/sgs/loop/test_conjecture_and_train_in_process.py); here the real processes matter.
    command = [sys.executable, "-m", "sgs", "+experiment=standard", *warm_run, "method.conjectures_per_target=1",
               "iterations=2", "run_dir=run", f"evaluation.benchmark={benchmark}", "evaluation.every=2",
               "evaluation.ks=[1,2]", "evaluation.samples_per_problem=2",
               # REINFORCE (every valid proof), not REINFORCE-1/2: whether the tiny warm Solver lands a
               # target in 0 < s <= 1/2 is luck, and the resume must be tested on trained weights.
               "method.solver_objective=reinforce",
               # a seeded share of the valid proofs gets the second opinion (coqc + coqchk in a fresh
               # sandbox; every valid one: tests/e2e/test_cli_audit.py)
               "prover.audit_fraction=0.3"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "WANDB_SILENT": "true"}
    # Kill once iteration 1 is proving: the Solver must then resume on iteration 0's weights.
    partial = run_dir / "iter_0001" / "prove.partial.jsonl"
    reached: list[bool] = []

    def proving() -> bool:
        # whether the prove phase was still running is read before the kill
        if partial.exists() and partial.stat().st_size:
            reached.append(not (run_dir / "iter_0001" / "phase_prove.done").exists())
        return bool(reached)

    code = run_until_then_kill(command, proving, "the run never reached iteration 1's prove phase", timeout=900,
                               cwd=tmp_path, env=env)
    assert code == -signal.SIGKILL
    killed_mid_phase = reached[0]
    assert not (run_dir / "iter_0001" / "phase_record.done").exists()
    # Samples that came back but were not yet verified are in the phase's sample cache.
    cache = run_dir / "iter_0001" / "prove.samples.jsonl"
    cached = cache.read_bytes().count(b"\n") if killed_mid_phase and cache.exists() else 0

    second = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=800)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resuming" in second.stdout
    if killed_mid_phase:
        output = second.stdout + second.stderr
        stored = int(re.search(r"resuming phase 'prove' of iteration 1 with (\d+) records", output).group(1))
        # ...and the resumed phase takes them from there instead of generating them again.
        if cached > stored:
            assert f"iteration 1 prove: reused {cached - stored} cached samples" in output

    store = check_run(run_dir, iterations=2, conjectures_per_target=1, objective="reinforce")
    try:
        assert store.checkpoint_iterations("solver")  # the warm Solver proves something: training happened
        rejected = {c.extraction_error for i in range(2) for c in store.conjectures(i)} - {None}
        metrics = store.metrics()
        assert "eval/pass@1" not in metrics[0] and 0.0 <= metrics[1]["eval/pass@2"] <= 1.0
        summary = json.loads((run_dir / "evals" / "iter_0001" / "summary.json").read_text())
        assert summary["problems"] == 2 and summary["n"] == 2
        # The weights evaluated are those the Solver serves after iteration 1's update.
        assert summary["policy_version"] == max([i + 1 for i in store.checkpoint_iterations("solver")], default=0)
        known = {f.value for f in Failure} | {DUPLICATE_OF_TARGET, DUPLICATE_CONJECTURE, MATCHES_BENCHMARK,
                                               "elaboration_invalid",
                                               "elaboration_timeout", "elaboration_system_error"}
        assert rejected <= known
        # Every conjecture that passed screening is scored (how many do is the warm Conjecturer's
        # luck: a handful are drawn, some rejected by design); the Guide's verdict is there
        # exactly for the kept ones.
        screened = [c.id for i in range(2) for c in store.conjectures(i) if c.statement is not None]
        scores = [s for i in range(2) for s in store.conjecture_scores(i).values()]
        assert len(scores) == len(screened)
        assert all((s.guide_output is not None) == s.kept for s in scores)
        for it in range(2):
            weighted = any(s.weight != 0 for s in store.conjecture_scores(it).values() if s.kept)
            assert (it in store.checkpoint_iterations("conjecturer")) == weighted
        assert (run_dir / "wandb").is_dir()  # offline wandb by default
        # The resumed process wrote the report; the phase the killed one finished has no timing in it.
        page = check_report(run_dir / "report" / "report.md")
        assert "no `phase_seconds/conjecture` in iteration(s) 1" in page
        # Iteration 0 was recorded by the first session, iteration 1 after the resume.
        assert [m["faults/driver_resumes"] for m in metrics] == [0, 1]
        # The audit ran, on valid proofs only; real Rocq's two paths agree.
        for m in metrics:
            assert m["verifier/audited"] <= m["verification/valid"] + m["verifier/audit_disagreements"]
            assert m["verifier/audit_disagreements"] == 0
            rejected = sum(v for k, v in m.items() if k.startswith("verifier/rejected/"))
            assert rejected == m["verification/invalid"] + m["verification/timeout"]
        assert sum(m["verifier/audited"] for m in metrics) > 0
        assert "## 9. Rejection reasons" in page
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.full  # make test-full; not in CI
def test_solver_only_experiment_on_vllm_engines_that_take_weights_directly(tmp_path, warm_run):
    """The solver-only experiment with vLLM engines that get each trained
    checkpoint from the learner over gloo, not from disk."""
    run_dir = tmp_path / "run"
    vllm = ["resources.engine_backend=vllm", "resources.weight_transfer=direct",
            # REINFORCE (every valid proof): under REINFORCE-1/2 whether anything trains, and so
            # whether any weights are sent, is the tiny warm Solver's luck
            "method.solver_objective=reinforce"]
    proc = _sgs("+experiment=reinforce_half_solver_only", *warm_run, *vllm, "iterations=2",
                "logging.wandb_mode=disabled", f"run_dir={run_dir}", timeout=500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "cumulative solve rate on the 6 training targets:" in proc.stdout
    store = check_run(run_dir, iterations=2, conjectures_per_target=0, objective="reinforce")
    try:
        assert not store.checkpoint_iterations("conjecturer")
        assert all(m["conjectures_sampled"] == 0 for m in store.metrics())
        trained = store.checkpoint_iterations("solver")
        assert trained, "no training happened, so no weights were sent"
        for iteration in trained:
            numbers = json.loads((store.checkpoint_dir("solver", iteration) / TRAIN_METRICS_FILE).read_text())
            assert numbers["weights_sent_directly"] == 1.0 and numbers["weight_transfer_seconds"] > 0
    finally:
        store.close()
    # Running the finished run again does nothing.
    again = _sgs("+experiment=reinforce_half_solver_only", *warm_run, *vllm, "iterations=2",
                 "logging.wandb_mode=disabled", f"run_dir={run_dir}")
    assert again.returncode == 0 and "all 2 iterations are done" in again.stdout


@pytest.mark.slow
@pytest.mark.full  # in process in CI: tests/unit/sgs/loop/test_loop_in_process.py runs every experiment
def test_a_cispo_run_trains_the_solver_on_whole_groups_with_the_samplers_logprobs(tmp_path, warm_run):
    """CISPO end to end: its entry asks for the sampler's log-probs and whole groups, and
    the Solver trains exactly when its selection holds something."""
    run_dir = tmp_path / "run"
    proc = _sgs("+experiment=cispo_solver_only", *warm_run, "iterations=2", "logging.wandb_mode=disabled",
                f"run_dir={run_dir}", timeout=500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_run(run_dir, iterations=2, conjectures_per_target=0, objective="cispo").close()


@pytest.mark.slow
@pytest.mark.full  # in process in CI: tests/unit/sgs/loop/test_loop_in_process.py runs every experiment
def test_an_expert_iteration_run_trains_the_solver_on_the_stored_proofs_it_replays(tmp_path, warm_run):
    """Expert iteration end to end: its entry replays the stored proofs of the last
    method.ei_replay_iterations iterations (the current one included)."""
    run_dir = tmp_path / "run"
    proc = _sgs("+experiment=ei_solver_only", *warm_run, "iterations=2", "logging.wandb_mode=disabled",
                f"run_dir={run_dir}", timeout=500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    store = Store.open(run_dir, None, yaml.safe_load((run_dir / "config.yaml").read_text()))
    try:
        assert [m["iteration"] for m in store.metrics()] == [0, 1]
        for it in range(2):
            replayed = [p for p in store.solved_registry.recent_proofs(since_iteration=it - 2)
                        if p.iteration <= it and p.reward != 0.0]
            assert (it in store.checkpoint_iterations("solver")) == bool(replayed)
    finally:
        store.close()


def check_parallel_sampling(store: Store, said: str) -> None:
    """The paper's third curve of Figure 1, in a finished two-iteration run (``store``, whose
    ``check_run`` passed; ``said``: its output): the warm Solver draws k proofs per target in
    every iteration and is never updated."""
    run_dir = store.run_dir
    # No learner ran: no checkpoint, no learner numbers, no learner placement.
    assert not store.checkpoint_iterations("solver") and not store.checkpoint_iterations("conjecturer")
    metrics = store.metrics()
    assert not any(key.startswith("train/") for m in metrics for key in m)
    assert json.loads((run_dir / "placement.json").read_text())["learner"] == {}
    # Every iteration draws fresh samples of the starting weights (policy version 0)...
    attempts = [sorted(store.attempts(it), key=lambda a: a.id) for it in range(2)]
    assert {a.completion.policy_version for a in attempts[0] + attempts[1]} == {0}
    assert [a.completion.text for a in attempts[0]] != [a.completion.text for a in attempts[1]]
    # ...k per training target: generations = k x targets x iterations.
    training = sum(not t.held_out for t in store.targets)
    assert [m["generations"] for m in metrics] == [4 * training, 4 * training * 2]
    assert metrics[0]["cumulative_solve_rate"] <= metrics[1]["cumulative_solve_rate"]
    assert re.search(r"held-out pass@4 on 1 targets: \S+ \(policy version 0\) -> \S+ \(policy version 0\)", said)
    # The report draws its curve, labelled by the experiment.
    page = check_report(run_dir / "report" / "report.md")
    assert f"| parallel_sampling | {run_dir} | 2 | {4 * training * 2} |" in page


def start_samples(store: Store) -> dict[str, tuple]:
    """Iteration 0's samples on the targets, by id: their text and what became of them."""
    return {a.id: (a.completion.text, a.verdict.status if a.verdict else a.extraction_error)
            for a in store.attempts(0) if a.problem_kind == "target"}


@pytest.mark.slow
@pytest.mark.full  # make test-full; in CI every experiment runs in process (tests/unit/sgs/loop/test_loop_in_process.py)
@pytest.mark.timeout(1800)  # two runs, each starting Ray and its engines: over 500 s at load 15 here
def test_multirun_sweep_gives_each_experiment_its_own_run(tmp_path, warm_run):
    """``python -m sgs -m``: a run per experiment in a folder of its own, both from the shared
    start cache, then the report command on both.  The sweep's experiments are parallel sampling
    (:func:`check_parallel_sampling`) and the method without a Guide, two iterations each: one
    command for what took two (every run starts Ray, its engines and the verifier pool; the
    standard method runs end to end in the killed-and-resumed run and in the default run)."""
    run_dir = tmp_path / "sweep"
    proc = _sgs("-m", "+experiment=parallel_sampling,no_guide", *warm_run, "iterations=2",
                "logging.wandb_mode=disabled", f"run_dir={run_dir}", timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    starts = []
    jobs = (("0", "parallel_sampling", 0, "none"), ("1", "no_guide", 1, "reinforce_half"))
    for job, experiment, cpt, objective in jobs:
        store = check_run(run_dir / job, iterations=2, conjectures_per_target=cpt, objective=objective)
        try:
            assert store.config["experiment"] == experiment and store.config["method"]["use_guide"] is False
            if experiment == "parallel_sampling":
                check_parallel_sampling(store, proc.stdout)
            else:
                assert all(s.guide_output is None for it in range(2) for s in store.conjecture_scores(it).values())
            starts.append(start_samples(store))
        finally:
            store.close()
    # Same seed and warm start: both experiments start from the same samples on the
    # targets (the shared start cache), whatever else their iteration 0 sampled.
    assert starts[0] and starts[0] == starts[1]
    assert "samples of the base weights from the shared start cache" in proc.stdout + proc.stderr
    # The report command puts both runs on each figure; the run without a Guide gets a note, not a crash.
    report = subprocess.run([sys.executable, "-m", "tools.report", str(run_dir), "--out", str(tmp_path / "report"),
                             "--format", "html"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    page = check_report(tmp_path / "report" / "report.html")
    assert "<td>parallel_sampling</td>" in page and "<td>no_guide</td>" in page
    assert "no_guide: no Guide reviews (its experiment has no Guide)" in page


@pytest.mark.slow
def test_the_default_run_warm_starts_and_prints_its_summary(tmp_path, require_rocq):
    """``python -m sgs`` as ``make demo`` runs it, cut to CI size: one iteration
    on the first 24 targets, a one-epoch warm start on 500 of the shipped
    corpus's lines into a fresh cache, its warm-up report on 4 targets (the
    iteration samples all 20 anyway)."""
    run_dir = tmp_path / "run"
    proc = _sgs("iterations=1", "targets.limit=24", "warmstart.epochs=1", "warmstart.max_examples=500",
                "warmstart.report_targets=4",
                "logging.wandb_mode=disabled", f"run_dir={run_dir}", timeout=590, SGS_CACHE_DIR=str(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert ("warm start: fine-tuning the base model on pkg://sgs/data/warmstart_rocq.jsonl "
            "(1 epoch(s), lr 0.001, at most 500 lines)") in out
    [info] = (tmp_path / "cache" / CACHE_SUBDIR).glob(f"*/{INFO_FILE}")
    assert json.loads(info.read_text())["examples"] == 500
    assert "warm-up: Solver pass@8" in out and "on 4 training targets" in out
    assert "Conjecturer parses" in out and "Guide parses" in out
    summary = out[out.index("== SGS run summary"):]
    assert f"run directory: {run_dir}" in summary
    assert "cumulative solve rate on the 20 training targets:" in summary
    assert "held-out pass@8 on 4 targets:" in summary
    assert "per phase: conjecture" in summary and "warm start" in summary
    assert f"report: {run_dir / 'report' / 'report.md'}" in summary
    # The one test run with Ray's dashboard, as make demo starts it: its address said at the start and at the end.
    assert re.search(r"^Ray dashboard: http://\S+:\d+ \(", out, re.MULTILINE), out[:3000]
    assert "Ray dashboard (while a run is going): http://" in summary
    check_report(run_dir / "report" / "report.md")  # every figure of the report, from a real run
    store = check_run(run_dir, iterations=1, conjectures_per_target=1, k=8)
    try:
        assert store.config["experiment"] == "standard" and store.config["model"]["name"] == "rocq_prover"
        # The Conjecturer sampled under the statement grammar: whatever it stated
        # in full is well formed and closed, so nothing failed to elaborate.
        assert store.config["sampling"]["conjecturer_grammar"] == "statement"
        conjectures = store.conjectures(0)
        assert any(c.statement is not None for c in conjectures)
        assert not any(c.extraction_error == "elaboration_invalid" for c in conjectures)
        held_out = json.loads((run_dir / "held_out_eval.json").read_text())
        assert held_out["0"]["targets"] == 4 and held_out["0"]["k"] == 8
    finally:
        store.close()
