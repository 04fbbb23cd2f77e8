"""``python -m sgs.fill.compare``: does learning a project pay?  (issue 46, section 3)

    python -m sgs.fill.compare --out runs/fill_compare [--projects DIR] [--only propcalc,search-trees]
        [--arms a,b,c,d,e,k,m] [--seeds 0,1] [--fraction 0.25] [--draw-seed 0] [--time-per-lemma 30]
        [--workers 2] [--adapt-iterations 2] [--adapt-minutes 5] [--adapt-anchor RATIO] [--adapt-set KEY=VALUE]
    python -m sgs.fill.compare --out runs/fill_compare --table      # the table of what is done

For each project folder under ``--projects`` (read-only: each is copied into
``<out>/work/``), a seeded share (``--fraction``, of the lemmas the tracer
keeps with the project's axioms allowed) of its proved lemmas is turned into
``Admitted`` in the copy, the rest staying proved as in a user's project;
then every arm (:data:`ARMS`) fills the copy with ``python -m sgs.fill`` at
the same ``--time-per-lemma``: (a) the learning-free baselines alone, (b)
the shipped prover, (c) after supervised adaptation, (d) after SGS self-play
adaptation, (e) after RL-only adaptation with the same iterations, (k)
the fill's default, the k-NN on the project's own proofs, and (m) the k-NN
and (c)'s model taking turns.  The arms whose
method samples run once per ``--seeds``.

Resumable: each finished (project, arm, seed) is one line of
``<out>/results.jsonl`` (or ``--results``: a file kept apart from the
scratch folder, so that the measurements outlive it), and a rerun skips
those; a failed fill goes to
``<out>/failures.jsonl`` and is tried again on the next run.  The adapted
checkpoints are kept in ``<out>/adapt_cache`` (so (d) and (e) reuse (c)'s
supervised stage of the same seed).  ``--table`` writes ``<out>/table.md``.

A lemma in a section is admitted with a ``Proof using`` clause: its own, or
the one Coq suggests for its proof (``coqc -set "Suggest Proof Using"``).
Coq generalises an admitted lemma over every variable of its section, a
proved one over those its proof uses, so admitting it bare may change its
type and break the lemmas after it (docs/fill.md); with the clause its type
stays.  A section lemma with neither (Coq suggests nothing for a
``Defined`` proof) is not drawn.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, NoReturn, Optional, Sequence

from lean_env.arguments import positive_float
from sgs.fill.adapt import ADAPT_METHODS
from sgs.fill.admitted import readable_using
from sgs.state.files import atomic_write
from sgs.state.rocq_project import BuildError, ProjectError, build, read_project

__all__ = ["Arm", "ARMS", "eligible", "draw", "admit_text", "parse_suggestions", "fill_command", "pending", "table",
           "main"]

REPO = Path(__file__).resolve().parents[2]
DEFAULT_PROJECTS = REPO.parent / "shared" / "data" / "rocq_projects"
_PROOF_USING = re.compile(r"Proof\s+using\b[^.]*\.(?=\s|$)")
# Coq breaks the message's lines where a long name makes it wide: any whitespace between words
_SUGGESTION = re.compile(r"The\s+proof\s+of\s+(\S+)\s+should\s+start\s+with\s+one\s+of\s+the\s+following"
                         r"\s+commands:\s*((?:Proof\s+using\b[^.]*\.\s*)+)")


@dataclass(frozen=True)
class Arm:
    description: str
    #: ``python -m sgs.fill`` flags of the arm
    flags: tuple[str, ...]
    #: ``--adapt-method``, or None for no adaptation
    adapt_method: Optional[str] = None
    #: whether its result depends on the seed (samples, or training)
    seeded: bool = True


#: the arms, by name, in the order they run (c before d and e: they reuse its supervised stage)
ARMS: dict[str, Arm] = {
    "a": Arm("learning-free baselines: Rocq's automation, then sauto", ("--rounds", "automation,sauto"),
             seeded=False),
    # the model's search proposes by beam search: without the sampling round, seeds change nothing
    "b": Arm("the shipped prover, no adaptation (its search)", ("--proposer", "model"), seeded=False),
    "c": Arm("supervised adaptation only", ("--proposer", "model"), "supervised"),
    "d": Arm("SGS self-play adaptation (after the supervised stage)", ("--proposer", "model"), "sgs"),
    "e": Arm("RL-only adaptation, same iterations (after the supervised stage)", ("--proposer", "model"), "rl"),
    "k": Arm("the fill's default: k-NN on the project's own proofs", ("--proposer", "knn"), seeded=False),
    # whether the adaptation adds to the learning-free k-NN rather than replacing it
    "m": Arm("k-NN and the supervised-adapted model taking turns", ("--proposer", "knn+model"), "supervised"),
}


class UsageError(Exception):
    pass


def eligible(row: dict, text: str, suggested: Optional[Mapping[str, Optional[str]]]) -> bool:
    """Whether a traced lemma may be admitted without changing its type (see the
    module docstring; ``text``: its file; ``suggested``: :func:`parse_suggestions`
    of the file, None when Coq was not asked)."""
    if "section" not in row.get("context", ""):
        return True
    declaration = _declaration(row, text)
    if declaration is None:
        return False
    if _PROOF_USING.match(text, declaration.proof_span[0]):
        return True
    if suggested is None or [d.name for d in _declarations(text).values()].count(declaration.name) > 1:
        return False
    if declaration.name in suggested:
        return suggested[declaration.name] is not None
    # Coq suggests a clause for every Qed proof with section variables in scope: none are
    return declaration.ending == "Qed"


def parse_suggestions(output: str) -> dict[str, Optional[str]]:
    """From what ``coqc -set "Suggest Proof Using"`` prints for one file: by lemma
    name, the first suggested clause :mod:`sgs.fill.admitted` can read (Coq lists
    the smallest first), or None when there is none, or when the name was
    suggested for twice (one short name in two modules of the file: which is
    which cannot be told)."""
    found: dict[str, list[Optional[str]]] = {}
    for match in _SUGGESTION.finditer(output):
        clauses = [" ".join(clause.split()) for clause in re.findall(r"Proof\s+using\b[^.]*\.", match.group(2))]
        found.setdefault(match.group(1), []).append(next((c for c in clauses if readable_using(c)), None))
    if len(re.findall(r"The\s+proof\s+of\s", output)) != sum(map(len, found.values())):
        # a missed suggestion would pass its lemma for one without section variables
        raise UsageError(f"Coq's Proof using suggestions were not all read: {output[:300]!r}")
    return {name: clauses[0] if len(clauses) == 1 else None for name, clauses in found.items()}


def suggested_clauses(source: Path, build_dir: Path, files: Sequence[str]) -> dict[str, dict[str, Optional[str]]]:
    """:func:`parse_suggestions` for each of ``files`` of the project ``source``,
    compiled again with Coq's suggestions on, after the project is built in
    ``build_dir`` (up to date already when the tracer built it there)."""
    try:
        project = read_project(source)
        build(project, build_dir)
    except (ProjectError, BuildError) as error:
        raise UsageError(f"{source}: {error}") from None
    flags = [part for item in project.load_path for part in (item.flag, item.directory, item.name)]
    found = {}
    with tempfile.TemporaryDirectory(prefix="sgs-suggest-") as scratch:
        for file in files:
            # -o elsewhere: the build's own .vo stays as make left it
            compiled = Path(scratch) / Path(file).with_suffix(".vo").name
            try:
                proc = subprocess.run(["coqc", *flags, "-set", "Suggest Proof Using", file, "-o", str(compiled)],
                                      cwd=build_dir, capture_output=True, text=True, timeout=3600)
            except subprocess.TimeoutExpired:
                raise UsageError(f"{source / file}: coqc with Suggest Proof Using ran past 3600 s") from None
            if proc.returncode != 0:
                raise UsageError(f"{source / file}: coqc with Suggest Proof Using failed: "
                                 f"{proc.stderr.strip()[-300:]}")
            found[file] = parse_suggestions(proc.stdout + proc.stderr)
    return found


def _declaration(row: dict, text: str):
    return _declarations(text).get((row["source"]["line"], row["id"].rsplit(".", 1)[1]))


@functools.lru_cache(maxsize=16)
def _declarations(text: str) -> dict:
    from sgs.state.rocq_declarations import find_declarations
    return {(d.line, d.name): d for d in find_declarations(text)[0]}


def draw(ids: Sequence[str], traced: int, fraction: float, seed: int) -> list[str]:
    """A seeded ``fraction`` of ``traced`` lemmas (at least one), drawn among ``ids`` (the eligible)."""
    count = min(len(ids), max(1, round(fraction * traced)))
    return sorted(random.Random(seed).sample(sorted(ids), count))


def admit_text(text: str, spans: Sequence[tuple[int, int]], suggested: Mapping[int, str] = {}) -> str:
    """``text`` with each proof span replaced by ``Admitted.``, opened by the
    proof's own ``Proof using`` or else by ``suggested[start of the span]``: the
    lemma's type stays the one its proof gave it."""
    for start, end in sorted(spans, reverse=True):
        using = _PROOF_USING.match(text, start)
        opening = using.group(0) if using else suggested.get(start)
        replacement = (opening + "\n" if opening else "") + "Admitted."
        text = text[:start] + replacement + text[end:]
    return text


def prepare(source: Path, out: Path, *, fraction: float, seed: int, log) -> Path:
    """The work copy of ``source`` with its drawn lemmas admitted (made once: ``<name>.admitted.json``
    is written last and names them)."""
    work = out / "work" / source.name
    record_path = out / "work" / f"{source.name}.admitted.json"
    if record_path.is_file() and work.is_dir():
        return work
    traced_path = out / "work" / f"{source.name}.targets.jsonl"
    if not traced_path.is_file():
        log(f"{source.name}: tracing its lemmas")
        proc = subprocess.run([sys.executable, str(REPO / "tools" / "trace_rocq_targets.py"), str(source),
                               "--out", str(traced_path), "--allow-project-axioms",
                               "--build-dir", str(out / "build" / f"{source.name}.original")],
                              cwd=REPO, capture_output=True, text=True, timeout=7200)
        if proc.returncode != 0:
            raise UsageError(f"{source}: tracing failed: {proc.stderr.strip()[-500:]}")
    rows = [json.loads(line) for line in traced_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = {}
    for row in rows:
        file = row["source"]["file"]
        texts.setdefault(file, (source / file).read_text(encoding="utf-8"))
    unclaused = sorted({row["source"]["file"] for row in rows if not eligible(row, texts[row["source"]["file"]], None)})
    if unclaused:
        log(f"{source.name}: asking Coq for the Proof using clauses of {len(unclaused)} files' section lemmas")
    suggested = suggested_clauses(source, out / "build" / f"{source.name}.original", unclaused) if unclaused else {}
    pool = [row["id"] for row in rows
            if eligible(row, texts[row["source"]["file"]], suggested.get(row["source"]["file"]))]
    if not pool:
        raise UsageError(f"{source}: none of its {len(rows)} traced lemmas can be admitted without changing "
                         "its type (see the module docstring)")
    chosen = set(draw(pool, len(rows), fraction, seed))
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(source, work, ignore=shutil.ignore_patterns(".*", "*.vo", "*.vos", "*.vok", "*.glob", "*.aux"))
    spans: dict[str, list[tuple[int, int]]] = {}
    openings: dict[str, dict[int, str]] = {}
    for row in rows:
        if row["id"] in chosen:
            file = row["source"]["file"]
            declaration = _declaration(row, texts[file])
            assert declaration is not None, row["id"]
            spans.setdefault(file, []).append(declaration.proof_span)
            clause = suggested.get(file, {}).get(declaration.name) if "section" in row.get("context", "") else None
            if clause is not None:
                openings.setdefault(file, {})[declaration.proof_span[0]] = clause
    for file, file_spans in spans.items():
        (work / file).write_text(admit_text(texts[file], file_spans, openings.get(file, {})), encoding="utf-8")
    try:
        # every arm builds it first (into the same folder): a lemma whose type changed shows here once
        build(read_project(work), out / "build" / source.name)
    except (ProjectError, BuildError) as error:
        raise UsageError(f"{source.name}: the copy with {len(chosen)} lemmas admitted does not build: "
                         f"{error}") from None
    atomic_write(record_path, json.dumps({"traced": len(rows), "eligible": len(pool), "admitted": sorted(chosen),
                                          "suggested_clauses": sum(map(len, openings.values())),
                                          "fraction": fraction, "seed": seed}, indent=2).encode())
    log(f"{source.name}: admitted {len(chosen)} of {len(rows)} traced lemmas ({len(pool)} eligible)")
    return work


def fill_command(arm: Arm, project: Path, report: Path, seed: int, *, time_per_lemma: float, workers: int,
                 build_dir: Path, iterations: int, minutes: float, adapt_sets: Sequence[str],
                 cache: Path, anchor: Optional[float] = None) -> list[str]:
    """``python -m sgs.fill`` for one arm and seed; ``anchor``: the self-play arms' ``--adapt-anchor``."""
    command = [sys.executable, "-m", "sgs.fill", str(project), "--out", str(report), "--time-per-lemma",
               f"{time_per_lemma:g}", "--workers", str(workers), "--build-dir", str(build_dir), "--seed", str(seed),
               *arm.flags]
    if arm.adapt_method is not None:
        command += ["--adapt", str(iterations), "--adapt-method", arm.adapt_method, "--adapt-minutes",
                    f"{minutes:g}", "--adapt-cache", str(cache), *(f"--adapt-set={item}" for item in adapt_sets)]
        if anchor and ADAPT_METHODS[arm.adapt_method].experiment is not None:
            command += ["--adapt-anchor", f"{anchor:g}"]
    return command


def _lines(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def pending(projects: Sequence[str], arms: Sequence[str], seeds: Sequence[int], done: Sequence[dict]
            ) -> list[tuple[str, str, int]]:
    """The (project, arm, seed) runs not in ``done``, in order; an arm that does not
    depend on the seed runs with the first seed only."""
    finished = {(row["project"], row["arm"], row["seed"]) for row in done}
    return [(project, arm, seed) for project in projects for arm in arms
            for seed in (seeds if ARMS[arm].seeded else seeds[:1]) if (project, arm, seed) not in finished]


def _append(path: Path, record: dict) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def table(rows: Sequence[dict], arms: Sequence[str] = tuple(ARMS)) -> str:
    """Per project and arm: lemmas proved (mean over seeds) of those admitted, and the
    adaptation's cost when it was made (wall minutes, stages together, mean over seeds)."""
    projects = sorted({row["project"] for row in rows})
    shown = [arm for arm in arms if any(row["arm"] == arm for row in rows)]
    lines = ["| project | admitted | " + " | ".join(f"({arm})" for arm in shown) + " |",
             "|---|---|" + "---|" * len(shown)]
    for project in projects:
        mine = [row for row in rows if row["project"] == project]
        cells = []
        for arm in shown:
            runs = [row for row in mine if row["arm"] == arm]
            if not runs:
                cells.append("")
                continue
            proved = [row["proved"] for row in runs]
            cell = f"{sum(proved) / len(proved):g} ({', '.join(map(str, proved))})" if len(runs) > 1 \
                else str(proved[0])
            adapt = [sum(stage["wall_seconds"] for stage in row.get("adaptation") or []) for row in runs]
            if any(adapt):
                cell += f"; {sum(adapt) / len(adapt) / 60:.1f} min"
            cells.append(cell)
        lines.append(f"| {project} | {mine[0]['admitted']} | " + " | ".join(cells) + " |")
    legend = [f"({arm}) {ARMS[arm].description}" for arm in shown]
    return "\n".join(lines + ["", "; ".join(legend) + "."]) + "\n"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = _Parser(prog="python -m sgs.fill.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="work folder (resumed when it has results)")
    parser.add_argument("--results", type=Path, help="the results file (default <out>/results.jsonl)")
    parser.add_argument("--projects", type=Path, default=DEFAULT_PROJECTS, help="a folder of project folders")
    parser.add_argument("--only", help="these project folders only (comma-separated names)")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"of {', '.join(ARMS)} (default all)")
    parser.add_argument("--seeds", default="0,1", help="seeds of the arms that sample or train (default 0,1)")
    parser.add_argument("--fraction", type=float, default=0.25, help="share of the traced lemmas admitted")
    parser.add_argument("--draw-seed", type=int, default=0, help="seed of the draw of the admitted lemmas")
    parser.add_argument("--time-per-lemma", type=positive_float, default=30.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--adapt-iterations", type=int, default=2)
    parser.add_argument("--adapt-minutes", type=positive_float, default=5.0)
    parser.add_argument("--adapt-anchor", type=positive_float, metavar="RATIO",
                        help="the self-play arms replay the project's own steps (sgs.fill --adapt-anchor)")
    parser.add_argument("--adapt-set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--table", action="store_true", help="only write the table of what is done")
    args = parser.parse_args(argv)
    args.arms = [arm.strip() for arm in args.arms.split(",") if arm.strip()]
    unknown = [arm for arm in args.arms if arm not in ARMS]
    if unknown or not args.arms:
        raise UsageError(f"--arms: unknown {', '.join(unknown) or '(none)'}; choose from {', '.join(ARMS)}")
    try:
        args.seeds = [int(seed) for seed in args.seeds.split(",") if seed.strip()]
    except ValueError:
        raise UsageError(f"--seeds takes integers, got {args.seeds!r}") from None
    if not args.seeds or not 0 < args.fraction < 1 or args.adapt_iterations < 1 or args.workers < 1:
        raise UsageError("--seeds needs one seed, --fraction lies in (0, 1), --adapt-iterations >= 1, "
                         "--workers >= 1")
    if not args.projects.is_dir():
        raise UsageError(f"--projects {args.projects}: not a folder")
    if args.results is not None and args.results.exists() and not args.results.is_file():
        raise UsageError(f"--results {args.results}: not a file")
    names = sorted(p.name for p in args.projects.iterdir() if p.is_dir())
    if args.only:
        wanted = [name.strip() for name in args.only.split(",") if name.strip()]
        missing = [name for name in wanted if name not in names]
        if missing:
            raise UsageError(f"--only: no project {', '.join(missing)} in {args.projects}")
        names = wanted
    args.names = names
    return args


def run(args: argparse.Namespace) -> int:
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    results, failures = (args.results or out / "results.jsonl").resolve(), out / "failures.jsonl"
    results.parent.mkdir(parents=True, exist_ok=True)

    def log(line: str) -> None:
        print(f"[{datetime.datetime.now(datetime.timezone.utc):%H:%M:%S}] {line}", flush=True)

    unusable: dict[str, str] = {}   # project -> why it could not be prepared
    if not args.table:
        todo = pending(args.names, args.arms, args.seeds, _lines(results))
        log(f"{len(todo)} fills to run")
        for project, arm, seed in todo:
            if project in unusable:
                continue
            try:
                work = prepare(args.projects / project, out, fraction=args.fraction, seed=args.draw_seed, log=log)
            except UsageError as error:
                # one project that cannot be prepared leaves the others to run
                unusable[project] = str(error)
                _append(failures, {"project": project, "prepare": str(error)})
                log(f"{project}: skipped: {error}")
                continue
            report = out / "reports" / project / f"{arm}-seed{seed}.jsonl"
            command = fill_command(ARMS[arm], work, report, seed, time_per_lemma=args.time_per_lemma,
                                   workers=args.workers, build_dir=out / "build" / project,
                                   iterations=args.adapt_iterations, minutes=args.adapt_minutes,
                                   adapt_sets=args.adapt_set, cache=out / "adapt_cache", anchor=args.adapt_anchor)
            log(f"{project} ({arm}) seed {seed}: " + " ".join(command[1:]))
            started = time.monotonic()
            timeout = 3 * 3600 + 3600 * args.adapt_iterations
            report.parent.mkdir(parents=True, exist_ok=True)
            # appended to: a fill stopped with the comparison resumes, and its log keeps both parts
            with report.with_suffix(".log").open("a") as stderr:
                try:
                    code = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                          timeout=timeout).returncode
                except subprocess.TimeoutExpired:
                    code = "timeout"
            wall = round(time.monotonic() - started, 1)
            summary_path = report.with_suffix(".summary.json")
            if code != 0 or not summary_path.is_file():
                _append(failures, {"project": project, "arm": arm, "seed": seed, "exit": code, "wall_seconds": wall,
                                   "log": str(report.with_suffix(".log"))})
                log(f"{project} ({arm}) seed {seed}: failed ({code}); see {report.with_suffix('.log')}")
                continue
            summary = json.loads(summary_path.read_text())
            record = {"project": project, "arm": arm, "seed": seed, "admitted": summary["admitted"],
                      "proved": summary["proved"], "not_proved": summary["not_proved"], "errors": summary["error"],
                      "fill_seconds": summary["seconds"], "wall_seconds": wall,
                      "adaptation": summary["adaptation"], "checkpoint": summary["checkpoint"],
                      "time_per_lemma": args.time_per_lemma, "workers": args.workers,
                      "adapt_iterations": args.adapt_iterations, "adapt_minutes": args.adapt_minutes,
                      "finished_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
            if summary.get("resumed_rounds"):
                # the fill resumed a stopped one: its seconds are this run's only
                record["resumed_rounds"] = summary["resumed_rounds"]
            _append(results, record)
            log(f"{project} ({arm}) seed {seed}: proved {record['proved']} of {record['admitted']} in {wall:.0f} s")
    page = table(_lines(results), args.arms)
    atomic_write(out / "table.md", page.encode())
    print(page)
    return 1 if unusable else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        return run(parse_args(argv))
    except UsageError as error:
        print(f"sgs.fill.compare: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
