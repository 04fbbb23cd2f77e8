"""Start-up benchmark: fixed costs that every run pays, each measured side
by side in one process.

    RAY_AUTH_MODE=disabled .venv/bin/python benchmarks/startup.py [--rounds 3] [--roles 3]

* engines: the roles' engine groups (one transformers engine each on the
  ``tiny`` model of :mod:`shapes`) started one after another, each waited
  for before the next (how ``python -m sgs`` used to start them),
  against all started at once and then waited for (what it does now:
  ``EngineGroup(..., wait=False)`` then ``wait_until_loaded``).  On a GPU
  node, where a vLLM engine takes about a minute to start, the difference
  is a minute per role.
* learner: one-worker Ray Train runs of :func:`sgs.machinery.learner.train`
  (4 examples) with the controller polling its workers at Ray's default of
  2 s against SGS's 0.5 s (``RAY_TRAIN_HEALTH_CHECK_INTERVAL_S``).
* two models (an iteration's Solver and Conjecturer): one Ray Train run
  each, one after another (how the loop used to train them),
  against both in one run (:func:`sgs.machinery.learner.train_models`).
* three training phases of those two models (three iterations): a Ray
  Train run per phase (how the loop trained until it kept its learner)
  against one :class:`sgs.machinery.learner.RayTrainLearner` called three
  times (what it does now: the workers start at the first phase only).

Rounds alternate the ways, so that a change of the machine's load touches
each.  Prints a table and the figures ``learner_poll: <ratio>x`` (seconds
per run at 2 s over 0.5 s), ``learner_runs: <ratio>x`` (seconds for the two
models in two runs over one), ``learner_kept: <ratio>x`` (seconds for the
three phases in a run each over one kept learner) and, last,
``startup: <ratio>x`` (seconds to start the engines one after another over
all at once; medians).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

import ray
from transformers import AutoTokenizer

from sgs.machinery.engines import EngineGroup, EngineGroupSettings
from sgs.machinery.learner import RayTrainLearner, TrainExample, TrainJob, TrainSettings, train, train_models
from shapes import build_model

POLL_VARIABLE = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"


def start_engines(checkpoint: str, roles: int, at_once: bool) -> float:
    """Seconds until ``roles`` one-engine groups have all loaded ``checkpoint``."""
    begin = time.perf_counter()
    groups = []
    try:
        for role in range(roles):
            groups.append(EngineGroup(f"role{role}", checkpoint,
                                      EngineGroupSettings(num_cpus=0.5, engine_options={"device": "cpu"}),
                                      wait=not at_once))
        for group in groups:
            group.wait_until_loaded()
        return time.perf_counter() - begin
    finally:
        for group in groups:
            group.shutdown()


def train_once(checkpoint: str, examples: list[TrainExample], poll_s: str, output: Path) -> float:
    """Seconds of one training run with the controller polling every ``poll_s``."""
    os.environ[POLL_VARIABLE] = poll_s  # read by train() when the run starts
    begin = time.perf_counter()
    train(examples, base_checkpoint=checkpoint, objective="ei", settings=TrainSettings(learner_workers=1,
          global_batch_size=len(examples)), output_dir=str(output), run_name=f"startup-bench-{output.name}")
    return time.perf_counter() - begin


def train_two(checkpoint: str, examples: list[TrainExample], one_run: bool, output: Path) -> float:
    """Seconds to train two models on ``examples``: in one run, or in one run each."""
    settings = TrainSettings(learner_workers=1, global_batch_size=len(examples))
    jobs = [TrainJob(examples, checkpoint, "ei", str(output / role), seed=seed)
            for seed, role in enumerate(("solver", "conjecturer"))]
    begin = time.perf_counter()
    if one_run:
        train_models(jobs, settings=settings, run_name=f"startup-bench-{output.name}")
    else:
        for job in jobs:
            train_models([job], settings=settings, run_name=f"startup-bench-{output.name}-{Path(job.output_dir).name}")
    return time.perf_counter() - begin


def train_phases(checkpoint: str, examples: list[TrainExample], kept: bool, output: Path, phases: int = 3) -> float:
    """Seconds for ``phases`` training phases of two models each: a Ray Train
    run per phase, or one learner kept for all of them (closed at the end)."""
    settings = TrainSettings(learner_workers=1, global_batch_size=len(examples))
    begin = time.perf_counter()
    learner = RayTrainLearner(str(output / "state"), name=f"startup-bench-{output.name}") if kept else None
    try:
        for phase in range(phases):
            jobs = [TrainJob(examples, checkpoint, "ei", str(output / f"{role}-{phase}"), seed=seed)
                    for seed, role in enumerate(("solver", "conjecturer"))]
            run_name = f"startup-bench-{output.name}-{phase}"
            (learner or train_models)(jobs, settings=settings, run_name=run_name)
    finally:
        if learner is not None:
            learner.close()
    return time.perf_counter() - begin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each way, alternating")
    parser.add_argument("--roles", type=int, default=3, help="engine groups to start (SGS has three roles)")
    args = parser.parse_args()
    if args.rounds < 1 or args.roles < 2:
        parser.error("--rounds must be at least 1 and --roles at least 2")
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")

    with tempfile.TemporaryDirectory() as scratch:
        checkpoint = str(build_model("tiny", Path(scratch)))
        tokenizer = AutoTokenizer.from_pretrained(checkpoint)
        prompt = tokenizer("Lemma a : True.")["input_ids"]
        proof = tokenizer(" exact I.", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        examples = [TrainExample(prompt_ids=prompt, completion_ids=proof, weight=1.0)] * 4

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
        engines = {"one after another": [], "all at once": []}
        learner = {"2": [], "0.5": []}
        two_models = {"one run each": [], "one run": []}
        phases = {"a run per phase": [], "one kept learner": []}
        try:
            # Warm-up: the first engine and the first run pay one-time costs (imports, file caches).
            start_engines(checkpoint, 1, at_once=False)
            train_once(checkpoint, examples, "0.5", Path(scratch) / "warm-up")
            for round_ in range(args.rounds):
                for way in engines:
                    engines[way].append(start_engines(checkpoint, args.roles, at_once=way == "all at once"))
                for poll in learner:
                    learner[poll].append(train_once(checkpoint, examples, poll,
                                                    Path(scratch) / f"run-{round_}-{poll}"))
                for way in two_models:
                    two_models[way].append(train_two(checkpoint, examples, way == "one run",
                                                     Path(scratch) / f"two-{round_}-{way.replace(' ', '-')}"))
                for way in phases:
                    phases[way].append(train_phases(checkpoint, examples, way == "one kept learner",
                                                    Path(scratch) / f"phases-{round_}-{way.replace(' ', '-')}"))
        finally:
            ray.shutdown()

    print(f"\n{args.roles} engine groups of one tiny transformers engine; one-worker Ray Train runs of 4 examples; "
          f"{args.rounds} rounds")
    print(f"{'what':<44}{'median s':>10}{'min s':>9}{'max s':>9}")
    rows = {f"engines, {way}": values for way, values in engines.items()}
    rows.update({f"training run, controller poll {poll} s": values for poll, values in learner.items()})
    rows.update({f"two models, {way}": values for way, values in two_models.items()})
    rows.update({f"three phases, {way}": values for way, values in phases.items()})
    for label, values in rows.items():
        print(f"{label:<44}{statistics.median(values):>10.2f}{min(values):>9.2f}{max(values):>9.2f}")
    print(f"learner_poll: {statistics.median(learner['2']) / statistics.median(learner['0.5']):.2f}x")
    print(f"learner_runs: {statistics.median(two_models['one run each']) / statistics.median(two_models['one run']):.2f}x")
    kept = statistics.median(phases["a run per phase"]) / statistics.median(phases["one kept learner"])
    print(f"learner_kept: {kept:.2f}x")
    print(f"startup: {statistics.median(engines['one after another']) / statistics.median(engines['all at once']):.2f}x")


if __name__ == "__main__":
    main()
