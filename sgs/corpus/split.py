"""The train/valid/test split, by whole files (pure, seeded).

A file's split is a function of the seed, its library and its path only: a
hash, not a shuffle, so it does not depend on which other files exist, on the
order they are extracted in, or on a resumed run.  Whole files are held out,
so no held-out theorem has its neighbours (often near copies) in training.
"""

from __future__ import annotations

import hashlib

SPLITS = ("train", "valid", "test")
#: the share of files in each split, in the order of :data:`SPLITS`
DEFAULT_RATIOS = (0.90, 0.05, 0.05)


def split_of(library: str, file: str, seed: int = 0, ratios: tuple[float, float, float] = DEFAULT_RATIOS) -> str:
    """``train``, ``valid`` or ``test`` for ``file`` (relative to its library's root)."""
    if len(ratios) != len(SPLITS) or any(r < 0 for r in ratios) or abs(sum(ratios) - 1.0) > 1e-9:
        raise ValueError(f"ratios must be {len(SPLITS)} non-negative shares summing to 1, got {ratios}")
    digest = hashlib.sha256(f"{seed}\0{library}\0{file}".encode("utf-8")).digest()
    draw = int.from_bytes(digest[:8], "big") / 2 ** 64      # uniform in [0, 1)
    bound = 0.0
    for name, share in zip(SPLITS, ratios):
        bound += share
        if draw < bound:
            return name
    return SPLITS[-1]   # rounding: the draw is below 1 and the shares sum to 1
