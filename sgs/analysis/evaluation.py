"""Measuring a model with the real engines and the verifier pool: the library
behind ``python -m sgs.evaluate`` (:mod:`sgs.evaluate`), the run's held-out and
periodic evaluations, and the warm start's warm-up report.

Every function takes engines and a pool that are already running and leaves
them running; hostile or broken model outputs are counted, never raised:

* :func:`evaluate_problems`: n samples per benchmark problem and the unbiased
  pass@k for each k with a bootstrap interval (:mod:`sgs.analysis.estimators`), as a
  :class:`BenchmarkResult` (for the command, and for a run that evaluates
  every ``evaluation.every`` iterations);
* :func:`solver_pass_at_k`: k proofs per target, pass@k as the share of
  targets with a valid proof; the run uses it on the held-out targets before
  and after self-play (:func:`held_out_pass_at_k`), the warm start
  (:mod:`sgs.sft`) on the training targets;
* :func:`conjecturer_outputs` / :func:`guide_parse_rate`: how often the
  Conjecturer's and the Guide's outputs parse, i.e. whether a model knows the
  output formats.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any


from lean_env.verdict import ProofTask, Status, Verdict
from sgs.machinery.engines import EngineGroup, Sample, SamplingSettings
from sgs.analysis.estimators import PassAtKEstimate, estimate_pass_at_k, pass_at_k
from sgs.machinery.streaming import Request, stream, submit
from sgs.state.records import Target
from sgs.method.roles import extract_conjecture, extract_guide_scores, extract_proof
from sgs.machinery.prompts import Prompter

#: The status of a sample whose output holds no extractable proof (so the prover never saw it).
NO_PROOF = "no_proof"
#: What can become of one Solver sample: a verdict status, or no proof at all.
SAMPLE_STATUSES = (*(status.value for status in Status), NO_PROOF)


# --------------------------------------------------------------------------
# Sampling and checking (shared by every Solver measurement)
# --------------------------------------------------------------------------


def sample_and_check(engine: EngineGroup, pool: Any, prompter: Prompter, problems: Sequence[Target],
                     settings: SamplingSettings, language: str, tokens: Counter | None = None) -> dict[str, Counter]:
    """Sample ``settings.n`` proofs per problem and check each with ``pool``;
    returns, per problem id in input order, how many samples ended with each
    of :data:`SAMPLE_STATUSES`; ``tokens``, when given, gets the generated
    tokens per problem id.

    Generation and checking overlap as in the loop's prove phase: each chunk
    of samples goes to the pool as soon as the engine returns it.  ``pool``
    must have no other check outstanding.  Problem ids must be unique (they
    name the samples).
    """
    counts = {p.id: Counter() for p in problems}
    if len(counts) != len(problems):
        repeated = sorted(i for i, n in Counter(p.id for p in problems).items() if n > 1)
        raise ValueError(f"problem ids must be unique; repeated: {', '.join(repeated)}")
    if not problems:
        return counts
    owner: dict[str, str] = {}

    def on_sample(request: Request, sample_id: str, sample: Sample) -> None:
        problem = request.item
        if tokens is not None:
            tokens[problem.id] += sample.num_tokens
        extraction = extract_proof(sample.text, language)
        if not extraction.ok:
            counts[problem.id][NO_PROOF] += 1
            return
        owner[sample_id] = problem.id
        pool.submit(ProofTask(id=sample_id, header=problem.header, statement=problem.statement,
                              proof=extraction.value, load_path=problem.load_path))

    def on_verdict(task: ProofTask, verdict: Verdict) -> None:
        counts[owner.pop(task.id)][verdict.status.value] += 1

    requests = [Request(prompt=prompter.solver(p.header, p.statement),
                        sample_ids=[f"eval/{p.id}/a{j}" for j in range(settings.n)], item=p) for p in problems]
    # submit() sets n to each request's sample count.
    stream(submit(engine, requests, settings), on_sample, pool, on_verdict)
    return counts


# --------------------------------------------------------------------------
# pass@k as the share of targets with a valid proof (k samples each)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class PassAtK:
    """Solver results on a set of targets, k samples each."""

    k: int
    """Samples per target."""
    valid: dict[str, int]
    """Valid proofs among the k samples, per target id."""
    seconds: float = 0.0
    """Wall time of the measurement."""

    @property
    def targets(self) -> int:
        return len(self.valid)

    @property
    def pass_at_k(self) -> float:
        """Share of the targets with at least one valid proof (0 with no target)."""
        return sum(n > 0 for n in self.valid.values()) / len(self.valid) if self.valid else 0.0

    @property
    def sample_valid_rate(self) -> float:
        """Share of all samples that are valid proofs."""
        return sum(self.valid.values()) / (self.k * len(self.valid)) if self.valid else 0.0

    def to_json(self) -> dict:
        return {"k": self.k, "targets": self.targets, "pass_at_k": self.pass_at_k,
                "sample_valid_rate": self.sample_valid_rate, "seconds": self.seconds, "valid": dict(self.valid)}


def solver_pass_at_k(engine: EngineGroup, pool: Any, prompter: Prompter, targets: Sequence[Target],
                     settings: SamplingSettings, language: str) -> PassAtK:
    """Sample ``settings.n`` proofs per target and check each with ``pool``
    (see :func:`sample_and_check`); an output with no extractable proof
    counts as a failed sample."""
    start = time.perf_counter()
    counts = sample_and_check(engine, pool, prompter, targets, settings, language)
    valid = {target_id: statuses[Status.VALID.value] for target_id, statuses in counts.items()}
    return PassAtK(settings.n, valid, time.perf_counter() - start)


# --------------------------------------------------------------------------
# pass@k on a benchmark: the unbiased estimator from n >= k samples
# --------------------------------------------------------------------------


#: Per-problem results of a benchmark evaluation, one JSON object per line.
PROBLEMS_FILE = "problems.jsonl"
#: The estimates of a benchmark evaluation and how they were measured.
SUMMARY_FILE = "summary.json"


@dataclass(frozen=True)
class ProblemResult:
    """What became of the n samples of one benchmark problem."""

    id: str
    """The problem's id."""
    statuses: dict[str, int]
    """Samples per status of :data:`SAMPLE_STATUSES` (every status present, zeros included)."""
    tokens: int = 0
    """Tokens generated for its samples."""

    @property
    def n(self) -> int:
        """Samples drawn."""
        return sum(self.statuses.values())

    @property
    def c(self) -> int:
        """Valid proofs among them."""
        return self.statuses[Status.VALID.value]


@dataclass(frozen=True)
class BenchmarkResult:
    """pass@k of one set of weights on one benchmark, from n samples per problem.

    A sample counts as correct only with a ``valid`` verdict: a sample with
    no proof, an invalid proof, a timeout or a system error (an infrastructure
    failure that outlived the pool's retries; see ``statuses``) all count as
    failures, so n is the same for every problem.
    """

    benchmark: str
    """The benchmark's name."""
    checkpoint: str
    """The weights evaluated (directory or hub id)."""
    policy_version: int | None
    """The policy version of the weights: 0 before self-play, v after
    iteration v-1's Solver update; None when not known (weights from outside
    a run)."""
    language: str
    """The proof language."""
    ks: tuple[int, ...]
    """The k of each estimate."""
    confidence: float
    """Coverage of each estimate's bootstrap interval."""
    settings: SamplingSettings
    """How the samples were drawn (``n`` samples per problem, the seed, ...)."""
    problems: tuple[ProblemResult, ...]
    """One result per problem, in benchmark order."""
    seconds: float
    """Wall time of sampling and checking."""
    wall_seconds: float | None = None
    """Wall time of the whole command (Ray, engine and pool start-up included), when a command measured it."""

    @property
    def n(self) -> int:
        """Samples per problem."""
        return self.settings.n

    @property
    def statuses(self) -> dict[str, int]:
        """Samples per status of :data:`SAMPLE_STATUSES`, over all problems."""
        return {status: sum(p.statuses[status] for p in self.problems) for status in SAMPLE_STATUSES}

    @cached_property
    def estimates(self) -> dict[int, PassAtKEstimate]:
        """pass@k with its interval, per k; the bootstrap is seeded with the sampling seed."""
        counts = [(p.n, p.c) for p in self.problems]
        return {k: estimate_pass_at_k(counts, k, confidence=self.confidence, seed=self.settings.seed or 0)
                for k in self.ks}

    def problem_lines(self) -> list[dict]:
        """The per-problem records of ``problems.jsonl``."""
        return [{"id": p.id, "n": p.n, "c": p.c, "pass_at_k": {str(k): pass_at_k(p.n, p.c, k) for k in self.ks},
                 "statuses": dict(p.statuses), "tokens": p.tokens} for p in self.problems]

    def to_json(self) -> dict:
        """The summary: every estimate with its interval, and what was measured how."""
        return {
            "benchmark": self.benchmark,
            "checkpoint": self.checkpoint,
            "policy_version": self.policy_version,
            "language": self.language,
            "problems": len(self.problems),
            "n": self.n,
            "seed": self.settings.seed,
            "sampling": {"max_tokens": self.settings.max_tokens, "temperature": self.settings.temperature,
                         "top_p": self.settings.top_p},
            "confidence": self.confidence,
            "pass_at_k": {str(k): estimate.to_json() for k, estimate in self.estimates.items()},
            "statuses": self.statuses,
            "tokens": sum(p.tokens for p in self.problems),
            "seconds": self.seconds,
            "wall_seconds": self.wall_seconds,
        }

    def write(self, directory: str | os.PathLike) -> tuple[Path, Path]:
        """Write ``problems.jsonl`` and ``summary.json`` into ``directory``
        (created if needed); each file is replaced whole, never left half-written."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        problems_path, summary_path = directory / PROBLEMS_FILE, directory / SUMMARY_FILE
        lines = "".join(json.dumps(line, sort_keys=True) + "\n" for line in self.problem_lines())
        tmp = problems_path.with_name(f".{problems_path.name}.{os.getpid()}.tmp")
        tmp.write_text(lines)
        os.replace(tmp, problems_path)
        write_json(summary_path, self.to_json())
        return problems_path, summary_path


def evaluate_problems(engine: EngineGroup, pool: Any, prompter: Prompter, problems: Sequence[Target], *,
                      ks: Sequence[int], settings: SamplingSettings, language: str, benchmark: str,
                      checkpoint: str, confidence: float = 0.95) -> BenchmarkResult:
    """pass@k for each k of ``ks`` of the weights ``engine`` serves, from
    ``settings.n`` samples per problem checked by ``pool``.

    ``benchmark`` and ``checkpoint`` only label the result.  Raises
    ValueError before sampling anything when there is no problem, a k is
    below 1, or ``settings.n`` is below the largest k.
    """
    if not problems:
        raise ValueError(f"benchmark {benchmark!r} has no problem to evaluate")
    if not ks or min(ks) < 1:
        raise ValueError(f"ks={list(ks)!r} must list at least one k, each at least 1")
    if settings.n < max(ks):
        raise ValueError(f"pass@{max(ks)} needs at least {max(ks)} samples per problem, settings.n is {settings.n}")
    start = time.perf_counter()
    tokens: Counter = Counter()
    counts = sample_and_check(engine, pool, prompter, problems, settings, language, tokens)
    results = tuple(ProblemResult(problem_id, {status: statuses[status] for status in SAMPLE_STATUSES},
                                  tokens[problem_id])
                    for problem_id, statuses in counts.items())
    return BenchmarkResult(benchmark=benchmark, checkpoint=checkpoint, policy_version=engine.policy_version,
                           language=language, ks=tuple(ks), confidence=confidence, settings=settings,
                           problems=results, seconds=time.perf_counter() - start)


def format_table(result: BenchmarkResult) -> str:
    """The estimates of ``result`` as a small table, with what was measured."""
    statuses = result.statuses
    lines = [
        f"== pass@k on {result.benchmark}: {len(result.problems)} problems, n = {result.n} samples each ==",
        f"checkpoint: {result.checkpoint} (policy version "
        f"{'unknown' if result.policy_version is None else result.policy_version})",
        f"{'k':>6}  {'pass@k':>7}  {result.confidence:.0%} CI",
    ]
    for k, estimate in result.estimates.items():
        lines.append(f"{k:>6}  {estimate.value:>7.3f}  [{estimate.low:.3f}, {estimate.high:.3f}]")
    lines.append(f"samples: {sum(statuses.values())} ("
                 + ", ".join(f"{status} {count}" for status, count in statuses.items())
                 + f"); sampling and checking {result.seconds:.1f} s"
                 + ("" if result.wall_seconds is None else f", {result.wall_seconds:.0f} s in all"))
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Output formats of the Conjecturer and the Guide
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ConjectureOutputs:
    """One Conjecturer sample per target and what became of it."""

    samples: int
    """Outputs drawn."""
    parsed: list[tuple[Target, str]] = field(default_factory=list)
    """(target, extracted statement) of every output that parsed."""
    elaborated: int = 0
    """Parsed statements that the prover accepts as statements."""

    @property
    def parse_rate(self) -> float:
        return len(self.parsed) / self.samples if self.samples else 0.0

    @property
    def elaboration_rate(self) -> float:
        """Share of all outputs that parse and elaborate."""
        return self.elaborated / self.samples if self.samples else 0.0


def conjecturer_outputs(engine: EngineGroup, pool: Any, prompter: Prompter, targets: Sequence[Target],
                        settings: SamplingSettings, language: str) -> ConjectureOutputs:
    """One target-conditioned conjecture per target (``settings.n`` is
    ignored); each parsed statement is checked to elaborate.  ``pool`` must
    have no other check outstanding: this waits for all of them."""
    samples = engine.generate([prompter.conjecturer(t) for t in targets], replace(settings, n=1))
    parsed = []
    for index, (target, (sample,)) in enumerate(zip(targets, samples)):
        extraction = extract_conjecture(sample.text, language)
        if extraction.ok:
            parsed.append((target, extraction.value))
            pool.submit_statement(ProofTask(id=f"eval/conjecture/{index}", header=target.header,
                                            statement=extraction.value, proof="", load_path=target.load_path))
    elaborated = sum(verdict.valid for _, verdict in pool.results())
    return ConjectureOutputs(samples=len(targets), parsed=parsed, elaborated=elaborated)


def guide_parse_rate(engine: EngineGroup, prompter: Prompter, pairs: Sequence[tuple[Target, str]],
                     settings: SamplingSettings) -> float | None:
    """Share of Guide reviews of (target, conjecture) pairs whose three scores
    parse; None with no pair to review."""
    if not pairs:
        return None
    samples = engine.generate([prompter.guide(t, c) for t, c in pairs], replace(settings, n=1))
    return sum(extract_guide_scores(s[0].text).ok for s in samples) / len(pairs)


# --------------------------------------------------------------------------
# The run's held-out evaluation
# --------------------------------------------------------------------------


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` as JSON so that readers see the old file or the new one, never a mix."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_json(path: str | os.PathLike) -> Any | None:
    """The JSON in ``path``, or None when it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


#: The held-out evaluations of a run, in its run directory: {policy version: PassAtK.to_json()}.
HELD_OUT_FILE = "held_out_eval.json"


def held_out_pass_at_k(run_dir: str | os.PathLike, solver: EngineGroup, pool: Any, prompter: Prompter,
                       targets: Sequence[Target], settings: SamplingSettings, language: str) -> dict | None:
    """pass@k of the weights ``solver`` serves on the held-out ``targets``,
    kept in ``run_dir/held_out_eval.json`` under their policy version.

    Measured once per version: a resumed or repeated call reads the stored
    result.  The same ``settings`` (seed included) at every version make
    the before/after comparison differ only by the weights.  None when no
    target is held out.
    """
    held_out = [t for t in targets if t.held_out]
    if not held_out:
        return None
    path = Path(run_dir) / HELD_OUT_FILE
    stored = read_json(path) or {}
    version = str(solver.policy_version)
    if version not in stored:
        result = solver_pass_at_k(solver, pool, prompter, held_out, settings, language)
        stored[version] = {"policy_version": int(version), **result.to_json()}
        write_json(path, stored)
    return stored[version]
