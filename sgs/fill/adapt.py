"""``--adapt ITERATIONS``: learn the project before filling it.

Two stages, each kept in the user's cache and reused (``~/.cache/sgs/fill_adapt/
<folder>-<digest>/``, one folder per version of the project's sources):

1. **supervised** (``sup-<key>/``): the starting checkpoint (the shipped prover,
   or ``--checkpoint``) fine-tuned by :func:`sgs.prover.train.train` (``init``)
   for ``minutes`` CPU-minutes on the project's own finished proofs, their
   tactic steps and whole proofs (the shards :mod:`sgs.fill.knowledge`
   replays), with a sample of the roles' warm-start lines beside them, as
   many as the project's examples, so that the formats self-play asks for
   stay known (:func:`_role_lines`).  An ``Admitted`` lemma has no proof
   there, so a lemma being filled never teaches its own.  A project without a
   finished proof skips this stage (self-play starts from the checkpoint).
2. **self-play** (``<method>-<key>/``): ``python -m sgs`` itself, as a
   bounded subprocess, for ``iterations`` iterations at the laptop scale
   (:data:`SELFPLAY_OVERRIDES`), warm-started from stage 1, on the project's
   traced lemmas (:func:`sgs.state.rocq_trace.trace`, the project's own
   axioms allowed) and its admitted lemmas as targets, none held out: the
   admitted ones have no human proof to leak, and the traced ones' proofs
   are never shown to the Solver.  The method is a registry entry
   (:data:`ADAPT_METHODS`): SGS (``standard``), RL on the targets alone
   (``reinforce_half_solver_only``), or none (``supervised``).

A stage's key is a digest of everything its result depends on (the project's
sources, the starting weights, the settings, the stage before), so a rerun
with the same settings trains nothing, and a changed setting never reuses an
old result.  A stopped stage resumes: the fine-tune from its last save
(every minute), self-play from its run directory's last finished phase.
Each finished stage writes ``adapted.json`` (its checkpoint and its cost)
last; that file is what "done" means.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from sgs.state.files import atomic_write, folder_problem

__all__ = ["AdaptMethod", "ADAPT_METHODS", "SELFPLAY_OVERRIDES", "AdaptSettings", "Stage", "Adaptation",
           "AdaptError", "AdaptInputError", "cache_root", "check_cache", "supervised_key", "selfplay_key",
           "selfplay_command", "newest_solver_checkpoint", "adapt"]

DONE = "adapted.json"
#: written on every successful stage; bump when a stage's recipe changes, so old results are not reused
RECIPE = 1


@dataclass(frozen=True)
class AdaptMethod:
    description: str
    #: ``+experiment=`` of the self-play run; None: no self-play
    experiment: Optional[str]


#: what ``--adapt-method`` chooses: the self-play after the supervised stage
ADAPT_METHODS: dict[str, AdaptMethod] = {
    "sgs": AdaptMethod("SGS self-play: Conjecturer, Guide and Solver", "standard"),
    "rl": AdaptMethod("RL on the targets alone (REINFORCE-1/2, no Conjecturer)", "reinforce_half_solver_only"),
    "supervised": AdaptMethod("the supervised stage only", None),
}

#: the product's laptop run on this machine's CPUs, minus what a fill has no use for
#: (the warm start: the starting checkpoint knows the formats; the held-out evaluation:
#: nothing is held out; wandb and progress bars), with the Solver searching: sampled
#: whole proofs prove 2 of the shared projects' 90 traced targets at 60 s, the search 69
#: (docs/prover.md, "Proof rate"), and a Solver that proves nothing is never updated;
#: the fill's search round uses the tactics search mode trains
SELFPLAY_OVERRIDES = ("model=rocq_prover", "prover=rocq", "resources=local_cpu", "scale=laptop",
                      "warmstart.mode=never", "evaluation.k=0", "logging.wandb_mode=disabled",
                      "logging.progress_bars=false", "solver.mode=search")


class AdaptError(Exception):
    """A stage that failed to run (not the user's input): its log says why."""


class AdaptInputError(Exception):
    """Bad input to the adaptation (a cache that cannot be written, a setting self-play refuses)."""


@dataclass(frozen=True)
class AdaptSettings:
    iterations: int
    method: str = "sgs"
    #: CPU-minutes of the supervised stage
    minutes: float = 5.0
    seed: int = 0
    #: the checkpoint adapted (``pkg://`` or a directory)
    base: str = "pkg://sgs/data/rocq_prover"
    learning_rate: float = 3e-4
    #: more ``python -m sgs`` settings (``key=value``) for the self-play
    overrides: tuple[str, ...] = ()
    #: seconds the self-play subprocess may take, each iteration
    seconds_per_iteration: float = 3600.0
    #: the project's own tactic steps replayed in each self-play update, this many per
    #: found step (``solver.anchor_corpus``/``anchor_ratio``); None: none
    anchor_ratio: Optional[float] = None


@dataclass(frozen=True)
class Stage:
    """One stage's result and what it cost."""

    name: str
    checkpoint: str
    #: the cost when it was made (a cached stage costs nothing now: ``cached``)
    wall_seconds: float
    cpu_minutes: Optional[float] = None
    cached: bool = False
    detail: dict = field(default_factory=dict)

    def describe(self) -> str:
        cost = f"{self.wall_seconds:.0f} s"
        if self.cpu_minutes is not None:
            cost += f", {self.cpu_minutes:.1f} CPU-min"
        extra = "".join(f", {key} {value}" for key, value in self.detail.items() if key in ("steps", "generations",
                                                                                            "iterations", "examples"))
        return f"{self.name} {cost}{extra}" + (" (cached: nothing trained now)" if self.cached else "")


@dataclass(frozen=True)
class Adaptation:
    """The checkpoint the fill proposes with, and each stage that made it."""

    checkpoint: str
    stages: tuple[Stage, ...]
    notes: tuple[str, ...] = ()

    def seconds_now(self) -> float:
        """Wall time this run spent adapting (0 when everything was cached)."""
        return sum(stage.wall_seconds for stage in self.stages if not stage.cached)

    def describe(self) -> str:
        return "; ".join([*(stage.describe() for stage in self.stages), *self.notes]) or "nothing to do"


def cache_root(base: Optional[Path] = None) -> Path:
    """``$SGS_CACHE_DIR/fill_adapt`` (``~/.cache/sgs/fill_adapt`` by default) or ``base``."""
    if base is not None:
        return Path(base).expanduser().resolve()
    from sgs.machinery.models import default_cache_dir
    return default_cache_dir().resolve() / "fill_adapt"


def check_cache(root: Path) -> None:
    """AdaptInputError unless ``root`` is (or can be made) a folder this command can write."""
    problem = folder_problem(root)
    if problem:
        raise AdaptInputError(f"--adapt-cache {root}: {problem}")


def _digest(record: dict) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def supervised_key(project_digest: str, base_weights: str, settings: AdaptSettings) -> str:
    """What the supervised stage's result depends on (the iterations and method do not)."""
    return _digest({"recipe": RECIPE, "project": project_digest, "base": base_weights, "minutes": settings.minutes,
                    "seed": settings.seed, "learning_rate": settings.learning_rate})


def selfplay_key(supervised: str, settings: AdaptSettings) -> str:
    """The self-play stage's: the stage before it, and its own settings."""
    record = {"recipe": RECIPE, "supervised": supervised, "method": settings.method,
              "iterations": settings.iterations, "seed": settings.seed,
              "overrides": [*SELFPLAY_OVERRIDES, *settings.overrides]}
    # only when set, so that the stages made before the setting existed keep their keys
    return _digest({**record, "anchor_ratio": settings.anchor_ratio} if settings.anchor_ratio else record)


def weights_digest(checkpoint: str) -> str:
    """The SHA-256 of ``checkpoint``'s weights (AdaptInputError naming one that cannot be read)."""
    from sgs.prover.ship import weights_sha256
    from sgs.prover.train import init_checkpoint
    try:
        return weights_sha256(init_checkpoint(checkpoint))
    except (ValueError, OSError) as error:
        raise AdaptInputError(f"--checkpoint {checkpoint}: {error}") from None


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One process per stage folder: a second waits, then finds the stage done."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _done(folder: Path) -> Optional[dict]:
    try:
        return json.loads((folder / DONE).read_text())
    except (OSError, ValueError):
        return None


def _finish(folder: Path, stage: Stage) -> None:
    atomic_write(folder / DONE, (json.dumps(asdict(stage), indent=2) + "\n").encode())


def _cached(record: dict) -> Stage:
    return Stage(**{**record, "cached": True})


#: the roles' formats, kept during the supervised stage (a sample of it)
ROLE_CORPUS = "pkg://sgs/data/warmstart_rocq.jsonl"


def _role_lines(corpus: Path, out: Path, seed: int) -> Path:
    """A seeded sample of the warm-start corpus's lines, as many as the project's own
    examples (at least 32): the roles' formats stay known without drowning the project
    (a small project has tens of proofs, the corpus 1,879 lines).  Written once."""
    if out.is_file():
        return out
    from sgs.config.schema import resolve_source_path
    from sgs.prover.examples import training_examples
    own = len(training_examples(corpus, ("train",)))
    path = resolve_source_path(ROLE_CORPUS)
    assert path is not None
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    chosen = random.Random(seed).sample(lines, min(len(lines), max(32, own)))
    atomic_write(out, ("\n".join(chosen) + "\n").encode("utf-8"))
    return out


def supervised_stage(folder: Path, corpus: Path, settings: AdaptSettings, log: Callable[[str], None]) -> Stage:
    """Fine-tune ``settings.base`` on the corpus's training split (resumable)."""
    from sgs.prover.train import TrainOptions, train
    with _locked(folder):
        record = _done(folder)
        if record is not None:
            return _cached(record)
        log(f"adapt: supervised: fine-tuning {settings.base} on the project's proofs for "
            f"{settings.minutes:g} CPU-minutes into {folder}")
        started = time.monotonic()
        roles = _role_lines(corpus, folder / "roles.jsonl", settings.seed)
        options = TrainOptions(corpus=corpus, out=folder, init=settings.base, minutes=settings.minutes,
                               learning_rate=settings.learning_rate, warmup_steps=10, save_minutes=1.0,
                               threads=1, seed=settings.seed, warmstart=str(roles))
        try:
            progress = train(options, log=lambda line: log(f"adapt: supervised: {line}"))
        except ValueError as error:
            raise AdaptError(f"the supervised stage failed: {error}") from None
        stage = Stage("supervised", str(folder / "checkpoint"), round(time.monotonic() - started, 1),
                      round(progress["seconds"] / 60, 2),
                      detail={"steps": progress["steps"], "examples": progress["examples"],
                              "epochs": round(progress["epochs"], 2)})
        _finish(folder, stage)
        return stage


def selfplay_command(settings: AdaptSettings, *, targets: Path, start: str, run_dir: Path,
                     allowed_axioms: Sequence[str], corpus: Path) -> list[str]:
    """``python -m sgs`` for the self-play stage (the method's experiment, the laptop scale;
    ``corpus``: the project's proofs, replayed as anchors with ``settings.anchor_ratio``)."""
    method = ADAPT_METHODS[settings.method]
    assert method.experiment is not None
    # double-quoted strings: Hydra's grammar reads a prime (Coq's x') inside them as it is
    axioms = "[" + ",".join(json.dumps(name) for name in allowed_axioms) + "]"
    return [sys.executable, "-m", "sgs", f"+experiment={method.experiment}", *SELFPLAY_OVERRIDES,
            f"targets.source={targets}", f"model.path={start}", f"iterations={settings.iterations}",
            f"seed={settings.seed}", f"run_dir={run_dir}", f"prover.allowed_axioms={axioms}",
            *((f"solver.anchor_corpus={json.dumps(str(corpus))}", f"solver.anchor_ratio={settings.anchor_ratio}")
              if settings.anchor_ratio else ()),
            *settings.overrides]


def newest_solver_checkpoint(run_dir: Path, iterations: int) -> Optional[Path]:
    """The Solver's checkpoint after the run's last iteration, or the newest before it
    (an iteration whose Solver learned nothing writes none); None when there is none."""
    from sgs.state.run_reader import RunReader
    reader = RunReader(run_dir, strict=False)
    found = [i for i in reader.checkpoint_iterations("solver") if i < iterations
             and (reader.checkpoint_dir("solver", i) / "config.json").is_file()]
    return reader.checkpoint_dir("solver", found[-1]) if found else None


def _metrics_tail(run_dir: Path) -> dict:
    try:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        return json.loads(lines[-1]) if lines else {}
    except (OSError, ValueError):
        return {}


def _bounded(command: Sequence[str], out, timeout: float) -> Optional[int]:
    """Run ``command`` in the checkout's root in a session of its own; its exit status, or
    None when it ran past ``timeout`` (then it and what it started, its Ray cluster, are ended)."""
    process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                               cwd=Path(__file__).resolve().parents[2])
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
            try:
                os.killpg(process.pid, sig)
                process.wait(timeout=grace)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        return None
    except BaseException:
        # interrupted (Ctrl-C): the run stops with the fill, and resumes with the next one
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
        raise


def selfplay_stage(folder: Path, targets: Path, start: str, allowed_axioms: Sequence[str], corpus: Path,
                   settings: AdaptSettings, log: Callable[[str], None]) -> Stage:
    """``python -m sgs`` on the targets from ``start`` (resumable: the run directory is kept)."""
    name = f"self-play ({settings.method})"
    with _locked(folder):
        record = _done(folder)
        if record is not None:
            return _cached(record)
        run_dir = folder / "run"
        command = selfplay_command(settings, targets=targets, start=start, run_dir=run_dir,
                                   allowed_axioms=allowed_axioms, corpus=corpus)
        log_path = folder / "selfplay.log"
        log(f"adapt: {name}: {settings.iterations} iteration(s) of python -m sgs from {start}; log in {log_path}")
        started = time.monotonic()
        timeout = settings.seconds_per_iteration * settings.iterations + 600
        with log_path.open("a") as out:
            out.write("$ " + " ".join(command) + "\n")
            out.flush()
            code = _bounded(command, out, timeout)
            if code is None:
                raise AdaptError(f"self-play ran past {timeout:.0f} s; run again to resume it ({log_path})")
        tail = log_path.read_text(errors="replace")[-1500:]
        if code == 2:
            raise AdaptInputError(f"python -m sgs refused the self-play's settings (see {log_path}): "
                                  + " ".join(tail.split())[-600:])
        if code != 0:
            raise AdaptError(f"self-play failed (exit {code}); run again to resume it; the end of {log_path}: "
                             + " ".join(tail.split())[-600:])
        checkpoint = newest_solver_checkpoint(run_dir, settings.iterations)
        metrics = _metrics_tail(run_dir)
        detail = {"iterations": settings.iterations, "generations": metrics.get("generations"),
                  "cumulative_solve_rate": metrics.get("cumulative_solve_rate"),
                  "solver_updated": checkpoint is not None}
        stage = Stage(name, str(checkpoint) if checkpoint else start, round(time.monotonic() - started, 1),
                      detail=detail)
        _finish(folder, stage)
        return stage


def selfplay_targets(project, build_dir: Path, fill_targets, load_path, allowed: Sequence[str],
                     out: Path, log: Callable[[str], None]) -> tuple[int, int, tuple[str, ...]]:
    """The self-play's targets file (written once per version of the sources): the
    project's traced lemmas and its admitted ones, none held out; how many of each,
    and the axioms a proof of them may use (the project's own, the admitted lemmas)."""
    meta = out.with_suffix(".meta.json")
    if out.is_file() and meta.is_file():
        record = json.loads(meta.read_text())
        return record["traced"], record["admitted"], tuple(record["allowed_axioms"])
    from sgs.state.rocq_project import source_digest
    from sgs.state.rocq_trace import trace
    log("adapt: tracing the project's proved lemmas as self-play targets")
    result = trace(project, build_dir, held_out_fraction=0.0, allow_project_axioms=True)
    rows = [dict(row, held_out=False) for row in result.targets]
    known = {row["id"] for row in rows}
    record = {"dir": str(build_dir), "digest": source_digest(build_dir)}
    admitted = [{"id": t.id, "header": t.header, "statement": t.statement, "held_out": False,
                 "load_path": [list(entry) for entry in load_path], "project": record}
                for t in fill_targets if t.id not in known]
    axioms = tuple(sorted({*allowed, *result.allowed_axioms}))
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, b"".join((json.dumps(row, ensure_ascii=False) + "\n").encode() for row in rows + admitted))
    atomic_write(meta, json.dumps({"traced": len(rows), "admitted": len(admitted),
                                   "allowed_axioms": list(axioms)}).encode())
    return len(rows), len(admitted), axioms


def adapt(project, build_dir: Path, fill_targets, load_path, allowed: Sequence[str], settings: AdaptSettings,
          *, cache: Path, log: Callable[[str], None]) -> Adaptation:
    """Both stages (each from the cache when done before): the checkpoint to fill with."""
    from sgs.fill.knowledge import project_steps
    from sgs.state.rocq_project import source_digest

    digest = source_digest(project.root)
    folder = cache / f"{project.root.name}-{digest[:16]}"
    method = ADAPT_METHODS[settings.method]
    corpus, steps = project_steps(project, build_dir)
    stages: list[Stage] = []
    notes: list[str] = []
    start = settings.base
    base_weights = weights_digest(settings.base)
    sup = supervised_key(digest, base_weights, settings)
    if steps:
        stage = supervised_stage(folder / f"sup-{sup[:16]}", corpus, settings, log)
        stages.append(stage)
        start = stage.checkpoint
    else:
        notes.append("supervised: skipped (the project has no finished proof to learn from)")
        log(f"adapt: {notes[-1]}; self-play starts from {settings.base}")
    if method.experiment is not None:
        targets = folder / "targets.jsonl"
        traced, admitted, axioms = selfplay_targets(project, build_dir, fill_targets, load_path, allowed,
                                                    targets, log)
        if not traced + admitted:
            notes.append("self-play: skipped (no target)")
        else:
            key = selfplay_key(sup if steps else f"none:{base_weights}", settings)
            stage = selfplay_stage(folder / f"{settings.method}-{key[:16]}", targets, start, axioms, corpus,
                                   settings, log)
            stages.append(dataclass_replace_detail(stage, traced=traced, admitted=admitted))
            start = stage.checkpoint
    return Adaptation(start, tuple(stages), tuple(notes))


def dataclass_replace_detail(stage: Stage, **detail) -> Stage:
    """``stage`` with more detail (the target counts, known to the caller only)."""
    return Stage(**{**asdict(stage), "detail": {**stage.detail, **detail}})
