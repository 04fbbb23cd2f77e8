"""The pool's audit rule: which valid verdicts get a second opinion, and
what the second opinion does to them.

A proof check is audited when ``sha256("<audit_seed>:<task id>")``, read as
a number in [0, 1), is below ``audit_fraction`` (:func:`audit_sampled`), so a
rerun with the same seed audits the same proofs.  :func:`combine_audit` turns
the first verdict and the audit's into the one returned: a disagreement makes
it ``invalid`` (reason ``audit_disagreement``), so the proof earns no reward;
a lost or timed-out audit, or a backend without an audit path, is
``inconclusive`` and the verdict stays ``valid``.
"""

from __future__ import annotations

import dataclasses
import hashlib

from lean_env.verdict import Status, Verdict

#: values of ``Verdict.audit`` after an audit
AGREE, DISAGREE, INCONCLUSIVE = "agree", "disagree", "inconclusive"
#: the reason of a verdict the audit overturned
AUDIT_DISAGREEMENT = "audit_disagreement"


def audit_sampled(task_id: str, seed: int, fraction: float) -> bool:
    """Whether the check of task ``task_id`` is audited: a fixed function of
    the id and the seed, true for about ``fraction`` of all ids (always for
    1.0, never for 0.0)."""
    digest = hashlib.sha256(f"{seed}:{task_id}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64 < fraction


def combine_audit(first: Verdict, audit: Verdict) -> Verdict:
    """The verdict returned for a ``valid`` check ``first`` audited as ``audit``.

    ``valid`` audit: agree.  ``timeout`` or ``system_error`` (no audit path,
    a lost worker): inconclusive, the verdict stays valid.  ``invalid``:
    disagree, the verdict becomes ``invalid`` with reason
    ``audit_disagreement`` and the audit's reason and messages.
    """
    if audit.valid:
        return dataclasses.replace(first, messages=list(first.messages), audit=AGREE)
    if audit.status in (Status.TIMEOUT, Status.SYSTEM_ERROR):
        return dataclasses.replace(first, messages=[*first.messages, f"audit inconclusive: {audit.reason}"],
                                   audit=INCONCLUSIVE)
    return Verdict(Status.INVALID, reason=AUDIT_DISAGREEMENT,
                   messages=[f"the first check accepted this proof; the audit rejected it: {audit.reason}",
                             *audit.messages],
                   seconds=first.seconds, worker=first.worker, cached=first.cached, audit=DISAGREE)
