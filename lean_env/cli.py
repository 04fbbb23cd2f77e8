"""``python -m lean_env verify``: check a JSONL file of proofs with the pool.

    python -m lean_env verify --backend rocq --input proofs.jsonl --output verdicts.jsonl --workers 2

Input lines: ``{"id", "header", "statement", "proof"}``, and for Rocq an optional
``"load_path"`` (``[[flag, directory, name], ...]``, as in a target file that
``tools/trace_rocq_targets.py`` writes: such a file checks its human proofs
as it is).  Output lines, in input
order: ``{"id", "status", "reason", "messages", "seconds"}``, plus ``"audit"``
(``agree``, ``disagree``, ``inconclusive``) for an audited proof.  ``--audit``
re-checks every ``valid`` proof through the backend's independent audit path
(``--audit-fraction F``: a share F of them; default none), ``--audit-log PATH``
appends each disagreement there.  A malformed
input line gets status ``invalid`` with its line number; every other line is
still checked.  A progress bar and a summary go to stderr.  Exit status 0 when
every line got a verdict, 2 on a usage error or a prover that cannot start
(checked before any worker starts, with one line saying why).

Lean: ``--repl-command`` (or ``LEAN_ENV_REPL_COMMAND``) is the command line that
starts one REPL, ``--project-dir`` (or ``LEAN_ENV_PROJECT_DIR``) the Mathlib
project it runs in; without a command, ``lake env repl`` in that project.
``--allowed-axioms A,B`` replaces the axioms a valid proof may depend on
(Rocq: none by default; Lean: ``propext``, ``Classical.choice``,
``Quot.sound``).  Rocq: ``--allow-bug-prone fixpoints,vm_reduction`` accepts
the proof features that reach Coq 8.16's known soundness bugs
(:mod:`lean_env.rocq.known_bugs`; refused by default); ``--tactic-library
'From Hammer Require Import Tactics.'`` (repeatable) loads a library after
every header (:mod:`lean_env.rocq.tactic_libraries`).
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Optional

from lean_env.arguments import positive_float
from lean_env.backends import BACKENDS, BackendSpec
from lean_env.lean.config import AXIOM_CHECKS, ENV_LAKE_COMMAND, ENV_PROJECT_DIR, ENV_REPL_COMMAND
from lean_env.verdict import ProofTask, Status, Verdict

REQUIRED_FIELDS = ("id", "header", "statement", "proof")
#: the REPL command when neither --repl-command nor LEAN_ENV_REPL_COMMAND gives one
DEFAULT_REPL_COMMAND = "lake env repl"


def parse_line(line: str, lineno: int) -> tuple[Optional[ProofTask], Optional[str]]:
    """Parse one input line into a task, or return ``(None, problem)``."""
    try:
        obj = json.loads(line)
    except ValueError as e:
        return None, f"line {lineno}: not valid JSON ({e.msg} at column {e.colno})"
    if not isinstance(obj, dict):
        return None, f"line {lineno}: expected a JSON object, got {type(obj).__name__}"
    missing = [k for k in REQUIRED_FIELDS if k not in obj]
    if missing:
        return None, f"line {lineno}: missing field(s) {', '.join(missing)}"
    if not isinstance(obj["id"], (str, int)):
        return None, f"line {lineno}: 'id' must be a string or an integer"
    for k in REQUIRED_FIELDS[1:]:
        if not isinstance(obj[k], str):
            return None, f"line {lineno}: '{k}' must be a string, got {type(obj[k]).__name__}"
    load_path = obj.get("load_path", [])
    if not isinstance(load_path, list) or not all(
            isinstance(e, list) and len(e) == 3 and all(isinstance(x, str) for x in e) for e in load_path):
        return None, f"line {lineno}: 'load_path' must be a list of [flag, directory, name] strings"
    return ProofTask(id=str(obj["id"]), header=obj["header"], statement=obj["statement"],
                     proof=obj["proof"], load_path=tuple(tuple(e) for e in load_path)), None


def read_input(path: Path) -> list[tuple[Optional[ProofTask], Optional[str], Optional[str]]]:
    """Each non-blank line as ``(task, problem, raw_id)``."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            task, problem = parse_line(line, lineno)
            raw_id = task.id if task else _best_effort_id(line, lineno)
            rows.append((task, problem, raw_id))
    return rows


def _best_effort_id(line: str, lineno: int) -> str:
    try:
        obj = json.loads(line)
        if isinstance(obj, dict) and isinstance(obj.get("id"), (str, int)):
            return str(obj["id"])
    except ValueError:
        pass
    return f"line-{lineno}"


def build_spec(args: argparse.Namespace) -> BackendSpec:
    """The workers' backend recipe from the command line; Lean settings fall back
    to ``LEAN_ENV_REPL_COMMAND`` / ``LEAN_ENV_PROJECT_DIR``, then to
    ``LeanConfig``'s defaults (``lake env repl`` needs a project directory)."""
    options: dict = {}
    if args.allowed_axioms is not None:
        options["allowed_axioms"] = tuple(name.strip() for name in args.allowed_axioms.split(",") if name.strip())
    if args.allow_bug_prone is not None:
        options["allow_bug_prone_features"] = tuple(
            name.strip() for name in args.allow_bug_prone.split(",") if name.strip())
    if getattr(args, "tactic_library", None):
        options["tactic_libraries"] = tuple(args.tactic_library)
    if args.backend == "lean":
        command = args.repl_command or os.environ.get(ENV_REPL_COMMAND)
        project_dir = args.project_dir or os.environ.get(ENV_PROJECT_DIR)
        options["repl_command"] = command or DEFAULT_REPL_COMMAND
        if project_dir:
            options["project_dir"] = project_dir
        if args.axiom_check:
            options["axiom_check"] = args.axiom_check
        lake_command = args.lake_command or os.environ.get(ENV_LAKE_COMMAND)
        if lake_command:
            options["lake_command"] = lake_command
        if args.writable_path:
            options["writable_paths"] = tuple(args.writable_path)
    return BackendSpec(args.backend, options)


def usage_problem(args: argparse.Namespace) -> Optional[str]:
    """What is wrong with the command line before anything runs, or ``None``."""
    if args.backend != "lean":
        lean_only = [flag for flag, value in (("--repl-command", args.repl_command),
                                              ("--project-dir", args.project_dir),
                                              ("--axiom-check", args.axiom_check),
                                              ("--lake-command", args.lake_command),
                                              ("--writable-path", args.writable_path)) if value]
        if lean_only:
            return f"{' and '.join(lean_only)} {'applies' if len(lean_only) == 1 else 'apply'} to --backend lean only"
    elif args.allow_bug_prone is not None or getattr(args, "tactic_library", None):
        return f"{'--allow-bug-prone' if args.allow_bug_prone is not None else '--tactic-library'} applies to " \
               "--backend rocq only"
    if not Path(args.input).is_file():
        return f"input file {args.input} does not exist"
    if args.workers < 1:
        return "--workers must be >= 1"
    if args.audit_fraction is not None and not 0 <= args.audit_fraction <= 1:
        return f"--audit-fraction must be between 0 and 1, got {args.audit_fraction}"
    return None


def run_verify(args: argparse.Namespace) -> int:
    import ray
    from tqdm import tqdm

    from lean_env.cache import VerdictCache
    from lean_env.pool import VerifierPool, VerifierPoolSettings

    problem = usage_problem(args)
    spec = build_spec(args)
    if problem is None:
        try:
            spec.check()
        except (ValueError, TypeError) as error:
            problem = f"cannot start the {args.backend} prover: {error}"
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    fraction = 1.0 if args.audit else (args.audit_fraction or 0.0)
    rows = read_input(Path(args.input))
    verdicts: list[Optional[Verdict]] = [None] * len(rows)
    for i, (task, problem, _) in enumerate(rows):
        if task is None:
            verdicts[i] = Verdict(Status.INVALID, reason="malformed_input", messages=[problem or ""])

    started = time.monotonic()
    ray.init(num_cpus=max(args.workers, 1), include_dashboard=False, logging_level=logging.WARNING,
             log_to_driver=False)
    try:
        settings = VerifierPoolSettings(num_workers=args.workers, timeout=args.timeout,
                                        audit_fraction=fraction, audit_log=args.audit_log)
        pool = VerifierPool(spec, settings, VerdictCache(args.cache) if args.cache else VerdictCache())
        index_of = {}
        for i, (task, _, _) in enumerate(rows):
            if task is not None:
                index_of.setdefault(id(task), i)
                pool.submit(task)
        with tqdm(total=len(rows), desc="verify", unit="proof", file=sys.stderr,
                  disable=args.quiet, initial=sum(v is not None for v in verdicts)) as bar:
            for task, verdict in pool.results():
                verdicts[index_of[id(task)]] = verdict
                bar.update(1)
        stats = pool.stats.as_dict()
        pool.shutdown()
    finally:
        ray.shutdown()
    elapsed = time.monotonic() - started

    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        for (_, _, raw_id), v in zip(rows, verdicts):
            assert v is not None
            line = {"id": raw_id, "status": v.status.value, "reason": v.reason, "messages": v.messages,
                    "seconds": round(v.seconds, 4)}
            if v.audit:
                line["audit"] = v.audit
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()

    counts = collections.Counter(v.status.value for v in verdicts if v is not None)
    summary = ", ".join(f"{counts.get(s.value, 0)} {s.value}" for s in Status)
    print(f"[lean_env] {len(rows)} proofs in {elapsed:.1f} s: {summary} "
          f"(cache hits {stats['cache_hits']}, duplicates {stats['duplicates']}, "
          f"workers restarted {stats['workers_restarted']})", file=sys.stderr)
    if fraction > 0:
        print(f"[lean_env] audited {stats['audited']}: {stats['audit_disagreements']} disagreements, "
              f"{stats['audit_inconclusive']} inconclusive", file=sys.stderr)
    return 0 if all(v is not None for v in verdicts) else 1


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lean_env", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="check a JSONL file of proofs")
    v.add_argument("--backend", choices=BACKENDS, required=True)
    v.add_argument("--input", required=True, help="JSONL with id, header, statement, proof")
    v.add_argument("--output", help="where to write verdicts (default: stdout)")
    v.add_argument("--workers", type=int, default=2, help="prover processes (default 2)")
    v.add_argument("--timeout", type=positive_float, default=60.0, help="seconds per proof (default 60)")
    v.add_argument("--repl-command", help="Lean only: command that starts the REPL "
                   "(default: $LEAN_ENV_REPL_COMMAND, else `lake env repl` run in --project-dir)")
    v.add_argument("--project-dir", help="Lean only: the Mathlib project directory the REPL runs in "
                   "(default: $LEAN_ENV_PROJECT_DIR)")
    v.add_argument("--axiom-check", choices=AXIOM_CHECKS,
                   help="Lean only: read a proof's axioms in a separate checker process that replays the proof's "
                        "environment (process, the default; needs --project-dir and lake) or from the REPL's "
                        "`#print axioms` (repl)")
    v.add_argument("--lake-command", help="Lean only: the lake command of the axiom checker and the audit "
                   "(default: $LEAN_ENV_LAKE_COMMAND, else lake)")
    v.add_argument("--writable-path", action="append", metavar="DIR", default=None,
                   help="Lean only: a directory the REPL and the checkers may write to besides their scratch "
                        "directories (repeatable; everything else is refused where Landlock exists)")
    v.add_argument("--allowed-axioms", metavar="A,B,...",
                   help="axioms a valid proof may depend on, replacing the backend's list (Rocq: none; Lean: "
                        "propext,Classical.choice,Quot.sound); '' allows none")
    v.add_argument("--allow-bug-prone", metavar="F,G",
                   help="Rocq only: accept proof features that reach Coq 8.16's known soundness bugs "
                        "(fixpoints, vm_reduction); refused by default")
    v.add_argument("--tactic-library", action="append", metavar="SENTENCE", default=None,
                   help="Rocq only: a Require sentence run after every task's header, so that proofs may use its "
                        "tactics ('From Hammer Require Import Tactics.'; repeatable); a statement whose term it "
                        "changes is refused")
    v.add_argument("--cache", help="persist verdicts to this JSONL cache file")
    v.add_argument("--quiet", action="store_true", help="no progress bar")
    audit = v.add_mutually_exclusive_group()
    audit.add_argument("--audit", action="store_true",
                       help="re-check every valid proof through the independent audit path")
    audit.add_argument("--audit-fraction", type=float, metavar="F",
                       help="re-check this share (0 to 1) of the valid proofs (default 0)")
    v.add_argument("--audit-log", metavar="PATH", help="append each audit disagreement to this JSONL file")
    args = parser.parse_args(argv)
    return run_verify(args)


if __name__ == "__main__":
    sys.exit(main())
