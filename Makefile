# The two commands of the README:
#   make demo   set everything up, then run the default job
#   make test   set everything up, then run the test suite
PY := .venv/bin/python

.PHONY: setup demo test test-full test-fast test-unit verify-sample corpus prover proof-rate fill-compare bench bench-quick gpu-check ablation long-horizon long-horizon-levers clean

setup:
	bash tools/setup.sh

# the default run (python -m sgs): warm start of the shipped Rocq prover (cached after
# the first run), then self-play on the Rocq targets, then a summary
demo: setup
	RAY_AUTH_MODE=$${RAY_AUTH_MODE:-disabled} $(PY) -m sgs

# the verifier alone on the shipped sample of valid, wrong and hostile proofs
verify-sample: setup
	RAY_AUTH_MODE=$${RAY_AUTH_MODE:-disabled} $(PY) -m lean_env verify --backend rocq \
	    --input lean_env/samples/rocq_sample.jsonl --output runs/sample_verdicts.jsonl --workers 2 --timeout 30

# the tactic-level corpus (docs/corpus.md): every proof of the standard library and of the
# Debian Coq libraries set-up installs, replayed through coqtop into CORPUS_DIR, one shard per
# source file; resumable (run it again after stopping it), then its summary; one hour at two
# jobs on two cores here (docs/corpus.md)
CORPUS_DIR ?= runs/corpus
CORPUS_JOBS ?= 2
corpus: setup
	$(PY) -m sgs.corpus extract --out $(CORPUS_DIR) --jobs $(CORPUS_JOBS) $(CORPUS_ARGS)
	$(PY) -m sgs.corpus stats $(CORPUS_DIR)

# the general Rocq prover (docs/prover.md): train on the corpus's standard library for
# PROVER_MINUTES CPU-minutes (resumable: run it again after stopping it), then ship the
# weights into sgs/data/rocq_prover, where every Rocq run finds them; needs the standard
# library's part of the corpus (CORPUS_ARGS="--libraries stdlib" make corpus: 35
# minutes at two jobs); training on every library did not pay at this budget (docs/prover.md)
PROVER_RUN ?= runs/prover/final
PROVER_SIZE ?= xs
PROVER_MINUTES ?= 48
prover: setup
	$(PY) -m sgs.prover train --corpus $(CORPUS_DIR) --out $(PROVER_RUN) --size $(PROVER_SIZE) \
	    --minutes $(PROVER_MINUTES) --libraries stdlib --threads 2
	$(PY) -m sgs.prover ship $(PROVER_RUN)/checkpoint sgs/data/rocq_prover

# issues 44 and 45's comparison (docs/prover.md, docs/search.md): the learning-free baselines,
# the searches (model, no finishers, k-NN, value) and whole-proof sampling for the same time, on
# the held-out standard-library files and the traced targets of every project under
# ROCQ_PROJECTS (traced first into runs/targets/, once); resumable like the command (a rerun
# skips what is done).  At 60 s: 66 minutes for the first six provers here (2026-11-29)
ROCQ_PROJECTS ?= ../shared/data/rocq_projects
PROOF_RATE_SECONDS ?= 60
proof-rate: setup
	mkdir -p runs/targets
	for project in $(ROCQ_PROJECTS)/*/; do name=$$(basename $$project); \
	    [ -s runs/targets/$$name.jsonl ] || $(PY) tools/trace_rocq_targets.py $$project \
	        --out runs/targets/$$name.jsonl || exit 2; done
	RAY_AUTH_MODE=$${RAY_AUTH_MODE:-disabled} $(PY) -m sgs.prover proof-rate --stdlib-test $(CORPUS_DIR) \
	    --limit 50 $$(for project in $(ROCQ_PROJECTS)/*/; do name=$$(basename $$project); echo --targets $$name=runs/targets/$$name.jsonl; done) \
	    --corpus $(CORPUS_DIR) --seconds $(PROOF_RATE_SECONDS) --workers 2 \
	    --provers automation,sauto,search,search-no-finishers,search-knn,search-value,search-knn-model,sample --out runs/proof_rate_$(PROOF_RATE_SECONDS)s

# issue 46's comparison (not in CI): a seeded 25% of each shared project's traced lemmas
# admitted in a copy, then sgs.fill's arms (a) baselines, (b) the shipped prover, (c)
# supervised, (d) SGS, (e) RL-only adaptation, (k) the k-NN, (m) the k-NN beside (c)'s
# model, two seeds where they sample or train; resumable (results appended per
# project/arm/seed to docs/fill_compare.jsonl, kept in the repository as the scratch folder
# is not; a rerun skips what is done); the table in runs/fill_compare/table.md.  Its
# duration: docs/fill.md, "Does learning pay"
FILL_COMPARE_DIR ?= runs/fill_compare
FILL_COMPARE_RESULTS ?= docs/fill_compare.jsonl
FILL_COMPARE_ARGS ?=
fill-compare: setup
	RAY_AUTH_MODE=$${RAY_AUTH_MODE:-disabled} $(PY) -m sgs.fill.compare --out $(FILL_COMPARE_DIR) \
	    --results $(FILL_COMPARE_RESULTS) --projects $(ROCQ_PROJECTS) $(FILL_COMPARE_ARGS)

# the suite on TEST_WORKERS pytest-xdist workers, a test file per worker at a
# time; every test but the few marked `full` (what CI runs; its time: docs/results.md, "The test suite")
TEST_WORKERS ?= 2
# --durations: the slowest tests in every log, to keep CI's time in view
PYTEST := RAY_AUTH_MODE=disabled $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
    --durations=25
test: setup
	$(PYTEST) tests -m "not full" $(PYTEST_ARGS)

# everything, including the heaviest tests marked `full` (the Rocq standard-library
# corpus alone took 18-32 minutes here, the five Rocq projects' round trip about a
# minute): before a release, or after changing what they run
test-full: setup
	$(PYTEST) tests $(PYTEST_ARGS)

# every test but the slow ones (the end-to-end runs); for the edit-test loop
test-fast: setup
	$(PYTEST) tests -m "not slow" $(PYTEST_ARGS)

# the unit layer only (tests/unit: no Ray, no prover, no command run as a
# subprocess; docs/tests.md); the quickest loop
test-unit: setup
	$(PYTEST) tests/unit $(PYTEST_ARGS)

# every benchmark, BENCH_RUNS times each, into benchmarks/results.json; the
# READMEs' figures are rendered from it (run on a quiet machine: load average < 1)
BENCH_RUNS ?= 3
bench: setup
	RAY_AUTH_MODE=disabled $(PY) benchmarks/harness.py --runs $(BENCH_RUNS) $(BENCH_ARGS)

# one run each at small sizes, into runs/bench/ (tries the harness; no README changes)
bench-quick: setup
	RAY_AUTH_MODE=disabled $(PY) benchmarks/harness.py --quick $(BENCH_ARGS)

# the GPU suite (benchmarks/README.md) on a machine with one NVIDIA GPU, with
# the machine's own python3 where there is no .venv; on a machine without a
# package index, first carry the pieces of tools/gpu_bundle.sh (.gpu_bundle/callN, see there)
GPU_PY ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)
gpu-check:
	RAY_AUTH_MODE=disabled $(GPU_PY) benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

# the laptop ablation (not in CI): standard, the RL baseline, no_guide and parallel sampling
# x three seeds on the default laptop setting, then the comparison (runs/ablation/comparison/);
# 106 minutes here on 2026-11-26 for the first three, plus about 16 per seed for parallel
# sampling (2026-11-27).  ABLATION_SEEDS=0 for a one-seed slice (python -m tools.compare joins
# slices).  parallel_sampling is last, so the other jobs keep their numbers in an older sweep
ABLATION_DIR ?= runs/ablation
ABLATION_SEEDS ?= 0,1,2
ablation: setup
	RAY_AUTH_MODE=$${RAY_AUTH_MODE:-disabled} $(PY) -m sgs -m \
	    +experiment=standard,reinforce_half_solver_only,no_guide,parallel_sampling seed=$(ABLATION_SEEDS) \
	    model=tiny prover=rocq resources=local_cpu scale=laptop logging.progress_bars=false \
	    run_dir=$(ABLATION_DIR)
	$(PY) -m tools.compare $(ABLATION_DIR)

# the long-horizon comparison (not in CI): SGS, the RL baseline and parallel sampling x three
# seeds, each run until its cumulative solve rate has been flat for 5 iterations (at least 20,
# at most 40), then the comparison (runs/long_horizon/comparison/).  Resumable in pieces: stop
# it at any time and run the same command again; finished runs are recognised in a second.
# Each run's folder is named <experiment>_seed<seed>, so a slice (LONG_SEEDS=0) fills the same
# folders.  The fits leave out points below 5,000 generations (docs/long_horizon.md says why)
LONG_DIR ?= runs/long_horizon
LONG_SEEDS ?= 0,1,2
LONG_EXPERIMENTS ?= standard,reinforce_half_solver_only,parallel_sampling
long-horizon: setup
	RAY_AUTH_MODE=$${RAY_AUTH_MODE:-disabled} $(PY) -m sgs -m seed=$(LONG_SEEDS) +experiment=$(LONG_EXPERIMENTS) \
	    model=tiny prover=rocq resources=local_cpu scale=laptop logging.progress_bars=false \
	    iterations=40 stop.flat_iterations=5 stop.min_iterations=20 \
	    'hydra.sweep.subdir=$${experiment}_seed$${seed}' run_dir=$(LONG_DIR) $(LONG_ARGS)
	$(PY) -m tools.compare $(LONG_DIR) --min-generations 5000

# the levers of the long-horizon comparison (not in CI): the standard setting with one
# change each (conf/lever/: Guide off, two conjectures per target, a third and three times
# the learning rate, free statements, a larger tiny model) and unchanged (lever_none),
# x two seeds, LEVER_ITERATIONS each, then the comparison against lever_none.  Resumable
# in pieces like long-horizon (its measured duration: docs/long_horizon.md, "The levers")
LEVER_DIR ?= runs/levers
LEVER_SEEDS ?= 0,1
LEVERS ?= none,no_guide,two_conjectures,lr_low,lr_high,free_grammar,wider_model
LEVER_ITERATIONS ?= 12
long-horizon-levers: setup
	RAY_AUTH_MODE=$${RAY_AUTH_MODE:-disabled} $(PY) -m sgs -m seed=$(LEVER_SEEDS) +experiment=standard \
	    +lever=$(LEVERS) model=tiny prover=rocq resources=local_cpu scale=laptop logging.progress_bars=false \
	    iterations=$(LEVER_ITERATIONS) 'hydra.sweep.subdir=$${experiment}_seed$${seed}' run_dir=$(LEVER_DIR) \
	    $(LEVER_ARGS)
	$(PY) -m tools.compare $(LEVER_DIR) --baseline lever_none --min-generations 5000

clean:
	rm -rf .venv runs .pytest_cache
