"""How far the Conjecturer's grammar moves what it samples from the model the learner trains.

    .venv/bin/python -m tools.grammar_gap [--targets 64] [--seed 0] [--base] [HYDRA OVERRIDES ...]

At laptop scale the Conjecturer samples under a grammar
(``sampling.conjecturer_grammar=statement``): at each step the engine sets
the tokens the grammar forbids to probability 0 and renormalises the rest,
so a conjecture y is drawn from

    pi_c(y_t | x, y_<t) = pi(y_t | x, y_<t) / Z_t,    Z_t = sum over allowed v of pi(v | x, y_<t),

where pi is the model's own (unconstrained) distribution and Z_t the share
of its probability mass the grammar allows at step t.  The learner knows no
grammar: it maximises sum_i w_i log pi(y_i), so its gradient is

    sum_i w_i grad log pi(y_i) = sum_i w_i grad log pi_c(y_i) + sum_i w_i sum_t grad log Z_t(y_i).

The first term is the policy gradient of the constrained policy, the one
that is sampled; the second pushes up the mass the grammar allows along the
rewarded conjectures.  Read as a gradient of the unconstrained policy, the
estimate is off-policy: the samples come from pi_c and the importance weight
pi(y) / pi_c(y) = prod_t Z_t is dropped.  Both discrepancies vanish as Z_t -> 1.

This script measures them on the default run's Conjecturer (the cached warm
start of the tiny model; ``--base`` takes the base model instead): it samples
one conjecture per training target under the grammar, exactly as the
conjecture phase does, then reports

* Z_t at every generated step (exp of the unconstrained log-prob minus the
  sampler's, both at the sampling temperature);
* per conjecture, log pi(y) - log pi_c(y) = sum_t log Z_t, the log importance weight;
* the cosine between the gradient the learner takes (of the token-mean
  log pi over the conjectures, every weight 1) and the gradient of the
  same loss on log pi_c, and the norm of their difference relative to the
  latter.  log pi_c is recomputed by replaying the grammar over the sampled
  tokens; its agreement with the sampler's log-probs is printed as a check.

The figures are given for every conjecture and for those whose statement
extracts (the only ones that can earn a reward and be trained on).

It runs on the CPU in a minute or two; nothing is written.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch

from sgs import sft
from sgs.config import SGSConfig, compose_config, validate
from sgs.machinery.engines.base import Sample
from sgs.machinery.engines.hf import TransformersEngine
from sgs.machinery.prompts import Prompter
from sgs.machinery.runtime import conjecturer_settings, model_paths
from sgs.method.roles import extract_conjecture
from sgs.state.targets import batch_targets, load_targets

#: Quantiles printed for each distribution.
QUANTILES = (0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 1.0)


def quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    picks = [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in QUANTILES]
    return "  ".join(f"{'min' if q == 0 else 'max' if q == 1 else f'p{int(q * 100)}'} {v:.4g}"
                     for q, v in zip(QUANTILES, picks))


def step_log_masses(engine: TransformersEngine, sample: Sample, temperature: float) -> list[float]:
    """log Z_t at each step: the unconstrained log-prob of the sampled token minus the sampler's."""
    unconstrained = engine.logprobs_of(sample.prompt_token_ids, sample.token_ids, temperature)
    return [u - c for u, c in zip(unconstrained, sample.logprobs)]


def gradient_pair(engine: TransformersEngine, samples: list[Sample], grammar: str,
                  temperature: float) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Gradients of the token-mean NLL under pi and under pi_c over ``samples``,
    flattened, and the largest gap between the replayed log pi_c and the sampler's."""
    model = engine.model
    params = [p for p in model.parameters() if p.requires_grad]
    total_u, total_c, gap = 0.0, 0.0, 0.0
    tokens = sum(s.num_tokens for s in samples)
    for sample in samples:
        prompt_len = len(sample.prompt_token_ids)
        ids = torch.tensor([sample.prompt_token_ids + sample.token_ids])
        logits = model(input_ids=ids).logits[0, prompt_len - 1:-1].float() / temperature
        # The engine's own grammar machinery, replayed over the sampled tokens
        # (private: the very compiled grammar and stop ids the sampler used).
        constraint = engine._grammars.constraint(grammar, 1)
        forbidden = torch.zeros_like(logits)
        row = torch.zeros(1, dtype=torch.long)
        for step, token in enumerate(sample.token_ids):
            constraint.mask(forbidden[step:step + 1], row)
            constraint.accept(torch.tensor([token]), row)
        target = torch.tensor(sample.token_ids).unsqueeze(-1)
        logp_u = torch.log_softmax(logits, dim=-1).gather(-1, target).squeeze(-1)
        logp_c = torch.log_softmax(logits + forbidden, dim=-1).gather(-1, target).squeeze(-1)
        gap = max(gap, max(abs(a - b) for a, b in zip(logp_c.tolist(), sample.logprobs)))
        total_u = total_u - logp_u.sum() / tokens
        total_c = total_c - logp_c.sum() / tokens
    grad_u = torch.autograd.grad(total_u, params, retain_graph=True)
    grad_c = torch.autograd.grad(total_c, params)
    return torch.cat([g.flatten() for g in grad_u]), torch.cat([g.flatten() for g in grad_c]), gap

def report(engine: TransformersEngine, samples: list[Sample], grammar: str, temperature: float) -> None:
    """Print the figures of the module doc for ``samples``."""
    per_step = [step_log_masses(engine, s, temperature) for s in samples]
    every_step = [z for steps in per_step for z in torch.tensor(steps).exp().tolist()]
    log_weights = [sum(steps) for steps in per_step]
    grad_u, grad_c, replay_gap = gradient_pair(engine, samples, grammar, temperature)
    cosine = float(torch.nn.functional.cosine_similarity(grad_u, grad_c, dim=0))
    relative = float((grad_u - grad_c).norm() / grad_c.norm())
    print(f"  allowed mass Z_t per step ({len(every_step)} steps): {quantiles(every_step)}")
    print(f"    mean {statistics.fmean(every_step):.4g}; steps with Z_t < 0.9: "
          f"{sum(z < 0.9 for z in every_step) / len(every_step):.1%}, < 0.5: "
          f"{sum(z < 0.5 for z in every_step) / len(every_step):.1%}, < 1e-3: "
          f"{sum(z < 1e-3 for z in every_step) / len(every_step):.1%}")
    print(f"  log pi(y) - log pi_c(y) per conjecture: {quantiles(log_weights)}")
    print(f"  gradient of the token-mean NLL (weights 1): cos(learner's, constrained policy's) {cosine:.3f}; "
          f"|difference| / |constrained| {relative:.3f}")
    print(f"  check: replayed log pi_c against the sampler's log-probs, largest gap {replay_gap:.1e}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=64, help="training targets, one conjecture each")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base", action="store_true", help="measure the base model, not its cached warm start")
    args, overrides = parser.parse_known_args(argv)
    cfg: SGSConfig = validate(compose_config(overrides))
    settings = conjecturer_settings(cfg, seed=args.seed)
    if settings.grammar is None:
        print("this config samples the Conjecturer without a grammar (sampling.conjecturer_grammar); "
              "there is nothing to measure", file=sys.stderr)
        return 2
    paths = model_paths(cfg)
    warm = None if args.base else sft.cached_checkpoint(cfg, paths)
    if warm is None and not args.base:
        print("no cached warm start of the default model: run `python -m sgs.sft` once, or pass --base",
              file=sys.stderr)
        return 2
    checkpoint = paths.base if warm is None else warm.checkpoint
    engine = TransformersEngine(checkpoint, device="cpu", dtype=cfg.model.dtype)
    prompter = Prompter(cfg.prover.language, engine.tokenizer)
    targets = batch_targets(load_targets(cfg.targets, cfg.prover.language), args.targets, args.seed, iteration=0)
    conditioned = cfg.method.conjecturer_prompt == "target_conditioned"
    prompts = [prompter.conjecturer(t if conditioned else None) for t in targets]
    samples = [group[0] for group in engine.generate(prompts, settings)]

    temperature = settings.temperature or 1.0
    print(f"model: {'base (not warm-started)' if warm is None else 'warm start'} {checkpoint}")
    print(f"{len(samples)} conjectures under the {cfg.sampling.conjecturer_grammar!r} grammar, temperature "
          f"{temperature:g}, max_tokens {settings.max_tokens}; {sum(s.finish_reason == 'stop' for s in samples)} "
          f"finished on EOS")
    extractable = [s for s in samples if extract_conjecture(s.text, cfg.prover.language).ok]
    for label, chosen in (("every conjecture", samples), ("conjectures whose statement extracts", extractable)):
        if chosen:
            print(f"\n{label} ({len(chosen)}):")
            report(engine, chosen, settings.grammar, temperature)
    return 0



if __name__ == "__main__":
    raise SystemExit(main())
