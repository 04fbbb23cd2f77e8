"""What every generation engine promises: sampling settings in, samples out.

An engine holds one set of weights (one role's policy) and samples
completions for raw-text prompts.  The loop only ever talks to this interface,
so the transformers backend (:mod:`sgs.machinery.engines.hf`) and a vLLM backend are
interchangeable.

Conventions every backend follows:

* Prompts are raw text, already rendered by the caller (role templates live in
  ``sgs/roles``).  They are tokenised the way ``tokenizer(prompt)`` does it,
  i.e. with the tokenizer's own special tokens such as BOS (vLLM does the same
  for text prompts), so a rendered chat template must not carry its own BOS.
* ``Sample.token_ids`` are the completion tokens exactly as sampled, including
  the final EOS token when generation stopped on one.  The learner trains on
  these ids; text is never re-tokenised.
* ``Sample.logprobs[t]`` is log p(token_t) under the *tempered* distribution
  softmax(logits / temperature) that the token was drawn from.  Top-p
  truncation is not applied to the reported value, so it equals a
  teacher-forced forward pass at the same temperature (``logprobs_of``) and
  serves as π_old for CISPO.  With temperature 0 (greedy decoding) the
  distribution is degenerate, and the untempered (temperature 1) log-probs
  are reported instead.
* With a grammar (``SamplingSettings.grammar``), the tokens the grammar
  forbids get probability 0 before sampling, so ``Sample.logprobs`` are
  renormalised over the allowed tokens (vLLM does the same): again the
  log-prob under the distribution that was sampled.  A teacher-forced pass,
  which knows no grammar, gives values that are lower or equal.
* ``Sample.entropy`` is the mean over completion tokens of the entropy of the
  sampler's top-10 log-probs renormalised to sum to one (the paper's token
  entropy, SPEC §1.6).
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import Any, Literal

import torch

FinishReason = Literal["stop", "length"]

ENTROPY_TOP_K = 10


@dataclass(frozen=True)
class SamplingSettings:
    """How to sample; one settings object per ``generate`` call."""

    n: int = 1
    """Samples per prompt (k = 8 for the Solver in the paper)."""
    max_tokens: int = 256
    """Most completion tokens per sample; a sample cut here finishes with "length"."""
    temperature: float = 1.0
    """Softmax temperature; 0 means greedy decoding."""
    top_p: float = 1.0
    """Nucleus sampling mass in (0, 1]; 1 samples from the whole distribution."""
    seed: int | None = None
    """Seed for the sampler; the same prompts, settings and weights give the same samples.
    None draws fresh randomness."""
    grammar: str | None = None
    """EBNF grammar (xgrammar's dialect, see :mod:`sgs.method.roles.grammar`) that every
    sample follows: tokens that would leave it are never drawn.  None: free text."""
    max_seq_len: int | None = None
    """Most prompt + completion tokens per sample: the learner's ``training.max_seq_len``
    for the samples it trains on, so that nothing is generated that training would cut.
    A sample that reaches it stops with "length" (before ``max_tokens`` when the prompt
    is long); a prompt that alone reaches it is refused.  None: only ``max_tokens`` and
    the engine's context limit apply."""

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"SamplingSettings.n must be a positive integer, got {self.n!r}")
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"SamplingSettings.max_tokens must be a positive integer, got {self.max_tokens!r}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0.0):
            raise ValueError(f"SamplingSettings.temperature must be finite and >= 0, got {self.temperature!r}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"SamplingSettings.top_p must lie in (0, 1], got {self.top_p!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or self.seed < 0):
            raise ValueError(f"SamplingSettings.seed must be None or a non-negative integer, got {self.seed!r}")
        if self.grammar is not None and (not isinstance(self.grammar, str) or not self.grammar.strip()):
            raise ValueError(f"SamplingSettings.grammar must be None or a non-empty EBNF text, got {self.grammar!r}")
        if self.max_seq_len is not None and (not isinstance(self.max_seq_len, int) or self.max_seq_len < 2):
            raise ValueError(f"SamplingSettings.max_seq_len must be None or an integer >= 2, got {self.max_seq_len!r}")


@dataclass(frozen=True)
class Sample:
    """One sampled completion with everything training and metrics need."""

    text: str
    """The completion decoded from ``token_ids``, special tokens (EOS) left out."""
    token_ids: list[int]
    """Completion token ids exactly as sampled, the stopping EOS included."""
    logprobs: list[float]
    """Log-prob of each sampled token under the tempered sampling distribution (see module doc)."""
    prompt_token_ids: list[int]
    """The prompt as the engine tokenised it."""
    finish_reason: FinishReason
    """"stop": the sample ended with an EOS token; "length": it hit max_tokens, max_seq_len or
    the context limit."""
    policy_version: int
    """Version of the weights that produced the sample (0 = the initial checkpoint)."""
    entropy: float
    """Mean token entropy over the sampler's top-10 log-probs, renormalised (SPEC §1.6)."""

    @property
    def num_tokens(self) -> int:
        """Number of completion tokens, EOS included (what counts against max_tokens)."""
        return len(self.token_ids)


class GenerationEngine(abc.ABC):
    """One model's sampler.  Implementations are used from inside a Ray actor."""

    @abc.abstractmethod
    def generate(self, prompts: list[str], settings: SamplingSettings) -> list[list[Sample]]:
        """Sample ``settings.n`` completions for each prompt; result[i] belongs to prompts[i]."""

    @abc.abstractmethod
    def load_weights(self, checkpoint_dir: str, policy_version: int) -> None:
        """Replace the weights with a Hugging Face checkpoint and label them ``policy_version``."""

    @property
    @abc.abstractmethod
    def policy_version(self) -> int:
        """Version of the weights currently loaded."""

    @abc.abstractmethod
    def logprobs_of(
        self, prompt_ids: list[int], completion_ids: list[int], temperature: float = 1.0
    ) -> list[float]:
        """Teacher-forced log-prob of each completion token under softmax(logits / temperature).

        This is the quantity ``Sample.logprobs`` reports (for temperature > 0),
        computed in one forward pass; it lets tests and the learner check the
        sampler's numbers.
        """

    def served_logprobs(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        """Teacher-forced log-probs at temperature 1 computed with the weights
        that serve samples (for vLLM: vLLM's own forward pass, not a copy).

        The loop compares them with the learner's log-probs of the same probe
        after every weight update: a gap means the engine did not get the
        weights the learner wrote, or computes with them very differently.
        Backends whose ``logprobs_of`` already runs the serving weights
        inherit this definition.
        """
        return self.logprobs_of(prompt_ids, completion_ids, 1.0)

    def sleep(self, level: int = 1) -> None:
        """Release accelerator memory while another phase (training) needs it.

        Level 1 keeps the weights in host memory, level 2 drops them (the
        caller loads new weights after :meth:`wake_up`).  The default does
        nothing: an engine with nothing to release stays as it is.
        """

    def wake_up(self) -> None:
        """Undo :meth:`sleep` (before generating or loading weights again)."""


def tokenize_prompts(
    tokenizer: Any, prompts: list[str], max_model_len: int, max_seq_len: int | None = None
) -> list[list[int]]:
    """Each prompt's token ids as ``tokenizer(prompt)`` gives them (special
    tokens included), refusing prompts that leave nothing to condition on or
    no room to generate under ``max_model_len`` or ``max_seq_len``
    (``SamplingSettings.max_seq_len``)."""
    prompt_ids = tokenizer(list(prompts))["input_ids"]
    for index, ids in enumerate(prompt_ids):
        if not ids:
            raise ValueError(f"prompt {index} is empty after tokenisation; there is nothing to condition on")
        if len(ids) >= max_model_len:
            raise ValueError(
                f"prompt {index} has {len(ids)} tokens, leaving no room under max_model_len={max_model_len}"
            )
        if max_seq_len is not None and len(ids) >= max_seq_len:
            raise ValueError(
                f"prompt {index} ({prompts[index][:80]!r}...) has {len(ids)} tokens, leaving no room for a "
                f"completion under max_seq_len={max_seq_len} (training.max_seq_len: the learner would cut "
                f"every token generated for it)"
            )
    return prompt_ids


def completion_limit(prompt_len: int, settings: SamplingSettings, max_model_len: int) -> int:
    """Most tokens a sample of a ``prompt_len``-token prompt may have: ``settings.max_tokens``,
    or less where the prompt leaves less room under the engine's ``max_model_len`` or
    under ``settings.max_seq_len``."""
    limit = min(settings.max_tokens, max_model_len - prompt_len)
    if settings.max_seq_len is not None:
        limit = min(limit, settings.max_seq_len - prompt_len)
    return limit


def top_k_entropy(top_logprobs: torch.Tensor) -> torch.Tensor:
    """Entropy of the distribution renormalised over some of its log-probs, [..., k] -> [...].

    Applied to the sampler's top-10 log-probs at each step.  Renormalising in
    log space keeps it exact when the retained mass is tiny.
    """
    log_p = torch.log_softmax(top_logprobs.float(), dim=-1)
    # Tokens a grammar forbids have log-prob -inf and add nothing (0 * -inf is nan).
    return -(log_p.exp() * log_p.masked_fill(torch.isneginf(log_p), 0.0)).sum(dim=-1)


def first_line(error: BaseException) -> str:
    """An exception as one short line (Ray's carry whole tracebacks)."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"
