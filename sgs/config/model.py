"""The base model all three roles start from (a part of the schema in
:mod:`sgs.config.schema`, kept in its own module so that each reads in one
sitting), and its checks (:func:`model_problems`; what its dtype and context
allow the training and sampling nodes is checked with them, in
:mod:`sgs.config.validation`)."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING

from sgs.config.checks import Choice, at_least, positive


class Dtype(Choice):
    """``model.dtype``: a torch dtype's name."""

    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"


@dataclass
class TinyModelSettings:
    """Architecture and tokenizer of the tiny Llama built by ``sgs.machinery.models.tiny``.

    head_dim = hidden_size / num_attention_heads must be at least 32 for
    vLLM's CPU attention kernels.
    """

    #: Target vocabulary of the byte-level BPE tokenizer, special tokens
    #: included; a small corpus may yield fewer tokens.
    vocab_size: int = 2048
    #: Width of the residual stream.
    hidden_size: int = 128
    #: Width of the MLP's hidden layer.
    intermediate_size: int = 256
    #: Number of transformer blocks.
    num_hidden_layers: int = 2
    #: Query heads per attention layer.
    num_attention_heads: int = 4
    #: Key/value heads (grouped-query attention); must divide the query heads.
    num_key_value_heads: int = 4
    #: Longest sequence (prompt plus generation) the model accepts.  RoPE
    #: positions have no weights, so a long context costs nothing; 16384 fits
    #: the paper's 8192-token generations after a prompt.
    max_position_embeddings: int = 16384
    #: Base of the rotary position embedding.
    rope_theta: float = 10000.0
    #: A BPE merge is learned only from pairs seen at least this often.
    min_token_frequency: int = 2


@dataclass
class ModelConfig:
    """The base model all three roles start from."""

    #: Short label for logs and run names.
    name: str = MISSING
    #: Hugging Face hub id or local directory of the base checkpoint; null
    #: builds the tiny model from ``tiny`` (no download).
    path: str | None = None
    #: Tokenizer hub id or directory; null uses ``path``.
    tokenizer_path: str | None = None
    #: Weights of the Guide, e.g. a checkpoint fine-tuned for the review
    #: format; null uses the base model.
    guide_path: str | None = None
    #: Weight dtype for generation and checkpoints.
    dtype: Dtype = Dtype.bfloat16
    #: The model is too large for CPU inference and training.
    needs_gpu: bool = False
    #: Builder settings when ``path`` is null.
    tiny: TinyModelSettings | None = None
    #: Factor on ``training.learning_rate`` for this model's self-play
    #: updates.  The experiments give the paper's rates, which suit a 7B
    #: model; a far smaller model needs far larger steps (the tiny model: 100).
    learning_rate_scale: float = 1.0


def model_problems(model: ModelConfig) -> list[str]:
    """Every problem within the ``model`` node, one message per problem, each naming its key."""
    problems: list[str] = []
    if not model.name:
        problems.append("model.name must not be empty")
    if model.path is None and model.tiny is None:
        problems.append("model.path is null and model.tiny is not set: give a checkpoint path or tiny-model settings")
    if model.path is None and model.needs_gpu:
        problems.append("model.needs_gpu=true but model.path is null: the locally built tiny model runs on CPU")
    positive(problems, "model.learning_rate_scale", model.learning_rate_scale)
    tiny = model.tiny
    if tiny is None:
        return problems
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "min_token_frequency"):
        at_least(problems, f"model.tiny.{key}", getattr(tiny, key), 1)
    positive(problems, "model.tiny.rope_theta", tiny.rope_theta)
    # The 256 byte symbols plus the 6 special tokens of sgs.machinery.models.tiny.
    at_least(problems, "model.tiny.vocab_size", tiny.vocab_size, 262)
    if tiny.num_attention_heads >= 1 and tiny.num_key_value_heads >= 1:
        if tiny.hidden_size % tiny.num_attention_heads:
            problems.append(
                f"model.tiny.hidden_size={tiny.hidden_size} must be divisible by "
                f"model.tiny.num_attention_heads={tiny.num_attention_heads}"
            )
        elif tiny.hidden_size // tiny.num_attention_heads < 32:
            problems.append(
                f"model.tiny head_dim = hidden_size / num_attention_heads = "
                f"{tiny.hidden_size // tiny.num_attention_heads} must be at least 32 (vLLM CPU attention)"
            )
        if tiny.num_attention_heads % tiny.num_key_value_heads:
            problems.append(
                f"model.tiny.num_key_value_heads={tiny.num_key_value_heads} must divide "
                f"model.tiny.num_attention_heads={tiny.num_attention_heads}"
            )
    return problems
