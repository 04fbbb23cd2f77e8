"""The locally built tiny model (sgs.machinery.models.tiny) and model path resolution."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from sgs.config import ModelConfig, TinyModelSettings
from sgs.machinery.models import ModelPaths, resolve_model_paths
from sgs.machinery.models import tiny
from sgs.machinery.models.tiny import BUILD_INFO_FILE, build_fingerprint, build_tiny_model, load_model_and_tokenizer

ROCQ_TEXT = (
    "Theorem plus_n_O' : forall n : nat, n = n + 0.\n"
    "Proof.\n  intros n. induction n as [| n' IHn'].\n  - reflexivity.\n  - simpl. rewrite <- IHn'. reflexivity.\nQed."
)
CORPUS = [ROCQ_TEXT, "Lemma andb_true : forall b : bool, andb b true = b.\nProof. destruct b; reflexivity. Qed."]
# Smallest shape the builder accepts (head_dim 32): keeps the extra builds cheap.
SMALL = TinyModelSettings(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The default tiny model, built once for the module."""
    settings = TinyModelSettings()
    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", CORPUS, settings, seed=0)
    model, tokenizer = load_model_and_tokenizer(path)
    return path, settings, model, tokenizer


def test_build_writes_a_hugging_face_checkpoint(built):
    path, settings, model, tokenizer = built
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json", BUILD_INFO_FILE):
        assert (path / name).is_file(), name
    config = json.loads((path / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["head_dim"] == settings.hidden_size // settings.num_attention_heads >= 32
    assert config["max_position_embeddings"] == settings.max_position_embeddings
    assert config["vocab_size"] == len(tokenizer) <= settings.vocab_size
    assert model.dtype == torch.float32


@pytest.mark.parametrize(
    "text",
    [
        ROCQ_TEXT,
        "Theorem t : forall x y : Z, (x + y = y + x)%Z .\nProof.  intros; lia.  Qed.  (* ∀ ✓ *)",
        "theorem sq (a : ℝ) : 0 ≤ a ^ 2 := by\n\tpositivity\n",
        "  leading spaces, trailing spaces  \n\n",
    ],
)
def test_tokenizer_round_trips_text_exactly(built, text):
    tokenizer = built[3]
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text


def test_tokenizer_learned_merges_from_the_corpus(built):
    tokenizer = built[3]
    ids = tokenizer("Proof. reflexivity. Qed.", add_special_tokens=False)["input_ids"]
    assert len(ids) < len("Proof. reflexivity. Qed.") / 2


def test_special_tokens_and_chat_template(built):
    tokenizer = built[3]
    for token in tiny.SPECIAL_TOKENS:
        assert len(tokenizer(token, add_special_tokens=False)["input_ids"]) == 1, token
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Prove it."}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == "<s><|system|>\nBe brief.</s>\n<|user|>\nProve it.</s>\n<|assistant|>\n"
    with pytest.raises(Exception, match="unknown chat role: tool"):
        tokenizer.apply_chat_template([{"role": "tool", "content": "x"}], tokenize=False)


def test_model_generates_tokens(built):
    _, _, model, tokenizer = built
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": ROCQ_TEXT}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    torch.manual_seed(0)
    out = model.generate(**prompt, max_new_tokens=6, do_sample=True, min_new_tokens=6)
    new = out[0, prompt["input_ids"].shape[1]:]
    assert new.shape == (6,)
    assert int(new.max()) < len(tokenizer)


def test_second_build_hits_the_cache(built, monkeypatch):
    path, settings, _, _ = built
    before = (path / "model.safetensors").stat().st_mtime_ns

    def fail(*args, **kwargs):
        raise AssertionError("the cached build was rebuilt")

    monkeypatch.setattr(tiny, "_train_tokenizer", fail)
    assert build_tiny_model(path, CORPUS, settings, seed=0) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == before


def test_builds_are_deterministic_and_seeded(tmp_path):
    first = build_tiny_model(tmp_path / "a", CORPUS, SMALL, seed=1)
    second = build_tiny_model(tmp_path / "b", CORPUS, SMALL, seed=1)
    assert (first / "tokenizer.json").read_text() == (second / "tokenizer.json").read_text()
    weights_a, weights_b = load_file(first / "model.safetensors"), load_file(second / "model.safetensors")
    assert all(torch.equal(weights_a[name], weights_b[name]) for name in weights_a)

    other = load_file(build_tiny_model(tmp_path / "c", CORPUS, SMALL, seed=2) / "model.safetensors")
    assert not torch.equal(weights_a["model.embed_tokens.weight"], other["model.embed_tokens.weight"])


def test_build_leaves_the_callers_random_state_alone(tmp_path):
    state = torch.get_rng_state()
    build_tiny_model(tmp_path / "m", [], SMALL, seed=5)
    assert torch.equal(torch.get_rng_state(), state)


def test_fingerprint_covers_settings_seed_and_corpus():
    base = build_fingerprint(CORPUS, SMALL, 0)
    assert build_fingerprint(CORPUS, SMALL, 0) == base
    assert build_fingerprint(CORPUS, SMALL, 1) != base
    assert build_fingerprint(CORPUS[:1], SMALL, 0) != base
    # Text boundaries count: the same characters split differently are a different corpus.
    assert build_fingerprint(["ab", "c"], SMALL, 0) != build_fingerprint(["a", "bc"], SMALL, 0)
    wider = TinyModelSettings(**{**SMALL.__dict__, "intermediate_size": 256})
    assert build_fingerprint(CORPUS, wider, 0) != base


def test_stale_build_is_replaced(tmp_path):
    path = build_tiny_model(tmp_path / "m", CORPUS, SMALL, seed=0)
    build_tiny_model(path, CORPUS, SMALL, seed=3)
    info = json.loads((path / BUILD_INFO_FILE).read_text())
    assert info["seed"] == 3 and info["fingerprint"] == build_fingerprint(CORPUS, SMALL, 3)
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # no staging or retired directories left


def test_foreign_directory_is_never_overwritten(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a tiny-model build"):
        build_tiny_model(tmp_path / "m", CORPUS, SMALL, seed=0)
    assert (tmp_path / "m" / "notes.txt").read_text() == "mine"


def test_empty_directory_is_used(tmp_path):
    (tmp_path / "m").mkdir()
    assert (build_tiny_model(tmp_path / "m", [], SMALL) / "config.json").is_file()


def test_settings_must_be_typed(tmp_path):
    with pytest.raises(TypeError, match="TinyModelSettings"):
        build_tiny_model(tmp_path / "m", [], {"hidden_size": 64})


def test_load_with_dtype(built):
    model, _ = load_model_and_tokenizer(built[0], dtype="bfloat16")
    assert model.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="unknown dtype 'half_float'"):
        load_model_and_tokenizer(built[0], dtype="half_float")


def test_resolve_model_paths_for_a_checkpoint_builds_nothing(tmp_path):
    model = ModelConfig(name="big", path="org/base", guide_path="org/guide")
    assert resolve_model_paths(model, seed=0, cache_dir=tmp_path) == ModelPaths("org/base", "org/base", "org/guide")
    assert list(tmp_path.iterdir()) == []


def test_resolve_model_paths_builds_the_tiny_model_once(tmp_path):
    model = ModelConfig(name="tiny", dtype="float32", tiny=SMALL)
    paths = resolve_model_paths(model, seed=0, corpus=CORPUS, cache_dir=tmp_path)
    expected = tmp_path / "tiny_models" / build_fingerprint(CORPUS, SMALL, 0)[:16]
    assert paths == ModelPaths(str(expected), str(expected), str(expected))
    assert (expected / "model.safetensors").is_file()
    assert resolve_model_paths(model, seed=0, corpus=CORPUS, cache_dir=tmp_path) == paths
    assert len(list((tmp_path / "tiny_models").iterdir())) == 1


def test_resolve_model_paths_without_path_or_settings_fails():
    with pytest.raises(ValueError, match="model.path is null and model.tiny is not set"):
        resolve_model_paths(ModelConfig(name="none"), seed=0)


def test_smallest_vocabulary_allowed_by_validation_is_bytes_plus_specials(tmp_path):
    # sgs.config rejects model.tiny.vocab_size below 262; that is exactly this.
    settings = TinyModelSettings(**{**SMALL.__dict__, "vocab_size": 256 + len(tiny.SPECIAL_TOKENS)})
    _, tokenizer = load_model_and_tokenizer(build_tiny_model(tmp_path / "m", CORPUS, settings))
    assert len(tokenizer) == 262
    assert tokenizer.decode(tokenizer(ROCQ_TEXT, add_special_tokens=False)["input_ids"]) == ROCQ_TEXT
