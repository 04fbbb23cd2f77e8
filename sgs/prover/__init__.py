"""The Rocq prover's learning side: examples from the corpus, premise
retrieval, a learner without gradients (k-NN), the trained model, and their
measurements.  ``python -m sgs.prover --help`` lists the commands."""
