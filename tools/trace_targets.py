"""Target files from a Lean 4 repository, for ``targets.source``.

    python tools/trace_targets.py REPO COMMIT [--out FILE] [--only-sorry]
    python tools/trace_targets.py --from-benchmark FILE --source-dir CHECKOUT [--out FILE] [--only-sorry]

The first form traces REPO (a Git URL, e.g. ``https://github.com/owner/project``,
or the path of a local Git repository) at COMMIT with LeanDojo
(``lean_dojo.trace``: ``lake build`` and LeanDojo's data extraction, cached in
``~/.cache/lean_dojo``; it needs the ``lean-dojo`` package, a Lean toolchain
(``lake`` from elan on PATH) and network access for the toolchain, the
dependencies and, for GitHub repositories, GitHub's API).  Where any of these
is missing it stops at once with one line naming what is missing (exit 2).
The second form needs none of them: it converts a LeanDojo Benchmark 4 file
(``train.json`` ...) whose theorems' sources are in CHECKOUT.

Either way every theorem of the repository itself (not of its dependencies)
becomes a target in the project's Lean format, one JSON object a line:
``id``, ``header``, ``theorem`` (ending in ``:= by``), plus ``url``,
``commit``, ``file_path``, ``full_name``, ``start``, ``end``.  The rules, and
the reasons a theorem that cannot be stated on its own is skipped, are in
:mod:`sgs.state.leandojo`.  ``--only-sorry`` keeps the theorems whose proofs
contain ``sorry``.  The skipped theorems go to ``FILE`` with
``.skipped.jsonl`` for its extension, each with its reason; the last line
printed counts both.  Exit status: 0 written, 1 tracing failed, 2 usage error
or a missing prerequisite.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import socket
import sys
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Iterable, NoReturn
from urllib.parse import urlparse

from sgs.state.leandojo import (LeanSourceFile, LeanTarget, Skipped, collect, convert, convert_benchmark,
                                reason_counts, traced_theorem_source)
from sgs.state.targets import TargetError, read_rows

EXIT_FAILED = 1
EXIT_USAGE = 2
#: seconds to wait for a host name to resolve before calling the network unreachable
DNS_TIMEOUT_S = 5.0


class UsageError(Exception):
    """A command line or a machine this command cannot work with: one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line and exit 2 (no usage block)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="tools/trace_targets.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", nargs="?", help="Git URL or local Git repository of a Lean 4 project")
    parser.add_argument("commit", nargs="?", help="the commit (hash, tag or branch) to trace")
    parser.add_argument("--out", type=Path, help="the target file to write (default: <repo name>.targets.jsonl)")
    parser.add_argument("--only-sorry", action="store_true", help="only theorems whose proofs contain `sorry`")
    parser.add_argument("--from-benchmark", type=Path, metavar="FILE",
                        help="convert this LeanDojo Benchmark 4 file instead of tracing (no Lean needed)")
    parser.add_argument("--source-dir", type=Path, metavar="CHECKOUT",
                        help="with --from-benchmark: a checkout of the traced repository at its commit")
    args = parser.parse_args(argv)
    if args.from_benchmark is not None:
        if args.repo is not None:
            raise UsageError("give either REPO COMMIT (to trace) or --from-benchmark FILE, not both")
        if args.source_dir is None:
            raise UsageError("--from-benchmark needs --source-dir CHECKOUT (where the theorems' files are)")
        if not args.from_benchmark.is_file():
            raise UsageError(f"--from-benchmark {args.from_benchmark}: no such file")
        if not args.source_dir.is_dir():
            raise UsageError(f"--source-dir {args.source_dir}: no such directory")
    else:
        if args.repo is None or args.commit is None:
            raise UsageError("give REPO and COMMIT to trace, or --from-benchmark FILE --source-dir CHECKOUT")
        if args.source_dir is not None:
            raise UsageError("--source-dir applies to --from-benchmark only")
        if not _is_url(args.repo) and not (Path(args.repo).expanduser() / ".git").exists():
            raise UsageError(f"REPO {args.repo!r} is neither a Git URL nor a local Git repository")
    if args.out is None:
        name = Path(urlparse(args.repo).path if args.repo else args.from_benchmark.name).name
        args.out = Path(f"{name.removesuffix('.git').removesuffix('.json') or 'leandojo'}.targets.jsonl")
    return args


def _is_url(repo: str) -> bool:
    return repo.startswith(("https://", "http://", "git@", "ssh://"))


def _resolves(host: str) -> bool:
    """Whether ``host`` has an address, waiting at most ``DNS_TIMEOUT_S``."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        pool.submit(socket.getaddrinfo, host, 443).result(timeout=DNS_TIMEOUT_S)
        return True
    except (OSError, FutureTimeout):
        return False
    finally:
        pool.shutdown(wait=False)


def missing_for_trace(repo: str) -> list[str]:
    """What this machine lacks to trace ``repo``, in words (empty: nothing)."""
    missing = []
    if importlib.util.find_spec("lean_dojo") is None:
        missing.append("the lean-dojo package (pip install 'sgs[lean]')")
    if shutil.which("git") is None:
        missing.append("git (not on PATH)")
    if shutil.which("lake") is None:
        missing.append("a Lean toolchain (`lake` is not on PATH; install elan, https://github.com/leanprover/elan)")
    if _is_url(repo):
        host = urlparse(repo).hostname or repo.partition("@")[2].partition(":")[0]
        hosts = [host, "api.github.com"] if host == "github.com" else [host]
        unreachable = [h for h in hosts if not _resolves(h)]
        if unreachable:
            missing.append(f"network access to {' and '.join(unreachable)} (the name does not resolve)")
    return missing


def traced_results(repo_arg: str, commit: str, only_sorry: bool) -> Iterable[LeanTarget | Skipped]:
    """Trace the repository with LeanDojo and convert each of its own theorems."""
    if not _is_url(repo_arg):
        # LeanDojo's remote cache holds traces of GitHub repositories only; asking it about a
        # local repository is a network round trip that cannot succeed.
        os.environ.setdefault("DISABLE_REMOTE_CACHE", "1")
    from lean_dojo import LeanGitRepo, trace

    repo = LeanGitRepo(repo_arg if _is_url(repo_arg) else str(Path(repo_arg).expanduser().resolve()), commit)
    traced = trace(repo)
    files: dict[str, LeanSourceFile] = {}
    for theorem in traced.get_traced_theorems():
        if (theorem.repo.url, theorem.repo.commit) != (repo.url, repo.commit):
            continue  # a theorem of a dependency (Mathlib, ...), not of this repository
        path = str(theorem.file_path)
        if path not in files:
            files[path] = LeanSourceFile("\n".join(theorem.traced_file.lean_file.code))
        try:
            source = traced_theorem_source(theorem, files[path])
        except Exception as error:  # LeanDojo's AST has no proof node for this declaration
            yield Skipped(theorem.theorem.full_name, path, "no_statement", f"LeanDojo locates no proof: {error}")
            continue
        yield convert(source, only_sorry)


def write(out: Path, targets: list[LeanTarget], skipped: list[Skipped], only_sorry: bool) -> str:
    """Write the target file and the skipped list beside it; the summary line."""
    out.parent.mkdir(parents=True, exist_ok=True)
    skipped_path = out.with_name(out.name.removesuffix(".jsonl") + ".skipped.jsonl")
    left_out = [s for s in skipped if s.reason == "no_sorry"]
    listed = [s for s in skipped if s.reason != "no_sorry"]
    for path, rows in ((out, [t.to_json() for t in targets]), (skipped_path, [s.to_json() for s in listed])):
        partial = path.with_name(path.name + ".partial")
        partial.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
        partial.replace(path)
    line = f"wrote {len(targets)} targets to {out}; skipped {len(listed)}"
    line += f" ({reason_counts(listed)}), listed in {skipped_path}" if listed else f" (the list: {skipped_path})"
    if only_sorry:
        line += f"; {len(left_out)} theorems without `sorry` left out"
    return line


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        if args.from_benchmark is not None:
            entries = read_rows(args.from_benchmark)
            targets, skipped = convert_benchmark(entries, str(args.from_benchmark), args.source_dir,
                                                 args.only_sorry)
        else:
            missing = missing_for_trace(args.repo)
            if missing:
                raise UsageError(f"cannot trace {args.repo} here: missing {'; '.join(missing)}. Without Lean, "
                                 f"convert a LeanDojo Benchmark 4 file: --from-benchmark FILE --source-dir CHECKOUT")
            try:
                targets, skipped = collect(traced_results(args.repo, args.commit, args.only_sorry))
            except Exception as error:  # lake, git, GitHub: whatever failed, say it in one line
                print(f"trace_targets: tracing {args.repo} at {args.commit} failed: {type(error).__name__}: "
                      f"{str(error).strip().splitlines()[-1] if str(error).strip() else ''}", file=sys.stderr)
                return EXIT_FAILED
    except (UsageError, TargetError, ValueError) as error:
        print(f"trace_targets: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(write(args.out, targets, skipped, args.only_sorry))
    return 0


if __name__ == "__main__":
    sys.exit(main())
