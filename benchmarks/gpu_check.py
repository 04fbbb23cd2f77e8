"""The GPU suite: what a one-GPU machine must run before a user's first real run does.

    make gpu-check                                             # on a machine with one NVIDIA GPU
    python benchmarks/gpu_check.py [--stages generation,loop] [--out DIR] [--workdir DIR]
    python benchmarks/gpu_check.py --dry-run                   # every stage's code path, tiny, on the CPU

Stages (:mod:`gpu_stages`), each in a process of its own so that a crash or
an out-of-memory error in one leaves the GPU clean for the next:

* ``environment``: GPU model, memory, driver, package versions, Rocq;
* ``generation``: vLLM's CUDA engine on a random model of DeepSeek-Prover-V2-7B's
  shape: tokens/s beside the transformers engine, and the log-prob gap between
  vLLM's samples and a teacher-forced transformers pass (``generation.py``);
* ``learner``: one DeepSpeed ZeRO-2 bf16 optimizer step through Ray Train on
  the 7B width with 8 of its 30 layers (the full shape does not fit one rank;
  ``learner.py``);
* ``sleep_wake``: vLLM sleep levels 1 and 2 on the 7B shape, the GPU memory
  freed and restored (``torch.cuda.mem_get_info``) and the probe's log-probs
  before and after;
* ``weight_update``: new weights into the running engine over CUDA IPC, and
  a checkpoint reload, each checked by the probe gap (``weight_transfer.py``);
* ``tactic_batching``: the search's model calls on the 7B shape, 64 searches' calls
  batched through the queue and pump against one search's, and the engine alone
  (``tactic_batching.py``);
* ``loop``: ``python -m sgs`` with the tiny model and Rocq, warm start and two
  iterations, three vLLM engines and the learner sharing the GPU.

The ``environment`` stage always runs (every report names its machine).
Without a visible GPU (and no ``--dry-run``) the other stages are skipped
at once, with that reason, without a process each.
A stage that lacks what it needs is skipped and one that breaks is recorded
as failed, each with its reason, and the next one runs.  The figures go to
``<out>/gpu_check.json`` and ``<out>/gpu_check.md`` with the date and the
GPU model; each stage's log beside them.  Exit status: 0 when no stage
failed, 1 otherwise.  Expected time on one H100: under 20 minutes (each
stage is stopped after ``--stage-timeout``).  A machine without an index of
packages gets them from ``tools/gpu_bundle.sh`` (see benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from gpu_stages import NEEDS_GPU, STAGES, CheckContext, Outcome, Skip, need_gpu, repo_env

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def run_stage(name: str, ctx: CheckContext) -> Outcome:
    """Run one stage in a subprocess of this script; a crash becomes a failed outcome."""
    report = ctx.out / f"{name}.outcome.json"
    report.unlink(missing_ok=True)
    command = [sys.executable, __file__, "--stage", name, "--report", str(report), "--workdir", str(ctx.workdir),
               "--out", str(ctx.out), "--stage-timeout", str(ctx.timeout_s), *(["--dry-run"] if ctx.dry_run else [])]
    try:
        done = subprocess.run(command, cwd=REPO, env=repo_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=ctx.timeout_s + 120)
    except subprocess.TimeoutExpired:
        return Outcome("fail", f"the stage ran past {ctx.timeout_s + 120:.0f} s and was stopped")
    (ctx.out / f"{name}.stage.log").write_text(done.stdout)
    if report.exists():
        return Outcome(**json.loads(report.read_text()))
    tail = "\n".join(done.stdout.splitlines()[-10:])
    return Outcome("fail", f"the stage's process exited with status {done.returncode} and no report:\n{tail}")


def missing_gpu(ctx: CheckContext) -> str:
    """Why the GPU stages skip here (:func:`gpu_stages.need_gpu`'s reason), or "" when they run."""
    try:
        need_gpu(ctx)
    except Skip as skip:
        return str(skip)
    return ""


def stage_main(name: str, ctx: CheckContext, report: Path) -> None:
    """The stage subprocess: run ``name``, write its outcome."""
    try:
        outcome = STAGES[name](ctx)
    except Skip as skip:
        outcome = Outcome("skip", str(skip))
    except Exception as error:  # noqa: BLE001 - recorded; the suite goes on with the next stage
        outcome = Outcome("fail", f"{type(error).__name__}: {error}")
    report.write_text(json.dumps(asdict(outcome), default=str))


def markdown(summary: dict) -> str:
    """The suite's figures as a markdown table per stage."""
    env = summary["stages"].get("environment", {}).get("figures", {})
    lines = [f"# GPU suite ({'dry run on the CPU' if summary['dry_run'] else 'GPU'})", "",
             f"{summary['date']}, GPU: {env.get('gpu', '?')} ({env.get('gpu_memory_gib', '?')} GiB, driver "
             f"{env.get('driver', '?')}), commit {summary['commit']}, {summary['seconds']:.0f} s in all", "",
             "| stage | status | seconds | figures / reason |", "|---|---|---|---|"]
    for name, stage in summary["stages"].items():
        detail = stage["reason"].replace("\n", " ")[:300] if stage["status"] != "ok" else \
            ", ".join(f"{key} {value}" for key, value in stage["figures"].items())
        lines.append(f"| {name} | {stage['status']} | {stage['seconds']:.0f} | {detail} |")
    notes = [f"- {name}: {note}" for name, stage in summary["stages"].items() for note in stage["notes"]]
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU (no GPU needed)")
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of: {', '.join(STAGES)}")
    parser.add_argument("--out", type=Path, default=None, help="where the figures and logs go (default runs/gpu_check/DATE)")
    parser.add_argument("--workdir", type=Path, default=None, help="models and run directories (default <out>/work)")
    parser.add_argument("--stage-timeout", type=float, default=900.0, help="seconds one stage may take")
    parser.add_argument("--stage", choices=list(STAGES), help=argparse.SUPPRESS)
    parser.add_argument("--report", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    chosen = [name.strip() for name in args.stages.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in STAGES]
    if unknown or not chosen:
        parser.error(f"--stages: unknown stage {', '.join(unknown) or '(none given)'}; available: {', '.join(STAGES)}")
    if "environment" not in chosen:
        chosen.insert(0, "environment")  # every report names its machine and GPU
    if args.stage_timeout <= 0:
        parser.error("--stage-timeout must be positive")
    out = args.out or REPO / "runs" / "gpu_check" / datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    ctx = CheckContext(dry_run=args.dry_run, workdir=args.workdir or out / "work", out=out,
                       timeout_s=args.stage_timeout)
    ctx.workdir.mkdir(parents=True, exist_ok=True)
    if args.stage:
        stage_main(args.stage, ctx, args.report)
        return 0

    summary = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": commit(),
               "dry_run": args.dry_run, "stages": {}}
    began = time.perf_counter()
    no_gpu = missing_gpu(ctx)
    for name in chosen:
        print(f"[gpu-check] {name} ...", flush=True)
        started = time.perf_counter()
        # a stage that would only find no GPU is not given a process of its own to find it
        outcome = Outcome("skip", no_gpu) if no_gpu and name in NEEDS_GPU else run_stage(name, ctx)
        summary["stages"][name] = {**asdict(outcome), "seconds": round(time.perf_counter() - started, 1)}
        print(f"[gpu-check] {name}: {outcome.status}"
              + (f" ({outcome.reason.splitlines()[0]})" if outcome.reason else f" {outcome.figures}"), flush=True)
        summary["seconds"] = time.perf_counter() - began
        (out / "gpu_check.json").write_text(json.dumps(summary, indent=1, default=str))  # each stage kept at once
    summary["seconds"] = time.perf_counter() - began
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=1, default=str))
    (out / "gpu_check.md").write_text(markdown(summary))
    print(markdown(summary))
    print(f"[gpu-check] figures in {out / 'gpu_check.json'} and {out / 'gpu_check.md'}")
    return 1 if any(stage["status"] == "fail" for stage in summary["stages"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
