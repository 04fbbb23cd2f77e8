"""A tactic-level corpus from real Rocq proofs (issue 44, section 1).

Every proof of the Coq standard library and of a few Debian Coq libraries is
replayed through a real ``coqtop``, one process per source file, sentence by
sentence in the file's order (so the file's own earlier lemmas are in scope,
as they were for its author).  For every tactic step the corpus keeps the
goals Rocq printed before it, the tactic's text, the global names the tactic
mentions (resolved with ``Locate`` in the same session) and where it comes
from; for every theorem, its statement and whole proof script.

Reading order, each module one job:

* :mod:`sgs.corpus.records`   the record format (pure): steps, theorems, files;
* :mod:`sgs.corpus.rocq_text` reading Rocq's text (pure): goal displays,
  ``Locate`` answers, the identifiers of a tactic;
* :mod:`sgs.corpus.split`     the seeded train/valid/test split by file (pure);
* :mod:`sgs.corpus.sources`   which libraries, where their ``.v`` files are;
* :mod:`sgs.corpus.truth`     the standard-library tool's cases and ``coqc``
  ground truth, matched to the replayed theorems;
* :mod:`sgs.corpus.replay`    one file through ``coqtop``;
* :mod:`sgs.corpus.extract`   every file, resumably, into per-file shards;
* :mod:`sgs.corpus.stats`     the summary of a corpus directory;
* :mod:`sgs.corpus.__main__`  the command line (``python -m sgs.corpus``).

docs/corpus.md says what the corpus holds, how long it takes and how to resume.
"""
