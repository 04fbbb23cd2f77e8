"""The JSON lines, the summary line and the readable page of sgs.fill."""

from __future__ import annotations

import json

import pytest

from sgs.fill.report import Row, jsonl, markdown, summary_line

ROWS = [
    Row("A.v", 7, "double", "P.A.double", "statement", "proved", 1.5, proof="Proof.\n  lia.\nQed.",
        prover="automation"),
    Row("A.v", 10, "bogus", "P.A.bogus", "proof", "not_proved", 6.0),
    Row("B.v", 3, "odd", "P.B.odd", "statement", "error", reason="the statement does not elaborate | at all"),
    Row("B.v", 9, "hammered", "P.B.hammered", "statement", "proved", 2.0, proof="Proof.\n  sauto.\nQed.",
        prover="sauto", needs_hammer=True, not_written="B.v: line 11: Error: No such goal."),
]


def test_one_line_per_lemma_with_the_fields_the_issue_names():
    lines = [json.loads(line) for line in jsonl(ROWS).decode().splitlines()]
    assert [line["name"] for line in lines] == ["double", "bogus", "odd", "hammered"]
    for line in lines:
        assert {"file", "line", "name", "status", "seconds"} <= set(line)
    assert lines[0]["proof"] == "Proof.\n  lia.\nQed." and "reason" not in lines[0]
    assert "proof" not in lines[1] and "needs_hammer" not in lines[1]
    assert lines[2]["status"] == "error" and lines[2]["reason"].startswith("the statement")
    assert lines[3]["needs_hammer"] is True and lines[3]["not_written"].startswith("B.v: line 11")
    assert "not_written" not in lines[0]


def test_the_summary_line_counts_every_status():
    assert summary_line(ROWS, 12.4) == "proved 2 of 4 admitted lemmas (1 not proved, 1 errors) in 12 s"


def test_a_row_refuses_what_does_not_go_together():
    with pytest.raises(ValueError):
        Row("A.v", 1, "x", "P.x", "statement", "proved")            # proved without a proof
    with pytest.raises(ValueError):
        Row("A.v", 1, "x", "P.x", "statement", "error")             # an error without its reason
    with pytest.raises(ValueError):
        Row("A.v", 1, "x", "P.x", "statement", "maybe")
    with pytest.raises(ValueError):
        Row("A.v", 1, "x", "P.x", "statement", "not_proved", not_written="B.v: line 1: Error")


def test_the_page_has_the_summary_every_lemma_the_proofs_and_the_write_outcome():
    page = markdown(ROWS, project="/p", command="python -m sgs.fill /p", when="2026-11-29 12:00 UTC",
                    seconds=12.4, settings={"workers": 2}, write="wrote 2 proofs into 1 file")
    assert "**proved 2 of 4 admitted lemmas" in page
    assert page.count("\n| ") == 5   # the header and one row per lemma
    assert "error: the statement does not elaborate \\| at all" in page
    assert "```coq\nProof.\n  lia.\nQed.\n```" in page
    assert "From Hammer Require Import Tactics." in page
    assert "--write: wrote 2 proofs into 1 file" in page
    assert "| proved, not written | sauto |" in page and "not written: it does not build in its file (B.v: line 11" in page
    assert "--write" not in markdown(ROWS, project="/p", command="c", when="w", seconds=1, settings={})
