"""The transformers backend: sampling with a hand-written KV-cache loop.

Why not ``model.generate``: we need the log-prob of every sampled token under
the tempered distribution, the top-10 entropy, a private random generator
(so seeding never touches torch's global RNG) and exact stop handling.  A
short loop over the model's forward pass gives all of that directly.

Batches are left-padded so that every row's next token sits in the last
column; position ids are computed from the attention mask so padding does not
shift the rotary positions.  The same layout serves the teacher-forced
``completion_logprobs`` that the learner and ``logprobs_of`` use.

This backend runs on CPU, or on the GPU when one is visible.  It is the
fallback to vLLM: simple, exact, and fast enough for tiny models and tests.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from sgs.machinery.engines.base import (
    ENTROPY_TOP_K,
    GenerationEngine,
    Sample,
    SamplingSettings,
    completion_limit,
    first_line,
    tokenize_prompts,
    top_k_entropy,
)


def left_pad(sequences: list[list[int]], pad_id: int, device: torch.device | str = "cpu") -> tuple[Tensor, Tensor]:
    """Left-pad token lists into ``input_ids`` and ``attention_mask``, both [B, L]."""
    length = max(len(seq) for seq in sequences)
    input_ids = torch.full((len(sequences), length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(sequences), length), dtype=torch.long)
    for row, seq in enumerate(sequences):
        input_ids[row, length - len(seq):] = torch.tensor(seq, dtype=torch.long)
        attention_mask[row, length - len(seq):] = 1
    return input_ids.to(device), attention_mask.to(device)


def position_ids_from_mask(attention_mask: Tensor) -> Tensor:
    """Positions that start at 0 on each row's first real token (padding gets 0 too)."""
    return (attention_mask.cumsum(dim=-1) - 1).clamp(min=0)


def completion_logprobs(
    model: PreTrainedModel,
    prompt_ids: list[list[int]],
    completion_ids: list[list[int]],
    pad_id: int,
    temperature: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """Teacher-forced log-probs of completion tokens, with grad if the model has it.

    Returns ``logprobs`` and ``mask``, both [B, C] with C the longest
    completion.  Completions are right-aligned: row b's tokens fill its last
    |y_b| columns and the mask is 1 there (the layout comes from left-padding
    prompt + completion, so every completion ends in the last column).  Only
    the logits of the last C + 1 positions are computed.
    """
    if len(prompt_ids) != len(completion_ids):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(completion_ids)} completions")
    for row, (prompt, completion) in enumerate(zip(prompt_ids, completion_ids)):
        if not prompt or not completion:
            raise ValueError(f"row {row}: prompt and completion must both be non-empty token lists")
    device = next(model.parameters()).device
    width = max(len(completion) for completion in completion_ids)
    input_ids, attention_mask = left_pad([p + c for p, c in zip(prompt_ids, completion_ids)], pad_id, device)
    logits = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids_from_mask(attention_mask),
        logits_to_keep=width + 1,
    ).logits[:, :-1].float()
    if temperature > 0:
        logits = logits / temperature
    targets = input_ids[:, -width:]
    logprobs = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    lengths = torch.tensor([len(c) for c in completion_ids], device=device)
    mask = torch.arange(width, device=device).unsqueeze(0) >= (width - lengths).unsqueeze(1)
    return logprobs, mask


def _pick_device(device: str | None) -> torch.device:
    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class TransformersEngine(GenerationEngine):
    """A Hugging Face causal LM behind the :class:`GenerationEngine` interface.

    ``model_path`` is anything ``AutoModelForCausalLM.from_pretrained`` takes:
    a local directory or a hub id.  The tokenizer is loaded from the same place
    once; ``load_weights`` swaps only the model (checkpoints written by the
    learner carry the same tokenizer).
    """

    def __init__(
        self,
        model_path: str,
        *,
        policy_version: int = 0,
        device: str | None = None,
        dtype: str = "auto",
        max_batch_size: int = 64,
        max_model_len: int | None = None,
    ) -> None:
        """
        Args:
            model_path: local Hugging Face checkpoint directory or hub id.
            policy_version: version label of the initial weights.
            device: "cpu", "cuda", "cuda:1", ...; default: the GPU if visible, else the CPU.
            dtype: torch dtype name for the weights, or "auto" for the checkpoint's own.
            max_batch_size: most sequences (prompts × n) in one forward pass.
            max_model_len: prompt + completion limit; default the model's max_position_embeddings.
        """
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size!r}")
        self._device = _pick_device(device)
        self._dtype = dtype
        self._max_batch_size = max_batch_size
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model = self._load_model(model_path)
        self._policy_version = _check_version(policy_version)
        self._max_model_len = max_model_len or self.model.config.max_position_embeddings
        self._stop_ids = self._stop_token_ids()
        self._pad_id = self.tokenizer.pad_token_id
        if self._pad_id is None:
            # Any id works: padded positions are masked out everywhere.
            self._pad_id = self._stop_ids[0] if self._stop_ids else 0
        self._grammars = GrammarCache(self.tokenizer, self.model.config.vocab_size, self._stop_ids)

    @property
    def policy_version(self) -> int:
        return self._policy_version

    def load_weights(self, checkpoint_dir: str, policy_version: int) -> None:
        # Load before dropping the old model, so a bad checkpoint leaves the engine working.
        model = self._load_model(checkpoint_dir)
        if model.config.vocab_size != self.model.config.vocab_size:
            raise ValueError(
                f"checkpoint {checkpoint_dir} has vocab size {model.config.vocab_size}, "
                f"the engine's model has {self.model.config.vocab_size}"
            )
        self.model = model
        self._policy_version = _check_version(policy_version)

    def sleep(self, level: int = 1) -> None:
        """On an accelerator, move the weights to host memory (both levels:
        reloading them from disk would cost more than keeping a host copy);
        on the CPU there is nothing to release."""
        if self._device.type != "cpu":
            self.model.to("cpu")
            torch.cuda.empty_cache()

    def wake_up(self) -> None:
        if self._device.type != "cpu":
            self.model.to(self._device)

    @torch.no_grad()
    def logprobs_of(
        self, prompt_ids: list[int], completion_ids: list[int], temperature: float = 1.0
    ) -> list[float]:
        logprobs, mask = completion_logprobs(self.model, [prompt_ids], [completion_ids], self._pad_id, temperature)
        return logprobs[0][mask[0]].tolist()

    @torch.no_grad()
    def generate(self, prompts: list[str], settings: SamplingSettings) -> list[list[Sample]]:
        if not prompts:
            return []
        prompt_ids = tokenize_prompts(self.tokenizer, prompts, self._max_model_len, settings.max_seq_len)
        generator = torch.Generator(device=self._device)
        if settings.seed is None:
            generator.seed()
        else:
            generator.manual_seed(settings.seed)
        # Row i * n + j is sample j of prompt i.
        rows = [ids for ids in prompt_ids for _ in range(settings.n)]
        samples: list[Sample] = []
        for start in range(0, len(rows), self._max_batch_size):
            samples.extend(self._sample_batch(rows[start:start + self._max_batch_size], settings, generator))
        return [samples[i * settings.n:(i + 1) * settings.n] for i in range(len(prompts))]

    def _sample_batch(
        self, rows: list[list[int]], settings: SamplingSettings, generator: torch.Generator
    ) -> list[Sample]:
        """Sample one completion per row until each stops or reaches its token limit.

        A row that finishes leaves the batch and the KV cache at once, so one
        long sample does not keep the finished rows decoding.
        """
        batch = len(rows)
        input_ids, attention_mask = left_pad(rows, self._pad_id, self._device)
        limits = torch.tensor(
            [completion_limit(len(row), settings, self._max_model_len) for row in rows], device=self._device
        )
        width = int(limits.max())
        tokens = torch.zeros((batch, width), dtype=torch.long, device=self._device)
        token_logprobs = torch.zeros((batch, width), device=self._device)
        entropies = torch.zeros((batch, width), device=self._device)
        stop_ids = torch.tensor(self._stop_ids, dtype=torch.long, device=self._device)
        positions = position_ids_from_mask(attention_mask)
        out = self.model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=positions, use_cache=True, logits_to_keep=1
        )
        positions = positions[:, -1:]
        grammar = self._grammars.constraint(settings.grammar, batch) if settings.grammar else None
        lengths = torch.zeros(batch, dtype=torch.long, device=self._device)
        stopped = torch.zeros(batch, dtype=torch.bool, device=self._device)
        live = torch.arange(batch, device=self._device)  # the original row of each row still decoding
        step = 0  # tokens generated so far by every live row
        while True:
            # Greedy decoding reports untempered log-probs (see sgs.machinery.engines.base).
            logits = out.logits[:, -1].float()
            if grammar is not None:
                grammar.mask(logits, live)
            logprobs = torch.log_softmax(logits / settings.temperature if settings.temperature > 0 else logits, dim=-1)
            token = _choose(logprobs, settings, generator)
            if grammar is not None:
                grammar.accept(token, live)
            top = logprobs.topk(min(ENTROPY_TOP_K, logprobs.shape[-1]), dim=-1).values
            tokens[live, step] = token
            token_logprobs[live, step] = logprobs.gather(-1, token.unsqueeze(-1)).squeeze(-1)
            entropies[live, step] = top_k_entropy(top)
            step += 1
            lengths[live] = step
            stopped[live] = torch.isin(token, stop_ids)
            going = ~stopped[live] & (lengths[live] < limits[live])
            if not bool(going.any()):
                break
            if not bool(going.all()):
                keep = going.nonzero().squeeze(-1)
                live, token, attention_mask, positions = live[keep], token[keep], attention_mask[keep], positions[keep]
                out.past_key_values.batch_select_indices(keep)
            attention_mask = torch.cat([attention_mask, attention_mask.new_ones(len(live), 1)], dim=-1)
            positions = positions + 1
            out = self.model(
                input_ids=token.unsqueeze(-1),
                attention_mask=attention_mask,
                position_ids=positions,
                past_key_values=out.past_key_values,
                use_cache=True,
            )
        tokens, token_logprobs, entropies = tokens.cpu(), token_logprobs.cpu(), entropies.cpu()
        samples = []
        for row in range(batch):
            length = int(lengths[row])
            token_ids = tokens[row, :length].tolist()
            samples.append(
                Sample(
                    text=self.tokenizer.decode(token_ids, skip_special_tokens=True),
                    token_ids=token_ids,
                    logprobs=token_logprobs[row, :length].tolist(),
                    prompt_token_ids=list(rows[row]),
                    finish_reason="stop" if bool(stopped[row]) else "length",
                    policy_version=self._policy_version,
                    entropy=float(entropies[row, :length].mean()),
                )
            )
        return samples

    def _load_model(self, path: str) -> PreTrainedModel:
        return AutoModelForCausalLM.from_pretrained(path, dtype=self._dtype).to(self._device).eval()

    def _stop_token_ids(self) -> list[int]:
        """EOS ids from the tokenizer and the generation config (which may list several)."""
        ids = []
        for source in (self.tokenizer.eos_token_id, self.model.generation_config.eos_token_id):
            for token_id in source if isinstance(source, list) else [source]:
                if token_id is not None and token_id not in ids:
                    ids.append(int(token_id))
        return ids


class GrammarCache:
    """Grammars compiled for one tokenizer (xgrammar), each compiled once."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: list[int]) -> None:
        self._tokenizer, self._vocab_size, self._stop_ids = tokenizer, vocab_size, stop_ids
        self._info = None
        self._compiled: dict[str, Any] = {}

    def constraint(self, grammar: str, rows: int) -> GrammarConstraint:
        """A fresh constraint for ``rows`` samples that each follow ``grammar``."""
        import xgrammar

        if grammar not in self._compiled:
            if self._info is None:
                self._info = xgrammar.TokenizerInfo.from_huggingface(
                    self._tokenizer, vocab_size=self._vocab_size, stop_token_ids=self._stop_ids)
            try:
                self._compiled[grammar] = xgrammar.GrammarCompiler(self._info).compile_grammar(grammar)
            except RuntimeError as error:
                raise ValueError(f"the sampling grammar does not compile: {first_line(error)}") from None
        return GrammarConstraint(self._compiled[grammar], rows, self._vocab_size)


class GrammarConstraint:
    """One grammar matcher per sample of a batch: which tokens each may draw next."""

    def __init__(self, compiled: Any, rows: int, vocab_size: int) -> None:
        import xgrammar

        self._xgrammar = xgrammar
        self._matchers = [xgrammar.GrammarMatcher(compiled) for _ in range(rows)]
        self._bitmask = xgrammar.allocate_token_bitmask(rows, vocab_size)

    def mask(self, logits: Tensor, live: Tensor) -> None:
        """Set the logits of tokens the grammar forbids to -inf; row j of
        ``logits`` is sample ``live[j]``."""
        for j, row in enumerate(live.tolist()):
            self._matchers[row].fill_next_token_bitmask(self._bitmask, j)
        self._xgrammar.apply_token_bitmask_inplace(logits, self._bitmask[:len(live)].to(logits.device))

    def accept(self, tokens: Tensor, live: Tensor) -> None:
        """Advance each live sample's matcher by the token it drew."""
        for token, row in zip(tokens.tolist(), live.tolist()):
            if not self._matchers[row].accept_token(token):
                raise RuntimeError(f"sample {row} drew token {token}, which its grammar forbids")


def _choose(logprobs: Tensor, settings: SamplingSettings, generator: torch.Generator) -> Tensor:
    """Draw the next token of every row: greedy, or from the top-p nucleus."""
    if settings.temperature == 0:
        return logprobs.argmax(dim=-1)
    probs = logprobs.exp()
    if settings.top_p >= 1.0:
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    # Keep the smallest prefix whose mass reaches top_p (always at least one token).
    outside = sorted_probs.cumsum(dim=-1) - sorted_probs >= settings.top_p
    sorted_probs = sorted_probs.masked_fill(outside, 0.0)
    choice = torch.multinomial(sorted_probs, 1, generator=generator)
    return order.gather(-1, choice).squeeze(-1)


def _check_version(policy_version: int) -> int:
    if not isinstance(policy_version, int) or policy_version < 0:
        raise ValueError(f"policy_version must be a non-negative integer, got {policy_version!r}")
    return policy_version
