#!/usr/bin/env python3
"""STAND-IN FOR THE LEAN 4 REPL: a test double that judges ANY statement and
proof by a documented deterministic rule.

No Lean toolchain can be installed on the machines SGS is built on, so the
Lean loop is rehearsed with this script in place of ``lake env repl``:

    python -m sgs prover=lean prover.lean.repl_command="$PWD/.venv/bin/python $PWD/tests/lean/lean_standin.py" \\
        prover.lean.project_dir=DIR ...        # DIR: any directory with a lean-toolchain file

It speaks the REPL's protocol on stdin/stdout exactly as
``tests/lean/lean_replay.py`` does (the framing code is shared), with the
response shapes of the recorded transcripts in ``../shared/fixtures/lean_repl/``:
environment ids counted from 0 across the process, messages with
``severity``/``pos``/``endPos``/``data``, ``sorries`` with a ``proofState``
and the goal, ``#print axioms`` as an info message, tactic mode
(``{"tactic", "proofState"}``) with ``proofStatus``, and REPL-level
``{"message": ...}`` errors for unknown environments and proof states.

What it answers:

* a command without ``env`` is a file start: ``import`` lines (Mathlib,
  Aesop, Lean, Std, Batteries), then ``set_option``/``open`` lines, then
  optionally declarations; an unknown import is an error;
* ``theorem``/``lemma``/``example`` declarations elaborate when the statement
  is well formed (:mod:`tests.lean.standin_statement`) and are proved when the
  body passes the tactic rule (:mod:`tests.lean.standin_tactics`): a body of
  ``sorry`` gives the ``declaration uses `sorry``` warning and a sorry with its
  proof state; a body that fails gives an error message; a name declared
  twice in one environment chain is an error;
* ``#print axioms NAME`` lists what the proof of NAME used: none for
  ``rfl``/``decide``/``exact``, ``propext`` for ``omega``, ``propext,
  Classical.choice, Quot.sound`` for the other tactics, ``sorryAx`` for a
  sorry or a failed proof; an unknown name is an error;
* ``{"pickleTo": FILE, "env": N}`` writes the declarations of environment N
  and their axioms to FILE as JSON (``{"standin_pickle": {name: [axioms]}}``),
  which ``lake_standin.py`` reads where the real checker reads a pickle.

``--forge-axioms`` answers every ``#print axioms`` with "does not depend on
any axioms", as the REPL would after a proof that redefined the command (the
pickle keeps the truth).  ``--exit-on TEXT`` ends the process, as a proof that
calls ``IO.Process.exit`` would, whenever a command contains TEXT.

``--request-log PATH`` appends every request received as ``{"pid", "cwd",
"request"}`` (as the replay does), so a test can see what the loop asked.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Optional

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lean_env.lean.checks import mask_comments_and_literals  # noqa: E402
from tests.lean.lean_replay import axioms_message, read_requests, write_answer  # noqa: E402
from tests.lean.standin_statement import Malformed, parse_declaration, position  # noqa: E402
from tests.lean.standin_tactics import Goal, Outcome, run_body, run_tactic  # noqa: E402

#: modules an ``import`` may name (and their submodules)
KNOWN_MODULES = ("Mathlib", "Aesop", "Lean", "Std", "Batteries", "Init")
_HEADER_LINE = re.compile(r"(import|set_option|open)\b")


class StandIn:
    """The environments and proof states of one REPL process."""

    def __init__(self, seed: str, forge_axioms: bool = False, exit_on: Optional[str] = None) -> None:
        self.seed = seed
        self.forge_axioms = forge_axioms
        self.exit_on = exit_on
        #: env id -> (parent env id or None, the declarations it adds: name -> axioms)
        self.envs: dict[int, tuple[Optional[int], dict[str, tuple[str, ...]]]] = {}
        self.states: dict[int, Goal] = {}

    # -- dispatch ------------------------------------------------------------
    def answer(self, request: dict) -> dict:
        if "tactic" in request:
            return self.tactic(request.get("tactic"), request.get("proofState"))
        if "pickleTo" in request:
            return self.pickle(request.get("pickleTo"), request.get("env"))
        cmd, env = request.get("cmd"), request.get("env")
        if self.exit_on is not None and isinstance(cmd, str) and self.exit_on in cmd:
            sys.exit(1)
        if not isinstance(cmd, str):
            return {"message": "the stand-in answers `cmd` and `tactic` requests only"}
        if env is not None and env not in self.envs:
            return {"message": "Unknown environment."}
        if env is None:
            return self.file_start(cmd)
        return self.command(cmd, env)

    def new_env(self, parent: Optional[int], declarations: Optional[dict] = None) -> int:
        env = len(self.envs)
        self.envs[env] = (parent, declarations or {})
        return env

    def pickle(self, path: Any, env: Any) -> dict:
        """Every declaration of ``env``'s chain with its axioms, as JSON in ``path``."""
        if not isinstance(path, str) or env not in self.envs:
            return {"message": "Unknown environment."}
        declarations: dict[str, tuple[str, ...]] = {}
        current: Optional[int] = env
        while current is not None:
            parent, added = self.envs[current]
            declarations = {**added, **declarations}
            current = parent
        Path(path).write_text(json.dumps({"standin_pickle": declarations}), encoding="utf-8")
        return {"env": env}

    def declared(self, name: str, env: Optional[int]) -> Optional[tuple[str, ...]]:
        while env is not None:
            parent, declarations = self.envs[env]
            if name in declarations:
                return declarations[name]
            env = parent
        return None

    # -- commands ------------------------------------------------------------
    def file_start(self, cmd: str) -> dict:
        """Imports, options and opens, then optionally declarations."""
        code = mask_comments_and_literals(cmd).code
        offset, imports_allowed = 0, True
        for line in code.split("\n"):
            match = _HEADER_LINE.match(line.strip())
            if line.strip() and match is None:
                break
            if match is not None and match.group(1) == "import":
                module = line.split()[1] if len(line.split()) > 1 else ""
                if not imports_allowed or module.split(".")[0] not in KNOWN_MODULES:
                    start = offset + len(line) - len(line.lstrip())
                    text = (f"unknown module prefix '{module.split('.')[0]}'" if imports_allowed
                            else "invalid 'import' command, it must be used in the beginning of the file")
                    return self.respond(self.new_env(None), cmd, [("error", text, start, offset + len(line))])
            elif match is not None:
                imports_allowed = False
            offset += len(line) + 1
        rest = cmd[offset:]
        if not rest.strip():
            return {"env": self.new_env(None)}
        return self.command(rest, None, offset_text=cmd[:offset])

    def command(self, cmd: str, env: Optional[int], offset_text: str = "") -> dict:
        """One command after environment ``env`` (None: at the start of a file)."""
        stripped = cmd.strip()
        if stripped.startswith("#print axioms"):
            return self.print_axioms(stripped[len("#print axioms"):].strip(), env, cmd)
        if _HEADER_LINE.match(stripped) and not stripped.startswith("import"):
            return {"env": self.new_env(env)}
        if stripped.startswith("import"):
            return self.respond(self.new_env(env), cmd, [
                ("error", "invalid 'import' command, it must be used in the beginning of the file", 0, 6)])
        return self.declaration(offset_text + cmd, env, len(offset_text))

    def declaration(self, text: str, env: Optional[int], skip: int) -> dict:
        """Elaborate a declaration starting at offset ``skip`` of ``text``."""
        try:
            decl = parse_declaration(text[skip:])
        except Malformed as error:
            return self.respond(self.new_env(env), text, [("error", str(error), skip + error.start,
                                                           skip + error.end)])
        name_span = (skip + decl.name_span[0], skip + decl.name_span[1])
        if decl.name is not None and self.declared(decl.name, env) is not None:
            return self.respond(self.new_env(env), text, [
                ("error", f"'{decl.name}' has already been declared", *name_span)])
        outcome = run_body(decl.body, Goal.of(decl), seed=f"{self.seed}:{text}")
        body_at = skip + decl.body_start
        if outcome.status == "closed":
            return self.respond(self.new_env(env, self._record(decl.name, outcome.axioms)), text, [])
        if outcome.status == "sorry":
            start, end = outcome.span or (0, len(decl.body.rstrip()))
            state = self.new_state(outcome.goal)
            sorry = {"proofState": state, "pos": position(text, body_at + start),
                     "goal": outcome.goal.pretty(), "endPos": position(text, body_at + end)}
            warning = ("warning", "declaration uses `sorry`", *name_span)
            return self.respond(self.new_env(env, self._record(decl.name, ("sorryAx",))), text, [warning],
                                sorries=[sorry])
        start, end = (body_at + outcome.span[0], body_at + outcome.span[1]) if outcome.span else (body_at - 2,
                                                                                                body_at)
        return self.respond(self.new_env(env, self._record(decl.name, ("sorryAx",))), text,
                            [("error", outcome.message, start, end)])

    @staticmethod
    def _record(name: Optional[str], axioms: tuple[str, ...]) -> dict:
        return {name: axioms} if name is not None else {}

    def print_axioms(self, name: str, env: Optional[int], cmd: str) -> dict:
        axioms = self.declared(name.removeprefix("_root_."), env)
        new = self.new_env(env)
        if axioms is None:
            return self.respond(new, cmd, [("error", f"Unknown constant `{name}`", 0, len(cmd))])
        return {"messages": [axioms_message(name, [] if self.forge_axioms else list(axioms))], "env": new}

    def respond(self, env: int, text: str, messages: list[tuple[str, str, int, int]],
                sorries: Optional[list[dict]] = None) -> dict:
        """A command answer, keys in the REPL's order, empty lists left out."""
        answer: dict[str, Any] = {}
        if sorries:
            answer["sorries"] = sorries
        if messages:
            answer["messages"] = [{"severity": severity, "pos": position(text, start),
                                   "endPos": position(text, end), "data": data}
                                  for severity, data, start, end in messages]
        answer["env"] = env
        return answer

    # -- tactic mode -------------------------------------------------------------
    def new_state(self, goal: Goal) -> int:
        state = len(self.states)
        self.states[state] = goal
        return state

    def tactic(self, tactic: Any, state: Any) -> dict:
        if not isinstance(tactic, str) or state not in self.states:
            return {"message": "Unknown proof state."}
        outcome: Outcome = run_tactic(tactic, self.states[state], seed=f"{self.seed}:{state}:{tactic}")
        if outcome.status == "error" and outcome.message == "unknown tactic":
            return {"message": "Lean error:\n<input>:1:1: unknown tactic"}
        new = self.new_state(outcome.goal)
        if outcome.status == "closed":
            return {"proofStatus": "Completed", "proofState": new, "goals": []}
        if outcome.status == "open":
            return {"proofStatus": "Incomplete: open goals remain", "proofState": new,
                    "goals": [outcome.goal.pretty()]}
        zero = {"line": 0, "column": 0}
        if outcome.status == "sorry":
            return {"proofStatus": "Incomplete: contains sorry", "proofState": new,
                    "sorries": [{"proofState": self.new_state(outcome.goal), "goal": outcome.goal.pretty()}],
                    "goals": []}
        return {"proofStatus": "Incomplete: contains sorry", "proofState": new,
                "messages": [{"severity": "error", "pos": zero, "endPos": zero, "data": outcome.message}],
                "goals": []}


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--request-log", help="append every request received (with this pid) here")
    parser.add_argument("--seed", default="lean-standin", help="seed of the randomised checks (omega, ring)")
    parser.add_argument("--forge-axioms", action="store_true",
                        help="answer every `#print axioms` with no axioms (the pickle keeps the truth)")
    parser.add_argument("--exit-on", metavar="TEXT", help="exit whenever a command contains TEXT")
    args = parser.parse_args(argv)
    standin = StandIn(args.seed, forge_axioms=args.forge_axioms, exit_on=args.exit_on)
    for request in read_requests(args.request_log):
        write_answer(json.dumps(standin.answer(request), ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
