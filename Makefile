# The two commands of the README:
#   make demo   set everything up, then run the default job
#   make test   set everything up, then run the test suite
PY := .venv/bin/python

.PHONY: setup demo test test-fast verify-sample bench clean

setup:
	bash tools/setup.sh

# the default run (python -m sgs): warm start of the tiny model (cached after
# the first run), then self-play on the Rocq targets, then a summary
demo: setup
	RAY_AUTH_MODE=$${RAY_AUTH_MODE:-disabled} $(PY) -m sgs

# the verifier alone on the shipped sample of valid, wrong and hostile proofs
verify-sample: setup
	RAY_AUTH_MODE=$${RAY_AUTH_MODE:-disabled} $(PY) -m lean_env verify --backend rocq \
	    --input lean_env/samples/rocq_sample.jsonl --output runs/sample_verdicts.jsonl --workers 2 --timeout 30

test: setup
	RAY_AUTH_MODE=disabled $(PY) -m pytest tests -q $(PYTEST_ARGS)

# unit tests only (skips the slow end-to-end runs); for the edit-test loop
test-fast: setup
	RAY_AUTH_MODE=disabled $(PY) -m pytest tests -q -m "not slow" $(PYTEST_ARGS)

# every benchmark; each prints its table and, last, its ratio (figures in benchmarks/README.md)
bench: setup
	for script in verifier generation rollout learner weight_transfer serve; do \
	    RAY_AUTH_MODE=disabled $(PY) benchmarks/$$script.py || exit 1; done

clean:
	rm -rf .venv runs .pytest_cache
