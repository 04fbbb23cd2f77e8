"""The run directory's writer: :class:`Store`, held by the one process that
drives a run, keeps everything the run records so that a killed run resumes
where it stopped with no verdict lost and no generation counted twice.

The reading rules live in :mod:`sgs.state.run_reader` (the store loads a run
through it, strictly), the file primitives in :mod:`sgs.state.files`, a
running phase's log in :mod:`sgs.state.phase_log`.

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
exactly once.  (These are the rules of :class:`~sgs.state.run_reader.RunReader`.)

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
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from sgs.state.config_diff import config_diff, plain_config, show_value
from sgs.state.files import StoreError, append_line, atomic_write, cut_torn_tail, fsync_dir, json_line, jsonl_rows
from sgs.state.phase_log import PhaseLog
from sgs.state.records import (
    RECORD_NAMES,
    Attempt,
    Conjecture,
    ConjectureScore,
    Record,
    RecordError,
    Target,
    record_from_line,
    record_key,
)
from sgs.state.run_reader import (
    BEST_FILE,
    CONFIG_CHANGES_FILE,
    CONFIG_FILE,
    METRICS_FILE,
    TARGETS_FILE,
    PhaseMarker,
    RunReader,
    is_created_run,
    iter_name,
)
from sgs.state.solved import MAX_PROOFS, SolvedRegistry

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"

# Config keys (dotted paths, fnmatch patterns) that may differ when a run is
# resumed without allow_changes: how many iterations it runs and when it stops early, where its
# directory now lives, where metrics go, which Ray cluster it joins and how
# many proof checkers it uses, how actors are placed, whether engines sleep
# during training, how often lost workers are replaced, the periodic
# evaluation, and the prover service's settings.
# None of them changes what an iteration computes.
RESUMABLE_CONFIG_KEYS = (
    "iterations",
    "stop.*",
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
    "resources.learner_restarts",
    "evaluation.k",
    "evaluation.ks",
    "evaluation.samples_per_problem",
    "evaluation.confidence",
    "evaluation.every",
    "evaluation.output_dir",
    "evaluation.checkpoint",
    "serve.*",
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

_NAME_RE = re.compile(r"[a-z][a-z0-9_]*")


# ---------------------------------------------------------------------------
# Argument checks


def _check_name(kind: str, name: str) -> None:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ValueError(f"{kind} name must match {_NAME_RE.pattern} (it becomes a file name), got {name!r}")


def _check_iteration(iteration: int) -> None:
    if not isinstance(iteration, int) or isinstance(iteration, bool) or iteration < 0:
        raise ValueError(f"iteration must be an int >= 0, got {iteration!r}")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ---------------------------------------------------------------------------
# The store


class Store:
    """One run directory, opened by exactly one process at a time.

    Create or resume with ``Store.open``; use as a context manager or call
    ``close`` to release the directory's lock.
    """

    def __init__(self, run_dir: Path, lock_fd: int, targets: list[Target], config: dict,
                 markers: list[PhaseMarker], metrics: list[dict], solved_registry: SolvedRegistry):
        self.run_dir = run_dir
        self.targets = targets
        """Every target of the run, in their original order (held-out ones included)."""
        self.config = config
        """The config this session runs with (the original one plus accepted changes)."""
        self.solved_registry = solved_registry
        """Solved targets and their stored proofs, as of the finished phases."""
        self._lock_fd = lock_fd
        self._reader = RunReader(run_dir, strict=True)
        self._targets_by_id = {t.id: t for t in targets}
        self._markers = list(markers)
        self._done = {(m.iteration, m.phase) for m in markers}
        self._open_logs: dict[tuple[int, str], PhaseLog] = {}
        self._metrics = metrics

    # -- opening -----------------------------------------------------------

    @staticmethod
    def is_run_dir(run_dir: str | os.PathLike) -> bool:
        """Whether ``run_dir`` holds a created run (so ``open`` would resume it)."""
        return is_created_run(run_dir)

    @classmethod
    def open(cls, run_dir: str | os.PathLike, targets: Sequence[Target] | None, config: Mapping[str, Any],
             *, allow_changes: bool = False, proof_counting: str = "distinct",
             max_proofs: int = MAX_PROOFS) -> "Store":
        """Create a run directory, or resume the one already there.

        Creating needs ``targets``; they are copied into the run.  Resuming
        reads the run's own copy: ``targets`` may then be None, and if given
        must equal it.  On resume, a config that differs from the run's in any
        key outside ``RESUMABLE_CONFIG_KEYS`` is refused unless
        ``allow_changes``; accepted differences are logged to
        ``config_changes.jsonl``.  ``proof_counting``: how the solved registry
        tells a target's proofs apart from now on (``method.ei_solved_count``,
        :data:`~sgs.state.solved.PROOF_KEYS`); ``max_proofs``: how many it
        keeps per target (``method.max_proofs_per_target``).

        The store's ``run_dir`` is absolute: every path the loop hands to an
        actor (checkpoints, Ray Train's state) is read in another process,
        whose working directory may differ.
        """
        run_dir = Path(run_dir).absolute()
        run_dir.mkdir(parents=True, exist_ok=True)
        lock_fd = _lock(run_dir)
        try:
            config = plain_config(config)
            if cls.is_run_dir(run_dir):
                return cls._resume(run_dir, lock_fd, targets, config, allow_changes, proof_counting, max_proofs)
            return cls._create(run_dir, lock_fd, targets, config, proof_counting, max_proofs)
        except BaseException:
            os.close(lock_fd)
            raise

    @classmethod
    def _create(cls, run_dir: Path, lock_fd: int, targets: Sequence[Target] | None, config: dict,
                proof_counting: str, max_proofs: int) -> "Store":
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
        atomic_write(run_dir / TARGETS_FILE, b"".join(json_line(t.to_json()) for t in targets))
        # config.yaml goes last: its presence is what makes the directory a run.
        atomic_write(run_dir / CONFIG_FILE, yaml.safe_dump(config, sort_keys=True, allow_unicode=True).encode("utf-8"))
        return cls(run_dir, lock_fd, targets, config, markers=[], metrics=[],
                   solved_registry=SolvedRegistry(targets, max_proofs, counting=proof_counting))

    @classmethod
    def _resume(cls, run_dir: Path, lock_fd: int, targets: Sequence[Target] | None, config: dict,
                allow_changes: bool, proof_counting: str, max_proofs: int) -> "Store":
        reader = RunReader(run_dir, strict=True)
        _cut_torn_tail(run_dir / CONFIG_CHANGES_FILE)
        run_config = reader.config()
        diff = config_diff(run_config, config)
        refused = [k for k in diff if not any(fnmatch.fnmatchcase(k, p) for p in RESUMABLE_CONFIG_KEYS)]
        if refused and not allow_changes:
            lines = "\n".join(f"  {k}: {show_value(diff[k][0])} -> {show_value(diff[k][1])}" for k in refused)
            raise StoreError(
                f"the config differs from the one run {run_dir} was started with:\n{lines}\n"
                f"Keys that may change on resume: {', '.join(RESUMABLE_CONFIG_KEYS)}. "
                "Resume with the run's values of the others, or give a new run_dir for a new run "
                "(from Python, Store.open(..., allow_changes=True) accepts the change)."
            )

        stored_targets = reader.targets()
        if targets is not None and list(targets) != stored_targets:
            raise StoreError(_targets_mismatch(run_dir, stored_targets, list(targets)))

        markers = reader.markers()
        registry = reader.solved_registry(stored_targets, markers, proof_counting, max_proofs)
        _cut_torn_tail(run_dir / METRICS_FILE)
        store = cls(run_dir, lock_fd, stored_targets, config, markers, reader.metrics(), registry)

        # Only now that the run has loaded cleanly is the new config part of its history.
        if diff:
            append_line(run_dir / CONFIG_CHANGES_FILE,
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
        must be complete: a hole means the phase list changed, and raises, as
        does a finished phase that is not in ``phases`` (a run directory of a
        version of SGS with other phases)."""
        if not phases:
            raise ValueError("phases must not be empty")
        unknown = sorted({phase for _, phase in self._done} - set(phases))
        if unknown:
            raise StoreError(f"{self.run_dir} has finished phases {unknown} that are not in this version's phase "
                             f"list {list(phases)}; was it written by another version of SGS?")
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
            fsync_dir(directory)
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
            fsync_dir(directory)
            counts, candidates = phase_log.counts(), phase_log.verified_target_proofs()
        marker = PhaseMarker(
            iteration=iteration,
            phase=phase,
            seq=len(self._markers),
            finished_at=_now(),
            records=counts,
            new_proofs=self.solved_registry.admissible(candidates),
        )
        atomic_write(self._reader.marker_path(iteration, phase),
                     json.dumps(marker.to_json(), ensure_ascii=False).encode("utf-8"))
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
        _cut_torn_tail(path)
        records, seen = [], set()
        for lineno, obj in jsonl_rows(path, self._reader.problems):
            try:
                record = record_from_line(obj)
            except RecordError as e:
                raise StoreError(f"{path}:{lineno}: {e}") from None
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
                out.extend(r for r in self._reader.records(marker) if isinstance(r, cls))
        return out

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
        append_line(self.run_dir / METRICS_FILE, line)
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
        return self._reader.checkpoint_dir(role, iteration)

    def checkpoint_iterations(self, role: str) -> list[int]:
        """Iterations that have a checkpoint directory for ``role``, ascending."""
        _check_name("role", role)
        return self._reader.checkpoint_iterations(role)

    def set_best_checkpoint(self, role: str, iteration: int) -> None:
        path = self.checkpoint_dir(role, iteration)
        if not path.is_dir():
            raise StoreError(f"cannot flag {path} as best: it does not exist")
        atomic_write(path.parent / BEST_FILE, (path.name + "\n").encode())

    def best_checkpoint(self, role: str) -> int | None:
        """The iteration whose checkpoint is flagged best for ``role``, if any."""
        _check_name("role", role)
        return self._reader.best_checkpoint(role)

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
        return self.run_dir / iter_name(iteration)

    def _log_paths(self, iteration: int, phase: str) -> tuple[Path, Path]:
        """The running phase's partial log and the name it gets when the phase finishes."""
        final = self._reader.log_path(iteration, phase)
        return final.with_name(f"{phase}.partial.jsonl"), final


# ---------------------------------------------------------------------------
# Opening helpers


def _cut_torn_tail(path: Path) -> None:
    """Before appending to a file again, drop what a writer killed mid-line left."""
    if path.exists() and (torn := cut_torn_tail(path)) is not None:
        log.warning("%s:%d: dropping an incomplete last line (%d bytes) left by a killed writer", path, *torn)


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
