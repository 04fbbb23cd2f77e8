"""The models the benchmarks run, built locally with random weights (no download).

Imported by the benchmark scripts of this folder (``from shapes import ...``;
a script's own folder is on ``sys.path``), never by ``sgs``.

* ``tiny``: a Llama with hidden 256, 4 layers, 4 heads (head_dim 64: vLLM's
  CPU kernels need >= 32) and the project's tiny BPE tokenizer, float32.
* ``medium``: hidden 1024, 12 layers, 16 heads, about 200M parameters, float32.
* ``7b``: DeepSeek-Prover-V2-7B's shape (a Llama: hidden 4096, intermediate
  11008, 30 layers, 32 heads, vocabulary 102400) in bfloat16, with the tiny
  tokenizer (sampled ids beyond it decode to nothing, which costs every
  engine the same); ``layers`` keeps the width with fewer layers.
"""

from __future__ import annotations

import json
from pathlib import Path

from sgs.machinery.models.tiny import TinyModelSettings, build_tiny_model

SHAPES = {
    "tiny": TinyModelSettings(hidden_size=256, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=4,
                              num_key_value_heads=4, max_position_embeddings=1024),
    "medium": TinyModelSettings(hidden_size=1024, intermediate_size=4096, num_hidden_layers=12,
                                num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=1024),
}

#: DeepSeek-Prover-V2-7B's architecture (its base, DeepSeek-Prover-V1.5, is a Llama;
#: see its config.json); only the shape matters here.
SHAPE_7B = dict(
    vocab_size=102400, hidden_size=4096, intermediate_size=11008, num_hidden_layers=30,
    num_attention_heads=32, num_key_value_heads=32,
)
#: Context of the 7B-shaped benchmark model: room for the benchmarks' prompts and generations.
CONTEXT_7B = 8192


def build_model(shape: str, directory: Path, *, seed: int = 0, layers: int | None = None) -> Path:
    """Build ``shape`` under ``directory`` and return its checkpoint path (reused when already built)."""
    if shape in SHAPES:
        if layers is not None:
            raise ValueError("layers applies to the 7b shape only")
        return build_tiny_model(directory / f"{shape}-{seed}", [], SHAPES[shape], seed=seed)
    if shape != "7b":
        raise ValueError(f"unknown shape {shape!r}; available: {', '.join([*SHAPES, '7b'])}")
    return build_7b(directory, seed=seed, layers=layers)


def build_7b(directory: Path, *, seed: int = 0, layers: int | None = None) -> Path:
    """A random bf16 Llama of the 7B shape (``layers`` of its 30, default all), built on the GPU when one is
    visible (seconds; minutes on a CPU), saved with the tiny tokenizer."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

    layers = layers or SHAPE_7B["num_hidden_layers"]
    path = directory / f"7b-{layers}layers-{seed}"
    config_file = path / "config.json"
    if config_file.exists() and json.loads(config_file.read_text()).get("num_hidden_layers") == layers:
        return path
    tokenizer = AutoTokenizer.from_pretrained(build_tiny_model(directory / "tokenizer", [], TinyModelSettings()))
    config = LlamaConfig(**{**SHAPE_7B, "num_hidden_layers": layers}, max_position_embeddings=CONTEXT_7B,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False, dtype="bfloat16")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return path
