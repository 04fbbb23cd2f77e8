"""The run's state: targets and benchmarks as loaded and checked, the records of
every iteration, the solved registry, the sample cache, the run directory that
holds them (:mod:`sgs.state.store` writes it, :mod:`sgs.state.run_reader` reads
it, :mod:`sgs.state.files` and :mod:`sgs.state.phase_log` are their parts), and
the warm-start corpus.
"""
