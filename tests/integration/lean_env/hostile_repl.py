#!/usr/bin/env python3
"""A stand-in for a prover that does what a hostile proof would make it do.

It speaks the Lean REPL's framing (one JSON object, then a blank line, each
way), so a test can drive it through :class:`lean_env.sandbox.SandboxedProcess`
or through :class:`lean_env.lean.repl.ReplProcess` itself.  Each request names
one attempt; the answer says whether it worked (``ok``) and, if not, the errno:

* ``{"write": PATH}``, ``{"mkdir": PATH}``, ``{"unlink": PATH}``,
  ``{"truncate": PATH}``, ``{"rename": [SRC, DST]}``, ``{"symlink": [TARGET, PATH]}``;
* ``{"daemon": MARKER, "busy": BOOL}``: double-fork, ``setsid``, and leave a
  process sleeping (or in a busy loop) with ``MARKER`` in its command line;
* ``{"forks": N}``: start up to N sleeping children; answers how many started;
* ``{"connect": PORT}``: TCP to 127.0.0.1; ``{"abstract": NAME}``: an abstract
  unix socket; ``{"signal": PID}``: SIGUSR1 to a process outside;
* ``{"where": true}``: the working directory and the writable places of the
  environment.

Standard library only: it must run under any interpreter.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time


def attempt(action) -> dict:
    try:
        extra = action() or {}
    except OSError as e:
        return {"ok": False, "errno": e.errno, "error": str(e)}
    return {"ok": True, **extra}


def write(path: str) -> None:
    with open(path, "w") as f:
        f.write("written by a hostile prover\n")


def daemon(marker: str, busy: bool) -> dict:
    """The classic escape: fork, setsid, fork again, and let the middle one exit,
    so that the survivor has neither our session, nor our process group, nor us
    as its parent."""
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            os.close(r)  # w is close-on-exec (Python's pipes are): the exec below ends the parent's read
            argv = [sys.executable, "-c", "while True: pass" if busy else "import time; time.sleep(600)", marker]
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.execvp(argv[0], argv)
        os._exit(0)
    os.close(w)
    os.read(r, 1)  # end of file once the survivor has exec'd: its command line names the marker before the answer
    os.close(r)
    os.waitpid(middle, 0)
    return {}


def forks(n: int) -> dict:
    started = 0
    for _ in range(n):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        started += 1
    return {"started": started}


def connect(port: int) -> None:
    socket.create_connection(("127.0.0.1", port), timeout=5).close()


def abstract(name: str) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(5)
        s.connect("\0" + name)
    finally:
        s.close()


def where() -> dict:
    names = ("HOME", "TMPDIR", "TMP", "TEMP", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")
    return {"cwd": os.getcwd(), **{n: os.environ.get(n) for n in names}}


def answer(request: dict) -> dict:
    if "write" in request:
        return attempt(lambda: write(request["write"]))
    if "mkdir" in request:
        return attempt(lambda: os.mkdir(request["mkdir"]))
    if "unlink" in request:
        return attempt(lambda: os.unlink(request["unlink"]))
    if "truncate" in request:
        return attempt(lambda: os.truncate(request["truncate"], 0))
    if "rename" in request:
        return attempt(lambda: os.rename(*request["rename"]))
    if "symlink" in request:
        return attempt(lambda: os.symlink(*request["symlink"]))
    if "daemon" in request:
        return attempt(lambda: daemon(request["daemon"], bool(request.get("busy"))))
    if "forks" in request:
        return attempt(lambda: forks(int(request["forks"])))
    if "connect" in request:
        return attempt(lambda: connect(int(request["connect"])))
    if "abstract" in request:
        return attempt(lambda: abstract(request["abstract"]))
    if "signal" in request:
        return attempt(lambda: os.kill(int(request["signal"]), signal.SIGUSR1))
    if "where" in request:
        return attempt(where)
    return {"message": f"unknown request {sorted(request)}"}


def main() -> None:
    lines: list[str] = []
    for line in sys.stdin:
        if line.strip():
            lines.append(line)
            continue
        if not lines:
            continue
        request = json.loads("".join(lines))
        lines = []
        sys.stdout.write(json.dumps(answer(request)) + "\n\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
