"""The run directory: everything a run records, kept so that a killed run
resumes where it stopped with no verdict lost and no generation counted twice.

Layout (``iter_0003`` is iteration 3; iterations count from 0)::

    <run_dir>/
      .lock                       flock held by the one process driving the run
      config.yaml                 the resolved config, written once at creation
      config_changes.jsonl        one line per resume that accepted a changed config
      targets.jsonl               the targets, copied once at creation
      metrics.jsonl               one line per iteration
      iter_0003/
        prove.partial.jsonl       records of a phase still running, one per line
        prove.jsonl               the same file, renamed when the phase finished
        phase_prove.done          the phase's commit marker, written last
        prove.samples.jsonl       samples of the running phase (sgs.state.sample_cache), deleted at its commit
      checkpoints/solver/iter_0003/   one checkpoint per role and iteration
      checkpoints/solver/best         names the best checkpoint directory

How a phase commits.  ``begin_phase`` opens ``<phase>.partial.jsonl`` and
every record is appended and flushed as it arrives, so a killed process loses
at most the line it was writing.  ``mark_done`` fsyncs the log, renames it to
``<phase>.jsonl`` and then atomically writes ``phase_<phase>.done``: a JSON
summary (record counts, the proofs the solved registry admitted).  Only phases
with a marker count.  The generation counter, the solved registry and the
readers are all derived from markers and finished logs, never from a partial
log, so an unfinished phase contributes nothing until it commits, and then
exactly once.

Resuming an unfinished phase.  ``begin_phase`` on a phase that has a partial
log (or a renamed log with no marker: killed between the two steps) drops a
torn last line with a warning and keeps every complete record: the caller finds
them in ``PhaseLog.recovered`` and does only the remaining work.  Writing a
record whose id the log already holds is refused, which is what keeps a redone
phase from counting a sample twice.

Files are only appended to or created by writing a temporary file in the same
directory, fsyncing it and ``os.replace``-ing it into place.  The one exception
is cutting a torn last line (bytes after the last newline, never a complete
record) off a file before appending to it again.
"""

from __future__ import annotations

import fcntl
import fnmatch
import json
import logging
import os
import re
import shutil
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from sgs.state.records import (
    RECORD_NAMES,
    RECORD_TYPES,
    Attempt,
    Conjecture,
    ConjectureScore,
    Record,
    RecordError,
    Target,
    check_fields,
    record_from_line,
    record_key,
    record_to_line,
    typed_field,
)
from sgs.state.solved import SolvedRegistry, StoredProof

log = logging.getLogger(__name__)

CONFIG_FILE = "config.yaml"
CONFIG_CHANGES_FILE = "config_changes.jsonl"
TARGETS_FILE = "targets.jsonl"
METRICS_FILE = "metrics.jsonl"
LOCK_FILE = ".lock"
BEST_FILE = "best"

# Config keys (dotted paths, fnmatch patterns) that may differ when a run is
# resumed without allow_changes: how many iterations it runs, where its
# directory now lives, where metrics go, which Ray cluster it joins and how
# many proof checkers it uses, how actors are placed, whether engines sleep
# during training, and the periodic evaluation.  None of them changes what an
# iteration computes.
RESUMABLE_CONFIG_KEYS = (
    "iterations",
    "run_dir",
    "logging.*",
    "resources.ray_address",
    "resources.num_cpus",
    "resources.num_gpus",
    "resources.verifier_workers",
    "resources.cpus_per_verifier",
    "resources.*_placement",
    "resources.verifier_node_resource",
    "resources.sleep_engines_during_training",
    "resources.engine_sleep_level",
    "resources.engine_heartbeat_timeout_s",
    "resources.engine_restart_timeout_s",
    "evaluation.k",
    "evaluation.ks",
    "evaluation.samples_per_problem",
    "evaluation.confidence",
    "evaluation.every",
    "evaluation.output_dir",
    "evaluation.checkpoint",
)

# Every metrics line must carry at least these keys.
REQUIRED_METRICS = (
    "iteration",
    "generations",
    "cumulative_solve_rate",
    "pass_at_k",
    "conjectures_kept",
    "mean_guide_score",
    "system_error_rate",
)

# Prover messages kept per verdict (characters, all messages together): enough
# to read the first errors, bounded so a runaway error dump cannot bloat a log.
VERDICT_MESSAGES_CAP = 4000

_NAME_RE = re.compile(r"[a-z][a-z0-9_]*")
_ITER_RE = re.compile(r"iter_(\d+)")


class StoreError(Exception):
    """The run directory is damaged, inconsistent, in use, or incompatible
    with what the caller asked for."""


# ---------------------------------------------------------------------------
# File primitives


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old file or the
    new one, never a mix, even if the process is killed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _append_line(path: Path, obj: Any) -> None:
    """Append one JSON line and fsync (for the small, rare history files)."""
    line = _json_line(obj)  # fails on unserialisable values before the file is touched
    with open(path, "ab") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def _json_line(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _jsonl_rows(path: Path, *, repair_torn_tail: bool) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, parsed object)`` for each line of a JSONL file.

    A last line without its newline is what a writer killed mid-write leaves.
    With ``repair_torn_tail`` it is cut off (with a warning) so the file can be
    appended to again; otherwise it means the file is damaged.  Any other
    unparsable line is damage and raises, naming the file and line.
    """
    good_end = 0
    torn = None
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                torn = lineno, len(raw)
                break
            try:
                obj = json.loads(raw)
            except ValueError as e:
                raise StoreError(f"{path}:{lineno}: not valid JSON ({e})") from None
            good_end += len(raw)
            yield lineno, obj
    if torn is not None:
        lineno, size = torn
        if not repair_torn_tail:
            raise StoreError(f"{path}:{lineno}: incomplete last line ({size} bytes, no newline); the file is damaged")
        log.warning("%s:%d: dropping an incomplete last line (%d bytes) left by a killed writer", path, lineno, size)
        os.truncate(path, good_end)


def _iter_name(iteration: int) -> str:
    return f"iter_{iteration:04d}"


def _check_name(kind: str, name: str) -> None:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ValueError(f"{kind} name must match {_NAME_RE.pattern} (it becomes a file name), got {name!r}")


def _check_iteration(iteration: int) -> None:
    if not isinstance(iteration, int) or isinstance(iteration, bool) or iteration < 0:
        raise ValueError(f"iteration must be an int >= 0, got {iteration!r}")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ---------------------------------------------------------------------------
# Config comparison


def _plain(config: Mapping[str, Any]) -> dict:
    """The config as plain JSON data (tuples become lists), or a clear error."""
    try:
        plain = json.loads(json.dumps(config))
    except (TypeError, ValueError) as e:
        raise ValueError(f"config must be plain data (dicts, lists, numbers, strings): {e}") from None
    if not isinstance(plain, dict):
        raise ValueError(f"config must be a mapping, got {type(config).__name__}")
    return plain


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in d.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


_ABSENT = object()


def _config_diff(old: dict, new: dict) -> dict[str, tuple[Any, Any]]:
    """``{dotted key: (old value, new value)}`` for every key that differs."""
    a, b = _flatten(old), _flatten(new)
    diff = {}
    for key in sorted(a.keys() | b.keys()):
        va, vb = a.get(key, _ABSENT), b.get(key, _ABSENT)
        # Compare canonical JSON text: NaN then equals NaN, and dict key order does not matter.
        if va is _ABSENT or vb is _ABSENT or json.dumps(va, sort_keys=True) != json.dumps(vb, sort_keys=True):
            diff[key] = (va, vb)
    return diff


def _show(value: Any) -> str:
    text = "<absent>" if value is _ABSENT else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def cap_messages(messages: Sequence[str], cap: int = VERDICT_MESSAGES_CAP) -> list[str]:
    """Keep messages in order until ``cap`` characters; cut the one that
    crosses it and say how much was dropped."""
    kept, left = [], cap
    for i, message in enumerate(messages):
        if len(message) > left:
            dropped = sum(len(m) for m in messages[i:]) - left
            kept.append(message[:left] + f" ... [{dropped} characters cut by the store]")
            break
        kept.append(message)
        left -= len(message)
    return kept


# ---------------------------------------------------------------------------
# Phase markers


@dataclass(frozen=True)
class _Marker:
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
    def from_json(cls, d: Any) -> "_Marker":
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


# ---------------------------------------------------------------------------
# Phase log


class PhaseLog:
    """The streaming record log of one running phase (``Store.begin_phase``).

    Records are appended and flushed one by one; they count only once the
    store's ``mark_done`` commits the phase.  One writer: append from one thread.
    """

    def __init__(self, path: Path, iteration: int, phase: str, targets: Mapping[str, Target], recovered: list[Record]):
        self.path = path
        self.iteration = iteration
        self.phase = phase
        self.recovered = recovered
        """Complete records that an earlier, killed run of this phase wrote.
        They are part of this log already: skip their work, do not rewrite them."""
        self._targets = targets
        self._ids: dict[str, set[str]] = {name: set() for name in RECORD_TYPES}
        self._target_proofs: list[StoredProof] = []
        for record in recovered:
            self._register(record)
        self._file = open(path, "ab")

    def append(self, record: Record) -> None:
        """Append one record and flush it to the operating system (it survives
        a killed process; ``mark_done`` fsyncs the file for power loss)."""
        self._check(record)
        if isinstance(record, Attempt) and record.verdict is not None:
            record = replace(record, verdict=replace(record.verdict, messages=cap_messages(record.verdict.messages)))
        self._file.write(_json_line(record_to_line(record)))
        self._file.flush()
        self._register(record)

    def ids(self, record_type: str) -> frozenset[str]:
        """Ids of the records of ``record_type`` (``attempt``, ``conjecture``,
        ``conjecture_score``) this log holds, recovered ones included."""
        return frozenset(self._ids[record_type])

    def counts(self) -> dict[str, int]:
        """Records per type in this log, recovered ones included."""
        return {name: len(ids) for name, ids in self._ids.items()}

    def verified_target_proofs(self) -> list[StoredProof]:
        """The proofs of this log's verified attempts on targets, in log order."""
        return list(self._target_proofs)

    def _check(self, record: Record) -> None:
        """Raise ValueError if ``record`` cannot go into this log."""
        if type(record) not in RECORD_NAMES:
            raise ValueError(f"cannot store a {type(record).__name__}; expected one of {sorted(RECORD_TYPES)}")
        if isinstance(record, (Attempt, Conjecture)) and record.iteration != self.iteration:
            raise ValueError(f"{type(record).__name__} {record.id!r} is from iteration {record.iteration}, "
                             f"this is the log of iteration {self.iteration}")
        if isinstance(record, Attempt) and record.problem_kind == "target" and record.problem_id not in self._targets:
            raise ValueError(f"attempt {record.id!r} is on unknown target {record.problem_id!r}")
        if isinstance(record, Conjecture) and record.target_id not in self._targets:
            raise ValueError(f"conjecture {record.id!r} has unknown parent target {record.target_id!r}")
        name, key = RECORD_NAMES[type(record)], record_key(record)
        if key in self._ids[name]:
            raise ValueError(f"{self.path} already holds {name} {key!r} "
                             "(a resumed phase must skip the work in PhaseLog.recovered)")

    def _register(self, record: Record) -> None:
        self._ids[RECORD_NAMES[type(record)]].add(record_key(record))
        if isinstance(record, Attempt) and record.problem_kind == "target" and record.verified:
            self._target_proofs.append(StoredProof(
                target_id=record.problem_id, iteration=record.iteration, attempt_id=record.id, proof=record.proof,
                reward=record.reward))

    def close(self) -> None:
        """Flush, fsync and close the file.  This does not commit the phase."""
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()


# ---------------------------------------------------------------------------
# The store


class Store:
    """One run directory, opened by exactly one process at a time.

    Create or resume with ``Store.open``; use as a context manager or call
    ``close`` to release the directory's lock.
    """

    def __init__(self, run_dir: Path, lock_fd: int, targets: list[Target], config: dict,
                 markers: list[_Marker], metrics: list[dict]):
        self.run_dir = run_dir
        self.targets = targets
        """Every target of the run, in their original order (held-out ones included)."""
        self.config = config
        """The config this session runs with (the original one plus accepted changes)."""
        self.solved_registry = SolvedRegistry(targets)
        """Solved targets and their stored proofs, as of the finished phases."""
        self._lock_fd = lock_fd
        self._targets_by_id = {t.id: t for t in targets}
        self._markers: list[_Marker] = []
        self._done: set[tuple[int, str]] = set()
        self._open_logs: dict[tuple[int, str], PhaseLog] = {}
        self._metrics = metrics
        for marker in sorted(markers, key=lambda m: m.seq):
            try:
                self._commit(marker)
            except ValueError as e:
                raise StoreError(f"{self._marker_path(marker.iteration, marker.phase)}: {e}") from None

    # -- opening -----------------------------------------------------------

    @staticmethod
    def is_run_dir(run_dir: str | os.PathLike) -> bool:
        """Whether ``run_dir`` holds a created run (so ``open`` would resume it)."""
        return (Path(run_dir) / CONFIG_FILE).is_file()

    @classmethod
    def open(cls, run_dir: str | os.PathLike, targets: Sequence[Target] | None, config: Mapping[str, Any],
             *, allow_changes: bool = False) -> "Store":
        """Create a run directory, or resume the one already there.

        Creating needs ``targets``; they are copied into the run.  Resuming
        reads the run's own copy: ``targets`` may then be None, and if given
        must equal it.  On resume, a config that differs from the run's in any
        key outside ``RESUMABLE_CONFIG_KEYS`` is refused unless
        ``allow_changes``; accepted differences are logged to
        ``config_changes.jsonl``.
        """
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        lock_fd = _lock(run_dir)
        try:
            config = _plain(config)
            if cls.is_run_dir(run_dir):
                return cls._resume(run_dir, lock_fd, targets, config, allow_changes)
            return cls._create(run_dir, lock_fd, targets, config)
        except BaseException:
            os.close(lock_fd)
            raise

    @classmethod
    def _create(cls, run_dir: Path, lock_fd: int, targets: Sequence[Target] | None, config: dict) -> "Store":
        leftovers = [p.name for p in run_dir.iterdir() if p.name.startswith("iter_") or p.name in (METRICS_FILE, "checkpoints")]
        if leftovers:
            raise StoreError(f"{run_dir} has no {CONFIG_FILE} but holds run data {sorted(leftovers)}; "
                             "refusing to start a new run on top of it")
        if not targets:
            raise ValueError(f"creating the run {run_dir} needs a non-empty list of targets")
        targets = list(targets)
        repeated = sorted(i for i, n in Counter(t.id for t in targets).items() if n > 1)
        if repeated:
            raise ValueError(f"target ids must be unique; repeated: {repeated[:10]}")
        _atomic_write(run_dir / TARGETS_FILE, b"".join(_json_line(t.to_json()) for t in targets))
        # config.yaml goes last: its presence is what makes the directory a run.
        _atomic_write(run_dir / CONFIG_FILE, yaml.safe_dump(config, sort_keys=True, allow_unicode=True).encode("utf-8"))
        return cls(run_dir, lock_fd, targets, config, markers=[], metrics=[])

    @classmethod
    def _resume(cls, run_dir: Path, lock_fd: int, targets: Sequence[Target] | None, config: dict,
                allow_changes: bool) -> "Store":
        run_config = _load_run_config(run_dir)
        diff = _config_diff(run_config, config)
        refused = [k for k in diff if not any(fnmatch.fnmatchcase(k, p) for p in RESUMABLE_CONFIG_KEYS)]
        if refused and not allow_changes:
            lines = "\n".join(f"  {k}: {_show(diff[k][0])} -> {_show(diff[k][1])}" for k in refused)
            raise StoreError(
                f"the config differs from the one run {run_dir} was started with:\n{lines}\n"
                f"Keys that may change on resume: {', '.join(RESUMABLE_CONFIG_KEYS)}. "
                "Pass allow_changes=True to resume with this config anyway."
            )

        targets_path = run_dir / TARGETS_FILE
        stored_targets = [_parse(targets_path, lineno, Target.from_json, obj)
                          for lineno, obj in _jsonl_rows(targets_path, repair_torn_tail=False)]
        if targets is not None and list(targets) != stored_targets:
            raise StoreError(_targets_mismatch(run_dir, stored_targets, list(targets)))

        markers = [_load_marker(path) for path in sorted(run_dir.glob("iter_*/phase_*.done"))]
        seqs = sorted(m.seq for m in markers)
        if seqs != list(range(len(seqs))):
            raise StoreError(f"{run_dir}: phase markers have inconsistent sequence numbers {seqs}")
        store = cls(run_dir, lock_fd, stored_targets, config, markers, _load_metrics(run_dir / METRICS_FILE))

        # Only now that the run has loaded cleanly is the new config part of its history.
        if diff:
            _append_line(run_dir / CONFIG_CHANGES_FILE,
                         {"changed_at": _now(), "changed": sorted(diff), "forced": bool(refused), "config": config})
            log.warning("resuming %s with changed config keys: %s", run_dir, ", ".join(sorted(diff)))
        return store

    def close(self) -> None:
        """Close open phase logs (without marking them done) and release the lock."""
        for phase_log in self._open_logs.values():
            phase_log.close()
        self._open_logs.clear()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- targets -----------------------------------------------------------

    def target(self, target_id: str) -> Target:
        try:
            return self._targets_by_id[target_id]
        except KeyError:
            raise KeyError(f"unknown target id {target_id!r}") from None

    # -- phases ------------------------------------------------------------

    def phase_done(self, iteration: int, phase: str) -> bool:
        return (iteration, phase) in self._done

    def first_unfinished(self, iteration: int, phases: Sequence[str]) -> str | None:
        """The first of ``phases`` (in the given order) not done in ``iteration``."""
        return next((p for p in phases if not self.phase_done(iteration, p)), None)

    def resume_point(self, phases: Sequence[str]) -> tuple[int, str]:
        """Where the loop continues: the first unfinished phase of the latest
        iteration that has any finished phase, else the first phase of the
        next iteration; ``(0, phases[0])`` for a new run.  Earlier iterations
        must be complete: a hole means the phase list changed, and raises."""
        if not phases:
            raise ValueError("phases must not be empty")
        last = self._latest_iteration()
        if last is None:
            return 0, phases[0]
        for iteration in range(last + 1):
            missing = self.first_unfinished(iteration, phases)
            if missing is None:
                continue
            if iteration < last:
                raise StoreError(f"{self.run_dir}: iteration {iteration} never finished phase {missing!r} but "
                                 f"iteration {last} has finished phases; is {list(phases)} the phase list of this run?")
            return iteration, missing
        return last + 1, phases[0]

    def begin_phase(self, iteration: int, phase: str) -> PhaseLog:
        """Open the record log of a phase about to run (or to resume).

        If an earlier run of this phase was killed, its complete records are
        kept and returned in ``PhaseLog.recovered``; a torn last line is
        dropped with a warning.
        """
        _check_iteration(iteration)
        _check_name("phase", phase)
        self._check_not_behind(iteration, phase)
        key = (iteration, phase)
        if key in self._open_logs:
            raise StoreError(f"phase {phase!r} of iteration {iteration} is already open")
        directory = self._iteration_dir(iteration)
        directory.mkdir(parents=True, exist_ok=True)
        partial, final = self._log_paths(iteration, phase)
        if final.exists():
            # Killed after the log was renamed but before the marker was written.
            if partial.exists():
                raise StoreError(f"both {partial} and {final} exist; remove the one that is not wanted")
            os.replace(final, partial)
            _fsync_dir(directory)
        recovered = self._recover(partial, iteration) if partial.exists() else []
        if recovered:
            log.warning("%s: resuming phase %r of iteration %d with %d records from an interrupted run",
                        partial, phase, iteration, len(recovered))
        phase_log = PhaseLog(partial, iteration, phase, self._targets_by_id, recovered)
        self._open_logs[key] = phase_log
        return phase_log

    def mark_done(self, iteration: int, phase: str) -> None:
        """Commit a phase: finish its log (if it has one), then write its
        marker.  Mark every phase of an iteration, even one with nothing to do."""
        _check_iteration(iteration)
        _check_name("phase", phase)
        self._check_not_behind(iteration, phase)
        directory = self._iteration_dir(iteration)
        partial, final = self._log_paths(iteration, phase)
        phase_log = self._open_logs.pop((iteration, phase), None)
        if phase_log is None:
            if partial.exists() or final.exists():
                raise StoreError(f"{partial.name if partial.exists() else final.name} in {directory} holds records "
                                 f"of an unfinished run of phase {phase!r}; call begin_phase to recover them first")
            directory.mkdir(parents=True, exist_ok=True)
            counts, candidates = {}, []
        else:
            phase_log.close()
            os.replace(partial, final)
            _fsync_dir(directory)
            counts, candidates = phase_log.counts(), phase_log.verified_target_proofs()
        marker = _Marker(
            iteration=iteration,
            phase=phase,
            seq=len(self._markers),
            finished_at=_now(),
            records=counts,
            new_proofs=self.solved_registry.admissible(candidates),
        )
        _atomic_write(self._marker_path(iteration, phase), json.dumps(marker.to_json(), ensure_ascii=False).encode("utf-8"))
        self._commit(marker)

    def _commit(self, marker: _Marker) -> None:
        self._markers.append(marker)
        self._done.add((marker.iteration, marker.phase))
        self.solved_registry.add(marker.new_proofs)

    def _check_not_behind(self, iteration: int, phase: str) -> None:
        if (iteration, phase) in self._done:
            raise StoreError(f"phase {phase!r} of iteration {iteration} is already done")
        last = self._latest_iteration()
        if last is not None and iteration < last:
            raise StoreError(f"iteration {iteration} is behind iteration {last}, which already has finished phases")

    def _recover(self, path: Path, iteration: int) -> list[Record]:
        records, seen = [], set()
        for lineno, obj in _jsonl_rows(path, repair_torn_tail=True):
            record = _parse(path, lineno, record_from_line, obj)
            key = (type(record), record_key(record))
            if key in seen:
                raise StoreError(f"{path}:{lineno}: a second {RECORD_NAMES[type(record)]} with id {key[1]!r}")
            if isinstance(record, (Attempt, Conjecture)) and record.iteration != iteration:
                raise StoreError(f"{path}:{lineno}: record of iteration {record.iteration} in the log of iteration {iteration}")
            seen.add(key)
            records.append(record)
        return records

    # -- reading finished phases -------------------------------------------

    def attempts(self, iteration: int) -> list[Attempt]:
        """Every attempt of the iteration's finished phases, in commit order."""
        return self._read(iteration, Attempt)

    def conjectures(self, iteration: int) -> list[Conjecture]:
        """Every Conjecturer sample of the iteration's finished phases."""
        return self._read(iteration, Conjecture)

    def conjecture_scores(self, iteration: int) -> dict[str, ConjectureScore]:
        """The iteration's conjecture scores, by conjecture id."""
        return {s.conjecture_id: s for s in self._read(iteration, ConjectureScore)}

    def generations(self, through_iteration: int | None = None) -> int:
        """Conjecturer plus Solver samples of all finished phases (up to and
        including ``through_iteration``)."""
        return sum(m.generations for m in self._markers
                   if through_iteration is None or m.iteration <= through_iteration)

    def _read(self, iteration: int, cls: type) -> list:
        name = RECORD_NAMES[cls]
        out = []
        for marker in self._markers:
            if marker.iteration == iteration and marker.records.get(name):
                out.extend(r for r in self._read_log(marker) if isinstance(r, cls))
        return out

    def _read_log(self, marker: _Marker) -> list[Record]:
        path = self._log_paths(marker.iteration, marker.phase)[1]
        if not path.exists():
            raise StoreError(f"{path} is missing but {self._marker_path(marker.iteration, marker.phase)} says it holds records")
        records = [_parse(path, lineno, record_from_line, obj)
                   for lineno, obj in _jsonl_rows(path, repair_torn_tail=False)]
        counts = {name: sum(isinstance(r, cls) for r in records) for name, cls in RECORD_TYPES.items()}
        if any(counts[name] != marker.records.get(name, 0) for name in RECORD_TYPES):
            raise StoreError(f"{path}: holds {counts} records but its marker recorded {marker.records}; the log is damaged")
        return records

    # -- metrics -----------------------------------------------------------

    def append_metrics(self, metrics: Mapping[str, Any]) -> None:
        """Append one iteration's metrics line (call it in the iteration's
        last phase, before marking that phase done).

        A redone phase may call this again for an iteration that already has
        a line (the earlier run was killed after writing it): the first line
        is kept and the repeat is skipped with a warning.
        """
        missing = [k for k in REQUIRED_METRICS if k not in metrics]
        if missing:
            raise ValueError(f"metrics are missing required keys {missing}")
        iteration = metrics["iteration"]
        _check_iteration(iteration)
        if any(m["iteration"] == iteration for m in self._metrics):
            log.warning("metrics for iteration %d are already in %s; keeping the line written first", iteration, METRICS_FILE)
            return
        if self._metrics and iteration < self._metrics[-1]["iteration"]:
            raise ValueError(f"metrics for iteration {iteration} come after iteration {self._metrics[-1]['iteration']}")
        line = dict(metrics)
        _append_line(self.run_dir / METRICS_FILE, line)
        self._metrics.append(line)

    def metrics(self) -> list[dict]:
        """Every metrics line, oldest first."""
        return [dict(m) for m in self._metrics]

    def sample_cache_path(self, iteration: int, phase: str) -> Path:
        """Where the running phase caches its samples (:mod:`sgs.state.sample_cache`)."""
        _check_name("phase", phase)
        _check_iteration(iteration)
        return self._iteration_dir(iteration) / f"{phase}.samples.jsonl"

    # -- checkpoints -------------------------------------------------------

    def checkpoint_dir(self, role: str, iteration: int) -> Path:
        """Where ``role``'s checkpoint after ``iteration`` lives (not created).
        Whether it is complete is told by the phase that wrote it being done."""
        _check_name("role", role)
        _check_iteration(iteration)
        return self.run_dir / "checkpoints" / role / _iter_name(iteration)

    def checkpoint_iterations(self, role: str) -> list[int]:
        """Iterations that have a checkpoint directory for ``role``, ascending."""
        _check_name("role", role)
        root = self.run_dir / "checkpoints" / role
        if not root.is_dir():
            return []
        return sorted(int(m.group(1)) for p in root.iterdir() if p.is_dir() and (m := _ITER_RE.fullmatch(p.name)))

    def set_best_checkpoint(self, role: str, iteration: int) -> None:
        path = self.checkpoint_dir(role, iteration)
        if not path.is_dir():
            raise StoreError(f"cannot flag {path} as best: it does not exist")
        _atomic_write(path.parent / BEST_FILE, (path.name + "\n").encode())

    def best_checkpoint(self, role: str) -> int | None:
        """The iteration whose checkpoint is flagged best for ``role``, if any."""
        _check_name("role", role)
        pointer = self.run_dir / "checkpoints" / role / BEST_FILE
        if not pointer.exists():
            return None
        text = pointer.read_text().strip()
        m = _ITER_RE.fullmatch(text)
        if m is None:
            raise StoreError(f"{pointer}: expected a checkpoint name like 'iter_0003', got {text!r}")
        return int(m.group(1))

    def prune_checkpoints(self, role: str, keep_last: int) -> list[int]:
        """Delete ``role``'s checkpoints except the newest ``keep_last`` and the
        best one; return the iterations deleted."""
        if keep_last < 1:
            raise ValueError(f"keep_last must be >= 1, got {keep_last}")
        best = self.best_checkpoint(role)
        root = self.run_dir / "checkpoints" / role
        if not root.is_dir():
            return []
        for leftover in root.glob(".deleting-*"):  # a delete that a kill interrupted
            shutil.rmtree(leftover)
        doomed = [i for i in self.checkpoint_iterations(role)[:-keep_last] if i != best]
        for iteration in doomed:
            # Rename first, so a kill mid-delete never leaves half a checkpoint under a loadable name.
            path = self.checkpoint_dir(role, iteration)
            trash = root / f".deleting-{path.name}"
            os.replace(path, trash)
            shutil.rmtree(trash)
        return doomed

    # -- paths -------------------------------------------------------------

    def _latest_iteration(self) -> int | None:
        return max((m.iteration for m in self._markers), default=None)

    def _iteration_dir(self, iteration: int) -> Path:
        return self.run_dir / _iter_name(iteration)

    def _log_paths(self, iteration: int, phase: str) -> tuple[Path, Path]:
        directory = self._iteration_dir(iteration)
        return directory / f"{phase}.partial.jsonl", directory / f"{phase}.jsonl"

    def _marker_path(self, iteration: int, phase: str) -> Path:
        return self._iteration_dir(iteration) / f"phase_{phase}.done"


# ---------------------------------------------------------------------------
# Loading helpers


def _lock(run_dir: Path) -> int:
    path = run_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = path.read_text().strip() or "unknown"
        os.close(fd)
        raise StoreError(f"{run_dir} is in use by another process (pid {holder}, lock {path})") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _parse(path: Path, lineno: int, parse, obj: Any):
    try:
        return parse(obj)
    except RecordError as e:
        raise StoreError(f"{path}:{lineno}: {e}") from None


def _load_run_config(run_dir: Path) -> dict:
    """The config the run last ran with: config.yaml plus accepted changes."""
    path = run_dir / CONFIG_FILE
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise StoreError(f"{path}: not valid YAML ({e})") from None
    if not isinstance(config, dict):
        raise StoreError(f"{path}: expected a mapping at the top level, got {type(config).__name__}")
    changes = run_dir / CONFIG_CHANGES_FILE
    if changes.exists():
        for lineno, obj in _jsonl_rows(changes, repair_torn_tail=True):
            if not isinstance(obj, dict) or not isinstance(obj.get("config"), dict):
                raise StoreError(f"{changes}:{lineno}: expected an object with a 'config' mapping")
            config = obj["config"]
    return config


def _load_marker(path: Path) -> _Marker:
    try:
        marker = _Marker.from_json(json.loads(path.read_bytes()))
    except ValueError as e:  # JSONDecodeError and RecordError
        raise StoreError(f"{path}: damaged phase marker ({e})") from None
    m = _ITER_RE.fullmatch(path.parent.name)
    if m is None or int(m.group(1)) != marker.iteration or path.name != f"phase_{marker.phase}.done":
        raise StoreError(f"{path}: marker says iteration {marker.iteration}, phase {marker.phase!r}")
    return marker


def _load_metrics(path: Path) -> list[dict]:
    if not path.exists():
        return []
    metrics: list[dict] = []
    for lineno, obj in _jsonl_rows(path, repair_torn_tail=True):
        if not isinstance(obj, dict) or not isinstance(obj.get("iteration"), int):
            raise StoreError(f"{path}:{lineno}: expected an object with an integer 'iteration'")
        if metrics and obj["iteration"] <= metrics[-1]["iteration"]:
            raise StoreError(f"{path}:{lineno}: iteration {obj['iteration']} does not follow {metrics[-1]['iteration']}")
        metrics.append(obj)
    return metrics


def _targets_mismatch(run_dir: Path, stored: list[Target], given: list[Target]) -> str:
    a, b = {t.id: t for t in stored}, {t.id: t for t in given}
    only_run = sorted(a.keys() - b.keys())
    only_given = sorted(b.keys() - a.keys())
    changed = sorted(i for i in a.keys() & b.keys() if a[i] != b[i])
    detail = [f"{len(only_run)} only in the run (e.g. {only_run[:3]})" if only_run else "",
              f"{len(only_given)} only in the given list (e.g. {only_given[:3]})" if only_given else "",
              f"{len(changed)} changed (e.g. {changed[:3]})" if changed else ""]
    detail = [d for d in detail if d] or ["same targets in a different order"]
    return (f"the targets differ from the copy in {run_dir / TARGETS_FILE}: {'; '.join(detail)}. "
            "A run keeps its targets; pass targets=None to resume with the run's copy.")
