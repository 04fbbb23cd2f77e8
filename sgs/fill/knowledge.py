"""The project's own proofs as tactic steps, for the k-NN proposer to learn from.

A Rocq user's prover learns from the proofs they already wrote (Tactician's
setting): every file of the built project is replayed through ``coqtop``
(:func:`sgs.corpus.replay.replay_file`, the corpus's own replay, with the
project's load path bound to its build directory), and the steps of its
finished proofs are written as corpus shards of the ``train`` split, which
:data:`sgs.prover.accuracy.PREDICTORS`' ``knn`` builds its memory from.  An
admitted proof gives no step, so a lemma being filled never teaches its own
proof.  The shards are kept per version of the sources (beside the build),
so a second run on the same project replays nothing.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from sgs.corpus.records import read_meta, read_theorems, shard_path, shards, write_shard
from sgs.corpus.replay import replay_file
from sgs.corpus.sources import Library, LibrarySpec
from sgs.prover.steps import theorem_steps
from sgs.state.rocq_project import Project, source_digest

__all__ = ["project_steps"]


@dataclass(frozen=True)
class _ProjectLibrary(Library):
    """A built project seen as a corpus library: its modules named and bound as the project binds them."""

    project: Project | None = None

    def module_of(self, file: str) -> str:
        assert self.project is not None
        return self.project.logical_module(file)

    def coqtop_argv(self, coqtop: str, file: str) -> list[str]:
        assert self.project is not None
        argv = [coqtop, "-emacs", "-q", "-native-compiler", "no", "-w", "-all"]
        for item in self.project.load_path:
            argv += [item.flag, str((self.root / item.directory).resolve()), item.name]
        return [*argv, "-top", self.module_of(file)]


def project_steps(project: Project, build_dir: Path, *, coqtop: str = "coqtop") -> tuple[Path, int]:
    """The corpus directory of the project's proofs (replayed once per version
    of its sources) and how many tactic steps it holds."""
    out = build_dir / ".sgs_fill_steps" / source_digest(build_dir)[:16]
    spec = LibrarySpec(name="project", location=str(build_dir), prefix=project.load_path[0].name,
                       package="", licence="", why="the project being filled")
    library = _ProjectLibrary(spec, build_dir, project)
    for file in project.sources:
        path = shard_path(out, library.name, file)
        if path.is_file() and read_meta(path) is not None:
            continue
        meta, theorems = replay_file(library, file, coqtop=coqtop, split="train")
        write_shard(path, meta, theorems)
    # older versions' shards are of no use once the sources changed
    for stale in (build_dir / ".sgs_fill_steps").iterdir():
        if stale != out:
            shutil.rmtree(stale, ignore_errors=True)
    steps = sum(len(theorem_steps(t)) for shard in shards(out) for t in read_theorems(shard))
    return out, steps
