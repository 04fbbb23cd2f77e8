"""Reading what a run did: per-iteration metrics, evaluation with pass@k and its
estimator, scaling-law fits, and the run report.
"""
