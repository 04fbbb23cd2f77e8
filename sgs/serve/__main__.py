"""``python -m sgs.serve``: serve a trained prover over HTTP (a Ray Serve application).

    python -m sgs.serve                                    # the default model, Rocq, http://127.0.0.1:8000
    python -m sgs.serve checkpoint=runs/x                  # a run's best (else newest) Solver checkpoint
    python -m sgs.serve checkpoint=HF_DIR_OR_HUB_ID prover=lean model=deepseek_prover_v2_7b resources=gpu_node \\
        prover.lean.project_dir=~/lean/mathlib serve.host=0.0.0.0 serve.engine_max_replicas=8

The command takes the overrides ``python -m sgs`` takes (model, prover,
resources, sampling ...) plus the ``serve`` node (:class:`sgs.config.ServeConfig`,
``conf/serve.yaml``); ``checkpoint=X`` is short for ``serve.checkpoint=X``.

Steps: compose and validate the config (exit 2 naming every problem), check
that this machine can run it and that the port is free (exit 3), find the
weights (:mod:`sgs.serve.weights`; exit 2 when ``serve.checkpoint`` names
nothing loadable), start Ray (a local cluster sized for the service, unless
``resources.ray_address`` names one), start Ray Serve's HTTP proxy on
``serve.host:serve.port`` with a request timeout just above
``serve.max_timeout_s``, deploy the application (:mod:`sgs.serve.app`) and
wait for its replicas, print where it listens, and serve until SIGINT or
SIGTERM; then stop Serve and Ray and exit 0.  A service whose replicas
cannot start (a prover that will not run, weights that will not load) ends
with exit status 1 and the reason.
"""

from __future__ import annotations

import signal
import socket
import sys
import time
from collections.abc import Sequence

import ray
from ray import serve

from sgs.config import ConfigError, SGSConfig, compose_config, requirements_problems, validate
from sgs.machinery.runtime import DASHBOARD_TOKEN_HINT, start_ray
from sgs.serve.app import build_app, service_cpus
from sgs.serve.weights import ServedWeights, WeightsError, served_weights

EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_REQUIREMENTS = 3
#: The service's primary config in ``conf/``.
SERVE_CONFIG_NAME = "serve"
#: Name of the Ray Serve application.
APP_NAME = "sgs"
#: Ray Serve's HTTP timeout is ``serve.max_timeout_s`` plus this, so a request
#: at the longest allowed timeout still gets the service's own answer.
HTTP_TIMEOUT_MARGIN_S = 30.0
#: The command-line aliases: ``checkpoint=X`` means ``serve.checkpoint=X``.
ALIASES = {"checkpoint": "serve.checkpoint"}


class Stopped(BaseException):
    """SIGINT or SIGTERM arrived (a BaseException, like KeyboardInterrupt, so no
    ``except Exception`` on the way swallows it)."""


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sgs.serve [overrides]``: serve until SIGINT or SIGTERM."""
    args = list(sys.argv[1:] if argv is None else argv)
    if any(arg in ("-h", "--help") for arg in args):
        print(__doc__)
        return 0
    try:
        cfg = validate(compose_config([_expand(arg) for arg in args], config_name=SERVE_CONFIG_NAME))
    except ConfigError as error:
        print(error, file=sys.stderr)
        return EXIT_CONFIG
    missing = requirements_problems(cfg) + _port_problems(cfg.serve.host, cfg.serve.port)
    if missing:
        print("this machine cannot run the config:\n" + "\n".join(f"  - {p}" for p in missing), file=sys.stderr)
        return EXIT_REQUIREMENTS
    try:
        weights = served_weights(cfg)
    except WeightsError as error:
        print(error, file=sys.stderr)
        return EXIT_CONFIG
    _handle_signals(_stop)
    try:
        _serve(cfg, weights)
    except Stopped:
        print("stopped", flush=True)
        return 0
    except RuntimeError as error:  # what Ray Serve raises when replicas cannot start
        print(f"the service did not start: {error}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _serve(cfg: SGSConfig, weights: ServedWeights) -> None:
    """Start Ray and the application, and serve until a signal raises :class:`Stopped`."""
    settings = cfg.serve
    context = start_ray(cfg, reserved=service_cpus(cfg))
    # Again: Ray's core worker installs its own SIGTERM handler, which only dumps a stack.
    _handle_signals(_stop)
    try:
        serve.start(http_options={"host": settings.host, "port": settings.port,
                                  "request_timeout_s": settings.max_timeout_s + HTTP_TIMEOUT_MARGIN_S})
        print(f"starting the SGS prover service: {weights.description}; prover {cfg.prover.backend}; "
              f"engine {cfg.resources.engine_backend}", flush=True)
        serve.run(build_app(cfg, weights), name=APP_NAME, route_prefix="/", blocking=False)
        url = f"http://{settings.host}:{settings.port}"
        print(f"serving on {url}: GET {url}/health, POST {url}/prove, {url}/verify, {url}/generate; "
              "SIGINT or SIGTERM stops it", flush=True)
        _print_monitoring(context)
        while True:
            time.sleep(3600)
    finally:
        # A second signal during the shutdown ends the process at once.
        _handle_signals(signal.SIG_DFL)
        try:
            serve.shutdown()
        finally:
            ray.shutdown()


def _print_monitoring(context) -> None:
    """Where the service's metrics can be read (a joined cluster's are on its head node)."""
    port = context.address_info.get("metrics_export_port")
    if port:
        print(f"metrics (Prometheus text, sgs_serve_*): http://{context.address_info['node_ip_address']}:{port}"
              "/metrics", flush=True)
    if context.dashboard_url:
        print(f"Ray dashboard: http://{context.dashboard_url.removeprefix('http://')} ({DASHBOARD_TOKEN_HINT})",
              flush=True)


def _handle_signals(handler) -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, handler)


def _stop(signum: int, frame) -> None:
    print(f"{signal.Signals(signum).name}: stopping the service", flush=True)
    raise Stopped


def _expand(override: str) -> str:
    """``checkpoint=X`` as ``serve.checkpoint=X``; other overrides as given."""
    key, sep, value = override.partition("=")
    prefix = "+" if key.startswith("+") else ""
    name = key.removeprefix("+")
    return f"{prefix}{ALIASES[name]}{sep}{value}" if sep and name in ALIASES else override


def _port_problems(host: str, port: int) -> list[str]:
    """Whether the HTTP proxy could listen on ``host:port`` (checked by binding it for a moment)."""
    try:
        with socket.create_server((host, port), reuse_port=False):
            return []
    except OSError as error:
        return [f"cannot listen on {host}:{port} ({error.strerror or error}); choose another with "
                "serve.port=N (or serve.host=...)"]


if __name__ == "__main__":
    sys.exit(main())
