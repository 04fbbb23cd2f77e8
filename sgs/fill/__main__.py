"""``python -m sgs.fill PROJECT_DIR``: prove the lemmas a Rocq project left ``Admitted``.

    python -m sgs.fill PROJECT_DIR [--out report.jsonl] [--time-per-lemma 60] [--workers 2]
        [--write] [--admits] [--names a,b] [--proposer auto|knn|model|knn+model]
        [--build-dir DIR]
        [--adapt ITERATIONS [--adapt-minutes M] [--adapt-method sgs|rl|supervised] [--adapt-anchor RATIO]
         [--adapt-set KEY=VALUE] [--adapt-cache DIR]] [--rounds automation,sauto,sample,search] [--seed N]

Finds every lemma whose proof is ``Admitted.`` (:mod:`sgs.fill.admitted`)
in a ``_CoqProject``, ``Make`` or dune project (:mod:`sgs.fill.project`),
builds the project, tries each lemma (:mod:`sgs.fill.attempts`: Rocq's
automation, ``sauto``, then tactic search) within ``--time-per-lemma``
seconds, re-checks every proof found with the verifier pool, and writes one
JSON line per lemma to ``--out`` and a readable ``.md`` beside it
(:mod:`sgs.fill.report`); the last line on stdout is ``proved N of M ...``.
``--write`` puts the proofs into the files only when the whole project then
builds (:mod:`sgs.fill.write`).  ``--adapt ITERATIONS`` first learns the
project (:mod:`sgs.fill.adapt`: supervised steps on its proofs, then
self-play on its lemmas), and the model proposes from the adapted
checkpoint (``--proposer knn+model``: the model and the k-NN on the
project's proofs taking turns).  docs/fill.md has the details.

Exit status: 0 done; 1 ``--write`` refused because the project does not
build with the proofs (the report says why; no file changed); 2 bad input,
one line on stderr naming it, nothing written: not a project, a project that
does not build, no admitted lemma, a source that changed during the run, a
folder ``--write`` cannot write, an ``--adapt`` cache folder that cannot be
written, self-play settings ``python -m sgs`` refuses, a bad command line;
3 the adaptation failed (its log says why; a rerun resumes it).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import logging
import os
import shlex
import sys
import time
from pathlib import Path
from typing import NoReturn, Optional, Sequence

from lean_env.arguments import positive_float
from lean_env.rocq.checks import RocqTextError
from lean_env.rocq.config import RocqConfigError
from lean_env.rocq.load_path import to_json
from lean_env.verdict import ProofTask, Status
from sgs.fill.adapt import (
    ADAPT_METHODS, AdaptError, AdaptInputError, AdaptSettings, adapt, cache_root, check_cache, weights_digest)
from sgs.fill.admitted import FillTarget, NotFillable, allowed_names, find_admitted, written_proof
from sgs.fill.project import find_project, source_hashes
from sgs.fill.attempts import DEFAULT_ROUNDS, ROUNDS, attempt_all, recheck_all
from sgs.fill.journal import Journal, journal_key, journal_path
from sgs.fill.report import Row, counts, jsonl, markdown, summary_line
from sgs.fill.write import Edit, WriteError, build_written, check_writable, replace_files
from sgs.prover.accuracy import LEARN_FROM_CORPUS, PREDICTORS, USE_THE_CHECKPOINT
from sgs.state.files import atomic_write, folder_problem
from sgs.state.rocq_project import BuildError, Project, ProjectError, build, default_build_dir
from sgs.state.rocq_trace import build_load_path

EXIT_WRITE_REFUSED = 1
EXIT_USAGE = 2
EXIT_ADAPT_FAILED = 3


class UsageError(Exception):
    """A command line or an input this command cannot work with: one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = _Parser(prog="python -m sgs.fill", description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path, help="the project folder (_CoqProject, Make or dune-project)")
    parser.add_argument("--out", type=Path, help="the JSON-lines report (default: <folder>.fill.jsonl); "
                                                 "the readable one goes beside it, .md")
    parser.add_argument("--time-per-lemma", type=positive_float, default=60.0, help="seconds per lemma (default 60)")
    parser.add_argument("--workers", type=int, default=2, help="provers at once (default 2)")
    parser.add_argument("--write", action="store_true",
                        help="replace each proved lemma's Admitted by its proof, if the whole project still builds")
    parser.add_argument("--admits", action="store_true",
                        help="also lemmas with tactics (an admit, say) before their Admitted")
    parser.add_argument("--names", help="only these admitted lemmas (comma-separated names or logical paths)")
    parser.add_argument("--proposer", choices=("auto", *PREDICTORS), default="auto",
                        help="what proposes tactics to the search: the k-NN learner on the project's own "
                             "proofs, the shipped (or adapted) model, both taking turns, or (auto) the k-NN "
                             "when the project has proofs and the model after --adapt")
    parser.add_argument("--checkpoint", default="pkg://sgs/data/rocq_prover",
                        help="the model (--proposer model or knn+model)")
    parser.add_argument("--build-dir", type=Path, help="where to build (default: ~/.cache/sgs/rocq_projects/...)")
    parser.add_argument("--jobs", type=int, default=2, help="parallel make jobs (default 2)")
    parser.add_argument("--rounds", default=",".join(DEFAULT_ROUNDS),
                        help=f"the rounds to run, of {', '.join(ROUNDS)} (default {','.join(DEFAULT_ROUNDS)}; "
                             "sample runs with the model, its share otherwise going to the search)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the samples and of --adapt's training")
    group = parser.add_argument_group("learning the project first (docs/fill.md)")
    group.add_argument("--adapt", type=int, metavar="ITERATIONS",
                       help="fine-tune the model on the project's proofs, then ITERATIONS of self-play on its lemmas; "
                            "the adapted checkpoint is cached and reused")
    group.add_argument("--adapt-minutes", type=positive_float, help="CPU-minutes of the supervised stage (default 5)")
    group.add_argument("--adapt-method", choices=tuple(ADAPT_METHODS),
                       help="the self-play: " + "; ".join(f"{k}: {m.description}" for k, m in ADAPT_METHODS.items())
                            + " (default sgs)")
    group.add_argument("--adapt-anchor", type=positive_float, metavar="RATIO",
                       help="replay the project's own tactic steps in each self-play update, RATIO per found step "
                            "(solver.anchor_corpus; default none)")
    group.add_argument("--adapt-set", action="append", default=[], metavar="KEY=VALUE",
                       help="a python -m sgs setting for the self-play (repeatable)")
    group.add_argument("--adapt-cache", type=Path, help="where adapted checkpoints are kept "
                                                        "(default ~/.cache/sgs/fill_adapt)")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.jobs < 1:
        raise UsageError("--workers and --jobs must be at least 1")
    args.rounds = tuple(name.strip() for name in args.rounds.split(",") if name.strip())
    unknown = [name for name in args.rounds if name not in ROUNDS]
    if unknown or not args.rounds:
        raise UsageError(f"--rounds: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(ROUNDS)}")
    _check_adapt(args)
    if args.out is None:
        args.out = Path(f"{args.project.resolve().name}.fill.jsonl")
    return args


def _check_adapt(args: argparse.Namespace) -> None:
    """The --adapt flags, checked before anything is built; ``args.adaptation`` their settings or None."""
    given = [flag for flag, value in (("--adapt-minutes", args.adapt_minutes), ("--adapt-method", args.adapt_method),
                                      ("--adapt-anchor", args.adapt_anchor), ("--adapt-set", args.adapt_set),
                                      ("--adapt-cache", args.adapt_cache)) if value is not None and value != []]
    args.adaptation = None
    if args.adapt is None:
        if given:
            raise UsageError(f"{', '.join(given)} go with --adapt ITERATIONS")
        return
    if args.proposer not in ("auto", *USE_THE_CHECKPOINT):
        raise UsageError(f"--adapt adapts the model, and --proposer {args.proposer} does not use it")
    if args.adapt < 1:
        raise UsageError(f"--adapt must be a positive number of self-play iterations, got {args.adapt}")
    minutes = 5.0 if args.adapt_minutes is None else args.adapt_minutes
    bad = [item for item in args.adapt_set if "=" not in item or item.startswith("=")]
    if bad:
        raise UsageError(f"--adapt-set takes KEY=VALUE, got {bad[0]!r}")
    # the self-play runs in the checkout's root: a relative checkpoint path is made absolute first
    base = args.checkpoint if "://" in args.checkpoint else str(Path(args.checkpoint).expanduser().resolve())
    args.adaptation = AdaptSettings(iterations=args.adapt, method=args.adapt_method or "sgs", minutes=minutes,
                                    seed=args.seed, base=base, overrides=tuple(args.adapt_set),
                                    anchor_ratio=args.adapt_anchor)
    args.adapt_cache = cache_root(args.adapt_cache)


def _read(project: Project, source: str) -> str:
    # bytes as they are (no newline translation), so the spans and a written file match the original
    try:
        return (project.root / source).read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise ProjectError(f"{project.root / source} is not UTF-8 text: {error}") from None


def find_targets(project: Project, texts: dict[str, str], *, admits: bool, names: Optional[str]
                 ) -> tuple[list[FillTarget], list[NotFillable]]:
    """The admitted lemmas of every file, those of ``names`` only when given."""
    targets: list[FillTarget] = []
    problems: list[NotFillable] = []
    for source in project.sources:
        try:
            found, not_fillable = find_admitted(texts[source], source, project.logical_module(source), admits=admits)
        except RocqTextError as error:
            raise ProjectError(f"{project.root / source} cannot be split into sentences: {error}") from None
        targets += found
        problems += not_fillable
    if names:
        wanted = [name.strip() for name in names.split(",") if name.strip()]
        known = {key for item in [*targets, *problems] for key in (item.name, item.id)}
        unknown = [name for name in wanted if name not in known]
        if unknown:
            raise UsageError(f"--names: no admitted lemma named {', '.join(unknown)} in {project.root}")
        targets = [t for t in targets if t.name in wanted or t.id in wanted]
        problems = [p for p in problems if p.name in wanted or p.id in wanted]
    if not targets and not problems:
        raise UsageError(f"{project.root} has no admitted lemma"
                         + ("" if admits else " (lemmas with tactics before Admitted count with --admits)"))
    return targets, problems


def _changed(project: Project, hashes: dict[str, str]) -> list[str]:
    now = source_hashes(project)
    return [source for source in project.sources if now.get(source) != hashes.get(source)]


def _prepare(args: argparse.Namespace):
    """Everything that may fail on bad input, before any prover starts."""
    project = find_project(args.project)
    for item in project.ignored:
        print(f"{project.project_file}: not used: {item}", file=sys.stderr)
    if args.write:
        check_writable(project)
    if args.adaptation is not None:
        check_cache(args.adapt_cache)
    # the journal goes beside the report from the first lemma on (sgs.fill.journal)
    problem = folder_problem(args.out.resolve().parent)
    if problem:
        raise UsageError(f"--out {args.out}: {problem}")
    hashes = source_hashes(project)
    texts = {source: _read(project, source) for source in project.sources}
    targets, problems = find_targets(project, texts, admits=args.admits, names=args.names)
    build_dir = (args.build_dir or default_build_dir(project)).expanduser().resolve()
    print(f"{len(targets) + len(problems)} admitted lemmas; building {project.root} in {build_dir}", file=sys.stderr)
    build(project, build_dir, jobs=args.jobs)
    return project, hashes, texts, targets, problems, build_dir


def _proposer(args, project: Project, build_dir: Path) -> tuple[str, Optional[Path]]:
    """What proposes to the search (a predictor of :data:`PREDICTORS`) and the k-NN's
    memory of the project's proofs (None when it has no part).  ``auto``: the k-NN, or
    the model after ``--adapt`` (the adapted model is what the adaptation is for) or when
    the project has no proof to learn from; ``knn+model`` without such proofs is the model."""
    chosen = args.proposer
    if chosen == "auto":
        chosen = "model" if args.adaptation is not None else "knn"
    if chosen not in LEARN_FROM_CORPUS:
        return chosen, None
    from sgs.fill.knowledge import project_steps
    corpus, steps = project_steps(project, build_dir)
    print(f"the project's own proofs: {steps} tactic steps", file=sys.stderr)
    if steps or args.proposer == "knn":
        return chosen, corpus
    return "model", None


def _journal(args: argparse.Namespace, hashes: dict[str, str], predictor: str, rocq_options: dict) -> Journal:
    """The journal of this fill (:mod:`sgs.fill.journal`), resumed when an earlier run of
    the same sources and settings left one; keyed by the model's weights, not its path."""
    weights = weights_digest(args.checkpoint) if predictor in USE_THE_CHECKPOINT else None
    key = journal_key(hashes, time_per_lemma=args.time_per_lemma, rounds=args.rounds, predictor=predictor,
                      weights=weights, seed=args.seed, rocq_options=rocq_options)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    journal = Journal.open(journal_path(args.out), key)
    if journal.note:
        print(journal.note, file=sys.stderr)
    return journal


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    project, hashes, texts, targets, problems, build_dir = _prepare(args)
    load_path = tuple(tuple(entry) for entry in to_json(build_load_path(project, build_dir)))
    modules = {source: (project.logical_module(source), texts[source]) for source in project.sources}
    rocq_options = {"allowed_axioms": allowed_names(modules, targets)}
    tasks = [ProofTask(t.id, t.header, t.statement, "", load_path) for t in targets]
    adaptation = None
    if args.adaptation is not None and targets:
        adaptation = adapt(project, build_dir, targets, load_path, rocq_options["allowed_axioms"], args.adaptation,
                           cache=args.adapt_cache, log=lambda line: print(line, file=sys.stderr))
        args.checkpoint = adaptation.checkpoint
    predictor, corpus = _proposer(args, project, build_dir) if targets else ("model", None)
    journal = _journal(args, hashes, predictor, rocq_options)

    # a busy machine's raylet may take longer than Ray's default minute to register
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "300")
    import ray

    from sgs.machinery.runtime import own_cluster_runtime_env
    # always a cluster of its own, never one another user started on the machine
    ray.init(address="local", num_cpus=args.workers, include_dashboard=False, logging_level=logging.WARNING,
             log_to_driver=False, runtime_env=own_cluster_runtime_env())
    try:
        outcomes = attempt_all(tasks, seconds=args.time_per_lemma, workers=args.workers, rocq_options=rocq_options,
                               predictor=predictor, knn_corpus=corpus, checkpoint=args.checkpoint,
                               rounds=args.rounds, seed=args.seed, journal=journal,
                               progress=lambda line: print(line, file=sys.stderr))
        # the baselines' proofs were checked by the verifier pool already (sauto's with CoqHammer
        # loaded); a search's or a sample's proof was checked by its worker's own backend, so the
        # pool checks it
        verdicts = {t.id: (Status.VALID.value, "", outcomes[t.id].prover == "sauto") for t in tasks
                    if outcomes[t.id].prover in ("automation", "sauto")}
        searched = [ProofTask(t.id, t.header, t.statement, outcomes[t.id].proof, t.load_path)
                    for t in tasks if outcomes[t.id].prover in ("search", "sample")]
        verdicts.update(recheck_all(searched, workers=args.workers, timeout=max(args.time_per_lemma, 30.0),
                                    rocq_options=rocq_options))
    finally:
        ray.shutdown()

    rows: list[Row] = []
    edits: dict[str, list[Edit]] = {}
    for target in targets:
        outcome = outcomes[target.id]
        status, reason, needs_hammer = verdicts.get(target.id, ("", "", False))
        common = dict(file=target.file, line=target.line, name=target.name, id=target.id, form=target.form,
                      seconds=round(outcome.seconds, 2))
        if status == Status.VALID.value:
            proof = written_proof(target, outcome.proof or "")
            rows.append(Row(**common, status="proved", proof=proof, prover=outcome.prover,
                            checkpoint=outcome.checkpoint, needs_hammer=needs_hammer))
            edits.setdefault(target.file, []).append(Edit(target.span, proof, needs_hammer, target.id))
        elif outcome.error:
            rows.append(Row(**common, status="error", reason=outcome.error))
        else:
            # a proof the re-check refused is no proof: the lemma stays not proved
            rows.append(Row(**common, status="not_proved"))
            if status:
                print(f"{target.id}: the {outcome.prover} proof failed the re-check ({status}: {reason})",
                      file=sys.stderr)
    rows += [Row(p.file, p.line, p.name, p.id, "statement", "error", reason=p.reason) for p in problems]
    rows.sort(key=lambda row: (row.file, row.line))

    changed = _changed(project, hashes)
    if changed:
        journal.remove()   # its results are the old version's
        raise UsageError(f"{', '.join(changed)} changed during the run: nothing written (run again on the new version)")
    write_outcome, code = None, 0
    if args.write:
        write_outcome, code, left_out = _write(args, project, texts, edits, hashes)
        rows = [dataclasses.replace(row, not_written=left_out[row.id]) if row.id in left_out else row for row in rows]
    seconds = time.monotonic() - started
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = "python -m sgs.fill " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    model = f"the adapted model ({args.checkpoint})" if adaptation else f"the model {args.checkpoint}"
    proposers = {"knn": "k-NN on the project's proofs", "model": model,
                 "knn+model": f"k-NN on the project's proofs and {model}, taking turns"}
    settings = {"time per lemma": f"{args.time_per_lemma:g} s", "workers": args.workers,
                "rounds": ",".join(args.rounds), "proposer": proposers[predictor]}
    if journal.finished_before:
        settings["resumed"] = (f"{journal.finished_before} lemma rounds from a stopped run "
                               "(its time is not in the total)")
    atomic_write(args.out, jsonl(rows))   # its folder was made with the journal
    stages = [stage.describe() for stage in adaptation.stages] + list(adaptation.notes) if adaptation else []
    page = markdown(rows, project=str(project.root), command=command, when=when, seconds=seconds,
                    settings=settings, write=write_outcome, adaptation=stages)
    atomic_write(args.out.with_suffix(".md"), page.encode("utf-8"))
    atomic_write(args.out.with_suffix(".summary.json"), json.dumps(
        {**counts(rows), "admitted": len(rows), "seconds": round(seconds, 1), "checkpoint": args.checkpoint,
         "knn": corpus is not None, "rounds": list(args.rounds), "seed": args.seed,
         "resumed_rounds": journal.finished_before,
         "adaptation": [dataclasses.asdict(stage) for stage in adaptation.stages] if adaptation else None,
         "adaptation_seconds_now": round(adaptation.seconds_now(), 1) if adaptation else 0.0},
        indent=2).encode("utf-8") + b"\n")
    journal.remove()   # the report has it all now
    if write_outcome:
        print(f"--write: {write_outcome}", file=sys.stderr if code else sys.stdout)
    print(summary_line(rows, seconds, adaptation.describe() if adaptation else None))
    return code


def _write(args, project: Project, texts: dict[str, str], edits: dict[str, list[Edit]],
           hashes: dict[str, str]) -> tuple[str, int, dict[str, str]]:
    """The proofs into the files, when the whole project builds with them: what happened,
    the exit code, and the proofs left out (lemma id -> the build's error in its file)."""
    if not edits:
        return "nothing to write: no lemma was proved", 0, {}
    print(f"--write: building the project with {sum(map(len, edits.values()))} proofs written in", file=sys.stderr)
    try:
        patched, dropped = build_written(project, texts, edits, jobs=args.jobs)
    except BuildError as error:
        return (f"nothing written: the project does not build with the proofs written in: {error}",
                EXIT_WRITE_REFUSED, {})
    changed = _changed(project, hashes)
    if changed:
        raise UsageError(f"{', '.join(changed)} changed during the run: nothing written (run again on the new version)")
    patch = replace_files(project, texts, patched)
    count = sum(map(len, edits.values())) - len(dropped)
    outcome = (f"wrote {count} proof{'s' * (count != 1)} into {len(patched)} file{'s' * (len(patched) != 1)}; "
               f"the project builds with them; the originals are in {patch} "
               f"(to undo, in the project folder: git apply -R {patch.name})")
    if dropped:
        outcome += (f"; left out {len(dropped)}, whose proof does not build in its file: "
                    + "; ".join(f"{edit.lemma} ({reason})" for edit, reason in dropped))
    return outcome, 0, {edit.lemma: reason for edit, reason in dropped}


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        return run(parse_args(argv))
    except (UsageError, ProjectError, BuildError, WriteError, RocqConfigError, AdaptInputError) as error:
        print(f"sgs.fill: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except AdaptError as error:
        print(f"sgs.fill: the adaptation failed: {error}", file=sys.stderr)
        return EXIT_ADAPT_FAILED


if __name__ == "__main__":
    sys.exit(main())
