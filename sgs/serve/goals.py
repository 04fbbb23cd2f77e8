"""LeanCopilot's external generator on a whole-proof Solver: goals in, tactics out.

LeanCopilot's ``suggest_tactics`` sends the goal under the cursor, pretty-printed
(``n : ℕ\\n⊢ gcd n n = n``), and expects tactic suggestions with scores.
The Solver writes whole proofs of statements, so :func:`goal_statement`
turns the goal into a statement and :func:`suggestion` turns the proof
body the Solver wrote into one suggestion.  Pure text, no prover.

Rules of :func:`goal_statement`:

* input that already is a statement (``theorem``/``lemma``/``example`` in
  Lean, ``Theorem``/``Lemma``/... in Rocq) is used as it is;
* of several goals (blank-line separated), the first is taken; a ``case``
  line is dropped;
* each hypothesis ``a b : T`` becomes the binder ``(a b : T)``; a let value
  (Lean ``x : T := v``, Rocq ``x := v : T``) is dropped, keeping ``(x : T)``;
  inaccessible names (Lean ``inst✝``, ``h✝¹``) get writable ones
  (``inst_1``, ``h_2``);
* the goal is the text after ``⊢`` (Lean) or after the ``=====`` line
  (Rocq); input with neither is the goal itself, with no hypotheses.

The statement only shapes the prompt: ``/generate`` checks nothing, and
LeanCopilot runs every suggestion in Lean itself.
"""

from __future__ import annotations

import re
import textwrap

#: The theorem name of a statement built from a goal.
GOAL_THEOREM = "copilot_goal"

_LEAN_DECLARATION = re.compile(r"^(theorem|lemma|example)\b")
_ROCQ_DECLARATION = re.compile(r"^(Theorem|Lemma|Example|Corollary|Proposition|Fact|Remark)\b")
_ROCQ_RULE = re.compile(r"^\s*={3,}\s*$")
_INACCESSIBLE = re.compile(r"✝[⁰¹²³⁴⁵⁶⁷⁸⁹]*")


def goal_statement(goal: str, language: str) -> str:
    """The statement whose proof proves ``goal`` (module docstring: the rules)."""
    text = goal.strip()
    if language == "lean":
        if _LEAN_DECLARATION.match(text):
            return text if text.endswith(":= by") else text.removesuffix(":=").rstrip() + " := by"
        hypotheses, conclusion = _lean_goal(_first_goal(text, "⊢"))
        binders = "".join(f" {binder}" for binder in hypotheses)
        return f"theorem {GOAL_THEOREM}{binders} : {conclusion} := by"
    if _ROCQ_DECLARATION.match(text):
        return text
    hypotheses, conclusion = _rocq_goal(_first_goal(text, "==="))
    binders = "".join(f" {binder}" for binder in hypotheses)
    return f"Theorem {GOAL_THEOREM}{binders} : {conclusion.rstrip('.').rstrip()}."


def suggestion(body: str, language: str) -> str:
    """A proof body (as :func:`sgs.method.roles.extract_proof` gives it) as one
    suggestion: the Lean tactic block dedented; the Rocq sentences between
    ``Proof.`` and ``Qed.``."""
    if language == "rocq":
        body = body.strip().removeprefix("Proof.").removesuffix("Qed.")
    return textwrap.dedent(body.strip("\n")).strip()


def _first_goal(text: str, marker: str) -> str:
    """The first blank-line separated block that holds ``marker``, else the whole text."""
    blocks = [block for block in re.split(r"\n\s*\n", text) if block.strip()]
    return next((block for block in blocks if marker in block), text)


def _logical_lines(block: str) -> list[str]:
    """Lines with the indented continuation lines of a long hypothesis joined on."""
    lines: list[str] = []
    for line in textwrap.dedent(block).splitlines():
        if line.startswith((" ", "\t")) and lines and line.strip():
            lines[-1] += " " + line.strip()
        elif line.strip():
            lines.append(line.strip())
    return lines


def _lean_goal(block: str) -> tuple[list[str], str]:
    lines = [line for line in _logical_lines(block) if not line.startswith("case ")]
    turnstile = next((i for i, line in enumerate(lines) if line.startswith("⊢")), None)
    if turnstile is None:
        return [], " ".join(lines)
    counter = iter(range(1, 10_000))
    binders = []
    for line in lines[:turnstile]:
        names, _, kind = line.partition(" : ")
        if not kind:
            continue
        kind = kind.split(" := ", 1)[0].strip()
        names = _INACCESSIBLE.sub(lambda _: f"_{next(counter)}", names)
        binders.append(f"({names.strip()} : {kind})")
    return binders, " ".join(lines[turnstile:]).removeprefix("⊢").strip()


def _rocq_goal(block: str) -> tuple[list[str], str]:
    lines = block.splitlines()
    rule = next((i for i, line in enumerate(lines) if _ROCQ_RULE.match(line)), None)
    if rule is None:
        return [], " ".join(line.strip() for line in lines if line.strip())
    binders = []
    for line in _logical_lines("\n".join(lines[:rule])):
        if " := " in line.split(" : ", 1)[0]:  # a let-bound hypothesis: "x := value : type"
            names, kind = line.split(" := ", 1)[0], line.rpartition(" : ")[2]
        else:
            names, _, kind = line.partition(" : ")
        if kind:
            # Rocq prints "n, m : nat" for what a binder writes "(n m : nat)".
            names = " ".join(names.replace(",", " ").split())
            binders.append(f"({names} : {kind.strip()})")
    return binders, " ".join(line.strip() for line in lines[rule + 1:] if line.strip())
