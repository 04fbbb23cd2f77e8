"""Whether a command may write where it was told to, asked before it starts."""

from __future__ import annotations

import os

from sgs.state.files import folder_problem, writable


def test_a_folder_to_be_made_under_a_writable_one_is_fine(tmp_path):
    assert folder_problem(tmp_path) is None
    assert folder_problem(tmp_path / "a" / "b") is None
    assert not (tmp_path / "a").exists()        # asking makes nothing


def test_a_file_on_the_way_is_named(tmp_path):
    (tmp_path / "report").write_text("")
    assert folder_problem(tmp_path / "report") == f"{tmp_path / 'report'} is not a folder"
    assert folder_problem(tmp_path / "report" / "x") == f"{tmp_path / 'report'} is not a folder"


def test_a_folder_marked_read_only_is_read_only_even_for_root(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o555)
    try:
        assert not writable(locked)
        assert folder_problem(locked / "out") == f"{locked} cannot be written (read-only)"
    finally:
        os.chmod(locked, 0o755)
    assert writable(locked)
