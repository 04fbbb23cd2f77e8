"""``python -m sgs.fill PROJECT_DIR``: prove the lemmas a Rocq project left ``Admitted``.

One job per module: :mod:`~sgs.fill.project` (which kind of project, its
files), :mod:`~sgs.fill.admitted` (the admitted lemmas as targets),
:mod:`~sgs.fill.knowledge` (the project's own proofs for the k-NN),
:mod:`~sgs.fill.attempts` (the provers, within each lemma's time),
:mod:`~sgs.fill.report` (the JSON lines and the page), :mod:`~sgs.fill.write`
(``--write``), :mod:`~sgs.fill.__main__` (the command).  docs/fill.md.
"""
