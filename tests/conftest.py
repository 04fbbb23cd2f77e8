"""Shared test fixtures.

Prover binaries: a test that needs one asks for its fixture.  Without the
binary the test is skipped on a developer machine but FAILS under CI
(``CI=true``), so a CI image that lost its prover cannot pass silently.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from sgs.machinery.models.tiny import TinyModelSettings, build_tiny_model

# A shell that starts the suite in the background hands it SIGINT ignored, and Python then keeps it
# ignored; the tests of Ctrl-C handling (tests/integration/sgs/test_learner.py) need Python's own handler.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: The engines' test model: a tiny random Llama.  Hidden 64 with 2 heads is
#: head_dim 32, the smallest vLLM's CPU kernels accept.
TINY = TinyModelSettings(
    vocab_size=320, hidden_size=64, intermediate_size=128, num_attention_heads=2, num_key_value_heads=2,
    max_position_embeddings=128,
)


#: Test files whose end-to-end runs take minutes, heaviest first (by file
#: name, wherever under ``tests/`` the file sits: names are unique).  They are
#: collected first, so that ``make test``'s xdist workers (a file each at a
#: time, in collection order: ``--no-loadscope-reorder``; xdist's default
#: order puts files with many tests first and these last) start on them and
#: neither is left with one of them at the end.  The Lean loop (its own warm
#: start) goes before the simulated GPUs, so that these find the shared warm
#: start (:func:`tests.e2e.test_loop.warm_run`) made instead of waiting for it.
HEAVY_FILES = ("test_loop.py", "test_lean_loop.py", "test_simulated_gpus.py", "test_sft.py",
               "test_weight_transfer.py", "test_gpu_check.py", "test_rocq_legit.py", "test_engine_faults.py",
               "test_long_horizon.py", "test_rocq_projects.py", "test_own_cluster.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return HEAVY_FILES.index(name) if name in HEAVY_FILES else len(HEAVY_FILES)

    items.sort(key=rank)  # stable: each file's tests keep their order


def require_binary(name: str) -> str:
    """Path of executable ``name``; skip (or fail under ``CI=true``) without it."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}, and CI=true requires it")
        pytest.skip(message)
    return path


#: What :func:`coqtop_without_stdlib` says when asked to check anything.
MISSING_STDLIB = "Error: Cannot find a physical path bound to logical path Coq.Init."


def coqtop_without_stdlib(directory: Path) -> dict[str, str]:
    """A test double of coqtop, written into ``directory``: it answers ``-v`` like
    Rocq 8.16.1 and fails to load its standard library otherwise (a half-installed
    Rocq).  Returns this environment with it first on ``PATH``."""
    directory.mkdir(parents=True, exist_ok=True)
    fake = directory / "coqtop"
    fake.write_text('#!/bin/sh\ncase "$1" in -v|--version) echo "The Coq Proof Assistant, version 8.16.1";;\n'
                    f'*) echo "{MISSING_STDLIB}" >&2; exit 1;; esac\n')
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{directory}{os.pathsep}{os.environ['PATH']}"}


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
    costs several seconds).  Reuses a cluster a test module already started.

    Without a dashboard, but with a dashboard port of its own: Ray Train's
    placement-group cleaner asks the state API at that port whether the run's
    controller is alive, and at the default 8265 another cluster's dashboard
    (an end-to-end run of the other pytest worker, or one shutting down) would
    answer that it knows no such actor; the cleaner then removes the run's
    placement group under its workers (CI of 2026-11-27)."""
    import ray

    from sgs.machinery.runtime import own_cluster_runtime_env
    from tests.local_ray_cluster import free_port

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    started = False
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=4, include_dashboard=False, dashboard_port=free_port(),
                 log_to_driver=False, logging_level="WARNING", runtime_env=own_cluster_runtime_env())
        started = True
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="session")
def sgs_cache_dir(tmp_path_factory) -> Path:
    """One SGS cache (``SGS_CACHE_DIR``) for the whole session: end-to-end runs
    with the same targets, corpus and warm-start settings share one warm
    start, whatever their placement (it is not part of the cache key).  With
    pytest-xdist (``make test`` runs two workers) the workers share it too:
    the warm-start cache's lock makes the second one wait for the first's
    training instead of repeating it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's base directory, above each worker's own
    cache = root / "sgs_cache"
    cache.mkdir(exist_ok=True)
    return cache


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> str:
    """A tiny random model (:data:`TINY`, seed 0) saved as a Hugging Face checkpoint."""
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", [], TINY, seed=0))


@pytest.fixture(scope="module")
def other_checkpoint(tmp_path_factory) -> str:
    """The same architecture with other weights (seed 1): a weight update to load."""
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", [], TINY, seed=1))
