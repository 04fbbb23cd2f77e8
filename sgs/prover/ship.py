"""Put a trained prover checkpoint where the product loads it from.

    python -m sgs.prover.ship runs/prover/final/checkpoint sgs/data/rocq_prover

Copies the model and tokenizer files (not the optimiser state) and writes
``sgs_prover.json``: the training record, the corpus it learned from, and the
SHA-256 of the weights.  That hash is what identifies the base model in the
warm start's cache key, so replacing the shipped weights never reuses a
warm start built on the old ones.  The destination is replaced whole (a
sibling is written first and renamed), and the weights must stay within
the repository's 50 MB.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, Sequence

__all__ = ["RECORD", "MAX_WEIGHT_BYTES", "ship", "weights_sha256", "main"]

RECORD = "sgs_prover.json"
MAX_WEIGHT_BYTES = 50 * 1000 * 1000
#: what a Hugging Face checkpoint needs to load (model, generation defaults, tokenizer, chat template)
FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
         "special_tokens_map.json", "chat_template.jinja")


def weights_sha256(directory: Path) -> str:
    digest = hashlib.sha256()
    with (Path(directory) / "model.safetensors").open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ship(checkpoint: Path, destination: Path, *, corpus_summary: Optional[dict] = None) -> dict:
    """Copy ``checkpoint`` to ``destination``; returns the record written beside it."""
    checkpoint, destination = Path(checkpoint), Path(destination)
    weights = checkpoint / "model.safetensors"
    if not weights.is_file():
        raise ValueError(f"{checkpoint}: no model.safetensors (not a checkpoint of python -m sgs.prover.train)")
    if weights.stat().st_size > MAX_WEIGHT_BYTES:
        raise ValueError(f"{weights}: {weights.stat().st_size / 1e6:.1f} MB, over the {MAX_WEIGHT_BYTES / 1e6:.0f} MB "
                         "a checkpoint may take in the repository")
    progress_file = checkpoint / "progress.json"
    progress = json.loads(progress_file.read_text()) if progress_file.is_file() else {}
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}-", dir=destination.parent))
    staging.chmod(0o755)      # mkdtemp's 0700 would keep the package's model from other users
    try:
        for name in FILES:
            if (checkpoint / name).is_file():
                shutil.copy2(checkpoint / name, staging / name)
                (staging / name).chmod(0o644)
        record = {"weights_sha256": weights_sha256(staging), "training": progress,
                  "corpus": corpus_summary or {}, "shipped_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        (staging / RECORD).write_text(json.dumps(record, indent=2) + "\n")
        if destination.exists():
            retired = destination.with_name(f".{destination.name}-old-{os.getpid()}")
            os.replace(destination, retired)
            shutil.rmtree(retired, ignore_errors=True)
        os.replace(staging, destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return record


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m sgs.prover.ship CHECKPOINT_DIR DESTINATION_DIR", file=sys.stderr)
        return 2
    try:
        record = ship(Path(args[0]), Path(args[1]))
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"shipped {args[0]} to {args[1]} (weights {record['weights_sha256'][:12]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
