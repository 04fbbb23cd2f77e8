"""The run directory: create, write, resume, the solved registry, metrics,
config and target checks, damaged files and checkpoints.  Kills between and
inside phases: ``test_store_kills.py``, with this file's builders."""

import json
from dataclasses import replace

import pytest
import yaml

from lean_env.verdict import Status, Verdict
from sgs.state.records import Attempt, Completion, Conjecture, ConjectureScore, RecordError, Target, prompt_digest
from sgs.state.solved import MAX_PROOFS
from sgs.state.phase_log import VERDICT_MESSAGES_CAP
from sgs.state.store import Store, StoreError

PHASES = ["conjecture", "prove", "review", "train_solver", "train_conjecturer", "record"]
CONFIG = {
    "iterations": 3,
    "learner": {"lr": 3e-6, "betas": [0.9, 0.95]},
    "model": {"name": "tiny"},
    "logging": {"wandb_mode": "offline"},
}


# ---------------------------------------------------------------------------
# Builders


def make_targets(n=4, held_out=()):
    return [
        Target(id=f"t{i}", header="import Mathlib", statement=f"theorem t{i} : {i} = {i} := by", held_out=f"t{i}" in held_out)
        for i in range(n)
    ]


def make_completion(text="rfl", policy_version=0):
    tokens = [ord(c) for c in text]
    return Completion(prompt_sha256=prompt_digest("prompt"), text=text, token_ids=tokens,
                      logprobs=[-0.5] * len(tokens), policy_version=policy_version, finish_reason="stop", entropy=0.7)


def make_attempt(iteration, problem_id, index, valid, proof=None, kind="target", messages=()):
    proof = proof if proof is not None else f"exact proof_{problem_id}_{index}"
    verdict = Verdict(status=Status.VALID if valid else Status.INVALID, reason="ok" if valid else "prover_error",
                      messages=list(messages), seconds=0.25, worker="w0")
    return Attempt(id=f"{problem_id}#{index}", iteration=iteration, problem_id=problem_id, problem_kind=kind,
                   completion=make_completion(f"```lean4\n{proof}\n```"), proof=proof, extraction_error=None,
                   verdict=verdict, reward=1.0 if valid else 0.0)


def make_conjecture(iteration, target_id, index=0, malformed=False):
    return Conjecture(id=f"c{iteration}-{target_id}-{index}", iteration=iteration, target_id=target_id,
                      completion=make_completion("theorem c : True := by sorry"),
                      statement=None if malformed else "theorem c : True := by",
                      extraction_error="no lean4 block" if malformed else None)


def make_metrics(iteration, **extra):
    return {"iteration": iteration, "generations": 0, "cumulative_solve_rate": 0.0, "pass_at_k": 0.0,
            "conjectures_kept": 0, "mean_guide_score": 0.0, "system_error_rate": 0.0, **extra}


def run_phase(store, iteration, phase, records):
    phase_log = store.begin_phase(iteration, phase)
    for r in records:
        phase_log.append(r)
    store.mark_done(iteration, phase)


@pytest.fixture
def run_dir(tmp_path):
    return tmp_path / "run"


# ---------------------------------------------------------------------------
# Create, write, resume


def test_create_then_resume_reads_everything_back(run_dir):
    targets = make_targets(3, held_out={"t2"})
    conjectures = [make_conjecture(0, "t0"), make_conjecture(0, "t1", malformed=True)]
    attempts = [make_attempt(0, "t0", 0, valid=True), make_attempt(0, "t0", 1, valid=False),
                make_attempt(0, "c0-t0-0", 0, valid=True, kind="conjecture")]
    score = ConjectureScore(conjecture_id="c0-t0-0", solve_rate=0.5, kept=True, relevance=4, redundancy=0,
                            complexity=1, guide_output="<begin_relevance_score>4<end_relevance_score>",
                            guide_parse_error=None, r_guide=6.0, reward=3.0, weight=1.0)
    with Store.open(run_dir, targets, CONFIG) as store:
        run_phase(store, 0, "conjecture", conjectures)
        run_phase(store, 0, "prove", attempts)
        run_phase(store, 0, "review", [score])
        store.append_metrics(make_metrics(0, generations=store.generations()))
        store.mark_done(0, "record")

    assert yaml.safe_load((run_dir / "config.yaml").read_text()) == CONFIG
    assert [json.loads(line)["id"] for line in (run_dir / "targets.jsonl").read_text().splitlines()] == ["t0", "t1", "t2"]
    assert sorted(p.name for p in (run_dir / "iter_0000").iterdir()) == [
        "conjecture.jsonl", "phase_conjecture.done", "phase_prove.done", "phase_record.done",
        "phase_review.done", "prove.jsonl", "review.jsonl"]

    with Store.open(run_dir, None, CONFIG) as store:
        assert store.targets == targets
        assert store.conjectures(0) == conjectures
        assert store.attempts(0) == attempts
        assert store.conjecture_scores(0) == {"c0-t0-0": score}
        assert store.generations() == 5  # 2 Conjecturer + 3 Solver samples; the score is not a generation
        assert store.metrics() == [make_metrics(0, generations=5)]
        assert store.solved_registry.is_solved("t0") and not store.solved_registry.is_solved("t1")
        assert store.resume_point(PHASES) == (0, "train_solver")


def test_a_relative_run_directory_is_held_absolute(tmp_path, monkeypatch):
    """Its paths go to actors whose working directory may differ (Ray Train's state dir among them)."""
    monkeypatch.chdir(tmp_path)
    with Store.open("runs/a", make_targets(), CONFIG) as store:
        assert store.run_dir == tmp_path / "runs" / "a"
    with Store.open("runs/a", None, CONFIG) as store:  # and resumed from the same relative path
        assert store.run_dir.is_absolute() and store.targets == make_targets()


def test_records_round_trip_through_json_with_unicode():
    a = make_attempt(2, "t0", 3, valid=True, proof="intro h\n  simp [∀, ℝ] -- é")
    assert Attempt.from_json(json.loads(json.dumps(a.to_json()))) == a
    failed = Attempt(id="x", iteration=0, problem_id="t0", problem_kind="target", completion=make_completion(), proof=None,
                     extraction_error="no lean4 block", verdict=None, reward=-0.25)
    assert Attempt.from_json(failed.to_json()) == failed
    assert failed.completion.num_tokens == len("rfl")


def test_record_invariants_are_enforced():
    with pytest.raises(RecordError, match="exactly one of 'proof' and 'extraction_error'"):
        Attempt(id="x", iteration=0, problem_id="t0", problem_kind="target", completion=make_completion(), proof=None,
                extraction_error=None, verdict=None, reward=0.0)
    with pytest.raises(RecordError, match="token ids but"):
        Completion(prompt_sha256="0", text="a", token_ids=[1, 2], logprobs=[-1.0], policy_version=0,
                   finish_reason="stop", entropy=0.0)
    with pytest.raises(RecordError, match="problem_kind"):
        Attempt(id="x", iteration=0, problem_id="t0", problem_kind="lemma", completion=make_completion(), proof=None,
                extraction_error="e", verdict=None, reward=0.0)


def test_phase_log_rejects_duplicates_unknown_targets_and_wrong_iteration(run_dir):
    with Store.open(run_dir, make_targets(2), CONFIG) as store:
        phase_log = store.begin_phase(1, "prove")
        phase_log.append(make_attempt(1, "t0", 0, valid=False))
        with pytest.raises(ValueError, match="already holds attempt 't0#0'"):
            phase_log.append(make_attempt(1, "t0", 0, valid=True))
        with pytest.raises(ValueError, match="unknown target 'nope'"):
            phase_log.append(make_attempt(1, "nope", 0, valid=True))
        with pytest.raises(ValueError, match="from iteration 0"):
            phase_log.append(make_attempt(0, "t1", 0, valid=True))
        with pytest.raises(ValueError, match="unknown parent target"):
            phase_log.append(make_conjecture(1, "nope"))
        store.mark_done(1, "prove")
        assert [a.id for a in store.attempts(1)] == ["t0#0"]
        with pytest.raises(StoreError, match="already done"):
            store.begin_phase(1, "prove")
        with pytest.raises(StoreError, match="behind iteration 1"):
            store.begin_phase(0, "prove")


def test_verdict_messages_are_capped(run_dir):
    long_messages = ["x" * 3000, "y" * 3000, "z" * 10]
    with Store.open(run_dir, make_targets(1), CONFIG) as store:
        run_phase(store, 0, "prove", [make_attempt(0, "t0", 0, valid=False, messages=long_messages)])
        (stored,) = store.attempts(0)
    messages = stored.verdict.messages
    assert messages[0] == "x" * 3000
    assert messages[1].startswith("y" * (VERDICT_MESSAGES_CAP - 3000))
    assert messages[1].endswith(f"[{3000 + 10 - (VERDICT_MESSAGES_CAP - 3000)} characters cut by the store]")
    assert len(messages) == 2


def test_second_open_of_a_run_in_use_is_refused(run_dir):
    with Store.open(run_dir, make_targets(1), CONFIG):
        with pytest.raises(StoreError, match="in use by another process"):
            Store.open(run_dir, None, CONFIG)
    Store.open(run_dir, None, CONFIG).close()  # released on close


# ---------------------------------------------------------------------------
# Solved registry


def test_proof_cap_keeps_sixteen_distinct_proofs_per_target(run_dir):
    # 18 distinct proofs plus 2 that repeat earlier ones up to whitespace.
    proofs = [f"tactic_{i}" for i in range(18)] + ["  tactic_0\n", "tactic_1"]
    with Store.open(run_dir, make_targets(2), CONFIG) as store:
        run_phase(store, 0, "prove", [make_attempt(0, "t0", i, valid=True, proof=p) for i, p in enumerate(proofs)])
        stored = store.solved_registry.proofs("t0")
        assert len(stored) == MAX_PROOFS == 16
        assert [p.proof for p in stored] == [f"tactic_{i}" for i in range(16)]
        run_phase(store, 1, "prove", [make_attempt(1, "t0", 0, valid=True, proof="new_tactic")])
        assert len(store.solved_registry.proofs("t0")) == 16
        assert store.solved_registry.solved_at("t0") == 0
    with Store.open(run_dir, None, CONFIG) as store:
        assert [p.proof for p in store.solved_registry.proofs("t0")] == [f"tactic_{i}" for i in range(16)]
        assert store.generations() == 21


def test_solved_from_first_verifying_iteration_and_stays_solved(run_dir):
    targets = make_targets(4, held_out={"t3"})
    with Store.open(run_dir, targets, CONFIG) as store:
        registry = store.solved_registry
        run_phase(store, 0, "prove", [make_attempt(0, "t0", 0, valid=False), make_attempt(0, "t3", 0, valid=True)])
        run_phase(store, 1, "prove", [make_attempt(1, "t0", 0, valid=True), make_attempt(1, "t1", 0, valid=True),
                                      make_attempt(1, "c1-t2-0", 0, valid=True, kind="conjecture")])
        uses_try = replace(make_attempt(2, "t1", 1, valid=True, proof="try simp"), reward=0.0)
        run_phase(store, 2, "prove", [make_attempt(2, "t0", 0, valid=False), make_attempt(2, "t1", 0, valid=True), uses_try])
        assert registry.solved_at("t0") == 1 and registry.solved_at("t1") == 1
        # t1#0 of iteration 2 repeats the proof t1#0 of iteration 1 found: stored once.
        # A verified proof that earned no reward is still stored, with its reward, for expert iteration.
        assert [(p.attempt_id, p.iteration, p.reward) for p in registry.proofs("t1")] == [("t1#0", 1, 1.0), ("t1#1", 2, 0.0)]
        assert registry.is_solved("t0", through_iteration=2) and not registry.is_solved("t0", through_iteration=0)
        assert not registry.is_solved("t2")  # only its conjecture was proved
        # Cumulative solve rate is over training targets: held-out t3 is solved but never counted.
        assert registry.is_solved("t3")
        assert registry.cumulative_solve_rate(through_iteration=0) == 0.0
        assert registry.cumulative_solve_rate() == pytest.approx(2 / 3)
        # Expert iteration: proofs created in the last iterations.
        assert sorted(p.attempt_id + f"@{p.iteration}" for p in registry.recent_proofs(since_iteration=2)) == ["t1#1@2"]
        assert store.generations(through_iteration=1) == 5 and store.generations() == 8
        with pytest.raises(KeyError):
            registry.is_solved("nope")


def test_held_out_only_targets_give_zero_rate(run_dir):
    with Store.open(run_dir, make_targets(2, held_out={"t0", "t1"}), CONFIG) as store:
        run_phase(store, 0, "prove", [make_attempt(0, "t0", 0, valid=True)])
        assert store.solved_registry.cumulative_solve_rate() == 0.0


# ---------------------------------------------------------------------------
# Config and targets on resume


def test_changed_config_is_refused_with_the_differing_keys(run_dir):
    Store.open(run_dir, make_targets(1), CONFIG).close()
    changed = {**CONFIG, "learner": {"lr": 1e-6, "betas": [0.9, 0.95]}, "model": {}}
    with pytest.raises(StoreError) as err:
        Store.open(run_dir, None, changed)
    message = str(err.value)
    assert "learner.lr: 3e-06 -> 1e-06" in message
    assert "model.name: 'tiny' -> <absent>" in message
    assert "give a new run_dir for a new run" in message and "allow_changes=True" in message
    assert not (run_dir / "config_changes.jsonl").exists()


def test_resumable_keys_may_change_and_forced_changes_become_the_run_config(run_dir):
    Store.open(run_dir, make_targets(1), CONFIG).close()
    longer = {**CONFIG, "iterations": 10, "logging": {"wandb_mode": "online"}}
    with Store.open(run_dir, None, longer) as store:
        assert store.config["iterations"] == 10
    changed = {**longer, "learner": {"lr": 1e-6, "betas": [0.9, 0.95]}}
    Store.open(run_dir, None, changed, allow_changes=True).close()
    # The run now compares against the config it last ran with.
    Store.open(run_dir, None, changed).close()
    with pytest.raises(StoreError, match="learner.lr: 1e-06 -> 3e-06"):
        Store.open(run_dir, None, longer)
    history = [json.loads(line) for line in (run_dir / "config_changes.jsonl").read_text().splitlines()]
    assert [(h["changed"], h["forced"]) for h in history] == [
        (["iterations", "logging.wandb_mode"], False), (["learner.lr"], True)]
    assert yaml.safe_load((run_dir / "config.yaml").read_text()) == CONFIG  # written once, never rewritten


def test_resume_refuses_different_targets(run_dir):
    Store.open(run_dir, make_targets(3), CONFIG).close()
    with pytest.raises(StoreError, match="1 only in the run"):
        Store.open(run_dir, make_targets(2), CONFIG)
    with pytest.raises(StoreError, match="1 changed"):
        Store.open(run_dir, make_targets(3, held_out={"t1"}), CONFIG)
    with Store.open(run_dir, make_targets(3), CONFIG) as store:
        assert [t.id for t in store.targets] == ["t0", "t1", "t2"]


def test_create_refuses_duplicate_targets_and_leftover_run_data(tmp_path):
    with pytest.raises(ValueError, match=r"repeated: \['t0'\]"):
        Store.open(tmp_path / "a", make_targets(2) + make_targets(1), CONFIG)
    (tmp_path / "b" / "iter_0000").mkdir(parents=True)
    with pytest.raises(StoreError, match="no config.yaml but holds run data"):
        Store.open(tmp_path / "b", make_targets(1), CONFIG)


# ---------------------------------------------------------------------------
# Damaged files


def _finished_run(run_dir):
    with Store.open(run_dir, make_targets(2), CONFIG) as store:
        run_phase(store, 0, "prove", [make_attempt(0, "t0", i, valid=True) for i in range(3)])
    return run_dir / "iter_0000" / "prove.jsonl"


def _replace_line(path, lineno, text):
    lines = path.read_text().splitlines(keepends=True)
    lines[lineno - 1] = text
    path.write_text("".join(lines))


def test_invalid_json_in_a_finished_log_names_file_and_line(run_dir):
    path = _finished_run(run_dir)
    _replace_line(path, 2, '{"attempt": {"id": \n')
    with Store.open(run_dir, None, CONFIG) as store, pytest.raises(StoreError, match=r"prove\.jsonl:2: not valid JSON"):
        store.attempts(0)


@pytest.mark.parametrize("field, bad, message", [
    ("token_ids", ["a"], "expected a list of integers"),
    ("token_ids", [1, True], "expected a list of integers"),  # JSON's true is no token
    ("token_ids", [1, 2.0], "expected a list of integers"),
    ("logprobs", [-0.5, "-1"], "expected a list of numbers"),
    ("logprobs", [-0.5, False], "expected a list of numbers"),
    ("logprobs", [-0.5, None], "expected a list of numbers"),
])
def test_wrong_field_type_in_a_finished_log_names_file_line_and_field(run_dir, field, bad, message):
    path = _finished_run(run_dir)
    record = json.loads(path.read_text().splitlines()[2])
    record["attempt"]["completion"][field] = bad
    _replace_line(path, 3, json.dumps(record) + "\n")
    with Store.open(run_dir, None, CONFIG) as store, \
            pytest.raises(StoreError, match=rf"prove\.jsonl:3: field '{field}': {message}"):
        store.attempts(0)


def test_a_completions_token_lists_read_back_as_written(run_dir):
    """Integer log-probabilities (JSON writes -1.0 as -1.0, but a hand-made log may say -1) come back as floats."""
    path = _finished_run(run_dir)
    record = json.loads(path.read_text().splitlines()[2])
    record["attempt"]["completion"]["logprobs"] = [-1, -0.25]
    record["attempt"]["completion"]["token_ids"] = [7, 8]
    _replace_line(path, 3, json.dumps(record) + "\n")
    with Store.open(run_dir, None, CONFIG) as store:
        completion = [a for a in store.attempts(0) if a.completion.token_ids == [7, 8]][0].completion
    assert completion.logprobs == [-1.0, -0.25] and all(type(x) is float for x in completion.logprobs)


def test_finished_log_that_lost_records_is_reported(run_dir):
    path = _finished_run(run_dir)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2]))
    with Store.open(run_dir, None, CONFIG) as store, pytest.raises(StoreError, match="its marker recorded"):
        store.attempts(0)
    path.write_text("".join(lines[:2]) + lines[2][:10])  # a torn line in a committed log is damage, not a kill
    with Store.open(run_dir, None, CONFIG) as store, pytest.raises(StoreError, match=r"prove\.jsonl:3: incomplete last line"):
        store.attempts(0)


def test_damaged_targets_marker_and_partial_log_are_reported(run_dir):
    _finished_run(run_dir)
    marker = run_dir / "iter_0000" / "phase_prove.done"
    good_marker = marker.read_text()
    marker.write_text(good_marker[:-5])
    with pytest.raises(StoreError, match=r"phase_prove\.done: damaged phase marker"):
        Store.open(run_dir, None, CONFIG)
    marker.write_text(good_marker)

    partial = run_dir / "iter_0001" / "prove.partial.jsonl"
    partial.parent.mkdir()
    partial.write_text(json.dumps({"attempt": make_attempt(1, "t0", 0, valid=True).to_json()}) + "\n"
                       + json.dumps({"proof": {}}) + "\n")
    with Store.open(run_dir, None, CONFIG) as store, \
            pytest.raises(StoreError, match=r"prove\.partial\.jsonl:2: unknown record type 'proof'"):
        store.begin_phase(1, "prove")

    targets = run_dir / "targets.jsonl"
    _replace_line(targets, 2, '{"id": "t1", "header": "", "statement": 3, "held_out": false}\n')
    with pytest.raises(StoreError, match=r"targets\.jsonl:2: field 'statement': expected str"):
        Store.open(run_dir, None, CONFIG)


# ---------------------------------------------------------------------------
# Checkpoints


def test_prune_keeps_the_last_n_and_the_best(run_dir):
    with Store.open(run_dir, make_targets(1), CONFIG) as store:
        for i in range(6):
            path = store.checkpoint_dir("solver", i)
            path.mkdir(parents=True)
            (path / "model.safetensors").write_bytes(b"w")
        store.checkpoint_dir("conjecturer", 0).mkdir(parents=True)
        assert store.checkpoint_dir("solver", 3) == run_dir / "checkpoints" / "solver" / "iter_0003"
        store.set_best_checkpoint("solver", 1)
        assert store.best_checkpoint("solver") == 1
        assert store.prune_checkpoints("solver", keep_last=2) == [0, 2, 3]
        assert store.checkpoint_iterations("solver") == [1, 4, 5]
        assert store.checkpoint_iterations("conjecturer") == [0]
        assert store.best_checkpoint("conjecturer") is None
        with pytest.raises(StoreError, match="does not exist"):
            store.set_best_checkpoint("solver", 0)
        with pytest.raises(ValueError, match="role name"):
            store.checkpoint_dir("../solver", 0)
    assert (run_dir / "checkpoints" / "solver" / "best").read_text() == "iter_0001\n"
