"""The results file of ``make bench`` and the README text rendered from it.

Pure functions over the file's content (a dict); :mod:`harness` runs the
benchmarks and calls these.  The file, ``benchmarks/results.json``::

    {"schema": 1, "updated": "...",
     "figures": {"verifier_speedup": {"benchmark": "verifier", "median": 16.3, "min": 16.2, "max": 22.8,
                                      "values": [...], "load_before": [...], "load_after": [...],
                                      "date": "...", "commit": "...", "machine": {...}, "source": "make bench"}},
     "outputs": {"verifier": "the output of the run whose figure is the median"},
     "failures": {"learner": {"why": "...", "output": "..."}}}

A record whose ``source`` is not ``make bench`` was measured by hand before
the harness existed; it says where it comes from, and the next ``make bench``
replaces it.  The READMEs quote the file between marks, which
:func:`render_readmes` fills and :func:`readme_drift` checks:

* ``<!-- fig:NAME -->...<!-- /fig -->``: one figure, e.g. ``1.25× (1.24–1.27×)``;
* ``<!-- bench-table -->...<!-- /bench-table -->``: the table of every benchmark;
* ``<!-- bench-output:NAME -->...<!-- /bench-output -->``: that benchmark's output, as a code block.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any, Iterable

SCHEMA = 1
#: The files whose marks are rendered, relative to the repository.
READMES = ("README.md", "benchmarks/README.md")
#: Lines of a run's output kept in the file (the table and the figure lines).
OUTPUT_LINES = 40
MARK = re.compile(r"<!-- (fig|bench-output):([\w-]+) -->(.*?)<!-- /(fig|bench-output) -->|"
                  r"<!-- bench-table -->(.*?)<!-- /bench-table -->", re.DOTALL)


def empty() -> dict:
    return {"schema": SCHEMA, "updated": None, "figures": {}, "outputs": {}, "failures": {}}


def load(path: Path) -> dict:
    """Read a results file; ``ValueError`` naming the problem when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not a readable results file: {error}") from error
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("figures"), dict):
        raise ValueError(f"{path} is not a results file of schema {SCHEMA}")
    for key in ("outputs", "failures"):
        data.setdefault(key, {})
    return data


def save(results: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_suffix(".json.tmp")
    staging.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    staging.replace(path)


def parse(output: str, wanted: Iterable[tuple[str, str]]) -> dict[str, float]:
    """The figures in a benchmark's output: for each (name, prefix), the last line ``<prefix><number>x``."""
    found = {}
    lines = output.splitlines()
    for name, prefix in wanted:
        pattern = re.compile(re.escape(prefix) + r"(-?\d+(?:\.\d+)?)x\s*$")
        for line in reversed(lines):
            match = pattern.match(line.strip())
            if match:
                found[name] = float(match.group(1))
                break
    return found


def tail(output: str, lines: int = OUTPUT_LINES) -> str:
    return "\n".join(output.rstrip().splitlines()[-lines:])


def summarise(benchmark: str, runs: list[tuple[Any, dict[str, float]]], context: dict) -> tuple[dict, str]:
    """Records of a benchmark's figures over its runs (each a ``Run`` and its figures), and the output of
    the run whose headline figure is the median (the lower middle run when the count is even)."""
    headline = next(iter(runs[0][1]))
    order = sorted(range(len(runs)), key=lambda i: runs[i][1][headline])
    middle = runs[order[(len(runs) - 1) // 2]][0]
    records = {}
    for name in runs[0][1]:
        values = [figures[name] for _, figures in runs]
        records[name] = {
            "benchmark": benchmark, "median": statistics.median(values), "min": min(values), "max": max(values),
            "values": values, "runs": len(values),
            "load_before": [round(run.load_before, 2) for run, _ in runs],
            "load_after": [round(run.load_after, 2) for run, _ in runs],
            "seconds": [round(run.seconds, 1) for run, _ in runs],
            "source": "make bench", **context,
        }
    return records, tail(middle.output)


def ratio(value: float) -> str:
    """A ratio as the READMEs print it: three significant digits or so."""
    if abs(value) >= 10:
        return f"{value:.1f}×"
    if abs(value) >= 0.1:
        return f"{value:.2f}×"
    return f"{value:.3f}×"


def quote(record: dict) -> str:
    """A figure as quoted in prose: the median, and the range when there were several runs."""
    text = ratio(record["median"])
    if record.get("runs", 1) > 1 and record["min"] != record["max"]:
        text += f" ({ratio(record['min'])[:-1]}–{ratio(record['max'])})"
    return text


def load_text(record: dict) -> str:
    before, after = record.get("load_before"), record.get("load_after")
    if not before:
        return record.get("load_note", "not recorded")
    return f"{max(before):.2f} → {max(after):.2f}" if len(before) == 1 else \
        f"{min(before):.2f}–{max(before):.2f} → {min(after):.2f}–{max(after):.2f}"


def table(results: dict, benchmarks: Iterable[Any]) -> str:
    """The markdown table of every benchmark's figures."""
    rows = ["| script | compares | target | figure | median (range) | runs | measured | load avg before → after |",
            "|---|---|---|---|---|---|---|---|"]
    for benchmark in benchmarks:
        for name, _ in benchmark.figures:
            record = results["figures"].get(name)
            if record is None:
                cells = ["not measured yet", "", "", ""]
            else:
                measured = record.get("date") or "?"
                if record.get("source") != "make bench":
                    measured += f" ({record['source']})"
                elif record.get("quick"):
                    measured += " (quick mode)"
                cells = [quote(record), str(record.get("runs", 1)), measured, load_text(record)]
            rows.append(f"| `{benchmark.name}.py` | {benchmark.compares} | {benchmark.target} | `{name}` | "
                        + " | ".join(cells) + " |")
    return "\n".join(rows)


def _render(kind: str, name: str | None, results: dict, benchmarks: list[Any]) -> str:
    if kind == "table":
        return "\n" + table(results, benchmarks) + "\n"
    if kind == "fig":
        record = results["figures"].get(name)
        return quote(record) if record else "(not measured yet)"
    output = results["outputs"].get(name)
    return f"\n```\n{output}\n```\n" if output else "\n(no output recorded yet)\n"


def render_text(text: str, results: dict, benchmarks: Iterable[Any]) -> str:
    """``text`` with every mark's content replaced by what the results file says."""
    benchmarks = list(benchmarks)

    def replace(match: re.Match) -> str:
        if match.group(5) is not None:
            return f"<!-- bench-table -->{_render('table', None, results, benchmarks)}<!-- /bench-table -->"
        kind, name = match.group(1), match.group(2)
        return f"<!-- {kind}:{name} -->{_render(kind, name, results, benchmarks)}<!-- /{kind} -->"

    return MARK.sub(replace, text)


def unknown_marks(text: str, results: dict) -> list[str]:
    """Figure marks naming a figure the results file does not have (a benchmark's output may be missing:
    figures measured by hand before the harness came without one)."""
    return [f"fig:{match.group(2)}" for match in MARK.finditer(text)
            if match.group(1) == "fig" and match.group(2) not in results["figures"]]


def render_readmes(results: dict, benchmarks: Iterable[Any], repo: Path) -> None:
    for relative in READMES:
        path = repo / relative
        text = path.read_text(encoding="utf-8")
        rendered = render_text(text, results, benchmarks)
        if rendered != text:
            path.write_text(rendered, encoding="utf-8")


def readme_drift(results: dict, benchmarks: Iterable[Any], repo: Path) -> list[str]:
    """One line per README whose marks do not show the results file (empty: they all do)."""
    benchmarks = list(benchmarks)
    problems = []
    for relative in READMES:
        text = (repo / relative).read_text(encoding="utf-8")
        for mark in unknown_marks(text, results):
            problems.append(f"{relative}: {mark} is not in the results file")
        rendered = render_text(text, results, benchmarks)
        if rendered != text:
            changed = [m.group(0)[:60] for m, n in zip(MARK.finditer(text), MARK.finditer(rendered))
                       if m.group(0) != n.group(0)]
            problems.append(f"{relative}: quotes differ from the results file at {'; '.join(changed)} "
                            f"(run: python benchmarks/harness.py --render-readmes)")
    return problems


def write_markdown(results: dict, benchmarks: Iterable[Any], path: Path) -> None:
    """The results file for people: the table, then each benchmark's median run."""
    benchmarks = list(benchmarks)
    parts = [f"# Benchmark results\n\nRendered from `{path.with_suffix('.json').name}` by `benchmarks/harness.py` "
             f"(last update {results.get('updated') or 'never'}).\n", table(results, benchmarks), ""]
    for benchmark in benchmarks:
        headline = results["figures"].get(benchmark.figures[0][0])
        if headline and headline.get("machine"):
            machine = ", ".join(f"{key} {value}" for key, value in headline["machine"].items())
            parts.append(f"## {benchmark.name}.py\n\ncommit {headline.get('commit')}; {machine}; "
                         f"arguments: {' '.join(headline.get('arguments') or []) or '(defaults)'}\n")
        else:
            parts.append(f"## {benchmark.name}.py\n")
        output = results["outputs"].get(benchmark.name)
        if output:
            parts.append(f"```\n{output}\n```\n")
        failure = results["failures"].get(benchmark.name)
        if failure:
            parts.append(f"Last attempt failed ({failure['why']}, {failure['date']}):\n\n```\n{failure['output']}\n```\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts), encoding="utf-8")
