"""The prover as a service: ``python -m sgs.serve`` (a Ray Serve application over HTTP).

* :mod:`sgs.serve.__main__`: the command (config, checks, Ray, Serve, signals);
* :mod:`sgs.serve.weights`: which Solver weights ``serve.checkpoint`` names;
* :mod:`sgs.serve.app`: the three deployments bound into one application;
* :mod:`sgs.serve.api`: the HTTP front (endpoints, metrics, request log);
* :mod:`sgs.serve.engine`, :mod:`sgs.serve.verifier`: the batched Solver engine
  and the verifier pool (each deployment imports only what its replicas need);
* :mod:`sgs.serve.search`: the ``/prove`` attempt loop;
* :mod:`sgs.serve.requests`: request parsing and checking (the 4xx answers);
* :mod:`sgs.serve.goals`: LeanCopilot goals as statements, proofs as suggestions;
* :mod:`sgs.serve.client`: calling the service from Python.
"""
