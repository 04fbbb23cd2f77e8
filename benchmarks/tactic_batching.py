"""Tactic-call batching benchmark: many searches' model calls through one engine, against one at a time.

    RAY_AUTH_MODE=disabled .venv/bin/python benchmarks/tactic_batching.py [--shape tiny|7b] [--searches 16]

A search asks the model for ``--width`` tactics at each state it expands
and waits for the answer.  In self-play and evaluation the calls of every
search go through one queue (:class:`sgs.search.engine_calls.TacticQueue`)
and the driver's pump (:class:`~sgs.search.engine_calls.EnginePump`)
submits whatever has piled up to the engine group as one batch.  This
script measures that path with no prover in the way (each simulated search
asks ``--calls`` states one after another, as a search that never waits
for Rocq would), on a random model of ``--shape`` (:mod:`shapes`), in one
engine group (vLLM where installed, else transformers), three rows side by
side in one run:

* ``one search``: one search's calls, each waiting for the last: a batch of
  one prompt per engine step, the latency floor;
* ``N searches``: ``--searches`` searches at once through the queue and
  pump: how many calls meet in a batch, and the calls per second;
* ``engine alone``: every prompt of the row above in one ``generate``: the
  engine's own throughput on the same work, the ceiling for the queue path.

The last line, ``tactic_batching: <ratio>x``, is the calls per second of
``N searches`` over ``one search``; the line before it gives the queue
path's tokens per second as a share of the engine alone's.  A random model
rarely stops early, so every call samples close to ``--max-tokens`` tokens
(a trained one stops at its tactic's end); its tactics decode to little
under the tiny tokenizer, which costs the reader nothing it would not pay.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path

from shapes import build_model

TARGETS = Path(__file__).resolve().parents[1] / "sgs" / "data" / "rocq_targets.jsonl"


def proof_states(count: int) -> list[str]:
    """Goals as Rocq prints them, from the shipped targets' statements (one per call, cycling)."""
    rows = [json.loads(line) for line in TARGETS.read_text().splitlines() if line.strip()]
    goals = [row["statement"].split(":", 1)[1].strip().rstrip(".") for row in rows]
    return [f"1 goal\n\n  ============================\n  {goals[i % len(goals)]}" for i in range(count)]


def make_searches():
    import ray

    @ray.remote(num_cpus=0)
    class Searches:
        """Simulated searches: each asks its states one after another, all of them at once."""

        def __init__(self, queue) -> None:
            self.queue = queue

        async def run(self, states_per_search: list[list[str]], width: int) -> dict:
            async def one(states: list[str]) -> tuple[list[float], int]:
                latencies, tokens = [], 0
                for state in states:
                    started = time.perf_counter()
                    answer = await self.queue.tactics.remote(state, width)
                    latencies.append(time.perf_counter() - started)
                    tokens += answer.tokens
                return latencies, tokens

            started = time.perf_counter()
            done = await asyncio.gather(*(one(states) for states in states_per_search))
            return {"wall_s": time.perf_counter() - started, "latencies": [x for lat, _ in done for x in lat],
                    "tokens": sum(tokens for _, tokens in done)}

    return Searches


def through_queue(group, reader, settings, states_per_search: list[list[str]]) -> dict:
    """The calls of ``states_per_search`` through a TacticQueue and an EnginePump, as the search does."""
    import ray

    from sgs.search.engine_calls import EnginePump, TacticQueue

    queue = TacticQueue.remote()
    pump = EnginePump(group, queue, settings, reader)
    searches = make_searches().remote(queue)
    try:
        result = searches.run.remote(states_per_search, settings.n)
        while not ray.wait([result], timeout=0)[0]:
            ray.wait([result, *pump.waitables()], num_returns=1, timeout=1.0)
            pump.advance()
        report = ray.get(result)
    finally:
        ray.kill(searches)
        ray.kill(queue)
    calls = len(report["latencies"])
    return {"calls": calls, "batches": pump.chunks, "wall_s": report["wall_s"], "tokens": report["tokens"],
            "calls_per_s": calls / report["wall_s"], "tokens_per_s": report["tokens"] / report["wall_s"],
            "median_latency_s": statistics.median(report["latencies"])}


def engine_alone(group, reader, settings, states: list[str]) -> dict:
    prompts = [reader.prompt(state) for state in states]
    started = time.perf_counter()
    samples = group.generate(prompts, settings)
    wall = time.perf_counter() - started
    tokens = sum(len(s.token_ids) for drawn in samples for s in drawn)
    return {"calls": len(prompts), "batches": 1, "wall_s": wall, "tokens": tokens,
            "calls_per_s": len(prompts) / wall, "tokens_per_s": tokens / wall, "median_latency_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=("tiny", "7b"), default="tiny")
    parser.add_argument("--backend", choices=("auto", "vllm", "transformers"), default="auto")
    parser.add_argument("--searches", type=int, default=16, help="searches running at once")
    parser.add_argument("--calls", type=int, default=6, help="model calls per search")
    parser.add_argument("--width", type=int, default=8, help="tactics sampled per call (the search's width)")
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens per sampled tactic, at most")
    parser.add_argument("--workdir", type=Path, default=Path("runs/bench/models"))
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    if min(args.searches, args.calls, args.width, args.max_tokens) < 1:
        parser.error("--searches, --calls, --width and --max-tokens must be at least 1")

    import importlib.util

    import ray
    import torch
    from transformers import AutoTokenizer

    from sgs.machinery.engines import EngineGroup, EngineGroupSettings, SamplingSettings
    from sgs.search.engine_proposer import TacticReader

    gpu = torch.cuda.is_available()
    backend = args.backend if args.backend != "auto" else \
        "vllm" if importlib.util.find_spec("vllm") is not None else "transformers"
    model = str(build_model(args.shape, args.workdir))
    reader = TacticReader(AutoTokenizer.from_pretrained(model))
    settings = SamplingSettings(n=args.width, max_tokens=args.max_tokens, temperature=1.0)
    states = proof_states(args.searches * args.calls)
    ray.init(num_cpus=max(2, os.cpu_count() or 2), num_gpus=1 if gpu else 0, include_dashboard=False,
             log_to_driver=False, logging_level="WARNING")
    started = time.perf_counter()
    group = EngineGroup("tactics", model, EngineGroupSettings(
        backend=backend, num_cpus=1, num_gpus=1 if gpu else 0,
        engine_options={"gpu_memory_utilization": 0.8} if gpu and backend == "vllm" else {}))
    try:
        group.generate([reader.prompt(states[0])], SamplingSettings(n=2, max_tokens=4))  # the engine is up
        startup = time.perf_counter() - started
        rows = {
            "one search": through_queue(group, reader, settings, [states[:args.calls]]),
            f"{args.searches} searches": through_queue(
                group, reader, settings, [states[i::args.searches] for i in range(args.searches)]),
            "engine alone": engine_alone(group, reader, settings, states),
        }
    finally:
        group.shutdown()
        ray.shutdown()

    print(f"{args.shape} model, {backend} engine ({'GPU' if gpu else 'CPU'}), width {args.width}, "
          f"up to {args.max_tokens} tokens a tactic; engine start {startup:.1f} s")
    print(f"{'row':<14} {'calls':>6} {'batches':>8} {'calls/s':>9} {'tokens/s':>10} {'median call s':>14}")
    for name, row in rows.items():
        print(f"{name:<14} {row['calls']:>6} {row['batches']:>8} {row['calls_per_s']:>9.2f} "
              f"{row['tokens_per_s']:>10.0f} {row['median_latency_s']:>14.3f}")
    many, one, alone = rows[f"{args.searches} searches"], rows["one search"], rows["engine alone"]
    ratio = many["calls_per_s"] / one["calls_per_s"]
    share = many["tokens_per_s"] / alone["tokens_per_s"]
    report = {"shape": args.shape, "backend": backend, "gpu": gpu, "width": args.width,
              "max_tokens": args.max_tokens, "searches": args.searches, "startup_s": startup, "rows": rows,
              "ratio": ratio, "share_of_engine": share}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    print(f"queue path against the engine alone (tokens/s): {share:.2f}x")
    print(f"tactic_batching: {ratio:.2f}x")


if __name__ == "__main__":
    main()
