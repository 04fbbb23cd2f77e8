"""tools/grammar_gap.py: what it measures is what the sampler did (on the tiny random model)."""

from __future__ import annotations

import math

import torch

from sgs.machinery.engines import SamplingSettings
from sgs.machinery.engines.hf import TransformersEngine
from tests.unit.sgs.machinery.test_grammar import SMALL
from tools.grammar_gap import gradient_pair, step_log_masses


def test_allowed_masses_and_the_replayed_constrained_log_probs_match_the_sampler(checkpoint):
    engine = TransformersEngine(checkpoint, device="cpu")
    settings = SamplingSettings(n=4, max_tokens=40, seed=3, grammar=SMALL)
    samples = [s for group in engine.generate(["Theorem", "Lemma x"], settings) for s in group]
    for sample in samples:
        masses = [math.exp(z) for z in step_log_masses(engine, sample, 1.0)]
        assert all(0.0 < z <= 1.0 + 1e-5 for z in masses)
        # The first token is a literal's: the grammar allows one token, whatever the model prefers.
        assert masses[0] < 0.5
    grad_u, grad_c, gap = gradient_pair(engine, samples, SMALL, 1.0)
    # Replaying the grammar over the sampled tokens gives the sampler's own log-probs ...
    assert gap < 1e-4
    # ... and a gradient other than the unconstrained one the learner takes.
    assert grad_u.shape == grad_c.shape and not torch.allclose(grad_u, grad_c)
    assert float(torch.nn.functional.cosine_similarity(grad_u, grad_c, dim=0)) < 1.0 - 1e-6
