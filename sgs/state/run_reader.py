"""Reading a run directory, read-only: the one place its reading rules live.

:class:`RunReader` opens a run directory without taking its lock and never
writes to it, so it may read a run that another process is still writing.
The store (:mod:`sgs.state.store`) loads a run through it in strict mode,
where damage raises :class:`~sgs.state.files.StoreError`; the report
(:mod:`sgs.analysis.report`) reads in lenient mode, where each problem
becomes a note in :attr:`RunReader.notes` and the damaged part is left out.

The rules, for both:

* the config is ``config.yaml`` with the last accepted change of
  ``config_changes.jsonl`` over it;
* only phases with a commit marker (``iter_NNNN/phase_<phase>.done``) count,
  in the order of their sequence numbers; a partial log is never read;
* the solved registry is rebuilt from the proofs each marker admitted;
* a finished log must hold the records its marker counts;
* a last line without its newline (a killed or still running writer) is
  never a record.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sgs.state.files import Problems, StoreError, jsonl_rows
from sgs.state.records import (
    RECORD_TYPES,
    Record,
    RecordError,
    Target,
    check_fields,
    record_from_line,
    typed_field,
)
from sgs.state.solved import MAX_PROOFS, SolvedRegistry, StoredProof

CONFIG_FILE = "config.yaml"
CONFIG_CHANGES_FILE = "config_changes.jsonl"
TARGETS_FILE = "targets.jsonl"
METRICS_FILE = "metrics.jsonl"
#: Names the best checkpoint of a role: ``checkpoints/<role>/best`` holds ``iter_NNNN``.
BEST_FILE = "best"

ITER_RE = re.compile(r"iter_(\d+)")


def is_created_run(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` holds a created run (its ``config.yaml`` is written last at creation)."""
    return (Path(run_dir) / CONFIG_FILE).is_file()


def iter_name(iteration: int) -> str:
    """The directory name of an iteration (``iter_0003``)."""
    return f"iter_{iteration:04d}"


@dataclass(frozen=True)
class PhaseMarker:
    """The commit record of one finished phase (``phase_<name>.done``)."""

    iteration: int
    """The iteration the phase belongs to."""
    phase: str
    """The phase name the loop used."""
    seq: int
    """Position of this commit among all commits of the run (0, 1, 2, ...)."""
    finished_at: str
    """UTC time of the commit, ISO 8601 (for people; nothing depends on it)."""
    records: dict[str, int]
    """Records per type in the phase's log; empty when the phase kept no log."""
    new_proofs: list[StoredProof]
    """The verified target proofs the solved registry admitted at this commit."""

    @property
    def generations(self) -> int:
        # One Attempt per Solver sample, one Conjecture per Conjecturer sample.
        return self.records.get("attempt", 0) + self.records.get("conjecture", 0)

    def to_json(self) -> dict:
        return {
            "iteration": self.iteration,
            "phase": self.phase,
            "seq": self.seq,
            "finished_at": self.finished_at,
            "records": self.records,
            "new_proofs": [p.to_json() for p in self.new_proofs],
        }

    @classmethod
    def from_json(cls, d: Any) -> "PhaseMarker":
        check_fields(d, cls)
        records = typed_field(d, "records", dict)
        if not all(k in RECORD_TYPES and type(v) is int and v >= 0 for k, v in records.items()):
            raise RecordError(f"field 'records': expected counts per record type {sorted(RECORD_TYPES)}")
        new_proofs = typed_field(d, "new_proofs", list)
        return cls(
            iteration=typed_field(d, "iteration", int),
            phase=typed_field(d, "phase", str),
            seq=typed_field(d, "seq", int),
            finished_at=typed_field(d, "finished_at", str),
            records=records,
            new_proofs=[StoredProof.from_json(p) for p in new_proofs],
        )


class RunReader:
    """One run directory, read without its lock and never written.

    ``strict``: damage raises :class:`StoreError` (the store's loading);
    otherwise it is noted in :attr:`notes` and left out (the report's).
    """

    def __init__(self, run_dir: str | Path, *, strict: bool):
        self.run_dir = Path(run_dir)
        self.problems = Problems(strict=strict)

    @property
    def notes(self) -> list[str]:
        """The problems met so far, each saying what was left out (lenient mode)."""
        return self.problems.notes

    # -- the run's own files -------------------------------------------------

    def config(self) -> dict:
        """The config the run last ran with: ``config.yaml`` plus accepted
        changes; empty (lenient) when there is none."""
        path = self.run_dir / CONFIG_FILE
        if not path.is_file():
            self.problems(f"{self.run_dir}: no {CONFIG_FILE}", "the run is labelled by its directory name")
            return {}
        try:
            config = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as e:
            self.problems(f"{path}: not valid YAML ({e})", "ignored")
            return {}
        if not isinstance(config, dict):
            self.problems(f"{path}: expected a mapping at the top level, got {type(config).__name__}", "ignored")
            return {}
        changes = self.run_dir / CONFIG_CHANGES_FILE
        if changes.exists():
            for lineno, obj in jsonl_rows(changes, self.problems):
                if not isinstance(obj, dict) or not isinstance(obj.get("config"), dict):
                    self.problems(f"{changes}:{lineno}: expected an object with a 'config' mapping", "line ignored")
                    continue
                config = obj["config"]
        return config

    def targets(self) -> list[Target]:
        """Every target of the run, in the run's order (held-out ones included)."""
        path = self.run_dir / TARGETS_FILE
        if not path.is_file():
            self.problems(f"{self.run_dir}: no {TARGETS_FILE}", "no per-target view")
            return []
        targets = []
        for lineno, obj in jsonl_rows(path, self.problems):
            try:
                targets.append(Target.from_json(obj))
            except RecordError as e:
                self.problems(f"{path}:{lineno}: {e}", "target ignored")
        return targets

    def metrics(self) -> list[dict]:
        """The metrics lines, oldest first (none before the first iteration ends)."""
        path = self.run_dir / METRICS_FILE
        if not path.is_file():
            return []
        metrics: list[dict] = []
        for lineno, obj in jsonl_rows(path, self.problems):
            if not isinstance(obj, dict) or not isinstance(obj.get("iteration"), int):
                self.problems(f"{path}:{lineno}: expected an object with an integer 'iteration'", "line ignored")
            elif metrics and obj["iteration"] <= metrics[-1]["iteration"]:
                self.problems(f"{path}:{lineno}: iteration {obj['iteration']} does not follow "
                              f"{metrics[-1]['iteration']}", "line ignored")
            else:
                metrics.append(obj)
        return metrics

    # -- checkpoints -----------------------------------------------------------

    def checkpoint_dir(self, role: str, iteration: int) -> Path:
        """Where ``role``'s checkpoint after ``iteration`` lives (it may not exist).
        Whether it is complete is told by the phase that wrote it being done."""
        return self.run_dir / "checkpoints" / role / iter_name(iteration)

    def checkpoint_iterations(self, role: str) -> list[int]:
        """Iterations that have a checkpoint directory for ``role``, ascending."""
        root = self.run_dir / "checkpoints" / role
        if not root.is_dir():
            return []
        return sorted(int(m.group(1)) for p in root.iterdir() if p.is_dir() and (m := ITER_RE.fullmatch(p.name)))

    def best_checkpoint(self, role: str) -> int | None:
        """The iteration whose checkpoint is flagged best for ``role`` (``checkpoints/<role>/best``), if any."""
        pointer = self.run_dir / "checkpoints" / role / BEST_FILE
        if not pointer.exists():
            return None
        text = pointer.read_text().strip()
        m = ITER_RE.fullmatch(text)
        if m is None:
            raise StoreError(f"{pointer}: expected a checkpoint name like 'iter_0003', got {text!r}")
        return int(m.group(1))

    # -- committed phases ----------------------------------------------------

    def markers(self) -> list[PhaseMarker]:
        """The run's finished phases, in commit order."""
        markers = []
        for path in sorted(self.run_dir.glob("iter_*/phase_*.done")):
            try:
                marker = PhaseMarker.from_json(json.loads(path.read_bytes()))
            except ValueError as e:  # JSONDecodeError and RecordError
                self.problems(f"{path}: damaged phase marker ({e})", "the phase is left out")
                continue
            m = ITER_RE.fullmatch(path.parent.name)
            if m is None or int(m.group(1)) != marker.iteration or path.name != f"phase_{marker.phase}.done":
                self.problems(f"{path}: marker says iteration {marker.iteration}, phase {marker.phase!r}",
                              "the phase is left out")
                continue
            markers.append(marker)
        seqs = sorted(m.seq for m in markers)
        if seqs != list(range(len(seqs))):
            self.problems(f"{self.run_dir}: phase markers have inconsistent sequence numbers {seqs}",
                          "the phases are read in the order of their numbers")
        return sorted(markers, key=lambda m: m.seq)

    def marker_path(self, iteration: int, phase: str) -> Path:
        return self.run_dir / iter_name(iteration) / f"phase_{phase}.done"

    def log_path(self, iteration: int, phase: str) -> Path:
        """The finished record log of a phase."""
        return self.run_dir / iter_name(iteration) / f"{phase}.jsonl"

    def solved_registry(self, targets: Sequence[Target], markers: Sequence[PhaseMarker],
                        counting: str = "distinct", max_proofs: int = MAX_PROOFS) -> SolvedRegistry:
        """The solved registry as of ``markers``: the proofs each one admitted,
        in commit order; ``counting`` and ``max_proofs`` are how it admits new
        ones (the run's ``method.ei_solved_count`` and ``max_proofs_per_target``)."""
        registry = SolvedRegistry(targets, max_proofs, counting=counting)
        for marker in markers:
            try:
                registry.add(marker.new_proofs)
            except (ValueError, KeyError) as e:
                self.problems(f"{self.marker_path(marker.iteration, marker.phase)}: {e}",
                              "its proofs are left out of the solved registry")
        return registry

    def records(self, marker: PhaseMarker, kinds: Collection[str] | None = None) -> list[Record]:
        """The records of a finished phase's log, in log order: all of them,
        or those of the record types named in ``kinds`` (the others are
        counted, never parsed)."""
        if not any(marker.records.values()):
            return []
        path = self.log_path(marker.iteration, marker.phase)
        if not path.exists():
            self.problems(f"{path} is missing but {self.marker_path(marker.iteration, marker.phase)} "
                          "says it holds records", "the phase's records are left out")
            return []
        records: list[Record] = []
        counts: Counter[str] = Counter()
        for lineno, obj in jsonl_rows(path, self.problems):
            name = next(iter(obj), None) if isinstance(obj, dict) and len(obj) == 1 else None
            if kinds is not None and name in RECORD_TYPES and name not in kinds:
                counts[name] += 1
                continue
            try:
                record = record_from_line(obj)
            except RecordError as e:
                self.problems(f"{path}:{lineno}: {e}", "record ignored")
                continue
            counts[name] += 1
            records.append(record)
        if any(counts[name] != marker.records.get(name, 0) for name in RECORD_TYPES):
            self.problems(f"{path}: holds {dict(sorted(counts.items()))} records but its marker recorded "
                          f"{marker.records}; the log is damaged", "the records found are kept")
        return records

    def unfinished_logs(self) -> list[str]:
        """The partial logs of phases that have not committed, relative to the run directory."""
        return sorted(p.relative_to(self.run_dir).as_posix() for p in self.run_dir.glob("iter_*/*.partial.jsonl"))


__all__ = ["CONFIG_CHANGES_FILE", "CONFIG_FILE", "ITER_RE", "METRICS_FILE", "PhaseMarker", "RunReader",
           "StoreError", "TARGETS_FILE", "is_created_run", "iter_name"]
