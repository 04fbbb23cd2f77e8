#!/usr/bin/env python3
"""STAND-IN FOR ``lake``: a test double for ``lake -d DIR env lean FILE``.

No Lean toolchain can be installed on the machines these tests run on, so the
Lean audit's tests run this script in place of ``lake``.  It checks that it was
called the way the audit calls ``lake`` and answers with the output shapes of
``lean FILE`` (Lean's ``Message.toString``, src/Lean/Message.lean: an error is
``FILE:LINE:COL: error: TEXT``; ``#print axioms`` prints ``'NAME' depends on
axioms: [A, B]`` or ``'NAME' does not depend on any axioms``, as an info
message, which newer Lean versions prefix with ``FILE:LINE:COL: info:``; a
long list wraps onto indented lines; ``lean`` exits 1 when there are errors).

Behaviour comes from ``LAKE_STANDIN_MODE`` (``LAKE_*`` variables reach the
prover's environment): ``axioms:A,B`` (exit 0, that list; ``axioms:`` for none),
``prefixed:A,B`` (the same with the info prefix), ``wrapped:A,B,...`` (the list
over several lines), ``error`` (an error message, exit 1), ``error0`` (an error
message, exit 0), ``silent`` (nothing, exit 0), ``twice`` (two axioms lines),
``hang`` (never finish).  ``LAKE_STANDIN_LOG`` names a file to which the call
(argv, cwd, the compiled file's text) is appended as one JSON line.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time


def main(argv: list[str]) -> int:
    if len(argv) != 5 or argv[0] != "-d" or argv[2:4] != ["env", "lean"] or not os.path.isdir(argv[1]):
        print(f"lake stand-in: unexpected call {argv!r}", file=sys.stderr)
        return 2
    source = open(argv[4], encoding="utf-8").read()
    if os.environ.get("LAKE_STANDIN_LOG"):
        with open(os.environ["LAKE_STANDIN_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps({"argv": argv, "cwd": os.getcwd(), "source": source}) + "\n")
    match = re.search(r"^#print axioms (\S+)$", source, re.MULTILINE)
    name = match.group(1) if match else "?"
    line = source[: match.start()].count("\n") + 1 if match else 1
    mode, _, listed = os.environ.get("LAKE_STANDIN_MODE", "axioms:").partition(":")
    axioms = [a for a in listed.split(",") if a]
    answer = (f"'{name}' depends on axioms: [{', '.join(axioms)}]" if axioms
              else f"'{name}' does not depend on any axioms")
    if mode == "axioms":
        print(answer)
    elif mode == "prefixed":
        print(f"{argv[4]}:{line}:0: info: {answer}")
    elif mode == "wrapped":
        print(f"'{name}' depends on axioms: [" + ",\n  ".join(axioms) + "]")
    elif mode in ("error", "error0"):
        print(f"{argv[4]}:{line - 2}:2: error: unsolved goals\n⊢ False")
        return 1 if mode == "error" else 0
    elif mode == "twice":
        print(answer)
        print(answer)
    elif mode == "hang":
        time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
