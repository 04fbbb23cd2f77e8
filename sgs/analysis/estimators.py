"""pass@k from n samples per problem, with a confidence interval.

The unbiased estimator (Chen et al., 2021, "Evaluating Large Language Models
Trained on Code"): with n samples of one problem of which c are correct,

    pass@k = 1 - C(n - c, k) / C(n, k)

is the probability that k samples drawn without replacement from the n
contain a correct one; its expectation over the n samples is the true pass@k.
A benchmark's pass@k is the mean over its problems.  Estimating from n > k
samples has a lower variance than drawing exactly k.

The interval is a percentile bootstrap over problems: problems are the
unit that varies between benchmarks, and the per-problem estimates are
bounded in [0, 1] and often 0 or 1, where a normal approximation is poor.
The bootstrap is seeded, so a report is reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with ``c`` correct among ``n`` samples (needs n >= k)."""
    if not (isinstance(n, int) and isinstance(c, int) and isinstance(k, int)):
        raise TypeError(f"n, c and k must be integers, got n={n!r}, c={c!r}, k={k!r}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if not 0 <= c <= n:
        raise ValueError(f"correct samples must lie in [0, n]: c={c}, n={n}")
    if n < k:
        raise ValueError(f"pass@{k} needs at least {k} samples per problem, got {n}")
    if n - c < k:
        return 1.0  # every draw of k contains a correct sample
    # 1 - prod_{i = n-c+1}^{n} (1 - k / i): the ratio of binomials without huge integers.
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


@dataclass(frozen=True)
class PassAtKEstimate:
    """pass@k over a set of problems with its bootstrap confidence interval."""

    k: int
    """The k of pass@k."""
    value: float
    """Mean of the per-problem unbiased estimates."""
    low: float
    """Lower end of the confidence interval."""
    high: float
    """Upper end of the confidence interval."""
    problems: int
    """Problems the estimate is over."""
    confidence: float
    """Coverage of [low, high], e.g. 0.95."""

    def to_json(self) -> dict:
        return {"k": self.k, "pass_at_k": self.value, "ci_low": self.low, "ci_high": self.high,
                "problems": self.problems, "confidence": self.confidence}

    def __str__(self) -> str:
        return (f"pass@{self.k} = {self.value:.3f} "
                f"[{self.low:.3f}, {self.high:.3f}] ({self.confidence:.0%} CI, {self.problems} problems)")


def estimate_pass_at_k(counts: Sequence[tuple[int, int]], k: int, *, confidence: float = 0.95,
                       resamples: int = 10_000, seed: int = 0) -> PassAtKEstimate:
    """pass@k of a benchmark from ``(n, c)`` per problem, with a percentile
    bootstrap interval over problems (``resamples`` draws, seeded)."""
    if not counts:
        raise ValueError("pass@k of an empty set of problems is undefined")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    per_problem = np.array([pass_at_k(n, c, k) for n, c in counts])
    value = float(per_problem.mean())
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(per_problem), size=(resamples, len(per_problem)))
    means = per_problem[draws].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    # The percentile interval of a constant vector is a point; keep value inside it numerically.
    return PassAtKEstimate(k=k, value=value, low=min(float(low), value), high=max(float(high), value),
                           problems=len(per_problem), confidence=confidence)
