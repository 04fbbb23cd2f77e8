"""Shared test fixtures.

Prover binaries: a test that needs one asks for its fixture.  Without the
binary the test is skipped on a developer machine but FAILS under CI
(``CI=true``), so a CI image that lost its prover cannot pass silently.
"""

from __future__ import annotations

import os
import shutil

import pytest


def require_binary(name: str) -> str:
    """Path of executable ``name``; skip (or fail under ``CI=true``) without it."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}, and CI=true requires it")
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def coqtop() -> str:
    """Path of the Rocq/Coq toplevel (``coqtop``)."""
    return require_binary("coqtop")


@pytest.fixture(scope="session")
def require_rocq(coqtop) -> str:
    """Alias used by tests that only need Rocq to be present."""
    return coqtop


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray cluster shared by every test that needs Ray (starting one
    costs several seconds).  Reuses a cluster a test module already started."""
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    started = False
    if not ray.is_initialized():
        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False,
                 logging_level="WARNING")
        started = True
    yield ray
    if started:
        ray.shutdown()
