"""Target files from a Rocq (Coq) project, for ``targets.source``.

    python tools/trace_rocq_targets.py PROJECT_DIR --out FILE [--build-dir DIR]
        [--held-out-fraction F] [--seed N] [--jobs N] [--allow-project-axioms]

Reads the project's ``_CoqProject`` (or old-style ``Make``) file, reporting
every item it does not use (``-extra`` make rules, OCaml files, ``-arg``
options, ...); builds the project with ``coq_makefile`` and ``make`` in a
build directory outside the project folder, which may be read-only (default
``~/.cache/sgs/rocq_projects/<folder>-<digest>``, one per version of the
sources; ``.vo`` files already up to date there are reused); and writes one
target a line for every ``Theorem``/``Lemma``/``Remark``/``Fact``/
``Corollary``/``Proposition``/``Example`` with a proof that can be checked in
its file's own context: ``id``, ``header`` (the file's text before the
declaration), ``statement``, ``proof`` (the human proof, never shown to the
Solver), ``held_out``, ``load_path``, ``project`` (build directory and source
digest) and ``source`` (folder, file, line).  The rules and every skip reason
are in :mod:`sgs.state.rocq_trace` and :mod:`sgs.state.rocq_declarations`;
the skipped declarations go to ``FILE`` with ``.skipped.jsonl`` for its
extension, each with its reason, and the summary printed counts them.

``--allow-project-axioms`` (off by default) also keeps the targets whose
human proofs need only the project's own ``Axiom``/``Parameter`` declarations
(a functor's parameters included, never an ``Admitted`` lemma), each with
those names in its ``allowed_axioms``; the tool prints the
``prover.allowed_axioms`` setting a run on them needs.

``--held-out-fraction`` (default 0.2) holds out that share of the files
(drawn with ``--seed``): all the targets of a held-out file are held out, so
evaluation is on files the Solver never trained on.

Then ``python -m sgs targets.source=FILE`` runs self-play on them and
``python -m sgs.evaluate targets.source=FILE ...`` measures pass@k; see
docs/rocq_projects.md.

Exit status: 0 written; 2 for a folder that is not a Rocq project, a project
that does not build (each failing file named with Coq's error), a file that
cannot be split into sentences, or a bad command line.  Both files are
written only when everything succeeded, each atomically.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from lean_env.rocq.config import RocqConfig, RocqConfigError
from sgs.state.files import atomic_write, json_line
from sgs.state.rocq_project import BuildError, ProjectError, build, default_build_dir, read_project
from sgs.state.rocq_trace import trace

EXIT_USAGE = 2


class UsageError(Exception):
    """A command line this tool cannot work with: one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line and exit 2 (no usage block)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="tools/trace_rocq_targets.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path, help="the project folder (with a _CoqProject or Make file)")
    parser.add_argument("--out", type=Path, help="the target file to write (default: <folder>.targets.jsonl)")
    parser.add_argument("--build-dir", type=Path, help="where to build (default: ~/.cache/sgs/rocq_projects/...)")
    parser.add_argument("--held-out-fraction", type=float, default=0.2,
                        help="share of the files whose targets are held out (default 0.2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the held-out draw (default 0)")
    parser.add_argument("--jobs", type=int, default=2, help="parallel make jobs (default 2)")
    parser.add_argument("--allow-project-axioms", action="store_true",
                        help="keep targets whose proofs need only the project's own Axiom/Parameter "
                             "declarations, naming them in the target's allowed_axioms (never an Admitted lemma)")
    args = parser.parse_args(argv)
    if not 0 <= args.held_out_fraction < 1:
        raise UsageError(f"--held-out-fraction must be in [0, 1), got {args.held_out_fraction}")
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    if args.out is None:
        args.out = Path(f"{args.project.resolve().name}.targets.jsonl")
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        project = read_project(args.project)
        for item in project.ignored:
            print(f"{project.project_file}: not used: {item}", file=sys.stderr)
        build_dir = (args.build_dir or default_build_dir(project)).expanduser().resolve()
        build(project, build_dir, jobs=args.jobs)
        result = trace(project, build_dir, held_out_fraction=args.held_out_fraction, seed=args.seed,
                       allow_project_axioms=args.allow_project_axioms)
    except (UsageError, ProjectError, BuildError, RocqConfigError) as error:
        print(f"trace_rocq_targets: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    skipped_path = args.out.with_name(args.out.name.removesuffix(".jsonl") + ".skipped.jsonl")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(skipped_path, b"".join(json_line(s.to_json()) for s in result.skipped))
    atomic_write(args.out, b"".join(json_line(t) for t in result.targets))
    held = sum(t["held_out"] for t in result.targets)
    counts = ", ".join(f"{reason}: {n}" for reason, n in result.reason_counts().most_common())
    print(f"wrote {len(result.targets)} targets ({held} held out) to {args.out}, built in {build_dir}; "
          f"skipped {len(result.skipped)}" + (f" ({counts}), listed in {skipped_path}" if counts else ""))
    if result.allowed_axioms:
        # the verifier allows axioms per run, not per target: this is the setting such a run needs
        print("the targets rely on project axioms; run with prover.allowed_axioms=["
              + ",".join(result.allowed_axioms) + "]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
