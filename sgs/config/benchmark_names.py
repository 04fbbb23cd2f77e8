"""The benchmarks SGS knows by name, and what is wrong with a benchmark setting.

Names only: nothing here reads a file or the network, so config validation
(:mod:`sgs.config.validation`) can check ``evaluation.benchmark`` without
importing the data loading of :mod:`sgs.state.benchmarks`, which reads the
benchmarks these names select.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Prefix that marks a benchmark given as a JSONL file whatever its file name.
JSONL_PREFIX = "jsonl:"
#: The benchmark of the Rocq targets' held-out split.
ROCQ_HELD_OUT = "rocq-held-out"


@dataclass(frozen=True)
class HubBenchmark:
    """A named benchmark published as one file of a Hugging Face data set."""

    name: str
    """The ``evaluation.benchmark`` value that selects it."""
    repo_id: str
    """The data set repository on the hub."""
    filename: str
    """The file inside the repository."""
    split: str
    """Records whose ``split`` field differs are skipped (local copies often hold every split)."""
    language: str
    """The proof language of its statements."""


#: The named benchmarks on the hub.
HUB_BENCHMARKS = {
    b.name: b for b in (
        HubBenchmark("minif2f-test", "cat-searcher/minif2f-lean4", "test.jsonl", split="test", language="lean"),
        HubBenchmark("proofnet-test", "UDACA/proofnet-lean4", "proofnet/test.jsonl", split="test",
                     language="lean"),
    )
}
#: Every named benchmark and the language of its statements.
NAMED_BENCHMARKS = {**{name: b.language for name, b in HUB_BENCHMARKS.items()}, ROCQ_HELD_OUT: "rocq"}
#: The benchmark ``evaluation.benchmark=null`` means, per prover language.
DEFAULT_BENCHMARKS = {"lean": "minif2f-test", "rocq": ROCQ_HELD_OUT}


def resolve_name(benchmark: str | None, language: str) -> str:
    """The benchmark ``benchmark`` names, with null meaning the language's default."""
    return DEFAULT_BENCHMARKS[language] if benchmark is None else benchmark


def benchmark_problems(benchmark: str | None, benchmark_file: str | None, language: str) -> list[str]:
    """What is wrong with ``evaluation.benchmark`` / ``evaluation.benchmark_file``
    for ``language``, without reading any file (for config validation)."""
    if language not in DEFAULT_BENCHMARKS:
        return []  # the prover node reports the bad language
    if benchmark is not None and not benchmark.strip():
        return ["evaluation.benchmark must not be empty; use null for the prover's default benchmark"]
    name = resolve_name(benchmark, language)
    problems = []
    known = NAMED_BENCHMARKS.get(name)
    if known is not None and known != language:
        fitting = ", ".join(n for n, lang in NAMED_BENCHMARKS.items() if lang == language)
        problems.append(
            f"evaluation.benchmark={name!r} holds {known} statements but prover.language={language!r}; "
            f"use prover={known}, or a {language} benchmark ({fitting}, or jsonl:PATH)"
        )
    if name.startswith(JSONL_PREFIX) and not name[len(JSONL_PREFIX):].strip():
        problems.append(f"evaluation.benchmark={name!r} names no file: use jsonl:PATH")
    if benchmark_file is not None:
        if known is None:
            problems.append(
                f"evaluation.benchmark_file is a local copy of a named benchmark ({', '.join(NAMED_BENCHMARKS)}), "
                f"but evaluation.benchmark={name!r} is a file already; drop evaluation.benchmark_file"
            )
        elif not benchmark_file.strip():
            problems.append("evaluation.benchmark_file must not be empty; use null to download the benchmark")
    return problems
