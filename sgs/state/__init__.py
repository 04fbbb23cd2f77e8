"""The run's state: targets and benchmarks as loaded and checked, the records of
every iteration, the solved registry, the sample cache and the run directory
that holds them (:mod:`sgs.state.store`), and the warm-start corpus.
"""
