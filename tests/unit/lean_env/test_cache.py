"""The verdict cache: only proof-determined verdicts, persistence, torn lines."""

from lean_env.cache import VerdictCache
from lean_env.verdict import ProofTask, Status, Verdict


def test_key_depends_on_every_part():
    t = ProofTask("a", "H", "S", "P")
    keys = {t.key("v1"), t.key("v2"), ProofTask("b", "H2", "S", "P").key("v1"),
            ProofTask("a", "H", "S2", "P").key("v1"), ProofTask("a", "H", "S", "P2").key("v1")}
    assert len(keys) == 5
    assert ProofTask("other-id", "H", "S", "P").key("v1") == t.key("v1")  # ids do not matter


def test_only_valid_and_invalid_are_cached(tmp_path):
    cache = VerdictCache(tmp_path / "c.jsonl")
    cache.put("v", Verdict(Status.VALID, reason="ok", seconds=1.5))
    cache.put("i", Verdict(Status.INVALID, reason="prover_error", messages=["boom"]))
    cache.put("t", Verdict(Status.TIMEOUT))
    cache.put("s", Verdict(Status.SYSTEM_ERROR))
    assert cache.get("t") is None and cache.get("s") is None
    hit = cache.get("i")
    assert hit.cached and hit.status is Status.INVALID and hit.messages == ["boom"] and hit.seconds == 0.0
    assert (cache.hits, cache.misses) == (1, 2)


def test_persists_and_skips_a_torn_last_line(tmp_path):
    path = tmp_path / "c.jsonl"
    VerdictCache(path).put("k", Verdict(Status.VALID))
    with open(path, "a") as f:
        f.write('{"key": "half", "verdict": {"sta')  # a killed writer
    again = VerdictCache(path)
    assert again.get("k").status is Status.VALID
    assert len(again) == 1


def test_the_audit_field_survives_memory_and_disk(tmp_path):
    path = tmp_path / "c.jsonl"
    cache = VerdictCache(path)
    cache.put("k", Verdict(Status.VALID, reason="ok"))
    assert cache.get("k").audit == ""
    # the same proof audited later: the entry is updated, in memory and on disk
    cache.put("k", Verdict(Status.VALID, reason="ok", audit="agree"))
    cache.put("d", Verdict(Status.INVALID, reason="audit_disagreement", audit="disagree"))
    assert cache.get("k").audit == "agree"
    reloaded = VerdictCache(path)
    assert reloaded.get("k").audit == "agree" and reloaded.get("k").cached
    assert (reloaded.get("d").reason, reloaded.get("d").audit) == ("audit_disagreement", "disagree")
    lines = path.read_text().splitlines()
    cache.put("k", Verdict(Status.VALID, reason="ok", audit="agree"))   # nothing new: nothing written
    assert path.read_text().splitlines() == lines and len(lines) == 3
