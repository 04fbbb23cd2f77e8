"""The settings of the prover service (``python -m sgs.serve``, :mod:`sgs.serve`).

:class:`ServeConfig` is the ``serve`` node of :class:`~sgs.config.schema.SGSConfig`;
``conf/serve.yaml`` is the service's primary config.  The model, prover,
resources and Solver sampling settings are the run's own nodes; this node
holds what only a service has: where it listens, what one request may ask
for, and how Ray Serve scales and batches.  :func:`serve_problems` checks it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sgs.config.checks import at_least, positive


@dataclass
class ServeConfig:
    """The prover service: weights, HTTP address, request limits, replicas and batching."""

    #: The Solver weights to serve: a run directory (its Solver checkpoint
    #: flagged best, else its newest finished one), a Hugging Face checkpoint
    #: directory, or a hub id.  Null serves the default model of
    #: ``python -m sgs``: the tiny model, warm-started when the warm-start
    #: cache holds its warm start.  ``checkpoint=X`` on the command line is
    #: short for ``serve.checkpoint=X``.
    checkpoint: str | None = None
    #: Address the HTTP server listens on; ``0.0.0.0`` listens on every interface.
    host: str = "127.0.0.1"
    #: Port of the HTTP server.
    port: int = 8000
    #: Proof attempts of a ``/prove`` request that names none.
    default_attempts: int = 8
    #: Most proof attempts one ``/prove`` request may ask for; a request
    #: asking for more is refused (400) rather than cut down silently.
    max_attempts: int = 64
    #: Seconds a ``/prove`` or ``/verify`` request may take when it names no ``timeout``.
    default_timeout_s: float = 60.0
    #: Longest ``timeout`` a request may ask for; more is refused (400).
    #: Ray Serve's own HTTP timeout is set a little above it, so no request hangs.
    max_timeout_s: float = 300.0
    #: Samples per engine call: a request's attempts are drawn in calls of
    #: this many, and each call's proofs go to the verifier as soon as it
    #: returns, so a small value finds an early proof sooner and a large one
    #: costs fewer engine calls.
    samples_per_call: int = 4
    #: Most engine calls (of up to ``samples_per_call`` samples each, from any
    #: requests) one engine replica runs in one generate step: Ray Serve's
    #: ``@serve.batch``.  1 turns batching off.
    max_batch_size: int = 8
    #: Seconds a batch that is not full waits for more calls before it runs.
    batch_wait_timeout_s: float = 0.01
    #: Solver engine replicas, each one engine (``resources.engine_backend``,
    #: with ``resources.cpus_per_engine`` / ``gpus_per_engine``).  With
    #: ``engine_max_replicas`` set, the number autoscaling starts from and
    #: never goes below.
    engine_replicas: int = 1
    #: Null keeps ``engine_replicas`` fixed; a number lets Ray Serve autoscale
    #: the engines between ``engine_replicas`` and it on ``target_ongoing_requests``.
    engine_max_replicas: int | None = None
    #: Verifier replicas, each a verifier pool of ``resources.verifier_workers``
    #: prover processes (``resources.cpus_per_verifier`` each).
    verifier_replicas: int = 1
    #: Null keeps ``verifier_replicas`` fixed; a number autoscales them up to it.
    verifier_max_replicas: int | None = None
    #: Replicas of the HTTP front (parsing, prompts, the attempt loop; no model).
    api_replicas: int = 1
    #: Autoscaling target: requests in progress per replica (engine calls for
    #: an engine replica, checks for a verifier replica) that Ray Serve aims at.
    target_ongoing_requests: float = 4.0
    #: Requests one front replica works on at once.
    max_ongoing_requests: int = 8
    #: Requests that may wait for a front replica, per Ray Serve proxy (at
    #: least 1); one more is answered 503 at once.  This is the service's
    #: overload limit: a request is either worked on, waiting in this bounded
    #: queue, or refused.
    max_queued_requests: int = 32
    #: Largest request body in bytes; a larger one is refused (413) before it is parsed.
    max_request_bytes: int = 262_144
    #: Outputs of one ``/generate`` call (LeanCopilot's external generator).
    generate_outputs: int = 8
    #: Header of the statement ``/generate`` builds from a goal (Lean: the
    #: imports the goal needs, e.g. ``import Mathlib``); it only shapes the
    #: prompt: ``/generate`` checks nothing.
    generate_header: str = ""
    #: Verdicts each verifier replica keeps in memory, so a proof (or
    #: statement) sent again is answered without the prover.
    verdict_cache_entries: int = 100_000


def serve_problems(serve: ServeConfig) -> list[str]:
    """Every problem with the ``serve`` node, one message per problem, each naming its key."""
    problems: list[str] = []

    def serve_at_least(key: str, low: float) -> None:
        at_least(problems, f"serve.{key}", getattr(serve, key), low)

    if serve.checkpoint is not None and not serve.checkpoint.strip():
        problems.append("serve.checkpoint must not be empty; use null for the default model")
    if not serve.host.strip():
        problems.append("serve.host must not be empty")
    if not 1 <= serve.port <= 65535:
        problems.append(f"serve.port={serve.port} must lie in 1..65535")
    for key in ("default_attempts", "max_attempts", "samples_per_call", "max_batch_size", "engine_replicas",
                "engine_max_replicas", "verifier_replicas", "verifier_max_replicas", "api_replicas",
                "max_ongoing_requests", "max_queued_requests", "generate_outputs", "verdict_cache_entries"):
        serve_at_least(key, 1)
    serve_at_least("max_request_bytes", 1024)
    serve_at_least("batch_wait_timeout_s", 0)
    for key in ("default_timeout_s", "max_timeout_s", "target_ongoing_requests"):
        positive(problems, f"serve.{key}", getattr(serve, key))
    if serve.default_attempts > serve.max_attempts:
        problems.append(f"serve.default_attempts={serve.default_attempts} must not exceed "
                        f"serve.max_attempts={serve.max_attempts}")
    if serve.default_timeout_s > serve.max_timeout_s:
        problems.append(f"serve.default_timeout_s={serve.default_timeout_s} must not exceed "
                        f"serve.max_timeout_s={serve.max_timeout_s}")
    for kind in ("engine", "verifier"):
        low, high = getattr(serve, f"{kind}_replicas"), getattr(serve, f"{kind}_max_replicas")
        if high is not None and high < low:
            problems.append(f"serve.{kind}_max_replicas={high} must be at least serve.{kind}_replicas={low}")
    return problems
