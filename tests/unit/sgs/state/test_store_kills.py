"""The run directory when its writer is killed: between phases (and where a
run resumes), mid-write inside a phase (a child process SIGKILLs itself, or
is killed from outside while streaming), at any byte of a line, between a
log's rename and its marker; a redone record phase and torn metrics lines.
The writer's other behaviour, and the builders used here: ``test_store.py``."""

import json
import logging
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgs.state.store import Store, StoreError
from tests.paths import REPO
from tests.unit.sgs.state.test_store import (  # noqa: F401  (run_dir is a fixture used here)
    CONFIG, PHASES, make_attempt, make_conjecture, make_metrics, make_targets, run_dir, run_phase,
)


def test_kill_between_phases_resumes_at_the_next_phase(run_dir):
    store = Store.open(run_dir, make_targets(2), CONFIG)
    run_phase(store, 0, "conjecture", [make_conjecture(0, "t0"), make_conjecture(0, "t1")])
    store.close()  # the process dies here: prove never started

    with Store.open(run_dir, None, CONFIG) as store:
        assert store.resume_point(PHASES) == (0, "prove")
        assert store.generations() == 2
        phase_log = store.begin_phase(0, "prove")
        assert phase_log.recovered == []


def test_resume_point_moves_to_the_next_iteration_and_detects_holes(run_dir):
    with Store.open(run_dir, make_targets(1), CONFIG) as store:
        assert store.resume_point(PHASES) == (0, "conjecture")
        for phase in PHASES:
            store.mark_done(0, phase)
        assert store.resume_point(PHASES) == (1, "conjecture")
        assert store.first_unfinished(0, PHASES) is None
        store.mark_done(1, "conjecture")
        assert store.resume_point(PHASES) == (1, "prove")
        with pytest.raises(StoreError, match="iteration 0 never finished phase 'eval'"):
            store.resume_point(PHASES + ["eval"])
        # A run directory written with other phases (SGS before 2026-11-27 trained each role in a phase
        # of its own) is refused, also when its one iteration would look unfinished.
        with pytest.raises(StoreError, match=r"finished phases \['train_conjecturer', 'train_solver'\] that are not"):
            store.resume_point([p for p in PHASES if not p.startswith("train_")] + ["train"])


# The child appends attempts through a real PhaseLog; its last write puts half
# a line on disk and the process SIGKILLs itself, so no cleanup code runs.
SELF_KILL_SCRIPT = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from tests.unit.sgs.state.test_store import CONFIG, make_attempt, make_conjecture, make_targets
from sgs.state.store import Store

class HalfWriteThenDie:
    def __init__(self, f):
        self.f = f
    def write(self, data):
        self.f.write(data[: len(data) // 2])
        self.f.flush()
        os.kill(os.getpid(), signal.SIGKILL)

store = Store.open(sys.argv[1], make_targets(2), CONFIG)
phase_log = store.begin_phase(0, "conjecture")
phase_log.append(make_conjecture(0, "t0"))
phase_log.append(make_conjecture(0, "t1", malformed=True))
store.mark_done(0, "conjecture")
phase_log = store.begin_phase(0, "prove")
for i in range(3):
    phase_log.append(make_attempt(0, "t0", i, valid=i > 0))
phase_log._file = HalfWriteThenDie(phase_log._file)
phase_log.append(make_attempt(0, "t0", 3, valid=True))
"""


def test_sigkill_mid_write_inside_a_phase_loses_only_the_torn_line(run_dir, caplog):
    proc = subprocess.run([sys.executable, "-c", SELF_KILL_SCRIPT, str(run_dir), str(REPO)], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    partial = run_dir / "iter_0000" / "prove.partial.jsonl"
    assert not partial.read_bytes().endswith(b"\n")  # a torn last line is on disk

    with Store.open(run_dir, None, CONFIG) as store:
        # Only the finished conjecture phase counts until prove commits.
        assert store.resume_point(PHASES) == (0, "prove")
        assert store.generations() == 2
        assert store.attempts(0) == []
        assert not store.solved_registry.is_solved("t0")

        with caplog.at_level(logging.WARNING, logger="sgs.state.store"):
            phase_log = store.begin_phase(0, "prove")
        assert "prove.partial.jsonl:4: dropping an incomplete last line" in caplog.text
        assert partial.read_bytes().endswith(b"\n")
        assert [a.id for a in phase_log.recovered] == ["t0#0", "t0#1", "t0#2"]

        # Redo the phase: skip what was recovered, do the rest.
        done = phase_log.ids("attempt")
        for i in range(8):
            attempt = make_attempt(0, "t0", i, valid=i > 0)
            if attempt.id not in done:
                phase_log.append(attempt)
        with pytest.raises(ValueError, match="already holds"):
            phase_log.append(make_attempt(0, "t0", 1, valid=True))
        store.mark_done(0, "prove")

        assert store.generations() == 2 + 8
        assert [a.id for a in store.attempts(0)] == [f"t0#{i}" for i in range(8)]
        assert [p.attempt_id for p in store.solved_registry.proofs("t0")] == [f"t0#{i}" for i in range(1, 8)]

    with Store.open(run_dir, None, CONFIG) as store:
        assert store.generations() == 10
        assert len(store.solved_registry.proofs("t0")) == 7
        assert store.resume_point(PHASES) == (0, "review")


# The child streams large attempts until the test kills it from outside, at
# whatever point of a write it happens to be.
STREAM_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[2])
from tests.unit.sgs.state.test_store import CONFIG, make_attempt, make_targets
from sgs.state.store import Store

store = Store.open(sys.argv[1], make_targets(2), CONFIG)
phase_log = store.begin_phase(0, "prove")
i = 0
while True:
    phase_log.append(make_attempt(0, "t1", i, valid=True, proof="simp\\n" * 50_000))
    i += 1
"""


def test_external_sigkill_while_streaming_keeps_every_complete_record(run_dir):
    proc = subprocess.Popen([sys.executable, "-c", STREAM_SCRIPT, str(run_dir), str(REPO)], stderr=subprocess.PIPE)
    partial = run_dir / "iter_0000" / "prove.partial.jsonl"
    deadline = time.monotonic() + 120
    try:
        while not (partial.exists() and partial.read_bytes().count(b"\n") >= 5):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the writer never produced 5 records"
            time.sleep(0.05)
    finally:
        proc.kill()  # SIGKILL
        proc.wait()
        proc.stderr.close()
    complete = partial.read_bytes().count(b"\n")

    with Store.open(run_dir, None, CONFIG) as store:
        assert store.generations() == 0
        phase_log = store.begin_phase(0, "prove")
        assert len(phase_log.recovered) == complete
        assert [a.id for a in phase_log.recovered] == [f"t1#{i}" for i in range(complete)]
        phase_log.append(make_attempt(0, "t1", complete, valid=False))
        store.mark_done(0, "prove")
        assert store.generations() == complete + 1
        assert len(store.attempts(0)) == complete + 1


@settings(max_examples=30, deadline=None)
@given(total=st.integers(min_value=1, max_value=6), cut_fraction=st.floats(min_value=0.0, max_value=1.0))
def test_a_kill_at_any_byte_is_recovered_without_loss_or_double_count(total, cut_fraction):
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        attempts = [make_attempt(0, "t0", i, valid=i % 2 == 0, proof=f"p{i}") for i in range(total)]
        store = Store.open(run_dir, make_targets(1), CONFIG)
        phase_log = store.begin_phase(0, "prove")
        for a in attempts:
            phase_log.append(a)
        store.close()  # killed before mark_done
        partial = run_dir / "iter_0000" / "prove.partial.jsonl"
        data = partial.read_bytes()
        cut = int(len(data) * cut_fraction)
        partial.write_bytes(data[:cut])
        complete = data[:cut].count(b"\n")

        with Store.open(run_dir, None, CONFIG) as store:
            phase_log = store.begin_phase(0, "prove")
            assert phase_log.recovered == attempts[:complete]
            for a in attempts[complete:]:
                phase_log.append(a)
            store.mark_done(0, "prove")
            assert store.attempts(0) == attempts
            assert store.generations() == total
            assert [p.attempt_id for p in store.solved_registry.proofs("t0")] == [a.id for a in attempts[::2]]


def test_kill_after_the_log_rename_but_before_the_marker(run_dir):
    with Store.open(run_dir, make_targets(1), CONFIG) as store:
        run_phase(store, 0, "prove", [make_attempt(0, "t0", i, valid=True) for i in range(3)])
    (run_dir / "iter_0000" / "phase_prove.done").unlink()  # the marker write never happened

    with Store.open(run_dir, None, CONFIG) as store:
        assert not store.phase_done(0, "prove")
        assert store.generations() == 0 and not store.solved_registry.is_solved("t0")
        with pytest.raises(StoreError, match="call begin_phase to recover"):
            store.mark_done(0, "prove")
        phase_log = store.begin_phase(0, "prove")
        assert len(phase_log.recovered) == 3
        store.mark_done(0, "prove")
        assert store.generations() == 3
        assert len(store.solved_registry.proofs("t0")) == 3


def test_redone_record_phase_writes_one_metrics_line(run_dir, caplog):
    with Store.open(run_dir, make_targets(1), CONFIG) as store:
        store.append_metrics(make_metrics(0, pass_at_k=0.5))
        # killed before mark_done(0, "record")
    with Store.open(run_dir, None, CONFIG) as store:
        assert store.resume_point(PHASES) == (0, "conjecture")
        with caplog.at_level(logging.WARNING, logger="sgs.state.store"):
            store.append_metrics(make_metrics(0, pass_at_k=0.75))
        assert "already in metrics.jsonl" in caplog.text
        store.mark_done(0, "record")
        store.append_metrics(make_metrics(1))
        assert [m["pass_at_k"] for m in store.metrics()] == [0.5, 0.0]
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == 2


def test_torn_metrics_line_is_dropped_on_resume(run_dir, caplog):
    with Store.open(run_dir, make_targets(1), CONFIG) as store:
        store.append_metrics(make_metrics(0))
    with open(run_dir / "metrics.jsonl", "ab") as f:
        f.write(b'{"iteration": 1, "gener')
    with caplog.at_level(logging.WARNING, logger="sgs.state.store"), Store.open(run_dir, None, CONFIG) as store:
        assert [m["iteration"] for m in store.metrics()] == [0]
        store.append_metrics(make_metrics(1))
    assert "metrics.jsonl:2: dropping an incomplete last line" in caplog.text
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["iteration"] for line in lines] == [0, 1]


def test_metrics_need_the_required_keys(run_dir):
    with Store.open(run_dir, make_targets(1), CONFIG) as store:
        bad = make_metrics(0)
        del bad["pass_at_k"], bad["system_error_rate"]
        with pytest.raises(ValueError, match=r"missing required keys \['pass_at_k', 'system_error_rate'\]"):
            store.append_metrics(bad)
        store.append_metrics(make_metrics(2))
        with pytest.raises(ValueError, match="come after iteration 2"):
            store.append_metrics(make_metrics(1))
        assert [m["iteration"] for m in store.metrics()] == [2]
