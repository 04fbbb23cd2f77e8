"""Weight-update benchmark: weights sent into a running vLLM engine against the
engine reloading the same weights from a checkpoint, on this machine.

    RAY_AUTH_MODE=disabled .venv/bin/python benchmarks/weight_transfer.py [--shape medium] [--repeats 3]
    python benchmarks/weight_transfer.py --shape 7b --transport ipc    # one GPU (the GPU suite's stage)

After each training run the learner writes a Hugging Face checkpoint (both
ways: resumed runs and restarted engines need it), and the engines must then
serve the new weights.  Two ways, timed side by side in one run:

* reload: ``EngineGroup.load_weights`` (each engine reads the safetensors
  file and loads it in place, vLLM's ``reload_weights``);
* direct: ``send_weights`` from this process (which plays the learner's
  rank 0, holding the trained model in memory) over ``--transport`` into
  the engine's workers, then ``EngineGroup.adopt_weights`` (what the loop
  does): gloo between CPU processes; on a GPU, CUDA IPC when the engine
  shares this process's GPU (NCCL needs the engine on another GPU).  A
  direct transfer that fails is reported and the reloads still run.

Each round first sends model B directly, then reloads checkpoint A, so every
update really changes the weights; after each, the engine's log-probs of a
probe sequence are compared with a transformers pass over the weights it
should hold (the ``gap`` column).  Models (random weights, the project's tiny
tokenizer; :mod:`shapes`): ``tiny`` (hidden 256, 4 layers), ``medium``
(default; hidden 1024, 12 layers, about 200M parameters, float32), ``7b``
(DeepSeek-Prover-V2-7B's shape, bf16, GPU transports).

Prints a table and, as its last line, ``weight_transfer: <ratio>x`` (reload
seconds over direct seconds, medians).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

import ray
import torch
from transformers import AutoModelForCausalLM

from sgs.machinery.engines import EngineGroup, EngineGroupSettings
from sgs.machinery.engines.hf import completion_logprobs
from sgs.machinery.engines.weight_transfer import BACKENDS, send_weights
from shapes import SHAPES, build_model

PROBE = ([1, 40, 41, 42, 43, 44, 45], [50, 51, 52, 53, 54, 55, 56, 57])


def probe_gap(group: EngineGroup, model: torch.nn.Module) -> float:
    """Largest per-token log-prob difference between the engine and ``model`` on the probe."""
    expected, mask = completion_logprobs(model, [PROBE[0]], [PROBE[1]], 0, 1.0)
    expected = expected[0][mask[0]].tolist()
    return max(abs(a - b) for served in group.served_logprobs(*PROBE) for a, b in zip(served, expected))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=[*sorted(SHAPES), "7b"], default="medium")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of one direct send and one reload")
    parser.add_argument("--transport", choices=BACKENDS, default="gloo",
                        help="gloo (CPU engine), ipc (GPU engine on this process's GPU), nccl (another GPU)")
    parser.add_argument("--gpu-memory-fraction", type=float, default=0.5,
                        help="GPU transports: the share of the GPU the engine may take (this process holds model B "
                             "beside it)")
    parser.add_argument("--workdir", type=Path, default=None, help="where the two checkpoints go (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="also write the timings and gaps to this JSON file")
    args = parser.parse_args()
    on_gpu = args.transport != "gloo"
    if on_gpu and not torch.cuda.is_available():
        parser.error(f"--transport {args.transport} needs a CUDA GPU")
    if args.repeats < 1 or not 0 < args.gpu_memory_fraction <= 1:
        parser.error("--repeats must be at least 1 and --gpu-memory-fraction in (0, 1]")
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")

    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or Path(scratch)
        path_a = str(build_model(args.shape, workdir, seed=0))
        path_b = str(build_model(args.shape, workdir, seed=1))
        # Model A only checks the probe (on the CPU); model B is what "the learner" sends, from its GPU on GPUs.
        model_a = AutoModelForCausalLM.from_pretrained(path_a, dtype="auto").eval()
        model_b = AutoModelForCausalLM.from_pretrained(path_b, dtype="auto").eval().to("cuda" if on_gpu else "cpu")
        parameters = sum(p.numel() for p in model_b.parameters())
        dtype = next(model_b.parameters()).dtype

        ray.init(num_cpus=2, num_gpus=1 if on_gpu else 0, include_dashboard=False, log_to_driver=False,
                 logging_level="WARNING")
        options = {"weight_transfer_backend": args.transport,
                   **({"gpu_memory_utilization": args.gpu_memory_fraction} if on_gpu else {})}
        settings = EngineGroupSettings(backend="vllm", num_cpus=1, num_gpus=1 if on_gpu else 0, engine_options=options)
        group = EngineGroup("bench", path_a, settings)
        rows = {"direct": [], "reload": []}
        gaps = {"direct": [], "reload": []}
        direct_error = None
        try:
            version = 0
            for _ in range(args.repeats):
                if direct_error is None:
                    version += 1
                    try:
                        seconds = send_weights(model_b, group.weight_target(version, args.transport, timeout_s=300))
                    except Exception as error:  # noqa: BLE001 - reported; the reload is still measured
                        direct_error = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
                    else:
                        # The loop confirms a direct transfer with adopt_weights: part of "direct".
                        begin = time.perf_counter()
                        group.adopt_weights(path_b, version)
                        rows["direct"].append(seconds + time.perf_counter() - begin)
                        gaps["direct"].append(probe_gap(group, model_b))

                version += 1
                begin = time.perf_counter()
                group.load_weights(path_a, version)
                rows["reload"].append(time.perf_counter() - begin)
                gaps["reload"].append(probe_gap(group, model_a))
        finally:
            group.shutdown()
            ray.shutdown()

    if args.json:
        args.json.write_text(json.dumps({"shape": args.shape, "transport": args.transport, "parameters": parameters,
                                         "seconds": rows, "gaps": gaps, "direct_error": direct_error}, indent=1))
    size = parameters * torch.finfo(dtype).bits / 8 / 2**30
    print(f"\nmodel: {args.shape}, {parameters / 1e6:.0f}M parameters ({str(dtype).removeprefix('torch.')}, "
          f"{size:.2f} GiB); one vLLM engine ({'GPU' if on_gpu else 'CPU'}), {args.transport}; {args.repeats} rounds")
    print(f"{'method':<34}{'median s':>10}{'min s':>9}{'max gap':>11}")
    labels = {"direct": "direct (send_weights + adopt)", "reload": "reload from checkpoint"}
    for method in ("direct", "reload"):
        if rows[method]:
            print(f"{labels[method]:<34}{statistics.median(rows[method]):>10.3f}{min(rows[method]):>9.3f}"
                  f"{max(gaps[method]):>11.2e}")
    if direct_error:
        print(f"direct transfer over {args.transport} failed: {direct_error}")
        return
    ratio = statistics.median(rows["reload"]) / statistics.median(rows["direct"])
    print(f"weight_transfer: {ratio:.2f}x")


if __name__ == "__main__":
    main()
