"""Tactic-level proof search (issue 45, docs/search.md): best-first,
breadth-first or depth-first over a prover's proof states, with symbolic
finishers, every found proof re-checked as a whole.

``provers`` adapts the Rocq and Lean backends to the handles a search goes
back to, ``proposers`` scores the tactics of a predictor, ``strategies``
searches, ``settings`` and ``results`` are what goes in and comes out.
"""
