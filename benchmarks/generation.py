"""Generation benchmark: the vLLM engine against the transformers engine, same
model, same prompts, same sampling settings, on this machine.

    RAY_AUTH_MODE=disabled .venv/bin/python benchmarks/generation.py [--shape tiny|7b] [--prompts 16] [--n 8]

The model is built locally with random weights (no download; :mod:`shapes`):
``--shape tiny`` (default; hidden 256, 4 layers, float32, runs on a CPU) or
``--shape 7b`` (DeepSeek-Prover-V2-7B's shape in bfloat16, for GPU machines).

Each backend runs in a subprocess of its own, so neither inherits the other's
memory (GPU memory especially) or process-wide settings (vLLM's CPU worker
patches torch's thread control).  In each: build the engine, one small warm-up
call, then one timed ``generate`` of every prompt with ``--n`` samples of up
to ``--max-tokens`` tokens.  The vLLM run also checks ``--check`` of its
samples against a teacher-forced transformers pass (``logprobs_of``, which
loads the model on the CPU) and reports the largest log-prob gap.

Prints a table and, as its last line, ``generation: <ratio>x`` (vLLM tokens/s
over transformers tokens/s).  Timings on a shared machine are noisy; the
line before it gives the same ratio per CPU second of each engine's process,
which moves less with other load (``--json`` writes both).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shapes import build_model

TARGETS = Path(__file__).resolve().parents[1] / "sgs" / "data" / "rocq_targets.jsonl"
BACKENDS = ("transformers", "vllm")


def make_prompts(count: int) -> list[str]:
    """Statements of the shipped Rocq targets, each opening a proof, as raw-text prompts."""
    rows = [json.loads(line) for line in TARGETS.read_text().splitlines() if line.strip()]
    return [f"{rows[i % len(rows)]['statement']}\nProof.\n" for i in range(count)]


def run_backend(backend: str, model: str, args: argparse.Namespace) -> dict:
    """Time one backend in this process; returns its measurements."""
    from sgs.machinery.engines import SamplingSettings, build_engine

    started = time.perf_counter()
    engine = build_engine(backend, model)
    startup = time.perf_counter() - started
    prompts = make_prompts(args.prompts)
    engine.generate(prompts[:2], SamplingSettings(n=2, max_tokens=8, seed=1))
    settings = SamplingSettings(n=args.n, max_tokens=args.max_tokens, seed=0)
    started, cpu_started = time.perf_counter(), time.process_time()
    results = engine.generate(prompts, settings)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    samples = [sample for group in results for sample in group]
    tokens = sum(sample.num_tokens for sample in samples)
    report = {
        "backend": backend, "startup_s": startup, "wall_s": wall, "tokens": tokens,
        "tokens_per_s": tokens / wall, "samples": len(samples), "cpu_s": cpu, "tokens_per_cpu_s": tokens / cpu,
        "mean_entropy": sum(sample.entropy for sample in samples) / len(samples),
    }
    if backend == "vllm" and args.check:
        report["max_logprob_gap"] = max(
            max(abs(a - b) for a, b in zip(engine.logprobs_of(s.prompt_token_ids, s.token_ids), s.logprobs))
            for s in samples[:args.check]
        )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=("tiny", "7b"), default="tiny")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--n", type=int, default=8, help="samples per prompt")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--check", type=int, default=4,
                        help="vLLM samples checked against a teacher-forced transformers pass (0: none)")
    parser.add_argument("--json", type=Path, default=None, help="also write the measurements to this JSON file")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "sgs-generation-benchmark",
                        help="where the model is built (and reused by later runs)")
    # A worker subprocess's job: time --backend on --model, write the measurements to --report.
    parser.add_argument("--backend", choices=BACKENDS, help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--report", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.backend:
        args.report.write_text(json.dumps(run_backend(args.backend, args.model, args)))
        return

    args.workdir.mkdir(parents=True, exist_ok=True)
    model = build_model(args.shape, args.workdir)
    reports = {}
    for backend in BACKENDS:
        report = args.workdir / f"report-{backend}.json"
        command = [sys.executable, __file__, "--backend", backend, "--model", str(model), "--report", str(report),
                   "--prompts", str(args.prompts), "--n", str(args.n), "--max-tokens", str(args.max_tokens),
                   "--check", str(args.check)]
        # vLLM logs a lot, to stdout too; shown only when the run fails.
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            sys.exit(f"{done.stdout[-5000:]}\nthe {backend} run failed with exit code {done.returncode}")
        reports[backend] = json.loads(report.read_text())

    print(f"\nmodel: {args.shape} ({model}); {args.prompts} prompts x n={args.n}, "
          f"max_tokens={args.max_tokens}, temperature 1, seed 0; {os.cpu_count()} CPUs")
    print(f"{'backend':<14}{'start-up s':>12}{'samples':>9}{'tokens':>9}{'wall s':>9}{'tokens/s':>10}"
          f"{'CPU s':>8}{'tokens/CPU s':>14}{'entropy':>9}")
    for report in reports.values():
        print(f"{report['backend']:<14}{report['startup_s']:>12.1f}{report['samples']:>9}{report['tokens']:>9}"
              f"{report['wall_s']:>9.2f}{report['tokens_per_s']:>10.0f}{report['cpu_s']:>8.1f}"
              f"{report['tokens_per_cpu_s']:>14.0f}{report['mean_entropy']:>9.3f}")
    if "max_logprob_gap" in reports["vllm"]:
        print(f"vLLM sampled-token log-probs vs teacher-forced transformers ({args.check} samples): "
              f"max |gap| = {reports['vllm']['max_logprob_gap']:.2e}")
    ratio = reports["vllm"]["tokens_per_s"] / reports["transformers"]["tokens_per_s"]
    cpu_ratio = reports["vllm"]["tokens_per_cpu_s"] / reports["transformers"]["tokens_per_cpu_s"]
    print(f"per CPU second (less sensitive to other load on the machine): {cpu_ratio:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"model": str(model), "shape": args.shape, "backends": reports,
                                         "ratio": ratio, "cpu_ratio": cpu_ratio}, indent=1))
    print(f"generation: {ratio:.2f}x")


if __name__ == "__main__":
    main()
