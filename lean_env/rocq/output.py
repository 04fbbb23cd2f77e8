"""Reading what ``coqtop -emacs`` prints: prompts, replies and assumptions.

In ``-emacs`` mode coqtop answers every sentence with its output followed by
a prompt ``<prompt>NAME < STATE |PENDING| DEPTH < </prompt>``: ``STATE`` is
the id of the document state after the sentence (a fresh id when the sentence
succeeded, the previous one when it failed), ``PENDING`` lists the open proofs
separated by ``|`` (empty at top level).

Tactics can print arbitrary text (``idtac "<prompt>..."``), so a prompt-like
string in the output proves nothing.  Every sentence is therefore followed by
a *barrier*: ``Check <nonce>.`` with a fresh random identifier that cannot
exist.  Its error message is the first place the nonce can appear, so the
real prompt of the sentence is the last prompt before that error, and any
other prompt-like text in the reply means the stream is not what we think
(forged prompts, or Coq having split the sentence differently from us).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

_PROMPT = re.compile(r"<prompt>(.*?) < (\d+) \|(.*?)\| (\d+) < </prompt>", re.S)
_PROMPT_TAGS = ("<prompt>", "</prompt>")
_END_TAG = b"</prompt>"
_ERROR_LINE = re.compile(r"^(?:Error:|Anomaly\b)", re.M)
_MARKUP = re.compile(r"</?(?:infomsg|warning)>")
_FETCHING = re.compile(r"^Fetching opaque proofs from disk for [\w.']+$", re.M)


class ProtocolError(RuntimeError):
    """coqtop's output does not have the expected structure."""


@dataclass(frozen=True)
class Prompt:
    """One parsed coqtop prompt."""

    #: name of the focused proof, ``Coq`` at top level
    proof: str
    #: document state id after the last sentence
    state: int
    #: names of the open proofs (empty at top level)
    pending: tuple[str, ...]

    @property
    def top_level(self) -> bool:
        """No proof is open."""
        return not self.pending


def parse_prompt(text: str) -> Prompt:
    """Parse exactly one prompt (the whole of ``text``)."""
    m = _PROMPT.fullmatch(text)
    if m is None:
        raise ProtocolError(f"not a coqtop prompt: {text[:200]!r}")
    pending = tuple(p for p in m.group(3).split("|") if p)
    return Prompt(proof=m.group(1), state=int(m.group(2)), pending=pending)


@dataclass(frozen=True)
class Barrier:
    """The sync command sent after each sentence."""

    #: the fresh identifier the barrier asks Coq about
    nonce: str

    @classmethod
    def fresh(cls) -> "Barrier":
        return cls(nonce=f"sgs_sync_{secrets.token_hex(8)}")

    @property
    def command(self) -> str:
        return f"Check {self.nonce}."

    def frame(self, buffer: bytes) -> int | None:
        """Framing function for ``SandboxedProcess.read_until``: the reply is
        complete at the first prompt after the nonce first appears."""
        at = buffer.find(self.nonce.encode())
        if at < 0:
            return None
        end = buffer.find(_END_TAG, at)
        return None if end < 0 else end + len(_END_TAG)


@dataclass(frozen=True)
class Reply:
    """coqtop's answer to one sentence."""

    #: everything the sentence printed (goals, messages, errors)
    output: str
    #: state id before the sentence
    before: int
    #: the prompt printed after the sentence
    prompt: Prompt

    @property
    def ok(self) -> bool:
        """The sentence succeeded: Coq moved to a new state and printed no
        error.  Both are required; either alone is a failure."""
        return self.prompt.state != self.before and not has_error(self.output)

    @property
    def message(self) -> str:
        """The output without coqtop's markup, for verdict messages."""
        return clean(self.output)


def parse_reply(raw: bytes, barrier: Barrier, before: int) -> Reply:
    """Split one framed reply (sentence output, its prompt, the barrier's
    error and the barrier's prompt) and check its structure."""
    text = raw.decode("utf-8", "replace")
    at = text.find(barrier.nonce)
    if at < 0:
        raise ProtocolError(f"the barrier never answered: {text[-500:]!r}")
    head, tail = text[:at], text[at:]
    open_at = head.rfind("<prompt>")
    if open_at < 0:
        raise ProtocolError(f"no prompt before the barrier: {text[-500:]!r}")
    output, prompt_text = head[:open_at], head[open_at:]
    end = prompt_text.find("</prompt>")
    if end < 0:
        raise ProtocolError(f"unterminated prompt: {prompt_text[:200]!r}")
    prompt = parse_prompt(prompt_text[:end + len("</prompt>")])
    barrier_output = prompt_text[end + len("</prompt>"):] + tail
    if any(tag in output for tag in _PROMPT_TAGS):
        raise ProtocolError("prompt markup inside a sentence's output")
    closing = barrier_output.rfind("<prompt>")
    if closing < 0 or barrier_output.count("<prompt>") != 1:
        raise ProtocolError(f"unexpected barrier reply: {barrier_output[:500]!r}")
    # Coq 8.16 says "reference", or "variable" inside a proof after some failed tactics
    # (``apply`` of an unknown lemma): either way the nonce is unknown, which is the point.
    expected = rf"Error:\s+The\s+(?:reference|variable)\s+{barrier.nonce}\s+was\s+not\s+found"
    if re.search(expected, barrier_output[:closing]) is None:
        raise ProtocolError(f"barrier did not answer as expected: {barrier_output[:500]!r}")
    if parse_prompt(barrier_output[closing:]).state != prompt.state:
        raise ProtocolError("the barrier changed the document state")
    return Reply(output=output, before=before, prompt=prompt)


def parse_banner(raw: bytes) -> Prompt:
    """Parse coqtop's start-up output, which ends with its first prompt."""
    text = raw.decode("utf-8", "replace")
    open_at = text.rfind("<prompt>")
    if open_at < 0 or text.count("<prompt>") != 1:
        raise ProtocolError(f"unexpected start-up output: {text[:500]!r}")
    return parse_prompt(text[open_at:])


def first_prompt_end(buffer: bytes) -> int | None:
    """Framing function for the start-up banner."""
    end = buffer.find(_END_TAG)
    return None if end < 0 else end + len(_END_TAG)


def has_error(output: str) -> bool:
    """Whether a sentence's output contains an error or anomaly report."""
    return _ERROR_LINE.search(output) is not None


def clean(output: str) -> str:
    """Remove coqtop's emacs markup and surrounding blank lines."""
    return _MARKUP.sub("", output).strip()


@dataclass(frozen=True)
class Assumptions:
    """The parsed answer of ``Print Assumptions``."""

    #: names listed under ``Axioms:``
    axioms: tuple[str, ...]
    #: headings of other sections (section variables, unsafe fixpoints,
    #: type-in-type, ...), each of which makes a proof unacceptable
    other: tuple[str, ...]

    def acceptable(self, allowed_axioms: frozenset[str] | set[str] | tuple[str, ...]) -> bool:
        """Only allowed axioms and nothing else."""
        return not self.other and set(self.axioms) <= set(allowed_axioms)


def parse_assumptions(output: str) -> Assumptions:
    """Parse ``Print Assumptions`` output.  Anything that is neither the
    closed answer nor a well-formed ``Axioms:`` listing counts as an
    unacceptable section, so an unknown format can only reject."""
    # Coq reports loading opaque proofs of libraries while it looks for axioms
    text = _FETCHING.sub("", clean(output)).strip()
    if text == "Closed under the global context":
        return Assumptions(axioms=(), other=())
    axioms: list[str] = []
    other: list[str] = []
    section: str | None = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.strip() or line[0] in " \t":
            continue  # blank line or continuation of a multi-line type
        if line.endswith(":") and " : " not in line:
            section = line[:-1]
            if section != "Axioms":
                other.append(section)
            continue
        # "name : type", or "name" alone when the type starts on the next line
        name, sep, _ = line.partition(" : ")
        typed_below = not sep and i + 1 < len(lines) and lines[i + 1].lstrip().startswith(": ")
        if section == "Axioms" and (sep or typed_below) and re.fullmatch(r"[\w.']+", name.strip()):
            axioms.append(name.strip())
        elif section is None or section == "Axioms":
            other.append(line[:100])
    if not axioms and not other:
        other.append(text[:100] or "empty answer")
    return Assumptions(axioms=tuple(axioms), other=tuple(other))
