"""The content-addressed sample cache: keys, round trip, torn and corrupt files."""

import math

from sgs.machinery.engines import Sample, SamplingSettings
from sgs.state.sample_cache import SampleCache, sample_key, start_samples_path, weights_fingerprint

SETTINGS = SamplingSettings(n=4, max_tokens=32, temperature=1.0, top_p=0.95, seed=7)


def tokens(prompt: str) -> list[int]:
    return [ord(ch) for ch in prompt]


def sample(text: str, entropy: float = 0.5) -> Sample:
    return Sample(text=text, token_ids=[1, 2, 3], logprobs=[-0.1, -0.2, -0.3], prompt_token_ids=tokens("p"),
                  finish_reason="stop", policy_version=2, entropy=entropy)


def test_the_key_covers_everything_that_determines_a_sample():
    base = sample_key("p", SETTINGS, 2, "target/t1/a0")
    assert sample_key("p", SETTINGS, 2, "target/t1/a0") == base
    # n does not matter: samples are keyed one by one
    assert sample_key("p", SamplingSettings(n=1, max_tokens=32, temperature=1.0, top_p=0.95, seed=7), 2,
                      "target/t1/a0") == base
    changed = [
        sample_key("q", SETTINGS, 2, "target/t1/a0"),
        sample_key("p", SamplingSettings(n=4, max_tokens=33, temperature=1.0, top_p=0.95, seed=7), 2, "target/t1/a0"),
        sample_key("p", SamplingSettings(n=4, max_tokens=32, temperature=0.9, top_p=0.95, seed=7), 2, "target/t1/a0"),
        sample_key("p", SamplingSettings(n=4, max_tokens=32, temperature=1.0, top_p=1.0, seed=7), 2, "target/t1/a0"),
        sample_key("p", SamplingSettings(n=4, max_tokens=32, temperature=1.0, top_p=0.95, seed=8), 2, "target/t1/a0"),
        sample_key("p", SETTINGS, 3, "target/t1/a0"),
        sample_key("p", SETTINGS, 2, "target/t1/a1"),
        sample_key("p", SamplingSettings(n=4, max_tokens=32, temperature=1.0, top_p=0.95, seed=7, max_seq_len=64), 2,
                   "target/t1/a0"),
    ]
    assert base not in changed and len(set(changed)) == len(changed)


def test_samples_survive_a_reopen_with_their_prompt_tokens_rebuilt(tmp_path):
    path = tmp_path / "prove.samples.jsonl"
    cache = SampleCache(path, tokens)
    cache.put("k1", sample("a"))
    cache.put("k2", sample("b", entropy=float("nan")))
    cache.close()
    again = SampleCache(path, tokens)
    assert len(again) == 2
    assert again.get("k1", "p") == sample("a")
    assert math.isnan(again.get("k2", "p").entropy)
    assert again.get("k3", "p") is None
    again.discard()
    assert not path.exists()


def test_a_torn_last_line_is_cut_and_appending_goes_on(tmp_path, caplog):
    path = tmp_path / "c.jsonl"
    cache = SampleCache(path, tokens)
    cache.put("k1", sample("a"))
    cache.put("k2", sample("b"))
    cache.close()
    data = path.read_bytes()
    path.write_bytes(data[:-10])  # the kill came mid-write of the second line
    reopened = SampleCache(path, tokens)
    assert "torn" in caplog.text
    assert reopened.get("k1", "p") == sample("a") and reopened.get("k2", "p") is None
    reopened.put("k2", sample("b2"))
    reopened.close()
    final = SampleCache(path, tokens)
    assert final.get("k2", "p").text == "b2" and len(final) == 2


def test_a_corrupt_line_is_skipped_not_fatal(tmp_path, caplog):
    path = tmp_path / "c.jsonl"
    cache = SampleCache(path, tokens)
    cache.put("k1", sample("a"))
    cache.close()
    with open(path, "ab") as handle:
        handle.write(b"\xff\xfe not json\n[1, 2]\n")
    cache = SampleCache(path, tokens)
    cache.put("k2", sample("b"))
    cache.close()
    reopened = SampleCache(path, tokens)
    assert len(reopened) == 2 and reopened.get("k2", "p").text == "b"
    assert "skipping a line" in caplog.text


def test_start_samples_are_named_by_the_weights_that_decide_them(tmp_path):
    weights = tmp_path / "model"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"w" * 10)
    (weights / "config.json").write_text("{}")
    first = start_samples_path(tmp_path / "cache", str(weights), "transformers")
    assert first.parent == tmp_path / "cache" / "starts" and first.name.endswith(".samples.jsonl")
    # A report written beside the weights later does not rename them ...
    (weights / "warmup_report.json").write_text("{}")
    assert start_samples_path(tmp_path / "cache", str(weights), "transformers") == first
    # ... another engine backend, or rewritten weights, do.
    assert start_samples_path(tmp_path / "cache", str(weights), "vllm") != first
    (weights / "model.safetensors").write_bytes(b"w" * 11)
    assert start_samples_path(tmp_path / "cache", str(weights), "transformers") != first
    # A hub id is named by itself.
    assert weights_fingerprint("org/model", "vllm") == weights_fingerprint("org/model", "vllm")
