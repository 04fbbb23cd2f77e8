"""The machinery that runs the method: generation engines (transformers or vLLM)
in Ray actors, the Ray Train learner, streaming between engines and the
verifier pool, the wiring of one run (:mod:`sgs.machinery.runtime`) and the
live dashboard gauges.
"""
