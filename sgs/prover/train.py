"""Train the general Rocq prover on the corpus: one recipe, one process, resumable.

    python -m sgs.prover.train --corpus runs/corpus --out runs/prover/s --size s --minutes 60
    python -m sgs.prover.train --corpus runs/corpus --out runs/prover/s --size s --minutes 60   # resumes
    python -m sgs.prover.train --corpus DIR --out runs/prover/ft --init sgs/data/rocq_prover --minutes 5

The model is the project's own Llama (:mod:`sgs.machinery.models.tiny`: the
same architecture, tokenizer kind and chat template as the tiny default
model, so every engine and the learner load it as they load that one), with
its byte-level BPE fit to Rocq text: the tokenizer is trained on a sample of
the training examples.  It learns :func:`sgs.prover.examples.training_examples`
with the completion-only NLL (the warm start's objective).

Why a plain PyTorch loop and not the Ray Train learner the warm start and
self-play use: this is one long single-process job on a CPU whose only
needs are a time budget and resuming after a stop (a session ends at three
hours), and the learner's per-call start-up is paid once per update there.
The result is an ordinary Hugging Face checkpoint that the learner and the
engines take as ``model.path``.

Time, not epochs, is the budget (``--minutes``), counted as the process's
CPU time (core-minutes: with ``--threads 2`` a wall minute counts two), so
that a run sharing the machine with other work is charged only for what it
used: the size ladder compares sizes at equal compute.  The learning rate
follows a cosine over that time, so a resumed run continues the same
schedule.  Every
``--save-minutes`` the model, optimiser and progress are written to
``<out>/checkpoint`` (a new directory renamed into place); a stopped run
loses at most that much.

``--init CHECKPOINT`` fine-tunes an existing checkpoint (its weights and its
tokenizer, as it is: ``--size`` does not apply) instead of building a model
from nothing; ``sgs.fill --adapt`` starts so from the shipped prover.  A
resumed run continues from its own ``checkpoint``, never again from the
starting one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from lean_env.arguments import positive_float
from sgs.config import TinyModelSettings
from sgs.prover.examples import PremisePrompts, ProofPrompts, TextExample, training_examples

__all__ = ["SIZES", "TrainOptions", "init_checkpoint", "train", "main"]

#: The size ladder.  head_dim stays 32 (vLLM-CPU's smallest); the vocabulary is
#: 4096 for all, fit to Rocq text.
SIZES: dict[str, TinyModelSettings] = {
    "xs": TinyModelSettings(vocab_size=4096, hidden_size=128, intermediate_size=256,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4),
    "s": TinyModelSettings(vocab_size=4096, hidden_size=256, intermediate_size=688,
                           num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8),
    "m": TinyModelSettings(vocab_size=4096, hidden_size=384, intermediate_size=1024,
                           num_hidden_layers=6, num_attention_heads=12, num_key_value_heads=12),
}

#: examples longer than this many tokens (prompt + completion) are left out
MAX_TOKENS = 768
#: texts the tokenizer is fit on (a seeded sample of the training examples)
TOKENIZER_TEXTS = 20_000
CHECKPOINT = "checkpoint"
PROGRESS = "progress.json"
LOG = "train_log.jsonl"


@dataclass(frozen=True)
class TrainOptions:
    corpus: Path
    out: Path
    size: str = "s"
    minutes: float = 60.0
    learning_rate: float = 1e-3
    #: tokens per optimiser step (padded batches of examples of similar length)
    batch_tokens: int = 4096
    warmup_steps: int = 100
    save_minutes: float = 10.0
    threads: int = 1
    seed: int = 0
    warmstart: Optional[str] = "pkg://sgs/data/warmstart_rocq.jsonl"
    libraries: Optional[tuple[str, ...]] = None
    #: show retrieved premises in the tactic prompts (:class:`sgs.prover.examples.PremisePrompts`)
    premises: bool = False
    #: show the proofs of similar earlier lemmas in the tactic prompts (:class:`sgs.prover.examples.ProofPrompts`)
    proofs: bool = False
    #: a checkpoint to fine-tune (a directory or ``pkg://`` source) instead of a new model of ``size``
    init: Optional[str] = None


def _encode(examples: Sequence[TextExample], tokenizer) -> list[tuple[list[int], int]]:
    """(token ids, prompt length) per example, in the chat form the engines send."""
    from sgs.machinery.prompts import chat_prompt
    encoded = []
    for example in examples:
        prompt = tokenizer(chat_prompt(tokenizer, example.prompt))["input_ids"]
        completion = tokenizer(example.completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        if len(prompt) + len(completion) <= MAX_TOKENS:
            encoded.append((prompt + completion, len(prompt)))
    return encoded


def batches(lengths: Sequence[int], batch_tokens: int, rng: random.Random) -> list[list[int]]:
    """Indices grouped into batches of similar length whose padded size stays
    within ``batch_tokens`` (at least one example each), in a random order.

    Sorting by length before cutting keeps padding small; shuffling inside
    equal lengths and then the batches keeps the order random."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], rng.random()))
    groups: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (len(current) + 1) * lengths[i] > batch_tokens:
            groups.append(current)
            current = []
        current.append(i)
    if current:
        groups.append(current)
    rng.shuffle(groups)
    return groups


def learning_rate(base: float, step: int, elapsed: float, budget: float, warmup: int) -> float:
    """Linear warm-up over ``warmup`` steps, then a cosine over the time budget down to a tenth."""
    if step < warmup:
        return base * (step + 1) / warmup
    progress = min(1.0, elapsed / budget) if budget > 0 else 1.0
    return base * (0.1 + 0.45 * (1.0 + math.cos(math.pi * progress)))


def _tensor_batch(encoded, indices, pad_id):
    import torch
    width = max(len(encoded[i][0]) for i in indices)
    ids = torch.full((len(indices), width), pad_id, dtype=torch.long)
    labels = torch.full((len(indices), width), -100, dtype=torch.long)
    mask = torch.zeros((len(indices), width), dtype=torch.long)
    for row, i in enumerate(indices):
        tokens, prompt_length = encoded[i]
        ids[row, :len(tokens)] = torch.tensor(tokens)
        labels[row, prompt_length:len(tokens)] = torch.tensor(tokens[prompt_length:])
        mask[row, :len(tokens)] = 1
    return ids, labels, mask


def evaluate_loss(model, encoded, batch_tokens: int, pad_id: int) -> float:
    """Mean NLL per completion token over ``encoded``."""
    import torch
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for indices in batches([len(t) for t, _ in encoded], batch_tokens, random.Random(0)):
            ids, labels, mask = _tensor_batch(encoded, indices, pad_id)
            tokens = int((labels[:, 1:] != -100).sum())
            total += float(model(input_ids=ids, attention_mask=mask, labels=labels).loss) * tokens
            count += tokens
    model.train()
    return total / max(count, 1)


def _initial_model(options: TrainOptions, examples: Sequence[TextExample]) -> Path:
    if options.init is not None:
        return init_checkpoint(options.init)
    from sgs.machinery.models.tiny import build_tiny_model
    sample = random.Random(options.seed).sample(list(examples), min(TOKENIZER_TEXTS, len(examples)))
    texts = [e.prompt + "\n" + e.completion for e in sample]
    return build_tiny_model(options.out / "init", texts, SIZES[options.size], options.seed)


def init_checkpoint(source: str) -> Path:
    """The directory of a starting checkpoint (``pkg://`` sources resolved); ValueError
    when it holds no Hugging Face model."""
    from sgs.config.schema import model_location
    path = Path(model_location(source)).expanduser()
    if not (path / "config.json").is_file():
        raise ValueError(f"--init {source}: not a checkpoint (no config.json in {path})")
    return path


def _save(model, tokenizer, optimizer, progress: dict, out: Path) -> None:
    import torch
    staging = Path(tempfile.mkdtemp(prefix=".checkpoint-", dir=out))
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    torch.save(optimizer.state_dict(), staging / "optimizer.pt")
    (staging / PROGRESS).write_text(json.dumps(progress, indent=2) + "\n")
    target = out / CHECKPOINT
    if target.exists():
        retired = out / f".retired-{os.getpid()}"
        os.replace(target, retired)
        shutil.rmtree(retired, ignore_errors=True)
    os.replace(staging, target)


def train(options: TrainOptions, log=print) -> dict:
    """Train (or resume) until ``options.minutes`` of training time are spent; returns the progress record."""
    import torch
    import transformers
    from sgs.machinery.models.tiny import load_model_and_tokenizer

    if options.init is None and options.size not in SIZES:
        raise ValueError(f"unknown size {options.size!r}; known: {', '.join(SIZES)}")
    torch.set_num_threads(options.threads)
    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(options.seed)
    options.out.mkdir(parents=True, exist_ok=True)
    premises = PremisePrompts.from_corpus(options.corpus, options.libraries) if options.premises else None
    proofs = ProofPrompts.from_corpus(options.corpus, options.libraries) if options.proofs else None
    examples = training_examples(options.corpus, ("train",), warmstart=options.warmstart,
                                 libraries=options.libraries, seed=options.seed, premises=premises, proofs=proofs)
    held_out = [e for e in training_examples(options.corpus, ("valid",), libraries=options.libraries,
                                             seed=options.seed, premises=premises, proofs=proofs)
                if e.kind == "tactic"][:1000]
    if not examples:
        raise ValueError(f"no training examples in {options.corpus}")
    checkpoint = options.out / CHECKPOINT
    resuming = (checkpoint / PROGRESS).is_file()
    source = checkpoint if resuming else _initial_model(options, examples)
    model, tokenizer = load_model_and_tokenizer(source, dtype="float32")
    model.train()
    encoded = _encode(examples, tokenizer)
    held_out_encoded = _encode(held_out, tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.learning_rate, weight_decay=0.01)
    progress = {"size": options.size if options.init is None else "init",
                "libraries": list(options.libraries or ["all"]), "premises": options.premises,
                "proofs": options.proofs,
                "parameters": sum(p.numel() for p in model.parameters()),
                "examples": len(encoded), "steps": 0, "tokens": 0, "seconds": 0.0, "epochs": 0.0,
                **({"init": str(options.init)} if options.init is not None else {})}
    if resuming:
        optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt"))
        progress = json.loads((checkpoint / PROGRESS).read_text())
    budget = options.minutes * 60.0
    rng = random.Random(options.seed)
    lengths = [len(t) for t, _ in encoded]
    # The batch order is a function of the seed and the epoch, so a resumed
    # run skips exactly the batches already trained on.
    epoch_batches: list[list[int]] = []
    epoch, position = divmod(progress["epochs"], 1.0)
    last_save = time.monotonic()
    log_file = (options.out / LOG).open("a")
    while progress["seconds"] < budget:
        if not epoch_batches:
            rng = random.Random(options.seed * 1000 + int(epoch))
            epoch_batches = batches(lengths, options.batch_tokens, rng)
            skip = int(position * len(epoch_batches))
            epoch_batches, position = epoch_batches[skip:], 0.0
            per_epoch = len(batches(lengths, options.batch_tokens, random.Random(0)))
        indices = epoch_batches.pop(0)
        step_start = time.process_time()
        ids, labels, mask = _tensor_batch(encoded, indices, tokenizer.pad_token_id)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(options.learning_rate, progress["steps"], progress["seconds"], budget,
                                        options.warmup_steps)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        progress["steps"] += 1
        progress["tokens"] += int(mask.sum())
        progress["seconds"] += time.process_time() - step_start
        progress["epochs"] = int(epoch) + 1 - len(epoch_batches) / per_epoch
        if not epoch_batches:
            epoch += 1
        if progress["steps"] % 50 == 0:
            record = {"step": progress["steps"], "loss": round(loss.item(), 4), "tokens": progress["tokens"],
                      "seconds": round(progress["seconds"], 1), "epochs": round(progress["epochs"], 3)}
            log_file.write(json.dumps(record) + "\n")
            log_file.flush()
            log(f"step {record['step']}  loss {record['loss']:.3f}  epochs {record['epochs']:.2f}  "
                f"{record['seconds'] / 60:.1f} min")
        if time.monotonic() - last_save > options.save_minutes * 60:
            _save(model, tokenizer, optimizer, progress, options.out)
            last_save = time.monotonic()
    # None, not 0, without held-out examples (a project's adaptation trains on all of its proofs)
    progress["held_out_loss"] = round(evaluate_loss(model, held_out_encoded, options.batch_tokens,
                                                    tokenizer.pad_token_id), 4) if held_out_encoded else None
    progress["held_out_examples"] = len(held_out_encoded)
    _save(model, tokenizer, optimizer, progress, options.out)
    measured = (f"held-out loss {progress['held_out_loss']:.3f} per token" if held_out_encoded
                else "no held-out examples")
    log(f"done: {progress['steps']} steps, {progress['epochs']:.2f} epochs, {measured}")
    return progress


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sgs.prover.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="corpus directory (python -m sgs.corpus extract)")
    parser.add_argument("--out", type=Path, required=True, help="run directory (resumed when it holds a checkpoint)")
    parser.add_argument("--size", default="s", help=f"model size: {', '.join(SIZES)}")
    parser.add_argument("--minutes", type=positive_float, default=60.0, help="training budget in CPU minutes")
    parser.add_argument("--learning-rate", type=positive_float, default=1e-3)
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--save-minutes", type=positive_float, default=10.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--libraries", help="comma-separated corpus libraries (default: all)")
    parser.add_argument("--premises", action="store_true", help="show retrieved premises in the tactic prompts")
    parser.add_argument("--proofs", action="store_true",
                        help="show the proofs of similar earlier lemmas in the tactic prompts")
    parser.add_argument("--init", help="fine-tune this checkpoint (directory or pkg:// source) instead of "
                                       "building a new model (--size is then not used)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    problems = []
    if not args.corpus.is_dir():
        problems.append(f"--corpus {args.corpus}: not a directory")
    if args.init is not None:
        try:
            init_checkpoint(args.init)
        except ValueError as error:
            problems.append(str(error))
    elif args.size not in SIZES:
        problems.append(f"--size {args.size!r}: known sizes are {', '.join(SIZES)}")
    if args.batch_tokens < MAX_TOKENS or args.threads < 1:
        problems.append(f"--batch-tokens must be >= {MAX_TOKENS}, --threads >= 1")
    if problems:
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    libraries = tuple(args.libraries.split(",")) if args.libraries else None
    options = TrainOptions(corpus=args.corpus, out=args.out, size=args.size, minutes=args.minutes,
                           learning_rate=args.learning_rate, batch_tokens=args.batch_tokens,
                           save_minutes=args.save_minutes, threads=args.threads, seed=args.seed,
                           libraries=libraries, premises=args.premises, proofs=args.proofs, init=args.init)
    try:
        train(options)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
