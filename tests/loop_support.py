"""The loop's test targets, shared by its in-process tests
(``tests/unit/sgs/loop/test_loop_parts.py``) and its end-to-end runs
(``tests/e2e/test_loop.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from sgs.state.records import Target

HEADER = "Require Import Arith Lia."
#: Test targets: some every tactic proves, some a few tactics prove, one none.
PROPOSITIONS = {
    "add_0": "forall n : nat, n + 0 = n",
    "four": "2 + 2 = 4",
    "le_succ": "forall n : nat, n <= S n",
    "truth": "True",
    "mul_comm": "forall a b : nat, a * b = b * a",
    "hard": "forall n : nat, n * n <> 2",
    "held": "forall n : nat, 0 + n = n",
}
HELD_OUT = {"held"}


def make_targets() -> list[Target]:
    return [Target(id=name, header=HEADER, statement=f"Theorem {name} : {prop}.", held_out=name in HELD_OUT)
            for name, prop in PROPOSITIONS.items()]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    """``rows`` as a JSON-lines file at ``path``."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path
