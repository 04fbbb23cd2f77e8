"""How long loading the headers of traced Rocq targets takes, two ways.

    python tools/time_rocq_headers.py TARGETS.jsonl

For the targets of one project (a file ``tools/trace_rocq_targets.py``
wrote), in one coqtop started with their load path: every header loaded from
coqtop's initial state (what a session would do if it replayed the file for
every target), then every header entered in file order from the previous one
(what :meth:`lean_env.rocq.session.RocqSession.enter` does: the headers of
one file are prefixes of one another, so only the text between two targets
runs).  Prints one line with both totals and the time per target.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from lean_env.rocq.checks import split_sentences
from lean_env.rocq.config import RocqConfig
from lean_env.rocq.load_path import load_path_argv, parse_load_path
from lean_env.rocq.session import RocqSession

#: seconds allowed for one header
HEADER_TIMEOUT_S = 300.0


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print("usage: python tools/time_rocq_headers.py TARGETS.jsonl", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in Path(argv[0]).read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows or len({json.dumps(row.get("load_path")) for row in rows}) != 1:
        print("the file must hold the targets of one project (one load path)", file=sys.stderr)
        return 2
    headers = [tuple(s.text for s in split_sentences(row["header"], trusted=True)) for row in rows]
    config = RocqConfig()
    session = RocqSession(config.argv(load_path_argv(parse_load_path(rows[0]["load_path"]))),
                          env=config.child_env(), limits=config.limits(), name="coqtop")
    try:
        session.wait_ready(time.monotonic() + config.start_timeout)
        started = time.monotonic()
        for header in headers:
            session.enter((), time.monotonic() + HEADER_TIMEOUT_S)   # back to the initial state
            if session.enter(header, time.monotonic() + HEADER_TIMEOUT_S) is not None:
                raise RuntimeError("a header failed to load")
        from_scratch = time.monotonic() - started
        session.enter((), time.monotonic() + HEADER_TIMEOUT_S)
        started = time.monotonic()
        for header in headers:
            if session.enter(header, time.monotonic() + HEADER_TIMEOUT_S) is not None:
                raise RuntimeError("a header failed to load")
        forward = time.monotonic() - started
    finally:
        session.kill()
    n = len(headers)
    print(f"{n} headers ({sum(map(len, headers))} sentences): each from scratch {from_scratch:.1f} s "
          f"({from_scratch / n:.3f} s a target); moving forward {forward:.1f} s ({forward / n:.3f} s a target)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
