"""``make bench``'s harness (``benchmarks/harness.py``, ``benchmarks/figures.py``):
the READMEs quote the committed results file, every benchmark script is on
the harness's list, and runs of a (stand-in) benchmark script become records
with median, range and load average.  No benchmark is timed here."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.paths import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import figures  # noqa: E402
import harness  # noqa: E402


def run_harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / "harness.py"), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_the_readmes_quote_the_results_file():
    done = run_harness("--check-readmes")
    assert done.returncode == 0, done.stderr
    text = (REPO / "README.md").read_text() + (REPO / "benchmarks" / "README.md").read_text()
    assert "<!-- fig:weight_transfer -->" in text and "<!-- bench-table -->" in text


def test_every_benchmark_script_is_on_the_harness_list():
    scripts = {path.stem for path in (REPO / "benchmarks").glob("*.py")} - set(harness.NOT_BENCHMARKS)
    assert scripts == {benchmark.name for benchmark in harness.BENCHMARKS}
    committed = figures.load(harness.RESULTS)
    for benchmark in harness.BENCHMARKS:
        for name, _ in benchmark.figures:
            assert name in committed["figures"], f"{name} has no record in benchmarks/results.json"


def test_bad_arguments_are_refused_with_status_2():
    for args in (["--only", "nonsense"], ["--runs", "0"], ["--only", ","]):
        done = run_harness(*args)
        assert done.returncode == 2 and "error:" in done.stderr and "Traceback" not in done.stderr, args


def test_a_results_file_that_is_not_one_is_refused(tmp_path):
    bad = tmp_path / "results.json"
    bad.write_text("[1, 2]")
    done = run_harness("--check-readmes", "--output", str(bad))
    assert done.returncode == 2 and f"{bad} is not a results file" in done.stderr


def test_figures_are_read_from_the_last_matching_line():
    output = "warm-up\nverifier_speedup: 9.0x\ntable\ntraining steps only: deepspeed / plain = 0.54x\nverifier_speedup: 16.25x\n"
    wanted = [("verifier_speedup", "verifier_speedup: "), ("learner_steps", "training steps only: deepspeed / plain = "),
              ("absent", "absent: ")]
    assert figures.parse(output, wanted) == {"verifier_speedup": 16.25, "learner_steps": 0.54}


FAKE_BENCHMARK = """
import sys
from pathlib import Path
counter = Path(sys.argv[1])
runs = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(runs + 1))
if len(sys.argv) > 2 and runs == 1:
    sys.exit("the second run breaks")
print("a table line")
print(f"side figure = {[0.5, 0.7, 0.6][runs]}x")
print(f"fake: {[2.0, 4.0, 3.0][runs]}x")
"""


def test_runs_become_one_record_per_figure_with_median_range_and_load(tmp_path):
    (tmp_path / "fake.py").write_text(FAKE_BENCHMARK)
    bench = harness.Benchmark("fake", "a stand-in script", "none", (("fake", "fake: "), ("side", "side figure = ")),
                              args=(str(tmp_path / "count"),))
    records, output = harness.measure(bench, runs=3, quick=False, scripts=tmp_path)
    fake, side = records["fake"], records["side"]
    assert (fake["median"], fake["min"], fake["max"], fake["values"]) == (3.0, 2.0, 4.0, [2.0, 4.0, 3.0])
    assert side["values"] == [0.5, 0.7, 0.6] and side["median"] == 0.6
    assert len(fake["load_before"]) == len(fake["load_after"]) == 3
    assert fake["source"] == "make bench" and fake["machine"]["cpus"] >= 1 and fake["date"]
    assert output.endswith("fake: 3.0x")  # the median run's output
    assert figures.quote(fake) == "3.00× (2.00–4.00×)"

    failing = harness.Benchmark("fake", "a stand-in script", "none", (("fake", "fake: "),),
                                args=(str(tmp_path / "count2"), "fail"))
    failure = harness.measure(failing, runs=3, quick=False, scripts=tmp_path)
    assert "exit status 1" in failure["why"] and "the second run breaks" in failure["output"]


def test_rendering_fills_the_marks_and_drift_is_reported(tmp_path):
    results = figures.empty()
    results["figures"]["fake"] = {"benchmark": "fake", "median": 1.25, "min": 1.24, "max": 1.27, "runs": 3,
                                  "values": [1.24, 1.25, 1.27], "date": "2026-01-01", "source": "make bench",
                                  "load_before": [0.2, 0.3, 0.1], "load_after": [0.4, 0.5, 0.3]}
    results["outputs"]["fake"] = "fake: 1.25x"
    bench = harness.Benchmark("fake", "a stand-in", "≥ 1×", (("fake", "fake: "),))
    text = "A <!-- fig:fake -->9×<!-- /fig --> B\n<!-- bench-table --><!-- /bench-table -->\n" \
           "<!-- bench-output:fake --><!-- /bench-output -->\n"
    rendered = figures.render_text(text, results, [bench])
    assert "A <!-- fig:fake -->1.25× (1.24–1.27×)<!-- /fig --> B" in rendered
    assert "| `fake.py` | a stand-in | ≥ 1× | `fake` | 1.25× (1.24–1.27×) | 3 | 2026-01-01 | 0.10–0.30 → 0.30–0.50 |" \
        in rendered
    assert "```\nfake: 1.25x\n```" in rendered
    assert figures.render_text(rendered, results, [bench]) == rendered
    assert figures.unknown_marks("<!-- fig:other -->1×<!-- /fig -->", results) == ["fig:other"]


@pytest.mark.parametrize("value, text", [(30.31, "30.3×"), (1.254, "1.25×"), (0.09, "0.090×")])
def test_ratios_are_printed_to_about_three_digits(value, text):
    assert figures.ratio(value) == text
