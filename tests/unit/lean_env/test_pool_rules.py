"""The verifier pool's rules that need no pool: its settings' checks, which
proofs the audit samples, how an audit's answer changes a verdict, and the
stats it reports (the pool itself, with real Rocq workers on Ray:
``tests/integration/lean_env/test_pool.py``)."""

from __future__ import annotations

import pytest

from lean_env.audit_rule import audit_sampled, combine_audit
from lean_env.backends import BackendSpec
from lean_env.pool import PoolStats, VerifierPoolSettings
from lean_env.verdict import Status, Verdict


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="num_workers"):
        VerifierPoolSettings(num_workers=0, timeout=5)
    with pytest.raises(ValueError, match="unknown prover backend"):
        BackendSpec("isabelle")


def test_audit_sample_is_a_fixed_function_of_id_and_seed():
    ids = [f"task-{i}" for i in range(4000)]
    assert not any(audit_sampled(i, 0, 0.0) for i in ids)
    assert all(audit_sampled(i, 0, 1.0) for i in ids)
    tenth = [i for i in ids if audit_sampled(i, 0, 0.1)]
    assert 300 < len(tenth) < 500                                      # about 10%
    assert tenth == [i for i in ids if audit_sampled(i, 0, 0.1)]       # a rerun audits the same proofs
    assert tenth != [i for i in ids if audit_sampled(i, 1, 0.1)]       # another seed, another sample
    # a larger fraction audits a superset
    assert set(tenth) <= {i for i in ids if audit_sampled(i, 0, 0.2)}


def test_combine_audit():
    first = Verdict(Status.VALID, reason="ok", messages=["m"], seconds=0.5, worker="w0")
    agree = combine_audit(first, Verdict(Status.VALID, reason="ok"))
    assert (agree.status, agree.reason, agree.audit, agree.messages) == (Status.VALID, "ok", "agree", ["m"])
    for status, reason in [(Status.TIMEOUT, "audit_timeout"), (Status.SYSTEM_ERROR, "audit_unavailable")]:
        unsure = combine_audit(first, Verdict(status, reason=reason))
        assert (unsure.status, unsure.audit) == (Status.VALID, "inconclusive")
        assert unsure.messages == ["m", f"audit inconclusive: {reason}"]
    no = combine_audit(first, Verdict(Status.INVALID, reason="audit_axioms:Audited.cheat", messages=["coqchk"]))
    assert (no.status, no.reason, no.audit, no.worker) == (Status.INVALID, "audit_disagreement", "disagree", "w0")
    assert "audit_axioms:Audited.cheat" in no.messages[0] and no.messages[1] == "coqchk"
    assert first.audit == "" and first.messages == ["m"]   # the first verdict is not changed


def test_stats_flatten_rejection_reasons():
    stats = PoolStats(audited=3, audit_disagreements=1)
    stats.verdicts["valid"] += 2
    stats.rejected["prover_error"] += 4
    stats.rejected["audit_disagreement"] += 1
    d = stats.as_dict()
    assert d["audited"] == 3 and d["audit_disagreements"] == 1 and d["audit_inconclusive"] == 0
    assert d["verdict_valid"] == 2 and d["rejected/prover_error"] == 4 and d["rejected/audit_disagreement"] == 1
    assert "rejected" not in d and "verdicts" not in d


def test_bad_audit_arguments():
    for fraction in (-0.1, 1.5, True):
        with pytest.raises(ValueError, match="audit_fraction"):
            VerifierPoolSettings(num_workers=1, timeout=5, audit_fraction=fraction)
