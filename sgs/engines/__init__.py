"""Generation engines: one role's policy, sampled behind a backend-neutral interface."""

from sgs.engines.actor import BACKENDS, EngineActor, EngineGroup, build_engine
from sgs.engines.base import GenerationEngine, Sample, SamplingSettings

__all__ = [
    "BACKENDS",
    "EngineActor",
    "EngineGroup",
    "GenerationEngine",
    "Sample",
    "SamplingSettings",
    "build_engine",
]
