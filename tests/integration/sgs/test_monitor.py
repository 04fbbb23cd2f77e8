"""The live dashboard gauges: what the loop's events add up to."""

from lean_env.verdict import Status
from sgs.machinery.monitor import LiveMonitor


def test_phase_numbers_count_events_and_restart_with_each_phase(ray_session):
    monitor = LiveMonitor("run-x", ("conjecture", "prove"), min_interval_s=3600)
    monitor.phase_started(2, "prove", {"solver": 3, "guide": 0})
    for waiting in (3, 2, 1, 0):
        monitor.sampled(1, generation_queue=waiting)
    for status in (Status.VALID, Status.SYSTEM_ERROR, Status.INVALID, Status.VALID):
        monitor.verified(status, verification_queue=5)
    started = monitor._phase_started
    numbers = monitor.snapshot(now=started + 2.0)
    assert numbers == {"generation_queue": 0, "verification_queue": 5, "generations_per_second": 2.0,
                       "verifications_per_second": 2.0, "system_error_rate": 0.25}
    monitor.phase_started(2, "review", {"solver": 3})
    assert monitor.snapshot()["system_error_rate"] == 0.0 and monitor.generations == 0


def test_publishing_is_throttled(ray_session, monkeypatch):
    monitor = LiveMonitor("run-y", ("prove",), min_interval_s=3600)
    published = []
    monkeypatch.setattr(monitor, "snapshot", lambda now=None: published.append(now) or {
        key: 0.0 for key in ("generation_queue", "verification_queue", "generations_per_second",
                             "verifications_per_second", "system_error_rate")})
    monitor.sampled(1, 0)
    monitor.verified(Status.VALID, 0)
    assert published == []  # within the interval: nothing sent
    monitor.publish(force=True)
    assert len(published) == 1


def test_rejection_reasons_become_tagged_gauges_that_drop_to_zero(ray_session, monkeypatch):
    monitor = LiveMonitor("run-z", ("prove",))
    rejected, headline = [], []
    monkeypatch.setattr(monitor._rejected, "set", lambda value, tags: rejected.append((tags["reason"], value)))
    monkeypatch.setattr(monitor._iteration_gauges["verifier/audit_disagreements"], "set", headline.append)
    monitor.iteration_finished({"iteration": 0, "verifier/audit_disagreements": 2,
                                "verifier/rejected/prover_error": 5, "verifier/rejected/banned:Admitted": 1})
    assert sorted(rejected) == [("banned:Admitted", 1.0), ("prover_error", 5.0)] and headline == [2.0]
    rejected.clear()
    monitor.iteration_finished({"iteration": 1, "verifier/rejected/prover_error": 3})
    assert sorted(rejected) == [("banned:Admitted", 0.0), ("prover_error", 3.0)]
