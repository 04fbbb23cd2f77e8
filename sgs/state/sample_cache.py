"""Samples of the running phase, cached by content, so that a killed driver's
resumed phase does not generate them again.

A phase stores a record only once its sample is fully processed (a proof
verified, a statement elaborated).  Samples that came back from the engines
but were still waiting for the prover when the driver died would otherwise be
drawn again.  The cache writes each sample the moment it returns, under a key
made of everything that determines it:

    sha256(prompt, max_tokens, temperature, top_p, the phase's seed, policy version, sample id,
           max_seq_len)

(the sample id names the problem and the draw, e.g. ``target/t17/a3``).  A
resumed phase looks every wanted sample up first and sends only the misses
to the engines; a change of prompt, sampling settings or weights is a miss,
never a stale hit.

One JSONL file per phase (``iter_0003/prove.samples.jsonl``), appended and
flushed line by line; a torn last line (a kill mid-write) is skipped when
reading.

The same format serves one cache that outlives runs: the start samples
(:func:`start_samples_path`), the Solver's samples of the base weights on
the targets, shared by every run that starts from those weights, so that
experiments with one seed start from identical samples.  Its file is named
by a fingerprint of the weights and the engine backend; the key above
covers everything else.  The file is deleted once the phase is committed: its records then
hold everything that mattered.  Prompt token ids are not stored (they would
double the file for long prompts): the reader re-tokenises the prompt, which
is what the engines did.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

from sgs.machinery.engines import Sample, SamplingSettings

log = logging.getLogger(__name__)


def weights_fingerprint(weights: str, engine_backend: str) -> str:
    """A name for base weights as served by one engine backend: the path (or hub
    id) and, for a local directory, the name, size and modification time of
    every file that decides what the model samples (weights, model config,
    tokenizer), so that weights rewritten in place get a new name.  Reports
    written beside the weights later do not change it."""
    parts = [engine_backend, weights]
    directory = Path(weights)
    if directory.is_dir():
        parts += [f"{p.relative_to(directory)}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
                  for p in sorted(directory.rglob("*")) if p.is_file() and _decides_samples(p.name)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _decides_samples(name: str) -> bool:
    return (name.endswith((".safetensors", ".bin")) or name.startswith("tokenizer")
            or name in ("config.json", "generation_config.json", "special_tokens_map.json"))


def start_samples_path(cache_dir: str | os.PathLike, weights: str, engine_backend: str) -> Path:
    """The shared start-samples file of these base weights under ``cache_dir``."""
    return Path(cache_dir) / "starts" / f"{weights_fingerprint(weights, engine_backend)}.samples.jsonl"


def sample_key(prompt: str, settings: SamplingSettings, policy_version: int, sample_id: str) -> str:
    """The content address of one sample (``settings.n`` does not matter: each sample is keyed alone)."""
    content = json.dumps([prompt, settings.max_tokens, settings.temperature, settings.top_p, settings.seed,
                          policy_version, sample_id, settings.max_seq_len])
    return hashlib.sha256(content.encode()).hexdigest()


class SampleCache:
    """Append-only cache of one phase's samples."""

    def __init__(self, path: str | os.PathLike, prompt_token_ids: Callable[[str], list[int]]):
        """Open ``path`` (created on the first write); ``prompt_token_ids``
        tokenises a prompt as the engines do."""
        self.path = Path(path)
        self._prompt_token_ids = prompt_token_ids
        self._entries: dict[str, dict] = {}
        if self.path.exists():
            self._entries = self._read()
        self._file = None

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str, prompt: str) -> Sample | None:
        """The cached sample under ``key`` (drawn from ``prompt``), or None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        return Sample(prompt_token_ids=self._prompt_token_ids(prompt), **entry)

    def put(self, key: str, sample: Sample) -> None:
        entry = {"text": sample.text, "token_ids": list(sample.token_ids), "logprobs": list(sample.logprobs),
                 "finish_reason": sample.finish_reason, "policy_version": sample.policy_version,
                 "entropy": sample.entropy}
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")
        self._file.write(json.dumps({"key": key, **entry}) + "\n")
        self._file.flush()
        self._entries[key] = entry

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def discard(self) -> None:
        """Close and delete the file (the phase is committed)."""
        self.close()
        self.path.unlink(missing_ok=True)
        self._entries = {}

    def _read(self) -> dict[str, dict]:
        """The cached entries.  A cache never stops a run: a torn last line
        (no newline after it) is cut off, an unreadable line is skipped, both
        with a warning, and their samples are simply drawn again."""
        data = self.path.read_bytes()
        *complete, torn = data.split(b"\n")
        if torn:
            log.warning("%s: cutting a torn last line", self.path)
            with open(self.path, "r+b") as handle:
                handle.truncate(len(data) - len(torn))
        entries = {}
        for number, line in enumerate(complete, 1):
            try:
                entry = json.loads(line)
                entries[entry.pop("key")] = entry
            except (ValueError, KeyError, AttributeError, TypeError):  # UnicodeDecodeError is a ValueError
                log.warning("%s:%d: skipping a line that is not a cached sample", self.path, number)
        return entries
