"""Role prompts exactly as the engines receive them: :class:`Prompter` and :func:`chat_prompt`.

Apart from the rest of :mod:`sgs.machinery` so that what only renders prompts
(the prover service's HTTP front) imports no torch, engine or learner.
"""

from __future__ import annotations

from typing import Any

from sgs.method.roles import PromptSet
from sgs.state.records import Target


def chat_prompt(tokenizer: Any, text: str) -> str:
    """``text`` as one user turn with the assistant turn opened, in the
    tokenizer's chat template (unchanged when it has none).

    The engines tokenise prompts with the tokenizer's own special tokens; when
    those include BOS, the template's BOS is dropped here so it is not doubled.
    """
    if not getattr(tokenizer, "chat_template", None):
        return text
    chat = tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                         add_generation_prompt=True)
    bos = tokenizer.bos_token
    adds_bos = tokenizer.bos_token_id is not None and tokenizer("x")["input_ids"][:1] == [tokenizer.bos_token_id]
    if adds_bos and bos and chat.startswith(bos):
        chat = chat[len(bos):]
    return chat


class Prompter:
    """The role prompts as the engines receive them.

    Role text comes from the language's templates (:class:`sgs.method.roles.PromptSet`),
    wrapped by :func:`chat_prompt`, as chat-tuned provers expect.
    ``token_ids`` tokenises the way the engines do, so the learner trains on
    the exact prompt the sampler saw.
    """

    def __init__(self, language: str, tokenizer: Any):
        self.roles = PromptSet(language)
        self.tokenizer = tokenizer

    def solver(self, header: str, statement: str) -> str:
        return chat_prompt(self.tokenizer, self.roles.solver(header, statement))

    def conjecturer(self, target: Target | None) -> str:
        """The target-conditioned prompt, or the fixed prompt when ``target`` is None."""
        if target is None:
            return chat_prompt(self.tokenizer, self.roles.conjecturer_unconditioned())
        return chat_prompt(self.tokenizer, self.roles.conjecturer(target.statement))

    def guide(self, target: Target, conjecture: str) -> str:
        return chat_prompt(self.tokenizer, self.roles.guide(target.statement, conjecture))

    def token_ids(self, prompt: str) -> list[int]:
        return self.tokenizer(prompt)["input_ids"]
