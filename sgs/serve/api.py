"""The HTTP front of the prover service: the ingress deployment, its endpoints, metrics and request log.

Endpoints (JSON in and out; every error is ``{"error": "<what is wrong>"}``):

* ``GET /health``: the model (checkpoint, where it came from, policy
  version), the prover (backend and version) and the engine backend (library
  and version), asked of the replicas; 503 when a back end does not answer.
* ``POST /prove`` ``{header?, statement, attempts?, timeout?, prover?, mode?}``:
  ``mode`` ``sample`` (the default: :func:`sgs.serve.search.search`, whole
  proofs sampled), ``search`` (a tactic-level search, :mod:`sgs.serve.searchers`)
  or ``both`` (sampling, then the search with the time left); answers
  ``found``, the ``proof`` body and the whole ``text`` (header, statement,
  proof), every attempt's verdict, ``seconds`` and ``verifier_seconds``,
  ``timed_out``, ``proved_by`` (``sample``, ``search`` or null) and
  ``search`` (how it ended, its model calls, samples and tokens; null
  when none ran).
* ``POST /verify`` ``{header?, statement, proof, timeout?, prover?}``: the
  verdict on one proof body, as ``python -m lean_env verify`` writes it.
* ``POST /generate`` ``{name, input, prefix}``: LeanCopilot's external
  generator (:mod:`sgs.serve.goals`): ``{"outputs": [{"output", "score"}]}``,
  the distinct suggestions that start with ``prefix``, best score first.

Before sampling or checking, ``/prove`` and ``/verify`` ask the verifier
whether the statement elaborates (a cached answer after the first time):
422 when it does not.  Request problems are 4xx from
:mod:`sgs.serve.requests`; a back end that is overloaded or failed is 503.

Metrics (``ray.util.metrics``, on the Ray dashboard's Metrics tab):
``sgs_serve_requests`` (tags ``endpoint``, ``status``),
``sgs_serve_request_seconds`` (tag ``endpoint``), ``sgs_serve_proofs_found``,
``sgs_serve_attempts`` (tag ``status``) and ``sgs_serve_verifier_seconds``
(prover seconds per check).  Each request is logged as one line on the
``ray.serve`` logger (the replica's log file, and the command's output).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import ray
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from ray import serve
from ray.serve.exceptions import BackPressureError, RayServeException
from ray.serve.handle import DeploymentHandle
from ray.util import metrics
from transformers import AutoTokenizer

from lean_env.verdict import ProofTask, Status, Verdict
from sgs.config import ServeConfig
from sgs.machinery.prompts import Prompter
from sgs.method.roles import extract_proof
from sgs.serve.engine import Drawn, Refusal
from sgs.serve.goals import goal_statement, suggestion
from sgs.serve.requests import BadRequest, generate_request, prove_request, read_body, too_large, verify_request
from sgs.serve.search import Outcome, awaited, call_sizes, capped, search
from sgs.serve.searchers import SearchOptions, Searchers

log = logging.getLogger("ray.serve")

app = FastAPI(title="SGS prover service", docs_url=None, redoc_url=None, openapi_url=None)

#: Seconds ``/health`` waits for each back end.
HEALTH_TIMEOUT_S = 10.0
#: The attempt statuses that are verdicts (the others never reached the prover).
VERDICT_STATUSES = frozenset(status.value for status in Status)
#: Latency histogram boundaries (seconds).
LATENCY_BOUNDARIES = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]


@dataclass(frozen=True)
class FrontSettings:
    """What the front knows of the service besides its two back ends."""

    prover: str
    """The prover backend, which is also the proof language."""
    serve: ServeConfig
    """The request limits and engine call size."""
    tokenizer: str
    """Where the Solver's tokenizer comes from (prompts are rendered with it)."""
    model: dict[str, Any]
    """The served weights, described for ``/health``."""
    search: SearchOptions | None = None
    """``/prove``'s search mode (None: a server that cannot search)."""


class Unavailable(Exception):
    """A back end could not answer (overloaded, or failed): the request gets a 503."""


class ServeMetrics:
    """The front's metrics, created in the replica that records them."""

    def __init__(self) -> None:
        self.requests = metrics.Counter("sgs_serve_requests", "Requests answered, by endpoint and HTTP status.",
                                        tag_keys=("endpoint", "status"))
        self.latency = metrics.Histogram("sgs_serve_request_seconds", "Seconds from request to answer.",
                                         boundaries=LATENCY_BOUNDARIES, tag_keys=("endpoint",))
        self.proofs_found = metrics.Counter("sgs_serve_proofs_found", "/prove requests answered with a valid proof.")
        self.attempts = metrics.Counter("sgs_serve_attempts", "/prove attempts, by how they ended.",
                                        tag_keys=("status",))
        self.verifier_seconds = metrics.Histogram("sgs_serve_verifier_seconds", "Prover seconds per check.",
                                                  boundaries=LATENCY_BOUNDARIES)


# Helpers come before the deployment classes: Ray Serve pickles a deployment's
# class when it is declared, with the module globals that exist by then.


def _proof_text(header: str, statement: str, proof: str) -> str:
    """Header, statement and proof as one file (a Lean body brings its own line break)."""
    head = f"{header}\n" if header else ""
    return head + statement + ("" if proof.startswith("\n") else "\n") + proof


class EngineCall:
    """One engine call: awaiting it gives its samples (a prompt the engine
    refused is a 422 naming why); ``cancel`` cancels the Ray Serve request."""

    def __init__(self, response: Any) -> None:
        self._response = response

    def cancel(self) -> None:
        self._response.cancel()

    def __await__(self):
        return self._samples().__await__()

    async def _samples(self) -> list[Drawn]:
        result = await self._response
        if isinstance(result, Refusal):
            raise BadRequest(422, f"the model cannot take this statement: {result.message}")
        return result


async def _body(request: Request, limit: int) -> bytes:
    """The body, read no further than one byte past ``limit`` (the parser then answers 413)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large(int(declared), limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            break
    return b"".join(chunks)



@serve.deployment
@serve.ingress(app)
class ProverAPI:
    """The ingress deployment: parses requests, renders prompts, runs the attempt loop."""

    def __init__(self, engine: DeploymentHandle, verifier: DeploymentHandle, settings: FrontSettings) -> None:
        self._engine = engine
        self._verifier = verifier
        self._settings = settings
        self._limits = settings.serve
        self._prompter = Prompter(settings.prover, AutoTokenizer.from_pretrained(settings.tokenizer))
        self._metrics = ServeMetrics()
        self._searchers = Searchers(engine, settings.search) if settings.search is not None else None

    @app.get("/health")
    async def health(self) -> JSONResponse:
        started = time.monotonic()
        try:
            engine = await self._call(self._engine.info.remote(), HEALTH_TIMEOUT_S)
            prover = await self._call(self._verifier.info.remote(), HEALTH_TIMEOUT_S)
        except Unavailable as error:
            return self._finish("/health", started, 503, {"status": "unavailable", "error": str(error)})
        body = {"status": "ok", "model": self._settings.model, "prover": prover, "backend": engine,
                "versions": {"ray": ray.__version__}}
        return self._finish("/health", started, 200, body)

    @app.post("/prove")
    async def prove(self, request: Request) -> JSONResponse:
        return await self._answer("/prove", request, self._prove)

    @app.post("/verify")
    async def verify(self, request: Request) -> JSONResponse:
        return await self._answer("/verify", request, self._verify)

    @app.post("/generate")
    async def generate(self, request: Request) -> JSONResponse:
        return await self._answer("/generate", request, self._generate)

    # -- the endpoints' work -------------------------------------------------

    async def _prove(self, body: dict, started: float) -> tuple[dict, str]:
        req = prove_request(body, self._limits, self._settings.prover)
        deadline = started + req.timeout
        await self._require_statement(req.header, req.statement, deadline)
        if req.mode != "sample" and self._searchers is None:
            raise BadRequest(422, f"mode={req.mode!r}: this server runs no search")
        outcome = Outcome(None, None, [], False)
        if req.mode != "search":
            outcome = await search(self._draw, self._check, prompt=self._prompter.solver(req.header, req.statement),
                                   header=req.header, statement=req.statement, language=self._settings.prover,
                                   attempts=req.attempts, per_call=self._limits.samples_per_call,
                                   deadline=deadline)
        for attempt in outcome.attempts:
            self._metrics.attempts.inc(tags={"status": attempt.status})
            if attempt.status in VERDICT_STATUSES:
                self._metrics.verifier_seconds.observe(attempt.seconds)
        proof, proved_by, searched, timed_out = outcome.proof, "sample", None, outcome.timed_out
        verifier_seconds = outcome.verifier_seconds
        if proof is None and req.mode != "sample":
            searched, proof, seconds = await self._search(req, deadline)
            proved_by, timed_out = "search", searched["stop"] in ("time", "request_timeout")
            verifier_seconds += seconds
        if proof is not None:
            self._metrics.proofs_found.inc()
        text = None if proof is None else _proof_text(req.header, req.statement, proof)
        answer = {"found": proof is not None, "proof": proof, "text": text,
                  "attempt": outcome.winner, "attempts": [a.to_json() for a in outcome.attempts],
                  "timed_out": timed_out, "seconds": round(time.monotonic() - started, 4),
                  "verifier_seconds": round(verifier_seconds, 4), "mode": req.mode,
                  "proved_by": proved_by if proof is not None else None, "search": searched}
        return answer, (f"mode={req.mode} attempts={req.attempts} found={answer['found']} "
                        f"proved_by={answer['proved_by']} timed_out={timed_out} verifier_s={verifier_seconds:.3f}")

    async def _search(self, req: Any, deadline: float) -> tuple[dict, str | None, float]:
        """The search's summary, the proof it found if the verifier accepts it, and the verifier's seconds."""
        result = await self._searchers.search(ProofTask("search", req.header, req.statement, ""),
                                              deadline - time.monotonic())
        if result is None:
            return {"stop": "request_timeout", "status": None, "model_calls": 0, "samples": 0, "tokens": 0,
                    "expanded": 0, "seconds": None}, None, 0.0
        stats, generation = result["stats"], result["generation"]
        summary = {"stop": result["stop"], "status": (result["verdict"] or {}).get("status"),
                   "model_calls": generation.get("model_calls", 0), "samples": generation.get("samples", 0),
                   "tokens": generation.get("tokens", 0), "expanded": stats.get("expanded", 0),
                   "seconds": round(stats.get("seconds", 0.0), 4)}
        if not result["proved"]:
            return summary, None, 0.0
        # The search's own re-check passed; the verifier decides, as for a sampled proof.
        try:
            verdict = await self._call(self._check(ProofTask("search", req.header, req.statement, result["proof"])),
                                       deadline - time.monotonic())
        except TimeoutError:
            summary["status"] = "unchecked"
            return summary, None, 0.0
        self._metrics.verifier_seconds.observe(verdict.seconds)
        summary["status"] = verdict.status.value
        return summary, result["proof"] if verdict.valid else None, verdict.seconds

    async def _verify(self, body: dict, started: float) -> tuple[dict, str]:
        req = verify_request(body, self._limits, self._settings.prover)
        deadline = started + req.timeout
        await self._require_statement(req.header, req.statement, deadline)
        try:
            verdict = await self._call(self._check(ProofTask("verify", req.header, req.statement, req.proof)),
                                       deadline - time.monotonic())
        except TimeoutError:
            answer = {"status": "timeout", "valid": False, "reason": "request_timeout",
                      "messages": [f"no verdict within the request's timeout of {req.timeout} s"], "seconds": None}
        else:
            self._metrics.verifier_seconds.observe(verdict.seconds)
            answer = {"status": verdict.status.value, "valid": verdict.valid, "reason": verdict.reason,
                      "messages": capped(verdict.messages), "seconds": round(verdict.seconds, 4)}
        return answer, f"status={answer['status']} reason={answer['reason']}"

    async def _generate(self, body: dict, started: float) -> tuple[dict, str]:
        req = generate_request(body)
        language = self._settings.prover
        prompt = self._prompter.solver(self._limits.generate_header, goal_statement(req.input, language))
        calls = [self._draw(prompt, n) for n in call_sizes(self._limits.generate_outputs,
                                                            self._limits.samples_per_call)]
        try:
            drawn = [s for samples in await self._call(asyncio.gather(*calls), self._limits.max_timeout_s)
                     for s in samples]
        except TimeoutError:
            raise Unavailable(f"generation took longer than {self._limits.max_timeout_s} s") from None
        best: dict[str, float] = {}
        for sample in drawn:
            extraction = extract_proof(sample.text, language)
            if extraction.ok:
                output = suggestion(extraction.value, language)
                if output and output.startswith(req.prefix):
                    best[output] = max(sample.logprob, best.get(output, -float("inf")))
        outputs = [{"output": o, "score": s} for o, s in sorted(best.items(), key=lambda item: -item[1])]
        return {"outputs": outputs}, f"name={req.name!r} samples={len(drawn)} outputs={len(outputs)}"

    # -- back ends -----------------------------------------------------------

    def _draw(self, prompt: str, n: int) -> EngineCall:
        return EngineCall(self._engine.generate.remote(prompt, n))

    def _check(self, task: ProofTask) -> Any:
        return self._verifier.check.remote(task)

    async def _require_statement(self, header: str, statement: str, deadline: float) -> None:
        """422 unless the statement elaborates; a timeout leaves the question to the proof checks."""
        try:
            verdict: Verdict = await self._call(self._verifier.check_statement.remote(header, statement),
                                                deadline - time.monotonic())
        except TimeoutError:
            return
        if verdict.status is Status.INVALID:
            details = "; ".join(capped(verdict.messages, 500))
            raise BadRequest(422, f"the statement does not elaborate ({verdict.reason})" + (f": {details}" if details
                                                                                               else ""))

    async def _call(self, awaitable: Any, timeout: float) -> Any:
        """A back end's answer within ``timeout`` seconds; TimeoutError (and the
        call cancelled) otherwise."""
        try:
            return await asyncio.wait_for(awaited(awaitable), max(timeout, 0.0))
        except TimeoutError:
            if callable(getattr(awaitable, "cancel", None)):
                awaitable.cancel()
            raise
        except BackPressureError as error:
            raise Unavailable(f"the service is overloaded: {error}") from None

    # -- answering -----------------------------------------------------------

    async def _answer(self, endpoint: str, request: Request,
                      work: Callable[[dict, float], Awaitable[tuple[dict, str]]]) -> JSONResponse:
        started = time.monotonic()
        summary = ""
        try:
            body = read_body(await _body(request, self._limits.max_request_bytes), self._limits.max_request_bytes)
            answer, summary = await work(body, started)
            return self._finish(endpoint, started, 200, answer, summary)
        except BadRequest as error:
            return self._finish(endpoint, started, error.status, {"error": error.message}, summary)
        except (Unavailable, BackPressureError) as error:
            return self._finish(endpoint, started, 503, {"error": str(error)}, summary)
        except (RayServeException, ray.exceptions.RayError) as error:
            log.warning("%s: a back end failed", endpoint, exc_info=True)
            # The type says which failure; Ray's message is a traceback, kept for the log.
            return self._finish(endpoint, started, 503, {"error": f"a back end failed ({type(error).__name__}); "
                                                                  "the service log has the details"})
        except Exception as error:  # a fault of the front itself: the request fails, the replica goes on
            log.exception("%s: internal error", endpoint)
            return self._finish(endpoint, started, 500, {"error": f"internal error ({type(error).__name__}); "
                                                                  "the service log has the details"})

    def _finish(self, endpoint: str, started: float, status: int, body: dict, summary: str = "") -> JSONResponse:
        seconds = time.monotonic() - started
        self._metrics.requests.inc(tags={"endpoint": endpoint, "status": str(status)})
        self._metrics.latency.observe(seconds, tags={"endpoint": endpoint})
        detail = summary if status < 400 else f"error={body.get('error', '')[:200]!r}"
        log.info("sgs-serve %s %d %.3fs %s", endpoint, status, seconds, detail)
        return JSONResponse(body, status_code=status)
