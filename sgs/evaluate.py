"""Measuring a model with the real engines and the verifier pool.

* :func:`solver_pass_at_k`: k proofs per target, each checked by the prover;
  pass@k is the share of targets with at least one valid proof.  The run
  uses it on the held-out targets before and after self-play, the warm start
  (:mod:`sgs.sft`) on the training targets.
* :func:`conjecturer_outputs` / :func:`guide_parse_rate`: how often the
  Conjecturer's and the Guide's outputs parse, i.e. whether a model knows the
  output formats.

Every function takes engines and a pool that are already running and leaves
them running; hostile or broken model outputs are counted, never raised.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lean_env.verdict import ProofTask, Verdict
from sgs.engines import EngineGroup, Sample, SamplingSettings
from sgs.loop import Request, stream, submit
from sgs.records import Target
from sgs.roles import extract_conjecture, extract_guide_scores, extract_proof
from sgs.runtime import Prompter


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
    """Sample ``settings.n`` proofs per target and check each with ``pool``.

    Generation and checking overlap as in the loop's prove phase: each chunk
    of samples goes to the pool as soon as the engine returns it.  An output
    with no extractable proof counts as a failed sample.
    """
    start = time.perf_counter()
    valid = {t.id: 0 for t in targets}
    if not targets:
        return PassAtK(settings.n, valid)
    owner: dict[str, Target] = {}

    def on_sample(request: Request, sample_id: str, sample: Sample) -> None:
        target = request.item
        extraction = extract_proof(sample.text, language)
        if extraction.ok:
            owner[sample_id] = target
            pool.submit(ProofTask(id=sample_id, header=target.header, statement=target.statement,
                                  proof=extraction.value))

    def on_verdict(task: ProofTask, verdict: Verdict) -> None:
        valid[owner.pop(task.id).id] += verdict.valid

    requests = [Request(prompt=prompter.solver(t.header, t.statement),
                        sample_ids=[f"eval/{t.id}/a{j}" for j in range(settings.n)], item=t) for t in targets]
    # submit() sets n to each request's sample count.
    stream(submit(engine, requests, settings), on_sample, pool, on_verdict)
    return PassAtK(settings.n, valid, time.perf_counter() - start)


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
                                            statement=extraction.value, proof=""))
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
