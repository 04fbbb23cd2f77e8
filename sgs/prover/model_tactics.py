"""Next-tactic predictions of a trained model checkpoint (beam search on the CPU).

The predictor the accuracy measurement (:mod:`sgs.prover.accuracy`) scores a
checkpoint with: the prompt is the Solver's tactic prompt
(:meth:`sgs.method.roles.PromptSet.tactic`) in the chat form the engines
send, and the k answers are the k best beams, each cut at its first sentence
end, de-duplicated by :func:`sgs.prover.steps.tactic_key`.  A search samples
through the engine group instead; this is the exact, deterministic top-k.
"""

from __future__ import annotations

import functools
from pathlib import Path

from sgs.method.roles import PromptSet
from sgs.prover.examples import clip_state
from sgs.prover.steps import tactic_key

__all__ = ["ModelTactics", "first_sentence", "tactic_prompt"]

#: longest tactic generated, in tokens (the corpus's 99th percentile is well under it)
MAX_TACTIC_TOKENS = 64


def first_sentence(text: str) -> str:
    """``text`` up to its first period that ends a sentence (followed by
    whitespace or the end), the way Rocq splits sentences outside strings
    and comments; the whole text when it has none."""
    depth_comment, in_string = 0, False
    i = 0
    while i < len(text):
        pair = text[i:i + 2]
        if in_string:
            in_string = text[i] != '"'
        elif pair == "(*":
            depth_comment += 1
            i += 1
        elif pair == "*)" and depth_comment:
            depth_comment -= 1
            i += 1
        elif depth_comment == 0 and text[i] == '"':
            in_string = True
        elif depth_comment == 0 and text[i] == "." and (i + 1 == len(text) or text[i + 1].isspace()):
            return text[:i + 1].strip()
        i += 1
    return text.strip()


@functools.lru_cache(maxsize=None)
def _prompts(language: str) -> PromptSet:
    return PromptSet(language)


def tactic_prompt(tokenizer, state: str, premises: str = "", *, proofs: str = "", language: str = "rocq") -> str:
    """The tactic prompt for ``state`` exactly as the model was trained on it
    (:func:`sgs.prover.examples.tactic_example`: the state clipped, the
    premise and proof blocks, if any) and as the engines receive a role prompt
    (the tokenizer's chat template, :func:`sgs.machinery.prompts.chat_prompt`),
    in ``language``'s template."""
    from sgs.machinery.prompts import chat_prompt
    return chat_prompt(tokenizer, _prompts(language).tactic(clip_state(state), premises, proofs))


class ModelTactics:
    """``predict(state, k)``: the k best tactics of a checkpoint for a proof state."""

    def __init__(self, path: str | Path, *, threads: int = 1, premises=None, proofs=None) -> None:
        import torch
        from sgs.machinery.models.tiny import load_model_and_tokenizer

        torch.set_num_threads(threads)
        self._model, self._tokenizer = load_model_and_tokenizer(path, dtype="float32")
        #: a :class:`sgs.prover.examples.PremisePrompts` for a model trained with premises,
        #: a :class:`sgs.prover.examples.ProofPrompts` for one trained with similar proofs
        self._premises, self._proofs = premises, proofs

    def prompt(self, state: str) -> str:
        premises = self._premises.block(state) if self._premises is not None else ""
        proofs = self._proofs.block(state) if self._proofs is not None else ""
        return tactic_prompt(self._tokenizer, state, premises, proofs=proofs)

    def predict(self, state: str, k: int) -> list[str]:
        import torch

        ids = self._tokenizer(self.prompt(state), return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = self._model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=MAX_TACTIC_TOKENS,
                num_beams=k, num_return_sequences=k, do_sample=False, early_stopping=True,
                eos_token_id=self._tokenizer.eos_token_id, pad_token_id=self._tokenizer.pad_token_id)
        seen, tactics = set(), []
        for row in out[:, ids.shape[1]:]:
            tactic = first_sentence(self._tokenizer.decode(row, skip_special_tokens=True))
            key = tactic_key(tactic)
            if tactic and key not in seen:
                seen.add(key)
                tactics.append(tactic)
        return tactics
