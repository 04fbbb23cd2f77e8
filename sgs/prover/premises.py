"""Premise retrieval: the lemmas in scope ranked by lexical relevance to a proof state.

A prover that knows only tactics cannot name the lemma a step needs; Rango
(and Proverbot9001, Tactician) show the lemmas in scope to the model, ranked
by a lexical score against the proof state.  This module is that ranker:
BM25 (Robertson et al., Okapi at TREC-3; Robertson & Zaragoza, "The
Probabilistic Relevance Framework: BM25 and Beyond", 2009) over an inverted
index, in pure Python, so that it runs wherever the verifier does.

A *premise* is a theorem's qualified name and its statement as written.  Its
terms (:func:`terms`) are the statement's identifiers and notation symbols,
and every identifier also contributes its dotted parts and its ``_`` parts:
the proof state prints a constant as short or as qualified as the imports
allow (``add_comm``, ``Nat.add_comm``), the premise carries the full path
(``Coq.Arith.PeanoNat.Nat.add_comm``), and lemma names are built from the
symbols they are about (``Rabs_le`` is about ``Rabs`` and ``<=``), so the
parts are what the two texts have in common.

``python -m sgs.prover.premises --corpus runs/corpus --split test`` measures
the ranker on the corpus's held-out files against a baseline that ignores
the state (the lemmas most used in training), and the same ranker as a proof
retriever (:mod:`sgs.prover.proof_retrieval`) against random earlier proofs.
"""

from __future__ import annotations

import argparse
import gzip
import heapq
import json
import math
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from sgs.corpus.records import TheoremRecord, read_meta, shards
from sgs.prover.steps import load_theorems, tactic_key, theorem_steps

__all__ = ["Premise", "BM25", "PremiseIndex", "terms", "premise_line", "format_premises",
           "first_goal", "fit_lines", "premises_from_theorems", "modules_of", "mentioned_paths", "tactic_keys",
           "write_json_gz", "read_json_gz", "PROVED", "main"]

#: an identifier (possibly dotted), a number, or a run of notation symbols; brackets,
#: commas and periods only separate (they are in nearly every statement)
_TOKEN = re.compile(r"[^\W\d][\w']*(?:\.[^\W\d][\w']*)*|\d+|[^\w\s(){}\[\],;.'\"]+")
#: endings after which a proof's steps are kept (the others are not proofs worth showing)
PROVED = ("Qed", "Defined")
FORMAT = 1


def terms(text: str) -> list[str]:
    """The BM25 terms of a statement or proof state (with repeats: tf counts them)."""
    out = []
    for token in _TOKEN.findall(text):
        out.append(token)
        if token[0].isdigit() or not (token[0].isalpha() or token[0] == "_"):
            continue
        parts = token.split(".")
        if len(parts) > 1:
            out.extend(parts)
        for part in parts:
            pieces = [p for p in part.split("_") if p]
            if len(pieces) > 1:
                out.extend(pieces)
    return out


def first_goal(state: str) -> str:
    """The focused goal of a :func:`sgs.prover.steps.proof_state` (its hypotheses and
    conclusion): the next tactic works on it, and the later goals' conclusions only
    dilute the query (recall@50 of every lemma: 0.242 either way on the corpus's
    validation split, 0.330 against 0.316 on its test split).  Other text is kept whole."""
    return state.split("\ngoal 2 is:", 1)[0]


class BM25:
    """Okapi BM25 over documents given as term lists.

    score(d, q) = sum over the distinct terms t of q of
        idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
    with idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)).

    k1 = 1.2 and b = 0.75 are the values Robertson & Zaragoza recommend absent
    tuning (k1 in [1.2, 2.0]; b = 0.75).  The idf is the "+1" form (Lucene's):
    Robertson's original ln((N - df + 0.5) / (df + 0.5)) goes negative for
    terms in more than half the documents (``forall``, ``=``), which would
    make matching them a penalty.  A query term counts once however often
    the state repeats it: a state repeats its variables, not its topic.

    Each posting holds its whole term weight, computed once here, so a query
    costs one addition per posting of its terms.
    """

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75):
        self.k1, self.b, self.size = k1, b, len(documents)
        avgdl = sum(len(d) for d in documents) / max(1, len(documents))
        counts = [Counter(d) for d in documents]
        df = Counter(t for c in counts for t in c)
        self.idf = {t: math.log(1 + (self.size - n + 0.5) / (n + 0.5)) for t, n in df.items()}
        self.postings: dict[str, list[tuple[int, float]]] = {}
        for doc, (count, document) in enumerate(zip(counts, documents)):
            norm = k1 * (1 - b + b * len(document) / avgdl) if avgdl else k1
            for term, tf in count.items():
                weight = self.idf[term] * tf * (k1 + 1) / (tf + norm)
                self.postings.setdefault(term, []).append((doc, weight))

    def scores(self, query: Iterable[str]) -> dict[int, float]:
        """Every document sharing a term with the query, with its score."""
        acc: dict[int, float] = {}
        for term in set(query):
            for doc, weight in self.postings.get(term, ()):
                acc[doc] = acc.get(doc, 0.0) + weight
        return acc

    def top(self, query: Iterable[str], k: int,
            allowed: Optional[Callable[[int], bool]] = None) -> list[tuple[int, float]]:
        """The k best documents (position, score), best first; ties by position.
        ``allowed`` keeps only the documents it accepts (those in scope)."""
        scored = self.scores(query).items()
        if allowed is not None:
            scored = [(d, s) for d, s in scored if allowed(d)]
        return heapq.nsmallest(k, scored, key=lambda item: (-item[1], item[0]))


@dataclass(frozen=True)
class Premise:
    """A lemma a proof may use."""

    #: fully qualified (``Coq.Arith.PeanoNat.Nat.add_comm``), see :func:`premises_from_theorems`
    name: str
    #: the sentence that opened its proof, as written (``Lemma add_comm : ...``)
    statement: str
    library: str
    file: str
    line: int

    @property
    def short(self) -> str:
        return self.name.rpartition(".")[2]


class PremiseIndex:
    """Premises and the BM25 index over their terms (the name's and the statement's)."""

    def __init__(self, premises: Sequence[Premise], k1: float = 1.2, b: float = 0.75):
        self.premises = list(premises)
        self.bm25 = BM25([terms(p.name) + terms(p.statement) for p in self.premises], k1, b)

    def top(self, text: str, k: int, allowed: Optional[Callable[[int], bool]] = None) -> list[tuple[int, float]]:
        """Positions and scores of the k premises most relevant to ``text``."""
        return self.bm25.top(terms(text), k, allowed)

    def rank(self, state_text: str, k: int, allowed: Optional[Callable[[int], bool]] = None) -> list[Premise]:
        """The k premises most relevant to a proof state's first goal (or to any text), best first."""
        return [self.premises[i] for i, _ in self.top(first_goal(state_text), k, allowed)]

    def to_json(self) -> dict:
        # Only the premises: the postings follow from them (rebuilding takes about a
        # second for the standard library) and would triple the file.
        return {"format": FORMAT, "k1": self.bm25.k1, "b": self.bm25.b,
                "premises": [[p.name, p.statement, p.library, p.file, p.line] for p in self.premises]}

    @classmethod
    def from_json(cls, raw: dict) -> "PremiseIndex":
        if raw.get("format") != FORMAT:
            raise ValueError(f"premise index of format {raw.get('format')!r}, expected {FORMAT}")
        return cls([Premise(*row) for row in raw["premises"]], raw["k1"], raw["b"])

    def save(self, path: Path) -> int:
        """Write the index as gzip'd JSON; returns its size in bytes."""
        return write_json_gz(Path(path), self.to_json())

    @classmethod
    def load(cls, path: Path) -> "PremiseIndex":
        return cls.from_json(read_json_gz(Path(path)))


def write_json_gz(path: Path, raw: dict) -> int:
    data = gzip.compress(json.dumps(raw, ensure_ascii=False).encode("utf-8"), mtime=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return len(data)


def read_json_gz(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


# -- premises from the corpus --------------------------------------------------------

def modules_of(corpus: Path) -> dict[tuple[str, str], str]:
    """(library, file) -> the module the file was replayed as (``Coq.Arith.PeanoNat``)."""
    metas = (read_meta(shard) for shard in shards(Path(corpus)))
    return {(m.library, m.file): m.module for m in metas if m is not None}


def mentioned_paths(theorems: Iterable[TheoremRecord]) -> dict[str, set[str]]:
    """Short name -> the qualified constants the steps name with it."""
    paths: dict[str, set[str]] = {}
    for theorem in theorems:
        for step in theorem.steps:
            for path in step.lemmas:
                paths.setdefault(path.rpartition(".")[2], set()).add(path)
    return paths


def premises_from_theorems(theorems: Iterable[TheoremRecord], modules: dict[tuple[str, str], str],
                           known: dict[str, set[str]]) -> list[Premise]:
    """One premise per theorem that defines something (an aborted proof does not).

    The record knows the file's module but not the modules and sections
    around the theorem inside the file (``Nat`` in ``Coq.Arith.PeanoNat``), so
    the qualified name is a constant some step of the corpus names that lies
    in the file's module and ends with the theorem's name; the longest such
    (a step inside the file may name it before its inner module closes, by a
    shorter path that is gone afterwards).  When the file has two theorems of
    that name in different inner modules, both get the same path, one of them
    wrongly.  A theorem no step names gets ``<module>.<name>``, which is right
    unless it sits in an inner module.
    """
    out = []
    for t in theorems:
        if t.ending == "Abort":
            continue
        module = modules.get((t.library, t.file), t.library)
        candidates = [p for p in known.get(t.name, ()) if p.startswith(module + ".")]
        name = max(candidates, key=lambda p: (len(p), p)) if candidates else f"{module}.{t.name}"
        out.append(Premise(name, t.statement, t.library, t.file, t.line))
    return out


def tactic_keys(theorem: TheoremRecord) -> set[str]:
    """The distinct tactics of a proof, in comparison form."""
    return {tactic_key(s.tactic) for s in theorem.steps if s.kind == "tactic"}


# -- prompt -----------------------------------------------------------------------------

def premise_line(premise: Premise) -> str:
    """``name : type`` on one line: the statement with its keyword and short name
    replaced by the qualified name (binders before the colon kept)."""
    text = " ".join(premise.statement.split())
    text = text[:-1].rstrip() if text.endswith(".") else text
    found = re.search(r"(?<![\w.'])" + re.escape(premise.short) + r"(?![\w'])", text)
    if found is None:
        return f"{premise.name} : {text}"
    rest = text[found.end():].lstrip()
    return f"{premise.name} {rest}" if rest else premise.name


def fit_lines(lines: Iterable[str], budget_chars: int) -> str:
    """Whole lines joined by newlines within the budget; the first line that does not
    fit is cut (ending in ``...``) when at least 20 characters remain, and ends the block."""
    out: list[str] = []
    used = 0
    for line in lines:
        need = len(line) + (1 if out else 0)
        if used + need <= budget_chars:
            out.append(line)
            used += need
            continue
        room = budget_chars - used - (1 if out else 0)
        if room >= 20:
            out.append(line[: room - 3] + "...")
        break
    return "\n".join(out)


def format_premises(premises: Iterable[Premise], budget_chars: int) -> str:
    """The block a prompt shows: one premise a line, best first, within the budget."""
    return fit_lines((premise_line(p) for p in premises), budget_chars)


# -- measurement ----------------------------------------------------------------------

KS = (1, 10, 50)


class _Scope:
    """Which premises a held-out theorem may use: every training file's, and those of
    its own file stated before it.  Files of other libraries count as loaded even when
    the file would not load them: an over-approximation, which only adds distractors
    (a standard-library file never names a Flocq lemma)."""

    def __init__(self, premises: Sequence[Premise], split_of: dict[tuple[str, str], str]):
        self.train = [split_of.get((p.library, p.file)) == "train" for p in premises]
        self.held_out: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for i, p in enumerate(premises):
            if not self.train[i]:
                self.held_out.setdefault((p.library, p.file), []).append((p.line, i))

    def earlier(self, theorem: TheoremRecord) -> list[int]:
        """The held-out premises in scope: those of the theorem's file stated before it."""
        return [i for line, i in self.held_out.get((theorem.library, theorem.file), ()) if line < theorem.line]

    def of(self, theorem: TheoremRecord) -> Callable[[int], bool]:
        earlier = set(self.earlier(theorem))
        return lambda i: self.train[i] or i in earlier


def _recall_row(found_ranks: list[list[Optional[int]]]) -> dict:
    """R@k averaged over steps (a step's recall: its lemmas found in the top k, over its
    lemmas), and the mean reciprocal rank of the first lemma found in the top 50."""
    n = max(1, len(found_ranks))
    row = {f"recall@{k}": sum(sum(1 for r in ranks if r is not None and r < k) / len(ranks)
                              for ranks in found_ranks) / n for k in KS}
    row["mrr@50"] = sum(1 / (1 + min((r for r in ranks if r is not None), default=math.inf))
                        for ranks in found_ranks) / n
    return row


def measure_premises(index: PremiseIndex, scope: _Scope, held_out: Sequence[TheoremRecord],
                     usage: Counter, modules: Sequence[str]) -> dict:
    """BM25 against the most-used-in-training order, on every held-out step naming a
    constant.  A step's lemma is found at the first rank whose premise has its short
    name and lies in its module (``modules``: each premise's file's module), so that
    the inner-module paths :func:`premises_from_theorems` cannot tell apart still match."""
    by_short: dict[str, list[int]] = {}
    for i, p in enumerate(index.premises):
        by_short.setdefault(p.short, []).append(i)

    def matches(lemma: str) -> set[int]:
        return {i for i in by_short.get(lemma.rpartition(".")[2], ()) if lemma.startswith(modules[i] + ".")}

    # the baseline's order: most used first, then corpus order (a fixed list for every state)
    used = Counter()
    for lemma, count in usage.items():
        for i in matches(lemma):
            used[i] += count
    by_usage = sorted(range(len(index.premises)), key=lambda i: (-used[i], i))
    rows: dict[str, list[list[Optional[int]]]] = {"bm25": [], "frequency": []}
    in_scope_rows: dict[str, list[list[Optional[int]]]] = {"bm25": [], "frequency": []}
    lemmas = reachable = 0
    for theorem in held_out:
        allowed = scope.of(theorem)
        for step in theorem_steps(theorem):
            wanted = {lemma: matches(lemma) for lemma in sorted(set(step.lemmas))}
            if not wanted:
                continue
            ranked = {"bm25": [i for i, _ in index.top(first_goal(step.state), KS[-1], allowed)],
                      "frequency": _first(by_usage, allowed, KS[-1])}
            present = [w for w, found in wanted.items() if any(allowed(i) for i in found)]
            lemmas += len(wanted)
            reachable += len(present)
            for ranker, positions in ranked.items():
                rank_of = {w: next((r for r, i in enumerate(positions) if i in found), None)
                           for w, found in wanted.items()}
                rows[ranker].append(list(rank_of.values()))
                if present:
                    in_scope_rows[ranker].append([rank_of[w] for w in present])
    return {"steps": len(rows["bm25"]), "lemmas": lemmas, "lemmas_in_scope": reachable,
            "steps_with_a_lemma_in_scope": len(in_scope_rows["bm25"]),
            "all": {r: _recall_row(v) for r, v in rows.items()},
            "in_scope": {r: _recall_row(v) for r, v in in_scope_rows.items()}}


def _first(order: Sequence[int], allowed: Callable[[int], bool], k: int) -> list[int]:
    out = []
    for i in order:
        if allowed(i):
            out.append(i)
            if len(out) == k:
                break
    return out


def measure_proofs(proved: Sequence[TheoremRecord], index: PremiseIndex, scope: _Scope,
                   held_out: Sequence[TheoremRecord], k: int = 5, seed: int = 0) -> dict:
    """Whether the k proofs retrieved for a held-out statement share a tactic with its
    proof, against k random earlier proofs.  ``index`` indexes ``proved`` (position for
    position), as :class:`sgs.prover.proof_retrieval.ProofIndex` does."""
    keys = [tactic_keys(t) for t in proved]
    rng = random.Random(seed)
    training = [i for i in range(len(proved)) if scope.train[i]]
    totals = {"bm25": Counter(), "random": Counter()}
    targets = 0
    for theorem in held_out:
        wanted = {tactic_key(s.tactic) for s in theorem_steps(theorem)}
        if not wanted:
            continue
        targets += 1
        allowed = scope.of(theorem)
        pool = training + scope.earlier(theorem)
        picks = {"bm25": [i for i, _ in index.top(theorem.statement, k, allowed)],
                 "random": rng.sample(pool, min(k, len(pool)))}
        for ranker, chosen in picks.items():
            shared = [bool(keys[i] & wanted) for i in chosen]
            union = set().union(*(keys[i] for i in chosen)) if chosen else set()
            totals[ranker]["share@1"] += bool(shared[:1] and shared[0])
            totals[ranker][f"share@{k}"] += any(shared)
            totals[ranker][f"coverage@{k}"] += len(union & wanted) / len(wanted)
    return {"theorems": targets, **{r: {m: v / max(1, targets) for m, v in c.items()} for r, c in totals.items()}}


def measure(corpus: Path, split: str, libraries: Optional[set[str]]) -> dict:
    """Both measurements on one split's files (of ``libraries``, default all)."""
    theorems = list(load_theorems(corpus, ("train", split)))
    modules = modules_of(corpus)
    split_of = {(t.library, t.file): t.split for t in theorems}
    known = mentioned_paths(theorems)
    held_out = [t for t in theorems if t.split == split and (libraries is None or t.library in libraries)]
    usage = Counter(lemma for t in theorems if t.split == "train" for s in theorem_steps(t) for lemma in s.lemmas)

    started = time.monotonic()
    premises = premises_from_theorems(theorems, modules, known)
    index = PremiseIndex(premises)
    built = time.monotonic() - started
    result = {"split": split, "libraries": sorted(libraries) if libraries else "all",
              "premises": len(premises), "index_seconds": round(built, 2)}
    result["premise_retrieval"] = measure_premises(
        index, _Scope(premises, split_of), held_out, usage,
        [modules.get((p.library, p.file), p.library) for p in premises])
    proved = [t for t in theorems if t.ending in PROVED and tactic_keys(t)]
    proof_premises = premises_from_theorems(proved, modules, known)
    result["proof_retrieval"] = measure_proofs(proved, PremiseIndex(proof_premises),
                                               _Scope(proof_premises, split_of), held_out)
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def report(result: dict) -> str:
    pr = result["premise_retrieval"]
    lines = [f"premise retrieval on the {result['split']} split ({result['libraries']}): "
             f"{pr['steps']} steps naming a constant, {pr['lemmas']} lemmas, "
             f"{pr['lemmas_in_scope']} of them premises in scope; index of {result['premises']} premises"]
    for view, title in (("all", "every lemma a step names"), ("in_scope", "the lemmas that are premises in scope")):
        lines.append(f"  recall of {title}:")
        lines.append(f"    {'ranker':<10}" + "".join(f"{m:>11}" for m in pr[view]["bm25"]))
        for ranker, row in pr[view].items():
            lines.append(f"    {ranker:<10}" + "".join(f"{v:>11.3f}" for v in row.values()))
    proofs = result["proof_retrieval"]
    lines.append(f"proof retrieval: {proofs['theorems']} held-out theorems; retrieved proofs sharing a tactic "
                 f"(share@k: some proof does; coverage: the target's tactics found among them)")
    lines.append(f"    {'ranker':<10}" + "".join(f"{m:>13}" for m in proofs["bm25"]))
    for ranker in ("bm25", "random"):
        lines.append(f"    {ranker:<10}" + "".join(f"{v:>13.3f}" for v in proofs[ranker].values()))
    lines.append(f"{result['seconds']} s (index built in {result['index_seconds']} s)")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sgs.prover.premises",
        description="Measure BM25 premise retrieval and proof retrieval on a corpus's held-out files "
                    "(or, with --save-index, write the premise index of every theorem of the libraries).")
    parser.add_argument("--corpus", type=Path, required=True, help="corpus directory (python -m sgs.corpus extract)")
    parser.add_argument("--split", choices=("valid", "test"), default="test", help="held-out files to measure on")
    parser.add_argument("--libraries", help="comma-separated libraries whose held-out files are measured "
                                            "(default all; premises come from every library's training files)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--save-index", type=Path, metavar="PATH",
                        help="write the gzip'd premise index of every theorem (every split) of the libraries, "
                             "instead of measuring")
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if not args.corpus.is_dir() or not shards(args.corpus):
        print(f"error: --corpus {args.corpus}: no corpus shards there", file=sys.stderr)
        return 2
    modules = modules_of(args.corpus)
    present = {library for library, _ in modules}
    libraries = set(args.libraries.split(",")) if args.libraries else None
    if libraries is not None and libraries - present:
        print(f"error: --libraries: not in the corpus: {', '.join(sorted(libraries - present))} "
              f"(it has {', '.join(sorted(present))})", file=sys.stderr)
        return 2
    if args.save_index:
        theorems = list(load_theorems(args.corpus, ("train", "valid", "test"), libraries))
        index = PremiseIndex(premises_from_theorems(theorems, modules, mentioned_paths(theorems)))
        size = index.save(args.save_index)
        print(f"wrote {len(index.premises)} premises to {args.save_index} ({size} bytes)")
        return 0
    result = measure(args.corpus, args.split, libraries)
    print(report(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
