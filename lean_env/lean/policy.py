"""The vocabulary of the Lean checks: what a rejection is, the policy's knobs,
and a proof ready for the REPL.  Shared by the banned-word passes
(:mod:`lean_env.lean.banned`) and the checks (:mod:`lean_env.lean.checks`)."""

from __future__ import annotations

from dataclasses import dataclass

#: axioms a valid proof may depend on
DEFAULT_ALLOWED_AXIOMS: frozenset[str] = frozenset({"propext", "Classical.choice", "Quot.sound"})


@dataclass(frozen=True)
class Rejection:
    """Why a text or an answer is not accepted.  ``reason`` is the short
    machine-readable classification that ends up in ``Verdict.reason``."""

    #: e.g. ``banned:sorry``, ``leaves_block``, ``prover_error``, ``axioms``
    reason: str
    #: human-readable details (Lean messages, the offending token)
    messages: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckPolicy:
    """The knobs of the checks (built from ``LeanConfig``)."""

    #: axioms a valid proof may depend on
    allowed_axioms: frozenset[str] = DEFAULT_ALLOWED_AXIOMS
    #: tokens banned in addition to the built-in lists (same matching rules
    #: as the proof keywords: whole tokens, the start of a name, ``«quoted»``)
    extra_banned: frozenset[str] = frozenset()
    #: longest accepted proof body or tactic, in characters
    max_body_chars: int = 100_000
    #: longest accepted statement, in characters
    max_statement_chars: int = 20_000

    def fingerprint(self) -> str:
        """A stable text that changes whenever the policy does (for cache keys)."""
        return "|".join([",".join(sorted(self.allowed_axioms)), ",".join(sorted(self.extra_banned)),
                         str(self.max_body_chars), str(self.max_statement_chars)])


@dataclass(frozen=True)
class PreparedProof:
    """A body that passed the pre-filter, spliced under its statement."""

    #: the command sent to the REPL: statement, newline, normalised body
    command: str
    #: the theorem's name as written (``#print axioms`` is asked about it)
    name: str
    #: the normalised body alone
    body: str


__all__ = ["DEFAULT_ALLOWED_AXIOMS", "CheckPolicy", "PreparedProof", "Rejection"]
