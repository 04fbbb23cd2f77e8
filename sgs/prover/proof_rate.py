"""Proof rate of the provers side by side, per target group.

    python -m sgs.prover.proof_rate --stdlib-test runs/corpus --limit 100 \\
        --targets search-trees=runs/targets/search-trees.jsonl \\
        --provers sauto,automation,search,search-no-finishers,search-knn \\
        --seconds 60 --workers 2 --out runs/proof_rate

The provers (:data:`PROVERS`): the learning-free baselines of
:mod:`sgs.prover.baselines` (whole proofs through the verifier pool), and
tactic-level searches (:mod:`sgs.search`, best-first, one Ray actor per
search) proposing with the trained model (``--checkpoint``, default the
shipped prover) or the k-NN learner (built from ``--corpus``'s training
split), with or without the symbolic finishers; and whole-proof sampling
from the same model for the same time (``sample``, :mod:`sgs.prover.sampling`).
Searches and sampling load CoqHammer's tactics after each target's header so
that ``sauto`` can finish (the checker refuses the library where it would
change the statement).

Target groups: the standard library's held-out files (``--stdlib-test
CORPUS``: the corpus's test-split theorems whose self-contained case plain
``coqc`` finds closed, a seeded sample of ``--limit``), and any traced
project's targets (``--targets NAME=FILE``, files written by
``tools/trace_rocq_targets.py``).  Every proof goes through the verifier
pool under the usual rules.  ``<out>/results.jsonl`` gets one line per
(prover, target) as it finishes, and a rerun with the same ``--out`` skips
what is there: a stopped run loses only the targets in flight.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from lean_env.arguments import positive_float
from lean_env.verdict import ProofTask, Status
from sgs.prover.baselines import BASELINES, HAMMER_TACTICS, Baseline, baseline_tasks, target_of
from sgs.prover.steps import load_theorems
from sgs.search.settings import ROCQ_FINISHERS, SearchSettings
from sgs.state.files import cut_torn_tail

__all__ = ["SearchProver", "SamplingProver", "PROVERS", "stdlib_test_targets", "project_targets", "run_baseline",
           "run_search", "run_sampling", "summarize", "main"]


@dataclass(frozen=True)
class SearchProver:
    #: the predictor that proposes tactics (:data:`sgs.prover.accuracy.PREDICTORS`)
    predictor: str
    finishers: tuple[str, ...]
    description: str = ""
    #: how the open states are ranked (:data:`sgs.search.values.SCORES`)
    score: str = "logprob"

    @property
    def needs_corpus(self) -> bool:
        """The k-NN learner and the value estimate learn from the corpus's training split."""
        from sgs.prover.accuracy import LEARN_FROM_CORPUS
        return self.predictor in LEARN_FROM_CORPUS or self.score != "logprob"


@dataclass(frozen=True)
class SamplingProver:
    """Whole-proof sampling from the model for the same time (:mod:`sgs.prover.sampling`)."""

    samples_per_round: int = 8
    description: str = ""
    needs_corpus = False


#: every prover the comparison knows, by name
PROVERS: dict[str, Baseline | SearchProver | SamplingProver] = {
    **BASELINES,
    "search": SearchProver("model", ROCQ_FINISHERS, "best-first search, the trained model proposing, finishers"),
    "search-no-finishers": SearchProver("model", (), "the same search without the finishers"),
    "search-knn": SearchProver("knn", ROCQ_FINISHERS, "best-first search, the k-NN learner proposing, finishers"),
    "search-knn-model": SearchProver("knn+model", ROCQ_FINISHERS,
                                     "best-first search, the k-NN and the model taking turns, finishers"),
    "search-value": SearchProver("model", ROCQ_FINISHERS, "the model's search, states ranked by log-prob + value",
                                 "logprob+value"),
    "search-knn-value": SearchProver("knn", ROCQ_FINISHERS, "the k-NN's search, states ranked by log-prob + value",
                                     "logprob+value"),
    "sample": SamplingProver(8, "whole proofs sampled from the model, 8 a round, checked until one is valid"),
}


def stdlib_test_targets(corpus: Path, limit: Optional[int], seed: int = 0
                        ) -> tuple[list[ProofTask], dict[str, frozenset[str]]]:
    """The held-out standard-library theorems that plain ``coqc`` proves closed, as
    targets, and for each the names a proof of it may not use.

    A target's header loads its own library module, so the theorem itself and
    everything stated after it in its file are in scope (``apply to_of.``
    proves ``to_of``'s copy): searches are kept from naming them.  Hints the
    file declares after the theorem stay loaded (a bias towards ``auto``-style
    tactics, not measured)."""
    theorems = list(load_theorems(corpus, ("test",), ["stdlib"]))
    targets, forbidden = [], {}
    for t in theorems:
        if t.case and t.truth == "closed":
            target_id = f"{t.file}:{t.name}"
            targets.append(target_of(target_id, t.case["header"], t.case["statement"]))
            forbidden[target_id] = frozenset(o.name for o in theorems if o.file == t.file and o.line >= t.line)
    if limit is not None and limit < len(targets):
        targets = sorted(random.Random(seed).sample(targets, limit), key=lambda t: t.id)
    return targets, forbidden


def project_targets(path: Path) -> list[ProofTask]:
    """A traced project's targets (``tools/trace_rocq_targets.py``'s JSON lines)."""
    from sgs.config import TargetsConfig
    from sgs.state.targets import load_targets
    return [target_of(t.id, t.header, t.statement, t.load_path)
            for t in load_targets(TargetsConfig(source=str(path)), "rocq")]


def run_baseline(baseline: Baseline, targets: Sequence[ProofTask], *, seconds: float, workers: int,
                 record, rocq_options: Optional[dict] = None) -> None:
    """Try ``baseline`` on every target through a verifier pool; ``record(target, proof, seconds,
    statuses)`` is called once per target as soon as its last proof is checked (``proof`` None: not
    proved; ``statuses``: how many of its proofs ended in each verdict status, so that a target lost to
    a system error is told from one the tactics could not prove).  ``rocq_options``: more
    :class:`~lean_env.rocq.config.RocqConfig` settings (``allowed_axioms``)."""
    from lean_env.backends import BackendSpec
    from lean_env.cache import VerdictCache
    from lean_env.pool import VerifierPool, VerifierPoolSettings

    spec = BackendSpec("rocq", {**(rocq_options or {}),
                                **({"tactic_libraries": baseline.tactic_libraries} if baseline.tactic_libraries else {})})
    spec.check()
    settings = VerifierPoolSettings(num_workers=workers, timeout=baseline.seconds_each(seconds))
    pool = VerifierPool(spec, settings, VerdictCache())
    waiting: dict[str, int] = {}
    proved: dict[str, Optional[str]] = {}
    spent: dict[str, float] = defaultdict(float)
    statuses: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    by_id = {t.id: t for t in targets}
    try:
        for target in targets:
            tasks = baseline_tasks(target, baseline)
            waiting[target.id] = len(tasks)
            proved[target.id] = None
            for task in tasks:
                pool.submit(task)
        for task, verdict in pool.results():
            target_id = task.id.rsplit("#", 1)[0]
            waiting[target_id] -= 1
            spent[target_id] += verdict.seconds
            statuses[target_id][verdict.status.value] += 1
            if verdict.status is Status.VALID and proved[target_id] is None:
                proved[target_id] = task.proof
            if waiting[target_id] == 0:
                record(by_id[target_id], proved[target_id], spent[target_id], dict(statuses[target_id]))
    finally:
        pool.shutdown()


def _recorder(record):
    """``done(target, result)`` for a search's or a sampling's result: the re-check's status (or
    how the attempt ended), and its stats and model use as the row's ``details``."""
    def done(target: ProofTask, result: dict) -> None:
        status = result["verdict"]["status"] if result["verdict"] else f"not_found:{result['stop']}"
        record(target, result["proof"], result["stats"].get("seconds", 0.0), {status: 1},
               {"stats": result["stats"], "generation": result.get("generation", {})})
    return done


def run_search(prover: SearchProver, targets: Sequence[ProofTask], *,
               seconds: float | Callable[[ProofTask], float], workers: int,
               corpus: Optional[Path], checkpoint: str, record,
               forbidden: Optional[dict[str, frozenset[str]]] = None, rocq_options: Optional[dict] = None,
               expansions: Optional[int] = None) -> None:
    """Search every target (best-first, ``seconds`` or ``seconds(target)`` and at most
    ``expansions`` states each) on ``workers`` Ray actors; ``record`` as :func:`run_baseline`'s,
    the statuses being the re-check's (or the search's end when nothing was found)."""
    from lean_env.backends import BackendSpec
    from sgs.search.workers import ProposerSpec, search_all

    def settings(target: ProofTask) -> SearchSettings:
        budget = seconds(target) if callable(seconds) else seconds
        return SearchSettings(lemma_seconds=budget, tactic_seconds=min(10.0, budget), finishers=prover.finishers,
                              **({"max_expansions": expansions} if expansions else {}))

    spec = ProposerSpec(prover.predictor, str(corpus) if corpus else None, checkpoint)

    search_all(targets, settings=settings, proposer=spec,
               backend=BackendSpec("rocq", {**(rocq_options or {}), "tactic_libraries": (HAMMER_TACTICS,)}),
               workers=workers, record=_recorder(record), forbidden=forbidden, score=prover.score)


def run_sampling(prover: SamplingProver, targets: Sequence[ProofTask], *, seconds: float, workers: int,
                 checkpoint: str, record, forbidden: Optional[dict[str, frozenset[str]]] = None,
                 rocq_options: Optional[dict] = None) -> None:
    """Sample whole proofs for every target for ``seconds`` each on ``workers`` Ray actors;
    ``record`` as :func:`run_baseline`'s (CoqHammer's tactics loaded as for the searches)."""
    from sgs.prover.sampling import SamplingPlan, sample_all

    sample_all(targets, plan=SamplingPlan(seconds, prover.samples_per_round), checkpoint=checkpoint,
               rocq_options={**(rocq_options or {}), "tactic_libraries": (HAMMER_TACTICS,)},
               workers=workers, record=_recorder(record), forbidden=forbidden)


def summarize(rows: Sequence[dict]) -> dict[str, dict[str, dict]]:
    """``{group: {prover: {targets, proved, rate}}}`` from result lines."""
    table: dict[str, dict[str, dict]] = defaultdict(dict)
    for row in rows:
        cell = table[row["group"]].setdefault(row["prover"], {"targets": 0, "proved": 0})
        cell["targets"] += 1
        cell["proved"] += bool(row["proved"])
    for cells in table.values():
        for cell in cells.values():
            cell["rate"] = round(cell["proved"] / cell["targets"], 4) if cell["targets"] else 0.0
    return dict(table)


def format_summary(table: dict[str, dict[str, dict]], provers: Sequence[str]) -> str:
    widths = [max(16, len(p) + 2) for p in provers]
    lines = [f"{'group':<24}{'targets':>8}" + "".join(f"{p:>{w}}" for p, w in zip(provers, widths))]
    for group, cells in table.items():
        count = max(c["targets"] for c in cells.values())
        row = f"{group:<24}{count:>8}"
        for prover, width in zip(provers, widths):
            cell = cells.get(prover)
            row += f"{cell['proved']} ({cell['rate']:.3f})".rjust(width) if cell else "-".rjust(width)
        lines.append(row)
    return "\n".join(lines)


def _read_rows(path: Path) -> list[dict]:
    """The finished rows; a last line without its newline (a run killed while writing it) is not one."""
    if not path.is_file():
        return []
    text = path.read_text()
    lines = text.split("\n")[:-1]   # whatever follows the last newline is torn or empty
    return [json.loads(line) for line in lines if line.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sgs.prover.proof_rate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stdlib-test", type=Path, metavar="CORPUS", help="held-out standard-library theorems")
    parser.add_argument("--limit", type=int, help="seeded sample of the standard-library targets")
    parser.add_argument("--targets", action="append", default=[], metavar="NAME=FILE", help="traced project targets")
    parser.add_argument("--provers", default=",".join(BASELINES), help=f"comma-separated: {', '.join(PROVERS)}")
    parser.add_argument("--corpus", type=Path, help="the corpus the k-NN learner learns from (search-knn)")
    parser.add_argument("--checkpoint", default="pkg://sgs/data/rocq_prover",
                        help="the model the searches propose with (default: the shipped prover)")
    parser.add_argument("--seconds", type=positive_float, default=60.0, help="time per lemma and prover")
    parser.add_argument("--expansions", type=int, metavar="N",
                        help="at most N states expanded per search: a budget the machine's load does not move")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    return parser


def _groups(args) -> tuple[dict[str, list[ProofTask]], dict[str, frozenset[str]], list[str]]:
    """The target groups, the names each target's proofs may not use, and the problems found."""
    groups: dict[str, list[ProofTask]] = {}
    forbidden: dict[str, frozenset[str]] = {}
    problems = []
    if args.stdlib_test is not None:
        if not args.stdlib_test.is_dir():
            problems.append(f"--stdlib-test {args.stdlib_test}: not a corpus directory")
        else:
            groups["stdlib-test"], forbidden = stdlib_test_targets(args.stdlib_test, args.limit, args.seed)
            if not groups["stdlib-test"]:
                problems.append(f"--stdlib-test {args.stdlib_test}: no held-out standard-library theorem")
    for item in args.targets:
        name, sep, file = item.partition("=")
        if not sep or not name or not Path(file).is_file():
            problems.append(f"--targets {item!r}: expected NAME=FILE with an existing file")
            continue
        try:
            groups[name] = project_targets(Path(file))
        except (ValueError, OSError) as error:
            problems.append(f"--targets {item!r}: {error}")
    if not groups and not problems:
        problems.append("no targets: give --stdlib-test CORPUS and/or --targets NAME=FILE")
    return groups, forbidden, problems


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    provers = [p for p in args.provers.split(",") if p]
    problems = [f"--provers: unknown {p!r} (known: {', '.join(PROVERS)})" for p in provers if p not in PROVERS]
    learners = [p for p in provers if isinstance(PROVERS.get(p), SearchProver) and PROVERS[p].needs_corpus]
    if learners and not (args.corpus and args.corpus.is_dir()):
        problems += [f"{p} needs --corpus CORPUS (the k-NN's or the value's training split)" for p in learners]
    if args.workers < 1 or (args.expansions is not None and args.expansions < 1):
        problems.append("--workers must be >= 1 and --expansions >= 1")
    groups, forbidden, more = _groups(args)
    problems += more
    results = args.out / "results.jsonl"
    rows = _read_rows(results)
    budget = (args.seconds, args.expansions)
    budgets = {(r.get("seconds_per_lemma", args.seconds), r.get("expansions_per_lemma")) for r in rows} - {budget}
    if budgets:
        problems.append(f"--out {args.out} holds results at other budgets (seconds, expansions per lemma) "
                        f"{sorted(budgets, key=str)}, not {budget}: use another --out (one directory, one budget)")
    if problems:
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    if results.is_file():
        cut_torn_tail(results)   # the torn row's target runs again
    done = {(r["prover"], r["group"], r["target"]) for r in rows}
    import ray
    ray.init(num_cpus=args.workers, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    started = time.monotonic()
    try:
        with results.open("a") as sink:
            for prover in provers:
                # every group's targets in one call: the pool or the search actors (a model, a
                # k-NN index) start once per prover, not once per group
                todo = [(group, t) for group, targets in groups.items() for t in targets
                        if (prover, group, t.id) not in done]
                if not todo:
                    continue
                group_of = {id(t): group for group, t in todo}

                def record(target, proof, seconds, statuses, details=None, prover=prover, group_of=group_of):
                    row = {"prover": prover, "group": group_of[id(target)], "target": target.id,
                           "proved": proof is not None, "proof": proof, "seconds": round(seconds, 2),
                           "statuses": statuses, "seconds_per_lemma": args.seconds,
                           "expansions_per_lemma": args.expansions, **({"details": details} if details else {})}
                    rows.append(row)
                    sink.write(json.dumps(row) + "\n")
                    sink.flush()

                print(f"{prover}: {len(todo)} targets", file=sys.stderr)
                entry, tasks = PROVERS[prover], [t for _, t in todo]
                if isinstance(entry, Baseline):
                    run_baseline(entry, tasks, seconds=args.seconds, workers=args.workers, record=record)
                elif isinstance(entry, SamplingProver):
                    run_sampling(entry, tasks, seconds=args.seconds, workers=args.workers,
                                 checkpoint=args.checkpoint, record=record, forbidden=forbidden)
                else:
                    run_search(entry, tasks, seconds=args.seconds, workers=args.workers, corpus=args.corpus,
                               checkpoint=args.checkpoint, record=record, forbidden=forbidden,
                               expansions=args.expansions)
    finally:
        ray.shutdown()
    wanted = {(p, g, t.id) for p in provers for g, targets in groups.items() for t in targets}
    table = summarize([r for r in rows if (r["prover"], r["group"], r["target"]) in wanted])
    summary = {"seconds_per_lemma": args.seconds, "expansions_per_lemma": args.expansions,
               "workers": args.workers, "provers": provers,
               "wall_seconds": round(time.monotonic() - started, 1), "table": table}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(format_summary(table, provers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
