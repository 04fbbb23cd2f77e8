"""Next-tactic accuracy of a predictor on held-out corpus steps.

For every tactic step of the held-out files, the predictor is asked for its
10 best tactics in the step's proof state; top-1 counts the steps whose
source tactic is its first guess, top-10 those where it is any of them
(tactics compared by :func:`~sgs.prover.steps.tactic_key`).

Two settings:

- **offline**: the predictor knows the training split only;
- **online**: after each held-out theorem, the predictor learns its steps
  (``add``), so the next proof of the file is predicted knowing the ones
  before it, as Tactician is measured and as a user's run would work.  What
  it learns stays learned for the held-out files after it (files in path
  order), which is more than "what is in scope" only where a later held-out
  file does not load an earlier one.

Any object with ``predict(state, k) -> list[str]`` is a predictor (an
``add(state, tactic)`` makes it an online one); :data:`PREDICTORS` names the
ones the command builds from the training split.

    python -m sgs.prover.accuracy --corpus runs/corpus --predictor knn --split test \\
        [--libraries stdlib,flocq] [--limit N] [--online | --offline] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional, Protocol, runtime_checkable

from sgs.corpus.records import TheoremRecord, shards
from sgs.prover.knn import KnnTactics
from sgs.prover.steps import load_steps, load_theorems, tactic_key, theorem_steps

__all__ = ["Predictor", "OnlinePredictor", "PREDICTORS", "LEARN_FROM_CORPUS", "USE_THE_CHECKPOINT", "Tally", "Report", "evaluate", "main"]

#: the guesses each step is scored on (top-10 needs 10)
GUESSES = 10


@runtime_checkable
class Predictor(Protocol):
    def predict(self, state: str, k: int) -> list[str]:
        """Up to ``k`` tactics for the proof state, best first."""
        ...


@runtime_checkable
class OnlinePredictor(Predictor, Protocol):
    def add(self, state: str, tactic: str) -> None:
        """Learn that ``tactic`` was applied in ``state``."""
        ...


def _build_knn(corpus: Path, checkpoint: str) -> Predictor:
    model = KnnTactics()
    model.add_steps(load_steps(corpus, splits=("train",)))
    return model


def _build_model(corpus: Path, checkpoint: str) -> Predictor:
    """A checkpoint; one trained with premises or similar proofs in its prompts (its
    ``progress.json`` says so) gets them from the corpus's training files."""
    from sgs.config import model_location
    from sgs.prover.examples import PremisePrompts, ProofPrompts
    from sgs.prover.model_tactics import ModelTactics
    from sgs.prover.ship import RECORD
    path = Path(model_location(checkpoint))
    # a training run's checkpoint records its progress; a shipped one, the same under "training"
    training = {}
    if (path / "progress.json").is_file():
        training = json.loads((path / "progress.json").read_text())
    elif (path / RECORD).is_file():
        training = json.loads((path / RECORD).read_text()).get("training", {})
    return ModelTactics(path, premises=PremisePrompts.from_corpus(corpus) if training.get("premises") else None,
                        proofs=ProofPrompts.from_corpus(corpus) if training.get("proofs") else None)


def _build_knn_and_model(corpus: Path, checkpoint: str) -> Predictor:
    """The k-NN and the model taking turns (:class:`sgs.search.proposers.Interleaved`)."""
    from sgs.search.proposers import Interleaved
    return Interleaved([_build_knn(corpus, checkpoint), _build_model(corpus, checkpoint)])


#: name -> how to build that predictor from a corpus's training split (every
#: library's) and a model checkpoint (``--checkpoint``; only models read it)
PREDICTORS: dict[str, Callable[[Path, str], Predictor]] = {
    "knn": _build_knn,
    "model": _build_model,
    "knn+model": _build_knn_and_model,
}
#: the predictors that learn from the corpus's training split (a model reads it only for premises)
LEARN_FROM_CORPUS = frozenset({"knn", "knn+model"})
#: the predictors that propose from the model checkpoint
USE_THE_CHECKPOINT = frozenset({"model", "knn+model"})


@dataclass
class Tally:
    steps: int = 0
    top1: int = 0
    top10: int = 0

    def count(self, truth: str, guesses: list[str]) -> None:
        keys = [tactic_key(g) for g in guesses[:GUESSES]]
        self.steps += 1
        self.top1 += bool(keys) and keys[0] == truth
        self.top10 += truth in keys

    def rates(self) -> tuple[float, float]:
        return (self.top1 / self.steps, self.top10 / self.steps) if self.steps else (0.0, 0.0)


@dataclass
class Report:
    setting: str
    total: Tally = field(default_factory=Tally)
    libraries: dict[str, Tally] = field(default_factory=dict)
    #: seconds spent in predict (and, online, in add)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        def entry(t: Tally) -> dict:
            top1, top10 = t.rates()
            return {**asdict(t), "top1_rate": top1, "top10_rate": top10}
        return {"setting": self.setting, "total": entry(self.total), "seconds": self.seconds,
                "predictions_per_second": self.total.steps / self.seconds if self.seconds else 0.0,
                "libraries": {name: entry(t) for name, t in sorted(self.libraries.items())}}


def evaluate(predictor: Predictor, theorems: Iterable[TheoremRecord], *, online: bool,
             limit: Optional[int] = None) -> Report:
    """Score ``predictor`` on every tactic step of ``theorems`` (in the order
    given: file by file, source order within a file), at most ``limit`` steps;
    ``online`` teaches it each theorem after scoring it."""
    if online and not isinstance(predictor, OnlinePredictor):
        raise TypeError(f"{type(predictor).__name__} cannot learn (no add), so it has no online setting")
    report = Report("online" if online else "offline")
    clock = time.perf_counter()
    for theorem in theorems:
        steps = theorem_steps(theorem)
        if limit is not None:
            steps = steps[:limit - report.total.steps]
        for step in steps:
            guesses = predictor.predict(step.state, GUESSES)
            truth = tactic_key(step.tactic)
            report.total.count(truth, guesses)
            report.libraries.setdefault(step.library, Tally()).count(truth, guesses)
        if online:
            for step in steps:
                predictor.add(step.state, step.tactic)
        if limit is not None and report.total.steps >= limit:
            break
    report.seconds = time.perf_counter() - clock
    return report


def format_report(report: Report) -> str:
    rows = [("library", "steps", "top-1", "top-10")]
    for name, tally in sorted(report.libraries.items()) + [("all", report.total)]:
        top1, top10 = tally.rates()
        rows.append((name, str(tally.steps), f"{top1:.3f}", f"{top10:.3f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in rows]
    speed = report.total.steps / report.seconds if report.seconds else 0.0
    lines.append(f"{report.setting}: {report.seconds:.1f} s, {speed:.0f} predictions/s")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sgs.prover.accuracy",
                                     description="Next-tactic top-1/top-10 accuracy on held-out corpus steps.")
    parser.add_argument("--corpus", type=Path, required=True, help="corpus directory (python -m sgs.corpus extract)")
    parser.add_argument("--predictor", required=True, choices=sorted(PREDICTORS))
    parser.add_argument("--split", default="test", choices=("valid", "test"), help="held-out split (default test)")
    parser.add_argument("--libraries", help="comma-separated libraries to score (default: every one); "
                                            "the predictor always learns every library's training split")
    parser.add_argument("--limit", type=int, help="score at most this many steps")
    parser.add_argument("--sample", type=int, metavar="N",
                        help="score a seeded sample of N held-out theorems (in file order) instead of all")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed")
    parser.add_argument("--checkpoint", default="pkg://sgs/data/rocq_prover",
                        help="the model predictor's checkpoint (default: the shipped prover)")
    setting = parser.add_mutually_exclusive_group()
    setting.add_argument("--online", dest="online", action="store_true", default=True,
                         help="learn each held-out theorem after scoring it (default)")
    setting.add_argument("--offline", dest="online", action="store_false", help="the training split only")
    parser.add_argument("--json", type=Path, help="also write the figures here as JSON")
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.corpus.is_dir() or not shards(args.corpus):
        print(f"error: {args.corpus} is not a corpus directory (no shards; see docs/corpus.md)", file=sys.stderr)
        return 2
    if (args.limit is not None and args.limit <= 0) or (args.sample is not None and args.sample <= 0):
        print("error: --limit and --sample must be positive", file=sys.stderr)
        return 2
    libraries = [name for name in args.libraries.split(",") if name] if args.libraries else None
    held_out = list(load_theorems(args.corpus, splits=(args.split,), libraries=libraries))
    if args.sample is not None and args.sample < len(held_out):
        chosen = set(random.Random(args.seed).sample(range(len(held_out)), args.sample))
        held_out = [t for i, t in enumerate(held_out) if i in chosen]
    if not any(theorem_steps(t) for t in held_out):
        which = f" of {', '.join(libraries)}" if libraries else ""
        print(f"error: the {args.split} split{which} in {args.corpus} has no tactic steps", file=sys.stderr)
        return 2
    clock = time.perf_counter()
    predictor = PREDICTORS[args.predictor](args.corpus, args.checkpoint)
    built = time.perf_counter() - clock
    if args.online and not isinstance(predictor, OnlinePredictor):
        print(f"error: predictor {args.predictor} cannot learn (no add): use --offline", file=sys.stderr)
        return 2
    report = evaluate(predictor, held_out, online=args.online, limit=args.limit)
    print(f"{args.predictor} on the {args.split} split of {args.corpus} (built in {built:.1f} s)")
    print(format_report(report))
    if args.json:
        figures = {"predictor": args.predictor, "split": args.split, "corpus": str(args.corpus),
                   "libraries": libraries, "limit": args.limit,
                   "sample": args.sample, "seed": args.seed, "checkpoint": args.checkpoint, "build_seconds": built, **report.as_dict()}
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
