"""Calling the prover service from Python (standard library only).

    from sgs.serve.client import call
    status, answer = call("http://127.0.0.1:8000/prove", {"statement": "Theorem t : True.", "attempts": 8})

:func:`call` returns the HTTP status and the JSON answer, errors included
(``{"error": ...}``; Ray Serve's own 503 text comes back as ``{"text": ...}``);
:func:`wait_until_up` waits for ``/health`` after starting ``python -m sgs.serve``.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any


def call(url: str, body: bytes | dict | None = None, timeout: float = 120.0) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON answer) of a GET (no body) or a POST (a dict is sent as JSON, bytes as they are)."""
    data = json.dumps(body).encode("utf-8") if isinstance(body, dict) else body
    request = urllib.request.Request(url, data=data, method="GET" if data is None else "POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        text = error.read().decode("utf-8", "replace")
        try:
            answer = json.loads(text)
        except ValueError:
            answer = None
        return error.code, answer if isinstance(answer, dict) else {"text": text}


def wait_until_up(url: str, process: subprocess.Popen | None = None, timeout: float = 600.0) -> dict[str, Any]:
    """``/health`` once it answers 200; RuntimeError if ``process`` ends first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the service exited with status {process.returncode} before it came up")
        try:
            status, health = call(f"{url}/health", timeout=10)
            if status == 200:
                return health
        except OSError:  # not listening yet
            pass
        time.sleep(2)
    raise RuntimeError(f"{url} did not come up within {timeout:.0f} s")
