"""The parts of the Rocq warm-start generator, ``tools/make_warmstart.py``
(the command; its docstring says what the corpus holds):

* :mod:`.statements`: the :class:`~.statements.Lemma` record and how a
  statement's text is read (binders, premises, conclusion);
* :mod:`.guide`: the Guide's scores;
* :mod:`.instances`: instances of targets and their proofs;
* :mod:`.lemma_tables`: the library and key lemma tables;
* :mod:`.families`: the families of generated Solver lemmas;
* :mod:`.guards`: held-out leakage and duplicates;
* :mod:`.corpus`: the examples of each role and :func:`~.corpus.build_corpus`.
"""
