"""The service as one Ray Serve application: three deployments bound together.

    ProverAPI (ingress, HTTP) ──> SolverEngine (batched generation)
                              └─> Verifier (a verifier pool per replica)

Why three deployments rather than one that owns an engine group and a pool:
the engines and the provers scale on different resources (GPUs for the
model, CPUs for Rocq or Lean), so each gets its own replicas, autoscaling
and queue (``serve.engine_*`` / ``serve.verifier_*``); Ray Serve batches the
engine calls of concurrent requests per engine replica (``@serve.batch``)
and restarts a replica that dies or fails its health check; and the front,
which only parses, renders prompts and waits, scales apart from both and
holds the service's one overload limit (``serve.max_queued_requests``:
beyond it, 503 at once).  The loop's own machinery is reused inside the
deployments: the engine backends of :mod:`sgs.machinery.engines`, the
verifier pool of :mod:`lean_env.pool` with its sandboxing and worker
replacement, and the Solver's prompts and proof extraction of
:mod:`sgs.method.roles`.  The engine group's restarts and heartbeats are
Ray Serve's job here (a replica is an actor it watches), so a replica holds
the engine itself rather than a group of further actors.
"""

from __future__ import annotations

from typing import Any

from ray.serve import Application

from lean_env.pool import VerifierPoolSettings

from sgs.config import SGSConfig
from sgs.machinery.runtime import backend_spec
from sgs.search.languages import finishers_for
from sgs.serve.api import FrontSettings, ProverAPI
from sgs.serve.searchers import SearchOptions
from sgs.serve.engine import SolverEngine
from sgs.serve.verifier import Verifier
from sgs.serve.weights import ServedWeights

#: An engine replica takes this many batches' worth of calls at once: one
#: batch running, the next one filling.
ENGINE_BATCHES_IN_FLIGHT = 2
#: Checks one verifier replica accepts at once; they wait in its pool's queue,
#: and the front's own limits bound how many requests can send them.
VERIFIER_MAX_ONGOING = 10_000


def service_cpus(cfg: SGSConfig) -> float:
    """CPUs the service's replicas reserve at their largest (the front reserves none)."""
    serve, res = cfg.serve, cfg.resources
    engines = serve.engine_max_replicas or serve.engine_replicas
    verifiers = serve.verifier_max_replicas or serve.verifier_replicas
    # Each front replica's search actors take one CPU each (sgs.serve.searchers).
    searchers = serve.api_replicas * cfg.evaluation.search.workers
    return engines * res.cpus_per_engine + verifiers * res.verifier_workers * res.cpus_per_verifier + searchers


def build_app(cfg: SGSConfig, weights: ServedWeights) -> Application:
    """The three deployments with the config's replicas, limits and batching."""
    serve, res, sampling = cfg.serve, cfg.resources, cfg.sampling.solver
    engine = SolverEngine.options(
        ray_actor_options={"num_cpus": res.cpus_per_engine, "num_gpus": res.gpus_per_engine},
        max_ongoing_requests=ENGINE_BATCHES_IN_FLIGHT * serve.max_batch_size,
        **_replicas(serve.engine_replicas, serve.engine_max_replicas, serve.target_ongoing_requests),
    ).bind(res.engine_backend, weights.checkpoint, {"dtype": cfg.model.dtype},
           {"max_tokens": sampling.max_tokens, "temperature": sampling.temperature, "top_p": sampling.top_p},
           serve.max_batch_size, serve.batch_wait_timeout_s, weights.policy_version,
           cfg.evaluation.search.tactic_max_tokens, weights.tokenizer, cfg.prover.backend)
    verifier = Verifier.options(
        # The replica only dispatches; its pool's worker actors reserve the CPUs.
        ray_actor_options={"num_cpus": 0},
        max_ongoing_requests=VERIFIER_MAX_ONGOING,
        **_replicas(serve.verifier_replicas, serve.verifier_max_replicas, serve.target_ongoing_requests),
    ).bind(backend_spec(cfg.prover),
           VerifierPoolSettings(num_workers=res.verifier_workers, timeout=cfg.prover.timeout,
                                cpus_per_worker=res.cpus_per_verifier, name="serve-verifier",
                                audit_fraction=cfg.prover.audit_fraction, audit_seed=cfg.seed),
           serve.verdict_cache_entries)
    model = {"checkpoint": weights.checkpoint, "source": weights.source, "policy_version": weights.policy_version,
             "description": weights.description}
    front = ProverAPI.options(
        num_replicas=serve.api_replicas,
        ray_actor_options={"num_cpus": 0},
        max_ongoing_requests=serve.max_ongoing_requests,
        max_queued_requests=serve.max_queued_requests,
    )
    return front.bind(engine, verifier, FrontSettings(cfg.prover.backend, serve, weights.tokenizer, model,
                                                      search_options(cfg)))


def search_options(cfg: SGSConfig) -> SearchOptions:
    """``/prove``'s search, as ``evaluation.search`` sets it, on the service's prover."""
    search = cfg.evaluation.search
    settings = {"width": search.width, "max_depth": search.max_depth, "tactic_seconds": search.tactic_seconds,
                "finishers": finishers_for(search.finishers, cfg.prover.backend)}
    return SearchOptions(str(search.strategy), search.workers, settings, backend_spec(cfg.prover))


def _replicas(low: int, high: int | None, target: float) -> dict[str, Any]:
    """A fixed number of replicas, or autoscaling between ``low`` and ``high``."""
    if high is None:
        return {"num_replicas": low}
    return {"autoscaling_config": {"min_replicas": low, "initial_replicas": low, "max_replicas": high,
                                   "target_ongoing_requests": target}}
