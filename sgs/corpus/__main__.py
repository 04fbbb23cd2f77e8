"""``python -m sgs.corpus``: build the tactic-level corpus, and summarise one.

    python -m sgs.corpus extract --out runs/corpus [--libraries stdlib,flocq] [--files 'Bool/*.v'] [--jobs 1]
    python -m sgs.corpus stats runs/corpus
    python -m sgs.corpus libraries

``extract`` is resumable: run the same command again after stopping it, and
the files already done are skipped.  Bad input (an unknown or missing
library, an unwritable ``--out``, no coqtop) is named and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from lean_env.arguments import positive_float
from sgs.corpus import extract, sources, stats

BAD_INPUT = 2


def _log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} {message}", flush=True)


def _extract(args: argparse.Namespace) -> int:
    names = sources.parse_names(args.libraries)
    where = sources.coq_where()
    libraries = [sources.find(name, where) for name in names]
    patterns = args.files or []
    if patterns and not any(library.files(patterns) for library in libraries):
        raise sources.SourceError(f"no file of {', '.join(names)} matches {' '.join(patterns)}")
    _log(f"extract into {args.out}: {', '.join(names)}, jobs {args.jobs}, seed {args.seed}")
    summary = extract.run(Path(args.out), libraries, patterns=patterns, jobs=args.jobs, seed=args.seed,
                          step_timeout=args.step_timeout, file_timeout=args.file_timeout,
                          retry_failed=args.retry_failed, log=_log)
    rate = summary.steps / summary.seconds if summary.seconds else 0.0
    _log(f"done: {summary.replayed} files replayed ({summary.failed} failed), {summary.skipped} already done; "
         f"{summary.theorems} theorems, {summary.steps} steps, {summary.bytes / 2**20:.1f} MiB in "
         f"{summary.seconds:.0f} s ({rate:.1f} steps/s)")
    for failure in summary.failures[:20]:
        _log(f"  failed: {failure[:300]}")
    return 0


def _totals() -> dict[str, int]:
    """The number of files each installed library has (for "files done / total")."""
    totals = {}
    try:
        where = sources.coq_where()
    except sources.SourceError:
        return totals
    for name in sources.LIBRARIES:
        try:
            totals[name] = len(sources.find(name, where).files())
        except sources.SourceError:
            pass
    return totals


def _stats(args: argparse.Namespace) -> int:
    out = Path(args.dir)
    if not out.is_dir():
        raise sources.SourceError(f"{out} is not a corpus directory")
    rows, unreadable = stats.collect(out)
    if args.json:
        print(json.dumps({f"{lib}/{split}": vars(row) for (lib, split), row in sorted(rows.items())}, indent=1))
    else:
        print(stats.render(rows, unreadable, _totals()))
    return 0


def _libraries(args: argparse.Namespace) -> int:
    try:
        where: Optional[Path] = sources.coq_where()
    except sources.SourceError:
        where = None
    for spec in sources.LIBRARIES.values():
        try:
            found = f"{len(sources.find(spec.name, where).files())} files" if where else "no coqc"
        except sources.SourceError:
            found = f"not installed (apt-get install {spec.package})"
        print(f"{spec.name:<16} {spec.package:<22} {found:<34} {spec.licence}\n{'':<17}{spec.why}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sgs.corpus", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    ex = commands.add_parser("extract", help="replay the libraries' proofs into a corpus directory (resumable)")
    ex.add_argument("--out", required=True, help="the corpus directory (one shard per source file)")
    ex.add_argument("--libraries", default="",
                    help=f"comma-separated, default all: {','.join(sources.LIBRARIES)}")
    ex.add_argument("--files", action="append", metavar="GLOB",
                    help="only files matching this fnmatch pattern, relative to the library's root "
                         "('Bool/Bool.v', 'Arith/*'); repeatable")
    ex.add_argument("--jobs", type=int, default=1, help="files replayed at once (one coqtop each)")
    ex.add_argument("--seed", type=int, default=0, help="the split's seed")
    ex.add_argument("--step-timeout", type=positive_float, default=120.0, help="seconds one sentence may take")
    ex.add_argument("--file-timeout", type=positive_float, default=3600.0, help="seconds one file may take")
    ex.add_argument("--retry-failed", action="store_true", help="replay again the files that failed before")
    ex.set_defaults(run=_extract)
    st = commands.add_parser("stats", help="files, theorems, steps and sizes per library and split")
    st.add_argument("dir", help="a corpus directory")
    st.add_argument("--json", action="store_true", help="machine-readable rows")
    st.set_defaults(run=_stats)
    li = commands.add_parser("libraries", help="the libraries the corpus knows, installed or not")
    li.set_defaults(run=_libraries)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "jobs", 1) < 1:
        print("error: --jobs must be at least 1", file=sys.stderr)
        return BAD_INPUT
    try:
        return args.run(args)
    except (sources.SourceError, extract.ExtractError) as e:
        print(f"error: {e}", file=sys.stderr)
        return BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
