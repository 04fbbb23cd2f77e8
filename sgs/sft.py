"""The warm start: supervised fine-tuning of the base model before self-play.

    python -m sgs.sft                              # warm-start the default model (the config of `python -m sgs`)
    python -m sgs.sft warmstart.epochs=2           # any override `python -m sgs` takes
    python -m sgs.sft warmstart.max_examples=300   # a quick smoke run on a seeded sample of the corpus
    python -m sgs.sft model.path=/ckpt warmstart.mode=always warmstart.corpus=/data/guide.jsonl \\
        warmstart.roles=[guide]                    # a Guide for the review format: pass the checkpoint
                                                   # it prints as model.guide_path

A randomly initialised model (the tiny default model) writes no proof, no
statement and no review, so self-play would have nothing to learn from.  The
warm start trains the base model on a corpus of (prompt, completion) pairs for
the three roles (:mod:`sgs.state.warmstart`; the shipped Rocq corpus is checked by
Rocq) through the SAME Ray Train learner as the self-play updates
(:func:`sgs.machinery.learner.train`), with the plain NLL objective: every example has
weight 1.  The paper fine-tunes its Guide for the output format the same way.

Prompts.  The corpus holds the role text as :class:`sgs.method.roles.PromptSet`
renders it; here it is wrapped by :func:`sgs.machinery.prompts.chat_prompt` and
tokenised exactly as the engines do at sampling time
(:class:`sgs.machinery.prompts.Prompter`), so the model is trained on the prompts it
will be asked.

Cache.  The result is a Hugging Face checkpoint in
``<cache dir>/warmstart/<key>`` (the cache dir of :func:`sgs.machinery.models.default_cache_dir`),
where the key hashes the corpus content, the base model (the tiny model's
build fingerprint, else its path) and the training settings.  A later run
with the same inputs finds it and starts at once.  Training writes to a
staging directory that is renamed into place only when it is complete, so a
run killed mid-training leaves no half-checkpoint (the next one starts
over); a lock file makes concurrent runs wait for one training (and one
report) instead of doing it twice.

Report.  After training, :func:`warmup_report` samples the warm model with
real engines and the verifier pool: the Solver's pass@k on the training
targets (self-play needs some but not all of them proved), how often the
Conjecturer's outputs parse (and elaborate), and how often the Guide's
reviews parse.  It is printed and stored beside the checkpoint
(``warmup_report.json``), measured once per cached checkpoint.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import ray
from transformers import AutoTokenizer

from lean_env.pool import VerifierPool
from sgs.config import ConfigError, SGSConfig, compose_config, requirements_problems, validate
from sgs.config import warmstart_enabled
from sgs.analysis.evaluation import conjecturer_outputs, guide_parse_rate, read_json, solver_pass_at_k, write_json
from sgs.machinery.learner import TrainExample, TrainSettings, train
from sgs.machinery.models import ModelPaths, default_cache_dir
from sgs.machinery.models.tiny import BUILD_INFO_FILE
from sgs.prover.ship import RECORD as PROVER_RECORD
from sgs.state.records import Target
from sgs.machinery.prompts import Prompter, chat_prompt
from sgs.machinery.runtime import (Checkpoint, conjecturer_settings, model_paths, pinned_gpus, sampling_settings,
                                   start_engines, start_ray, start_verifier_pool, train_settings)
from sgs.state.targets import batch_targets, load_targets, seeded_subsample
from sgs.state.warmstart import WarmstartExample, corpus_fingerprint, load_corpus

#: Bump when the training procedure changes, so old cached checkpoints are not reused.
SFT_VERSION = 1
#: Cache subdirectory (under :func:`sgs.machinery.models.default_cache_dir`).
CACHE_SUBDIR = "warmstart"
#: Written last into a finished checkpoint: the key, its inputs, the learner's numbers.
INFO_FILE = "sgs_warmstart.json"
#: The warm-up report, beside the checkpoint.
REPORT_FILE = "warmup_report.json"


@dataclass(frozen=True)
class WarmStart:
    """A warm-started checkpoint."""

    checkpoint: str
    """Hugging Face checkpoint directory (with the tokenizer)."""
    trained: bool
    """True if this call trained it; False if it came from the cache."""
    info: dict
    """The contents of its ``sgs_warmstart.json``: key, inputs, learner metrics."""
    report: dict | None
    """The warm-up report (:func:`warmup_report`), None until measured."""


# --------------------------------------------------------------------------
# Pure parts: settings, examples, cache key
# --------------------------------------------------------------------------


def sft_settings(cfg: SGSConfig) -> TrainSettings:
    """The learner's settings for the warm start: the run's optimiser and
    placement, with the ``warmstart`` node's epochs, learning rate and batch
    sizes, a fresh optimiser and the token-mean NLL."""
    ws = cfg.warmstart
    return replace(train_settings(cfg), learning_rate=ws.learning_rate, epochs=ws.epochs,
                   global_batch_size=ws.global_batch_size, micro_batch_size=ws.micro_batch_size,
                   loss_normalisation="token_mean", optimizer_state="reset")


def training_examples(examples: Sequence[WarmstartExample], tokenizer: Any,
                      roles: Sequence[str]) -> list[TrainExample]:
    """The corpus lines of ``roles`` as learner examples of weight 1.

    The prompt is the chat-wrapped role text, tokenised as the engines
    tokenise prompts; the completion ends with EOS, so the model learns to stop.
    """
    out = []
    for example in examples:
        if example.role.value not in roles:
            continue
        prompt_ids = tokenizer(chat_prompt(tokenizer, example.prompt))["input_ids"]
        completion_ids = tokenizer(example.completion, add_special_tokens=False)["input_ids"]
        out.append(TrainExample(prompt_ids=prompt_ids, completion_ids=completion_ids + [tokenizer.eos_token_id],
                                weight=1.0))
    return out


def base_identity(path: str) -> str:
    """What identifies the base model in the cache key: the tiny model's build
    fingerprint (it covers architecture, seed and tokenizer corpus), the
    shipped prover's weight hash (:mod:`sgs.prover.ship`; its path stays the
    same when the weights are replaced), else the checkpoint's path or hub id
    as given."""
    for prefix, record, key in (("tiny:", BUILD_INFO_FILE, "fingerprint"), ("prover:", PROVER_RECORD, "weights_sha256")):
        try:
            return prefix + json.loads((Path(path) / record).read_text())[key]
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return "path:" + (os.path.abspath(path) if os.path.isdir(path) else path)


def cache_key(cfg: SGSConfig, paths: ModelPaths) -> dict:
    """Everything that determines the warm-started weights, as plain JSON
    (equal to itself read back from the checkpoint's info file)."""
    settings = asdict(sft_settings(cfg))
    # Placement changes the speed and, through the order of floating-point sums,
    # the last digits of the weights, not what is trained: one warm start serves
    # every placement.  Restarts after lost workers change nothing.
    for name in ("learner_workers", "cpus_per_learner_worker", "use_gpu", "simulated_gpus", "learner_placement",
                 "learner_restarts"):
        settings.pop(name)
    key = {
        "version": SFT_VERSION,
        "corpus_sha256": corpus_fingerprint(cfg.warmstart.corpus),
        "language": cfg.prover.language,
        "roles": sorted(cfg.warmstart.roles),
        "base": base_identity(paths.base),
        "tokenizer": base_identity(paths.tokenizer),
        "settings": settings,
    }
    if cfg.warmstart.max_examples is not None:
        # Only when set, so that the caches of full-corpus warm starts keep their keys.
        key["max_examples"] = cfg.warmstart.max_examples
    return json.loads(json.dumps(key))


def key_digest(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------
# Training (with the cache)
# --------------------------------------------------------------------------


def cached_checkpoint(cfg: SGSConfig, paths: ModelPaths, cache_dir: Path | None = None) -> WarmStart | None:
    """The finished warm start for these inputs, if the cache holds one."""
    key = cache_key(cfg, paths)
    digest = key_digest(key)
    directory = (cache_dir or default_cache_dir()) / CACHE_SUBDIR / digest[:16]
    info = read_json(directory / INFO_FILE)
    if info is None or info.get("digest") != digest:
        return None
    return WarmStart(str(directory), trained=False, info=info, report=read_json(directory / REPORT_FILE))


@contextmanager
def _locked(checkpoint: Path) -> Iterator[None]:
    """Hold the cache's lock on ``checkpoint`` (a file beside it): one process
    trains it or measures its report while the others wait, then read it."""
    with open(checkpoint.parent / f"{checkpoint.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def warm_start(cfg: SGSConfig, paths: ModelPaths, cache_dir: Path | None = None) -> WarmStart:
    """Fine-tune ``paths.base`` on ``cfg.warmstart.corpus``, or return the cached result.

    Needs Ray to be initialised (the learner is a Ray Train run).  The
    returned checkpoint has no report yet when this call trained it; see
    :func:`prepare` for training plus report.
    """
    root = (cache_dir or default_cache_dir()) / CACHE_SUBDIR
    root.mkdir(parents=True, exist_ok=True)
    key = cache_key(cfg, paths)
    digest = key_digest(key)
    final = root / digest[:16]
    # Another process training the same checkpoint finishes first; we then find it.
    with _locked(final):
        found = cached_checkpoint(cfg, paths, cache_dir)
        if found is not None:
            return found
        if final.exists():
            shutil.rmtree(final)  # a checkpoint of another key under a colliding prefix, or damaged
        # Left behind only by a killed run (we hold the lock): start over.
        staging = root / f".{digest[:16]}.partial"
        shutil.rmtree(staging, ignore_errors=True)

        tokenizer = AutoTokenizer.from_pretrained(paths.tokenizer)
        examples = training_examples(load_corpus(cfg.warmstart.corpus, cfg.prover.language), tokenizer,
                                     cfg.warmstart.roles)
        examples = seeded_subsample(examples, cfg.warmstart.max_examples, cfg.seed)
        if not examples:
            raise ValueError(f"warmstart.corpus={cfg.warmstart.corpus!r} holds no line for the roles "
                             f"{list(cfg.warmstart.roles)}")
        started = time.perf_counter()
        result = train(examples, base_checkpoint=paths.base, objective="reinforce", settings=sft_settings(cfg),
                       output_dir=str(staging), run_name=f"warmstart-{digest[:12]}")
        if paths.tokenizer != paths.base:
            # The learner saved the base's tokenizer; the prompts were tokenised with this one.
            tokenizer.save_pretrained(staging)
        info = {"digest": digest, "key": key, "corpus": cfg.warmstart.corpus, "examples": len(examples),
                "seconds": time.perf_counter() - started, "metrics": asdict(result.metrics)}
        (staging / INFO_FILE).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
        os.rename(staging, final)
    return WarmStart(str(final), trained=True, info=info, report=None)


def default_weights(cfg: SGSConfig, paths: ModelPaths, *, train: bool) -> tuple[str, str]:
    """The weights ``python -m sgs`` starts self-play from and their tokenizer:
    the base model, or its warm start when the run would warm-start it.

    With ``train`` a warm start the cache lacks is trained now (Ray must be
    initialised); without, the base model stands in for it.
    """
    if not warmstart_enabled(cfg):
        return paths.base, paths.tokenizer
    found = warm_start(cfg, paths) if train else cached_checkpoint(cfg, paths)
    if found is None:
        return paths.base, paths.tokenizer
    # Its checkpoint holds the tokenizer the prompts were trained with.
    return found.checkpoint, found.checkpoint


# --------------------------------------------------------------------------
# The warm-up report
# --------------------------------------------------------------------------


def report_targets(cfg: SGSConfig, targets: Sequence[Target]) -> list[Target]:
    """The training targets the report samples: all of them, or a seeded
    subsample of ``warmstart.report_targets`` (target files are often sorted
    by topic, so the first N would not be representative)."""
    return batch_targets(targets, cfg.warmstart.report_targets, cfg.seed, iteration=0)


def warmup_report(cfg: SGSConfig, checkpoint: str, tokenizer: Any, targets: Sequence[Target],
                  pool: VerifierPool | None = None) -> dict:
    """Sample the model at ``checkpoint`` in the three roles on ``targets``, with
    one engine started for it, at the run's sampling settings; proofs are
    checked by ``pool`` (the run's, whose verdict cache then holds them too),
    or by a pool started for the report when None.

    Returns the Solver's pass@k (k = ``method.num_solver_samples``) and
    per-sample valid rate, the Conjecturer's parse and elaboration rates (one
    conjecture per target) and the Guide's parse rate on reviews of the
    parsed conjectures.  Needs Ray to be initialised.
    """
    started = time.perf_counter()
    sampling, language = cfg.sampling, cfg.prover.language
    # Colocated, the one engine takes the Solver's first GPU (nothing else holds it now).
    engine = start_engines(cfg, "warmup", Checkpoint(checkpoint, 0), num_engines=1,
                           gpu_ids=pinned_gpus(cfg).get("solver", [])[:1] or None, weight_transfer=False)
    own_pool = pool is None
    try:
        if own_pool:
            pool = start_verifier_pool(cfg, name="warmup-verifier")
        try:
            prompter = Prompter(language, tokenizer)
            k = cfg.method.num_solver_samples
            solver = solver_pass_at_k(engine, pool, prompter, targets,
                                      sampling_settings(sampling.solver, n=k, seed=cfg.seed), language)
            conjectures = conjecturer_outputs(engine, pool, prompter, targets,
                                              conjecturer_settings(cfg, seed=cfg.seed), language)
            guide = guide_parse_rate(engine, prompter, conjectures.parsed,
                                     sampling_settings(sampling.guide, n=1, seed=cfg.seed))
        finally:
            if own_pool:
                pool.shutdown()
    finally:
        engine.shutdown()
    return {
        "checkpoint": checkpoint,
        "targets": len(targets),
        "k": k,
        **_sampled_as(cfg),
        "solver_pass_at_k": solver.pass_at_k,
        "solver_sample_valid_rate": solver.sample_valid_rate,
        "conjecturer_parse_rate": conjectures.parse_rate,
        "conjecturer_elaboration_rate": conjectures.elaboration_rate,
        "guide_parse_rate": guide,
        "guide_reviews": len(conjectures.parsed),
        "seconds": time.perf_counter() - started,
    }


def _sampled_as(cfg: SGSConfig) -> dict:
    """The sampling settings a warm-up report records: a cached report that
    differs in any of them is measured again (``max_seq_len`` caps the
    Conjecturer's samples, :func:`sgs.machinery.runtime.conjecturer_settings`)."""
    sampling = cfg.sampling
    return {"max_tokens": {role: getattr(sampling, role).max_tokens for role in ("solver", "conjecturer", "guide")},
            "conjecturer_grammar": sampling.conjecturer_grammar, "max_seq_len": cfg.training.max_seq_len}


def _report_fits(cfg: SGSConfig, report: dict | None) -> bool:
    """Whether a stored report was measured at this run's sampling settings."""
    return report is not None and all(report.get(key) == value for key, value in _sampled_as(cfg).items())


def format_report(report: dict) -> str:
    """The report as one line of words."""
    guide = "n/a" if report["guide_parse_rate"] is None else f"{report['guide_parse_rate']:.0%}"
    return (f"warm-up: Solver pass@{report['k']} {report['solver_pass_at_k']:.1%} on {report['targets']} training "
            f"targets ({report['solver_sample_valid_rate']:.1%} of samples valid); Conjecturer parses "
            f"{report['conjecturer_parse_rate']:.0%} (elaborates {report['conjecturer_elaboration_rate']:.0%}); "
            f"Guide parses {guide} of {report['guide_reviews']} reviews")


def prepare(cfg: SGSConfig, paths: ModelPaths, targets: Sequence[Target], cache_dir: Path | None = None,
            log: Any = print, pool: VerifierPool | None = None,
            need_ray: Callable[[], None] = lambda: None) -> WarmStart:
    """The warm-started checkpoint with its report: trained and measured
    when the cache lacks them, else read from it.  Prints what it does.
    ``pool``: the run's verifier pool, for the report (see :func:`warmup_report`).
    ``need_ray``: called before training or measuring, which need Ray; the
    command line starts Ray only then, so a cached answer takes no cluster."""
    started = time.perf_counter()
    found = cached_checkpoint(cfg, paths, cache_dir)
    if found is None:
        sample = "" if cfg.warmstart.max_examples is None else f", at most {cfg.warmstart.max_examples} lines"
        log(f"warm start: fine-tuning the base model on {cfg.warmstart.corpus} "
            f"({cfg.warmstart.epochs} epoch(s), lr {cfg.warmstart.learning_rate:g}{sample}); cached for later runs")
        need_ray()
        found = warm_start(cfg, paths, cache_dir)
    if not _report_fits(cfg, found.report):
        # Runs started together (a multirun) measure the report once, the first
        # to take the lock; the others wait and read it.
        with _locked(Path(found.checkpoint)):
            report = read_json(Path(found.checkpoint) / REPORT_FILE)
            if not _report_fits(cfg, report):
                need_ray()
                report = warmup_report(cfg, found.checkpoint, AutoTokenizer.from_pretrained(found.checkpoint),
                                       report_targets(cfg, targets), pool)
                write_json(Path(found.checkpoint) / REPORT_FILE, report)
        found = replace(found, report=report)
    log(f"warm start: {found.checkpoint} ({'trained' if found.trained else 'cached'}, "
        f"{time.perf_counter() - started:.0f} s)")
    log(format_report(found.report))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sgs.sft [overrides]``: warm-start the model the config names."""
    overrides = list(sys.argv[1:] if argv is None else argv)
    try:
        cfg = validate(compose_config(overrides))
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    if not warmstart_enabled(cfg):
        print(f"warmstart.mode={cfg.warmstart.mode!r} does not warm-start this model "
              f"(model.path={cfg.model.path!r}, warmstart.corpus={cfg.warmstart.corpus!r}); "
              "use warmstart.mode=always", file=sys.stderr)
        return 2
    problems = requirements_problems(cfg)
    if problems:
        print("this machine cannot run the config:\n" + "\n".join(f"  - {p}" for p in problems), file=sys.stderr)
        return 3
    targets = load_targets(cfg.targets, cfg.prover.language)
    paths = model_paths(cfg)

    def need_ray() -> None:
        if not ray.is_initialized():
            start_ray(cfg)

    try:
        prepare(cfg, paths, targets, need_ray=need_ray)
    finally:
        ray.shutdown()  # does nothing where Ray was never started
    return 0


if __name__ == "__main__":
    sys.exit(main())
