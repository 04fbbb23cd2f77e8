"""Generation engines: one role's policy, sampled behind a backend-neutral interface.

Backends, chosen by name with :func:`build_engine` (``resources.engine_backend``):
"transformers" (:mod:`sgs.machinery.engines.hf`) and "vllm" (:mod:`sgs.machinery.engines.vllm`).
Neither is imported here, so importing this package needs no vLLM.
"""

from sgs.machinery.engines.actor import BACKENDS, EngineActor, build_engine
from sgs.machinery.engines.base import GenerationEngine, Sample, SamplingSettings
from sgs.machinery.engines.group import EngineFailure, EngineGroup, EngineGroupSettings, EngineGroupStats, shares_gpu

__all__ = [
    "BACKENDS",
    "EngineActor",
    "EngineFailure",
    "EngineGroup",
    "EngineGroupSettings",
    "EngineGroupStats",
    "GenerationEngine",
    "Sample",
    "SamplingSettings",
    "build_engine",
    "shares_gpu",
]
