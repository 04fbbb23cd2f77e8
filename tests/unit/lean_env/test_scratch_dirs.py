"""Scratch directories left by killed processes are swept by the next process."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from lean_env import scratch
from lean_env.scratch import make_scratch_dir, owner_pid, remove_orphaned_scratch_dirs, scratch_dir

#: above the kernel's largest possible pid_max (2**22): no process has this number
DEAD_PID = 2 ** 22 + 7


@pytest.mark.parametrize("name, pid", [
    ("lean_env-coqtop-pid123-ab_9xyz0", 123),
    ("lean_env-coqtop-census-pid45-abcdefgh", 45),        # a kind with dashes in it
    ("lean_env-lean-repl-3-exchange-pid6-abcdefgh", 6),
    ("lean_env-coqtop-abcdefgh", None),                   # the old naming, without an owner
    ("lean_env-coqtop-pid12-abc", None),                  # not mkdtemp's eight characters
    ("sgs-census-pid12-abcdefgh", None),
    ("lean_env-pid12-abcdefgh", None),                    # no kind
])
def test_the_owner_is_read_from_the_name(name, pid):
    assert owner_pid(name) == pid


def test_only_directories_of_owners_that_no_longer_run_are_removed(tmp_path):
    orphan = tmp_path / f"lean_env-coqtop-pid{DEAD_PID}-abcdefgh"
    (orphan / ".tmp").mkdir(parents=True)
    (orphan / ".tmp" / "left.v").write_text("Lemma x : True.")
    kept = [tmp_path / f"lean_env-coqtop-pid{os.getpid()}-abcdefgh",   # ours
            tmp_path / "lean_env-coqtop-pid1-abcdefgh",                # init runs
            tmp_path / "lean_env-coqtop-abcdefgh",                     # no owner in the name
            tmp_path / "unrelated"]
    for path in kept:
        path.mkdir()
    not_a_dir = tmp_path / f"lean_env-file-pid{DEAD_PID}-abcdefgh"
    not_a_dir.write_text("")
    link = tmp_path / f"lean_env-link-pid{DEAD_PID}-abcdefgh"
    link.symlink_to(tmp_path / "unrelated")

    assert remove_orphaned_scratch_dirs(str(tmp_path)) == [str(orphan)]
    assert not orphan.exists()
    assert all(path.is_dir() for path in kept) and not_a_dir.is_file() and link.is_symlink()


def test_a_missing_parent_is_nothing_to_sweep(tmp_path):
    assert remove_orphaned_scratch_dirs(str(tmp_path / "gone")) == []


def test_the_first_directory_a_process_makes_sweeps_once(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(scratch, "_swept_by", None)
    before = tmp_path / f"lean_env-coqtop-pid{DEAD_PID}-aaaaaaaa"
    before.mkdir()

    first = make_scratch_dir("coqtop")
    assert not before.exists()
    assert owner_pid(os.path.basename(first)) == os.getpid() and os.path.dirname(first) == str(tmp_path)
    assert os.stat(first).st_mode & 0o777 == 0o700

    after = tmp_path / f"lean_env-coqtop-pid{DEAD_PID}-bbbbbbbb"
    after.mkdir()
    second = make_scratch_dir("rocq-audit")
    assert after.exists()                     # swept by the next process, not on every call
    assert os.path.basename(second).startswith(f"lean_env-rocq-audit-pid{os.getpid()}-")


def test_a_with_block_scratch_dir_is_named_for_its_owner_and_gone_after(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with scratch_dir("census-header") as path:
        (Path(path) / "Header.vo").write_bytes(b"compiled")
        assert os.path.basename(path).startswith(f"lean_env-census-header-pid{os.getpid()}-")
    assert not os.path.exists(path)
    with pytest.raises(RuntimeError), scratch_dir("census") as path:
        raise RuntimeError("coqchk failed")
    assert not os.path.exists(path)
