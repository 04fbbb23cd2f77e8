"""Learner benchmark: training tokens per second of the Ray Train learner
(DDP and DeepSpeed ZeRO-2) against a plain single-process torch loop, on the
same examples and the same model, in one run.

    RAY_AUTH_MODE=disabled .venv/bin/python benchmarks/learner.py [--examples 128] [--workers 2]
    RAY_AUTH_MODE=disabled .venv/bin/python benchmarks/learner.py --shape 7b     # a GPU machine
    RAY_AUTH_MODE=disabled .venv/bin/python benchmarks/learner.py --shape 7b --layers 8   # fits one 80 GB GPU
    ... --rows deepspeed --json rows.json     # only some runs (the GPU suite's learner step), rows as JSON

``--shape tiny`` (the default) is the tiny Llama of ``conf/model/tiny.yaml``
on CPU.  ``--shape 7b`` is a randomly initialised Llama of the shape of
DeepSeek-Prover-V2-7B (its base, DeepSeek-Prover-V1.5: 30 layers, hidden
4096), no download, trained in bf16 with gradient checkpointing on the
machine's GPUs; there the plain loop is pure bf16 Adam on one GPU (fp32 Adam
state for 7B parameters does not fit one), and DDP is expected to run out of
memory on 80 GB GPUs (every rank holds fp32 weights, gradients and Adam
state: 112 GB).  A row that fails is reported and the others still run.  On
CPU each Ray worker gets one CPU and the plain loop one thread.

Every run trains the same synthetic examples (seeded random tokens) for one
epoch with the REINFORCE objective and the learner's default batching
(global batch 32 by gradient accumulation over micro-batches of 1).  Two
rates per row: "train" counts only the training steps (``TrainMetrics``;
the plain loop times the same call), "end to end" the whole run: Ray
start-up, model loading, training and writing the checkpoint.  Prints a
table and, as its last line, ``learner: <ratio>x``: end-to-end tokens per
second of the Ray Train DeepSpeed learner over the plain loop's (below 1:
the ratio is the learner's overhead at this size).  Timings on a shared
2-core machine are noisy: compare the ratios, not the absolute times.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import ray
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from sgs.machinery.learner import TorchUpdate, TrainExample, TrainSettings, make_optimizer, plan_steps, run_steps, train
from sgs.machinery.models.tiny import TinyModelSettings, build_tiny_model
from sgs.machinery.runtime import own_cluster_runtime_env
from sgs.method.registry import objective
from shapes import build_7b

OBJECTIVE = "reinforce"
#: The runs compared, in the order they are made.
ROWS = ("plain", "ddp", "deepspeed")

@dataclass
class Row:
    """One measured way of training."""

    name: str
    tokens: int = 0
    train_seconds: float = 0.0
    wall_seconds: float = 0.0
    error: str = ""

    def train_rate(self) -> float:
        return self.tokens / self.train_seconds if self.train_seconds else 0.0

    def wall_rate(self) -> float:
        return self.tokens / self.wall_seconds if self.wall_seconds else 0.0


def build_checkpoint(shape: str, directory: Path, layers: int | None = None) -> str:
    """The benchmark's base checkpoint: the tiny model, or a random bf16 7B-shaped Llama with the tiny tokenizer
    (``layers`` keeps the 7B width with fewer layers, so that every row fits one GPU)."""
    if shape == "tiny":
        return str(build_tiny_model(directory / "tiny", [], TinyModelSettings(), seed=0))
    return str(build_7b(directory, layers=layers))


def make_examples(count: int, prompt_len: int, completion_len: int, vocab: int) -> list[TrainExample]:
    """Seeded random token sequences with lengths spread around the given means and weights in [-1, 1]."""
    rng = random.Random(0)
    examples = []
    for _ in range(count):
        prompt = [rng.randrange(3, vocab) for _ in range(rng.randint(prompt_len // 2, prompt_len * 3 // 2))]
        completion = [rng.randrange(3, vocab) for _ in range(rng.randint(completion_len // 2, completion_len * 3 // 2))]
        examples.append(TrainExample(prompt, completion, weight=rng.uniform(-1.0, 1.0)))
    return examples


def plain_loop(checkpoint: str, examples: list[TrainExample], settings: TrainSettings, output: Path) -> Row:
    """One process, no Ray: load, train with the learner's own step code, save; as the Ray workers do."""
    row = Row("plain torch loop (1 process)")
    device = torch.device("cuda" if settings.use_gpu else "cpu")
    start = time.perf_counter()
    # On GPU the plain loop keeps weights and Adam state in bf16: fp32 ones for 7B do not fit one GPU.
    dtype = torch.bfloat16 if settings.bf16 else torch.float32
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=dtype).to(device)
    if settings.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    [steps] = plan_steps(examples, objective(OBJECTIVE), replace(settings, learner_workers=1))
    update = TorchUpdate(model, make_optimizer(model, settings), settings.grad_clip_norm)
    train_start = time.perf_counter()
    totals = run_steps(model, update, steps, objective(OBJECTIVE), settings)
    if settings.use_gpu:
        torch.cuda.synchronize()
    row.train_seconds = time.perf_counter() - train_start
    model.save_pretrained(output)
    row.wall_seconds = time.perf_counter() - start
    row.tokens = int(totals["num_tokens"])
    del model, update
    if settings.use_gpu:
        torch.cuda.empty_cache()
    return row


def ray_learner(checkpoint: str, examples: list[TrainExample], settings: TrainSettings, output: Path) -> Row:
    """One :func:`sgs.machinery.learner.train` call: a whole Ray Train run."""
    row = Row(f"Ray Train {settings.strategy} ({settings.learner_workers} workers)")
    start = time.perf_counter()
    result = train(examples, base_checkpoint=checkpoint, objective=OBJECTIVE, settings=settings,
                   output_dir=str(output), run_name=f"bench-learner-{settings.strategy}-{uuid.uuid4().hex[:8]}")
    row.wall_seconds = time.perf_counter() - start
    row.tokens = result.metrics.num_tokens
    row.train_seconds = result.metrics.train_seconds
    return row


def measure(name: str, run, *args) -> Row:
    """Run one row; a failure (out of memory, say) becomes a row with the error."""
    try:
        return run(*args)
    except Exception as error:  # noqa: BLE001 - reported in the table, the other rows still run
        return Row(name, error=f"{type(error).__name__}: {str(error).splitlines()[0][:80]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=("tiny", "7b"), default="tiny")
    parser.add_argument("--examples", type=int, default=128, help="training sequences (one epoch)")
    parser.add_argument("--prompt-len", type=int, default=None, help="mean prompt tokens (tiny 64, 7b 512)")
    parser.add_argument("--completion-len", type=int, default=None, help="mean completion tokens (tiny 192, 7b 1536)")
    parser.add_argument("--workers", type=int, default=None, help="Ray Train workers (tiny: 2; 7b: the GPUs)")
    parser.add_argument("--layers", type=int, default=None,
                        help="7b only: keep the 7B width with this many layers (30 in the real shape); with 8, "
                             "DDP and ZeRO-2 fit one 80 GB GPU")
    parser.add_argument("--rows", default=",".join(ROWS),
                        help=f"comma-separated runs to make, of {', '.join(ROWS)} (the ratios need plain and deepspeed)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    chosen = [row.strip() for row in args.rows.split(",") if row.strip()]
    if not chosen or set(chosen) - set(ROWS):
        parser.error(f"--rows: choose from {', '.join(ROWS)}, got {args.rows!r}")

    gpu = args.shape == "7b"
    if gpu and not torch.cuda.is_available():
        parser.error("--shape 7b needs a GPU machine")
    if args.layers is not None and (not gpu or args.layers < 1):
        parser.error("--layers needs --shape 7b and a positive number")
    workers = args.workers or (torch.cuda.device_count() if gpu else 2)
    prompt_len = args.prompt_len or (512 if gpu else 64)
    completion_len = args.completion_len or (1536 if gpu else 192)
    settings = TrainSettings(
        learning_rate=3e-6,
        max_seq_len=4 * (prompt_len + completion_len),
        bf16=gpu,
        gradient_checkpointing=gpu,
        learner_workers=workers,
        cpus_per_learner_worker=1.0,
        use_gpu=gpu,
    )

    ray.init(address="local", logging_level=logging.WARNING, runtime_env=own_cluster_runtime_env(),
             **({} if gpu else {"num_cpus": workers}))
    work = Path(tempfile.mkdtemp(prefix="bench-learner-"))
    try:
        checkpoint = build_checkpoint(args.shape, work, args.layers)
        vocab = AutoTokenizer.from_pretrained(checkpoint).vocab_size
        examples = make_examples(args.examples, prompt_len, completion_len, vocab)
        if not gpu:
            # One thread, as each 1-CPU Ray worker has (OMP_NUM_THREADS=1).  torch's default, one
            # thread per core, collapses when the cores are shared (measured: 14x slower here).
            torch.set_num_threads(1)
        rows = {}
        for key in (key for key in ROWS if key in chosen):
            if key == "plain":
                rows[key] = measure("plain torch loop (1 process)", plain_loop, checkpoint, examples, settings,
                                    work / "plain")
            else:
                rows[key] = measure(f"Ray Train {key} ({workers} workers)", ray_learner, checkpoint, examples,
                                    replace(settings, strategy=key), work / key)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        ray.shutdown()

    layers = f" ({args.layers} layers)" if args.layers else ""
    print(f"\nshape {args.shape}{layers}, {args.examples} sequences, {workers} Ray Train workers"
          f"{'' if gpu else ' of 1 CPU each, plain loop on 1 thread'}, "
          f"global batch {settings.global_batch_size}, micro-batch {settings.micro_batch_size}")
    print(f"{'run':<34} {'tokens':>8} {'train s':>8} {'train tok/s':>12} {'wall s':>8} {'end-to-end tok/s':>17}")
    if args.json:
        args.json.write_text(json.dumps({key: asdict(row) for key, row in rows.items()}, indent=1))
    for row in rows.values():
        if row.error:
            print(f"{row.name:<34} failed: {row.error}")
        else:
            print(f"{row.name:<34} {row.tokens:>8} {row.train_seconds:>8.2f} {row.train_rate():>12.0f} "
                  f"{row.wall_seconds:>8.2f} {row.wall_rate():>17.0f}")
    plain, deepspeed = rows.get("plain"), rows.get("deepspeed")
    if plain is None or deepspeed is None:
        return
    if plain.error or deepspeed.error:
        print("learner: n/a (a run failed)")
        return
    print(f"training steps only: deepspeed / plain = {deepspeed.train_rate() / plain.train_rate():.2f}x")
    print(f"learner: {deepspeed.wall_rate() / plain.wall_rate():.3f}x")


if __name__ == "__main__":
    main()
