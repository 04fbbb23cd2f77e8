"""The split by file: a pure function of the seed, the library and the path."""

from __future__ import annotations

import collections

import pytest

from sgs.corpus.split import SPLITS, split_of


def test_the_same_file_always_lands_in_the_same_split():
    first = [split_of("stdlib", f"Dir/File{k}.v", seed=3) for k in range(200)]
    again = [split_of("stdlib", f"Dir/File{k}.v", seed=3) for k in reversed(range(200))]
    assert first == list(reversed(again))


def test_the_shares_follow_the_ratios():
    counts = collections.Counter(split_of("stdlib", f"F{k}.v") for k in range(4000))
    assert set(counts) == set(SPLITS)
    assert 0.87 < counts["train"] / 4000 < 0.93
    assert 0.03 < counts["valid"] / 4000 < 0.07
    assert 0.03 < counts["test"] / 4000 < 0.07


def test_the_seed_and_the_library_change_the_draw():
    files = [f"F{k}.v" for k in range(300)]
    base = [split_of("stdlib", f, seed=0) for f in files]
    assert base != [split_of("stdlib", f, seed=1) for f in files]
    assert base != [split_of("flocq", f, seed=0) for f in files]


def test_ratios_decide_everything():
    assert {split_of("stdlib", f"F{k}.v", ratios=(0.0, 0.0, 1.0)) for k in range(50)} == {"test"}
    assert {split_of("stdlib", f"F{k}.v", ratios=(1.0, 0.0, 0.0)) for k in range(50)} == {"train"}


@pytest.mark.parametrize("ratios", [(0.5, 0.5), (0.9, 0.2, -0.1), (0.5, 0.3, 0.1)])
def test_bad_ratios_are_refused(ratios):
    with pytest.raises(ValueError):
        split_of("stdlib", "F.v", ratios=ratios)
