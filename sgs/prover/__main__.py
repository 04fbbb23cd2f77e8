"""``python -m sgs.prover COMMAND [ARGS]``: the general Rocq prover's commands.

Each command is a module with its own ``--help``; this only dispatches, so
``python -m sgs.prover train ...`` and ``python -m sgs.prover.train ...`` are
the same command."""

from __future__ import annotations

import importlib
import sys
from typing import Optional, Sequence

#: command -> (module, what it does)
COMMANDS = {
    "train": ("sgs.prover.train", "train (or resume) the prover on the corpus, for a CPU-time budget"),
    "ship": ("sgs.prover.ship", "copy a trained checkpoint to where the product loads it"),
    "accuracy": ("sgs.prover.accuracy", "next-tactic top-1/top-10 of a predictor on held-out corpus steps"),
    "premises": ("sgs.prover.premises", "premise and proof retrieval, measured on held-out steps"),
    "proof-rate": ("sgs.prover.proof_rate", "proof rate of the learning-free baselines per target group"),
}


def usage() -> str:
    lines = ["usage: python -m sgs.prover COMMAND [ARGS]   (COMMAND --help for its options)", ""]
    lines += [f"  {name:<11} {what}" for name, (_, what) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    if args[0] not in COMMANDS:
        print(f"error: unknown command {args[0]!r}\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[args[0]][0])
    return module.main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
