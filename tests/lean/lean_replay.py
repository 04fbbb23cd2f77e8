#!/usr/bin/env python3
"""REPLAY PROCESS: a test double standing in for the Lean 4 REPL binary.

No Lean toolchain can be installed on the machines these tests run on, so the
tests start this script in place of ``lake env repl``.  It speaks the REPL's
stdin/stdout protocol and answers each request with the response Lean gave to
the same request in a recorded transcript pair (``X.in`` / ``X.expected.out``
from the REPL's own test suite, real Lean output), so the real client code,
framing and verdict logic run against real answers.

Reading requests follows the REPL exactly: lines are read until a blank line,
each line's end is trimmed and the lines are joined with no separator, then
parsed as JSON.  As in the REPL, a request that is not valid JSON, or a blank
line where a request should start (two blank lines in a row), kills the
process with ``uncaught exception`` on stderr and exit code 1; EOF ends it with
exit code 0.

Matching: a request matches a recorded one when their keys agree, ``cmd`` and
``tactic`` agree up to runs of whitespace, and ``env`` / ``proofState`` are
equal; the first unused match in transcript order answers, else the first
used one.  A request nothing matches is a test failure: the replay says so on
stderr and exits with code 3.  Recorded answers are written byte for byte.

Synthesized answers (not from Lean; in the REPL's documented format):
* ``--header TEXT``: answers the command ``TEXT`` (no ``env``) with a fresh
  environment; recorded requests that had no ``env`` then also match requests
  made in that environment (the core transcripts ran without a header);
* ``#print axioms NAME``: no transcript prints axioms, so the answer is an
  info message ``'NAME' depends on axioms: [...]`` built from ``--axioms``
  (``none`` for "does not depend on any axioms", ``silent`` for no message at
  all), wrapped over lines with ``--wrap-axioms`` as Lean does for long lists;
* an ``env`` this process never handed out gets ``Unknown environment.``.

Synthetic failures, triggered by a request whose ``cmd``/``tactic`` contains
``--fault-on TEXT`` (default: any request but the first):
``hang`` (never answer; with ``--child-pid-file`` first start a child process
in the same process group and record its pid), ``die`` (write half an answer
and exit 1), ``garbage`` (an answer that is not JSON), ``message`` (a REPL-level
``{"message": ...}`` error), ``slow`` (answer after ``--delay`` seconds).
``--fault-once PATH`` makes only the first process that triggers the fault
fail (it creates PATH); later processes answer normally.  ``--request-log
PATH`` appends ``{"pid": ..., "cwd": ..., "request": ...}`` for every request
received, so tests can see which process was asked what, and where it ran.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Optional

HEADER_ENV_BASE = 1000


def read_blocks(text: str) -> list[str]:
    """Split a transcript into blank-line-separated blocks, joining each
    block's lines the way the REPL does (trim line ends, no separator)."""
    blocks, current = [], []
    for line in text.split("\n"):
        if line.strip():
            current.append(line.rstrip())
        elif current:
            blocks.append("".join(current))
            current = []
    if current:
        blocks.append("".join(current))
    return blocks


def raw_response_blocks(text: str) -> list[str]:
    """The recorded responses, each exactly as Lean printed it."""
    return [b for b in re.split(r"\n\n+", text) if b.strip()]


def normalize(request: dict) -> dict:
    return {k: " ".join(v.split()) if k in ("cmd", "tactic") and isinstance(v, str) else v
            for k, v in request.items()}


class Replay:
    """The recorded sessions plus the synthesized behaviour."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.pairs: list[tuple[dict, str]] = []
        for stem in args.transcripts:
            requests = [json.loads(b) for b in read_blocks(Path(stem + ".in").read_text(encoding="utf-8"))]
            responses = raw_response_blocks(Path(stem + ".expected.out").read_text(encoding="utf-8"))
            if len(requests) != len(responses):
                sys.exit(f"lean_replay: {stem}: {len(requests)} requests but {len(responses)} responses")
            self.pairs += [(normalize(q), r) for q, r in zip(requests, responses)]
        self.used: set[int] = set()
        self.envs: set[int] = set()
        self.header_envs: set[int] = set()
        self.answered = 0

    # -- answers -----------------------------------------------------------
    def answer(self, request: dict) -> str:
        if "env" in request and request["env"] not in self.envs:
            return json.dumps({"message": "Unknown environment."})
        cmd = request.get("cmd")
        if self.args.header is not None and cmd == self.args.header and "env" not in request:
            env = HEADER_ENV_BASE + len(self.header_envs)
            self.header_envs.add(env)
            return json.dumps({"env": env})
        if isinstance(cmd, str) and cmd.startswith("#print axioms "):
            return self.axioms_answer(cmd[len("#print axioms "):].strip())
        index = self.match(normalize(request))
        if index is None:
            sys.stderr.write(f"lean_replay: no recorded answer for request {json.dumps(request)[:500]}\n")
            sys.stderr.flush()
            os._exit(3)
        self.used.add(index)
        return self.pairs[index][1]

    def match(self, request: dict) -> Optional[int]:
        candidates = [i for i, (recorded, _) in enumerate(self.pairs) if self.matches(recorded, request)]
        unused = [i for i in candidates if i not in self.used]
        return (unused or candidates or [None])[0]

    def matches(self, recorded: dict, request: dict) -> bool:
        if recorded == request:
            return True
        # a recorded fresh-session command matches the same command in a header env
        if "env" in recorded or request.get("env") not in self.header_envs:
            return False
        return recorded == {k: v for k, v in request.items() if k != "env"}

    def axioms_answer(self, name: str) -> str:
        env = self.fresh_env()
        if self.args.axioms == "silent":
            return json.dumps({"env": env})
        axioms = [] if self.args.axioms == "none" else self.args.axioms.split(",")
        message = axioms_message(name, axioms, self.args.wrap_axioms)
        return json.dumps({"messages": [message], "env": env}, ensure_ascii=False, indent=1)

    def fresh_env(self) -> int:
        return max(self.envs | {-1}) + 1

    # -- faults ------------------------------------------------------------
    def faulty(self, request: dict) -> bool:
        if self.args.fault is None:
            return False
        text = request.get("cmd", request.get("tactic", ""))
        if self.args.fault_on is None:
            triggered = self.answered > 0
        else:
            triggered = isinstance(text, str) and self.args.fault_on in text
        if not triggered:
            return False
        if self.args.fault_once is None:
            return True
        try:
            os.close(os.open(self.args.fault_once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def fail(self, request: dict) -> Optional[str]:
        """Misbehave on ``request``; the answer written, if any."""
        fault = self.args.fault
        if fault == "hang":
            if self.args.child_pid_file:
                child = subprocess.Popen(["sleep", "3600"])
                Path(self.args.child_pid_file).write_text(str(host_pid(child.pid)))
            while True:
                time.sleep(3600)
        if fault == "die":
            data = self.answer(request).encode("utf-8")
            sys.stdout.buffer.write(data[: len(data) // 2])
            sys.stdout.flush()
            sys.stderr.write("INTERNAL PANIC: replay told to die mid-answer\n")
            sys.stderr.flush()
            os._exit(1)
        if fault == "garbage":
            self.write("this is not a JSON answer {{{")
            return None
        if fault == "message":
            self.write(json.dumps({"message": "Unknown environment."}))
            return None
        time.sleep(self.args.delay)
        answer = self.answer(request)
        self.write(answer)
        return answer

    # -- I/O -----------------------------------------------------------------
    def write(self, answer: str) -> None:
        write_answer(answer)

    def record(self, answer: str) -> None:
        """Remember the environment an answer handed out."""
        try:
            env = json.loads(answer).get("env")
        except (json.JSONDecodeError, AttributeError):
            return
        if isinstance(env, int):
            self.envs.add(env)

    def serve(self) -> None:
        for request in read_requests(self.args.request_log):
            if self.faulty(request):
                answer = self.fail(request)
            else:
                answer = self.answer(request)
                self.write(answer)
            if answer is not None:
                self.record(answer)
            self.answered += 1


def die(message: str) -> None:
    sys.stderr.write("uncaught exception: " + json.dumps({"message": message}) + "\n")
    sys.stderr.flush()
    os._exit(1)


# -- the REPL's framing, shared with the stand-in (lean_standin.py) -----------------

def host_pid(child: Optional[int] = None) -> int:
    """This process's id (or its child ``child``'s) as the test that started it sees
    it: the sandbox runs a REPL in its own PID namespace, where ids mean nothing
    outside; /proc there is still the machine's, so its numbers are."""
    try:
        if child is None:
            return int(os.readlink("/proc/self"))
        for task in Path("/proc/self/task").iterdir():
            for pid in (task / "children").read_text().split():
                status = Path(f"/proc/{pid}/status").read_text()
                nspid = next(line for line in status.splitlines() if line.startswith("NSpid:"))
                if nspid.split()[-1] == str(child):  # its id in the innermost namespace
                    return int(pid)
    except (OSError, ValueError, StopIteration):
        pass
    return os.getpid() if child is None else child


def read_requests(request_log: Optional[str] = None) -> Iterator[dict]:
    """The requests on stdin, read as the REPL reads them: lines up to a
    blank line, each line's end trimmed, joined with no separator, parsed as
    JSON.  Invalid JSON, a non-object or a blank line where a request starts
    kills the process as the REPL dies; EOF ends the iteration.  With
    ``request_log``, each request is appended there as ``{"pid", "cwd",
    "request"}``."""
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return
        if not line.strip():
            die("Could not parse JSON:\nunexpected end of input (a blank line where a request starts)")
        lines = [line]
        while (line := stdin.readline()).strip():
            lines.append(line)
        try:
            request = json.loads("".join(part.decode("utf-8").rstrip() for part in lines))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            die(f"Could not parse JSON:\n{e}")
        if not isinstance(request, dict):
            die("Could not parse as a valid JSON command:\nnot an object")
        if request_log:
            with open(request_log, "a", encoding="utf-8") as log:
                log.write(json.dumps({"pid": host_pid(), "cwd": os.getcwd(), "request": request},
                                     ensure_ascii=False) + "\n")
        yield request


def write_answer(answer: str) -> None:
    """Write one answer and the blank line that ends it."""
    sys.stdout.buffer.write(answer.encode("utf-8") + b"\n\n")
    sys.stdout.flush()


def axioms_message(name: str, axioms: list[str], wrap: bool = False) -> dict:
    """The info message ``#print axioms NAME`` prints (Lean's wording; a long
    list wraps over lines when ``wrap``)."""
    shown = name.removeprefix("_root_.")
    if not axioms:
        text = f"'{shown}' does not depend on any axioms"
    else:
        text = f"'{shown}' depends on axioms: [{(',' + chr(10) + ' ' if wrap else ', ').join(axioms)}]"
    return {"severity": "info", "pos": {"line": 1, "column": 0}, "endPos": {"line": 1, "column": 13}, "data": text}


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transcripts", nargs="*", help="transcript stems: STEM.in and STEM.expected.out")
    parser.add_argument("--header", help="answer this fresh-session command with a synthesized env")
    parser.add_argument("--axioms", default="propext,Classical.choice,Quot.sound",
                        help="comma-separated axioms for `#print axioms`; 'none' or 'silent'")
    parser.add_argument("--wrap-axioms", action="store_true", help="wrap the axiom list over lines")
    parser.add_argument("--fault", choices=["hang", "die", "garbage", "message", "slow"])
    parser.add_argument("--fault-on", help="fault on requests whose cmd/tactic contains this text")
    parser.add_argument("--fault-once", help="fault only if this file can still be created")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before a slow answer")
    parser.add_argument("--child-pid-file", help="(hang) start a child and write its pid here")
    parser.add_argument("--request-log", help="append every request received (with this pid) here")
    Replay(parser.parse_args(argv)).serve()


if __name__ == "__main__":
    main()
