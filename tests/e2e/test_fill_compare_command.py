"""``python -m sgs.fill.compare`` as ``make fill-compare`` calls it, on what needs no prover:
the table from a results file kept apart from the work folder, and a bad ``--results``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO


def compare(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sgs.fill.compare", *flags], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_the_table_is_read_from_the_kept_results_file(tmp_path: Path):
    (tmp_path / "projects" / "p").mkdir(parents=True)
    kept = tmp_path / "kept.jsonl"
    rows = [{"project": "p", "arm": "k", "seed": 0, "admitted": 5, "proved": 2, "adaptation": None},
            {"project": "p", "arm": "m", "seed": 0, "admitted": 5, "proved": 3, "adaptation": None},
            {"project": "p", "arm": "m", "seed": 1, "admitted": 5, "proved": 2, "adaptation": None}]
    kept.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = compare("--out", str(tmp_path / "scratch"), "--results", str(kept), "--projects",
                     str(tmp_path / "projects"), "--table")
    assert result.returncode == 0, result.stderr
    assert "| p | 5 | 2 | 2.5 (3, 2) |" in result.stdout
    assert (tmp_path / "scratch" / "table.md").read_text().rstrip() == result.stdout.rstrip()
    assert kept.read_text().count("\n") == 3  # read, not rewritten


def test_a_results_path_that_is_a_folder_exits_2_naming_it(tmp_path: Path):
    (tmp_path / "projects").mkdir()
    result = compare("--out", str(tmp_path / "scratch"), "--results", str(tmp_path), "--projects",
                     str(tmp_path / "projects"), "--table")
    assert result.returncode == 2
    assert result.stderr.strip() == f"sgs.fill.compare: error: --results {tmp_path}: not a file"
    assert not (tmp_path / "scratch").exists()
