#!/usr/bin/env python3
"""STAND-IN FOR ``lake``: a test double for the two calls SGS makes of it.

No Lean toolchain can be installed on the machines these tests run on, so the
Lean audit's and axiom checker's tests run this script in place of ``lake``:

* ``lake -d DIR env lean -o Audited.olean Audited.lean`` (the audit's compile):
  answers with the output shapes of ``lean FILE`` (Lean's ``Message.toString``,
  src/Lean/Message.lean: an error is ``FILE:LINE:COL: error: TEXT``; ``lean``
  exits 1 when there are errors) and writes, in place of the ``.olean``, JSON
  naming the theorem and its axioms;
* ``lake -d DIR env lean --run .../SgsAxiomCheck.lean NONCE MODE FILE THEOREM``
  (the trusted axiom checker): reads that JSON, or the pickle the REPL stand-in
  (``lean_standin.py``) wrote, and prints the checker's one answer line.

Behaviour comes from ``LAKE_STANDIN_MODE`` (``LAKE_*`` variables reach the
prover's environment): ``axioms:A,B`` (the compile succeeds and the theorem
depends on A and B; ``axioms:`` for none), ``forged:A,B`` (the same, but the
compile also prints a look-alike ``does not depend on any axioms`` line, as a
proof that redefined ``#print axioms`` would), ``error`` (an error message,
exit 1), ``error0`` (an error message, exit 0), ``hang`` (the compile never
finishes), ``checker_silent`` / ``checker_twice`` / ``checker_wrong_nonce`` /
``checker_replay_error`` (the checker prints nothing, two lines, another
nonce, or the kernel's refusal).  ``LAKE_STANDIN_LOG`` names a file to which
each call (argv, cwd, the compiled file's text) is appended as one JSON line.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] != "-d" or argv[2:4] != ["env", "lean"] or not os.path.isdir(argv[1]):
        return refuse(argv)
    mode, _, listed = os.environ.get("LAKE_STANDIN_MODE", "axioms:").partition(":")
    log(argv, argv[6] if argv[4:5] == ["-o"] and len(argv) == 7 else None)
    if argv[4:5] == ["-o"] and len(argv) == 7:
        return compile_module(argv[6], argv[5], mode, [a for a in listed.split(",") if a])
    if argv[4:5] == ["--run"] and len(argv) == 10 and argv[5].endswith("SgsAxiomCheck.lean") \
            and os.path.isfile(argv[5]):
        return check_axioms(*argv[6:10], mode=mode)
    return refuse(argv)


def refuse(argv: list[str]) -> int:
    print(f"lake stand-in: unexpected call {argv!r}", file=sys.stderr)
    return 2


def log(argv: list[str], source_file: str | None) -> None:
    if not os.environ.get("LAKE_STANDIN_LOG"):
        return
    source = open(source_file, encoding="utf-8").read() if source_file else None
    with open(os.environ["LAKE_STANDIN_LOG"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"argv": argv, "cwd": os.getcwd(), "source": source}) + "\n")


def compile_module(source_file: str, olean: str, mode: str, axioms: list[str]) -> int:
    source = open(source_file, encoding="utf-8").read()
    match = re.search(r"^(?:theorem|lemma)\s+(\S+)", source, re.MULTILINE)
    name = match.group(1) if match else "?"
    line = source[: match.start()].count("\n") + 1 if match else 1
    if mode in ("error", "error0"):
        print(f"{source_file}:{line + 1}:2: error: unsolved goals\n⊢ False")
        return 1 if mode == "error" else 0
    if mode == "hang":
        time.sleep(3600)
    if mode == "forged":
        print(f"'{name}' does not depend on any axioms")
    with open(olean, "w", encoding="utf-8") as f:
        json.dump({"standin_olean": {name: axioms}}, f)
    return 0


def check_axioms(nonce: str, kind: str, file: str, theorem: str, mode: str) -> int:
    with open(file, encoding="utf-8") as f:
        stored = json.load(f)
    declarations = stored.get("standin_pickle" if kind == "pickle" else "standin_olean", {})
    name = theorem.removeprefix("_root_.")
    if mode == "checker_replay_error":
        answer = {"error": f"(kernel) declaration type mismatch, '{name}'"}
    elif name not in declarations:
        answer = {"error": f"the environment declares no constant {theorem}"}
    else:
        answer = {"theorem": theorem, "axioms": declarations[name], "replayed": len(declarations)}
    line = f"SGS-AXIOMS {nonce} {json.dumps(answer)}"
    if mode == "checker_silent":
        return 0
    if mode == "checker_wrong_nonce":
        line = f"SGS-AXIOMS {'0' * len(nonce)} {json.dumps(answer)}"
    print(line)
    if mode == "checker_twice":
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
