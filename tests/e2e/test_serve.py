"""The prover service: ``python -m sgs.serve`` (:mod:`sgs.serve`).

The slow tests share ONE server: the real command, started as a subprocess
with real Ray Serve, the real transformers engine and real Rocq, spoken to
over HTTP, and stopped with SIGTERM at the end.  The request, goal,
attempt-loop, weights and config tests, in plain Python:
``tests/unit/sgs/serve/test_serve_in_process.py``.

Its model is the tiny Llama taught two answers by a few dozen plain gradient
steps in this module (warm-starting it properly takes minutes): the right
proof of ``Theorem t : True.`` and a wrong one of ``Theorem f : 1 = 2.``.  At
temperature 1 it writes them almost every time, so the provable statement
is proved and the false one gets real Rocq verdicts, every time.  The model
sits in a run directory as its best Solver checkpoint, so the command also
resolves a run directory.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from sgs.config import TinyModelSettings
from sgs.machinery.models import build_tiny_model
from sgs.machinery.prompts import Prompter
from sgs.method.roles import PromptSet
from sgs.serve.client import call, wait_until_up
from tests.config_support import NO_DASHBOARD
from tests.paths import REPO
from tests.unit.sgs.serve.test_serve_in_process import FALSE, RIGHT, TRUE, WRONG, make_run

SMALL = TinyModelSettings(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048)


# --------------------------------------------------------------------------
# The server, over HTTP
# --------------------------------------------------------------------------


def teach(path: Path) -> Path:
    """The tiny model at ``path``, taught :data:`RIGHT` for ``t`` and :data:`WRONG` for ``f``
    (80 Adam steps on the two answers: a loss of about 0.003, seconds on one thread)."""
    roles = PromptSet("rocq")
    answers = {TRUE: RIGHT, FALSE: WRONG}
    build_tiny_model(path, [roles.solver("", s) for s in answers] + list(answers.values()), SMALL, seed=0)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    prompter = Prompter("rocq", tokenizer)
    examples = []
    for statement, answer in answers.items():
        prompt = prompter.token_ids(prompter.solver("", statement))
        completion = tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        examples.append((torch.tensor([prompt + completion]), torch.tensor([[-100] * len(prompt) + completion])))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on a loaded 2-core machine, two threads per step are many times slower
    try:
        torch.manual_seed(0)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(80):
            sum(model(input_ids=ids, labels=labels).loss for ids, labels in examples).backward()
            optimizer.step()
            optimizer.zero_grad()
    finally:
        torch.set_num_threads(threads)
    model.save_pretrained(path)
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory, require_rocq):
    """``python -m sgs.serve`` on a run directory holding the taught model; yields (url, process, log path)."""
    root = tmp_path_factory.mktemp("serve")
    run_dir = make_run(root / "run", teach(root / "model"), best=True)
    port, log_path = free_port(), root / "serve.log"
    command = [sys.executable, "-m", "sgs.serve", f"checkpoint={run_dir}", f"serve.port={port}",
               "resources.verifier_workers=1", "sampling.solver.max_tokens=32", "serve.max_attempts=32",
               "serve.max_ongoing_requests=4", "serve.max_queued_requests=8", "serve.default_timeout_s=60",
               "evaluation.search.workers=1", "evaluation.search.width=2", "evaluation.search.finishers=[auto]",
               NO_DASHBOARD]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "SGS_CACHE_DIR": str(root / "cache")}
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_until_up(url, process, timeout=420)
        except RuntimeError as error:
            pytest.fail(f"{error}:\n{log_path.read_text()[-3000:]}")
        yield SimpleNamespace(url=url, process=process, log=log_path)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_health_names_the_model_prover_and_engine(server):
    status, health = call(f"{server.url}/health")
    assert status == 200 and health["status"] == "ok"
    assert health["model"]["source"] == "run" and health["model"]["policy_version"] == 1
    assert health["model"]["checkpoint"].endswith("checkpoints/solver/iter_0000")
    assert health["prover"]["backend"] == "rocq" and health["prover"]["version"].startswith("rocq-8.")
    assert health["backend"]["engine"] == "transformers" and health["backend"]["library"].startswith("transformers ")


@pytest.mark.slow
def test_a_provable_statement_gets_a_checked_proof(server):
    status, answer = call(f"{server.url}/prove", {"statement": TRUE, "attempts": 8, "timeout": 60})
    assert status == 200 and answer["found"], answer
    assert answer["proof"] == "Proof.\n  exact I.\nQed." and answer["text"] == f"{TRUE}\n{answer['proof']}"
    assert answer["attempts"][answer["attempt"]]["status"] == "valid" and len(answer["attempts"]) == 8
    assert answer["seconds"] > 0 and not answer["timed_out"]
    # The proof it returned checks on its own.
    status, verdict = call(f"{server.url}/verify", {"statement": TRUE, "proof": answer["proof"]})
    assert (status, verdict["status"], verdict["valid"]) == (200, "valid", True)


@pytest.mark.slow
def test_a_false_statement_gets_no_proof_within_its_budget(server):
    status, answer = call(f"{server.url}/prove", {"statement": FALSE, "attempts": 4, "timeout": 60})
    assert status == 200 and not answer["found"] and answer["proof"] is None and not answer["timed_out"]
    statuses = [a["status"] for a in answer["attempts"]]
    assert len(statuses) == 4 and "valid" not in statuses and "invalid" in statuses, answer
    assert answer["verifier_seconds"] > 0
    status, verdict = call(f"{server.url}/verify", {"statement": FALSE, "proof": "Proof.\n  reflexivity.\nQed."})
    assert (status, verdict["valid"], verdict["reason"]) == (200, False, "prover_error")


@pytest.mark.slow
def test_the_search_mode_proves_with_its_finishers_and_counts_its_model_calls(server):
    """``mode=search``: a search on the front's actor, its model calls to the service's engine, its
    proof checked by the verifier; ``both`` samples first (the taught model proves ``t``)."""
    imp = "Theorem imp : forall P : Prop, P -> P."
    status, answer = call(f"{server.url}/prove", {"statement": imp, "mode": "search", "timeout": 60})
    assert status == 200 and answer["found"] and answer["proved_by"] == "search", answer
    assert answer["proof"] == "Proof.\n  auto.\nQed." and answer["attempts"] == [] and answer["attempt"] is None
    assert answer["search"]["status"] == "valid" and answer["search"]["stop"] == "completed"
    assert answer["search"]["model_calls"] == 0 and answer["verifier_seconds"] > 0  # auto at the root
    # auto fails on a false statement, so the model is asked; its tactics get it nowhere.
    status, answer = call(f"{server.url}/prove", {"statement": FALSE, "mode": "search", "timeout": 20})
    assert status == 200 and not answer["found"] and answer["proved_by"] is None, answer
    search = answer["search"]
    assert search["model_calls"] >= 1 and search["samples"] == 2 * search["model_calls"]
    assert search["tokens"] >= search["samples"] and search["status"] is None
    status, answer = call(f"{server.url}/prove", {"statement": TRUE, "mode": "both", "attempts": 8, "timeout": 60})
    assert status == 200 and answer["proved_by"] == "sample" and answer["search"] is None, answer


@pytest.mark.slow
def test_concurrent_requests_are_all_answered(server):
    # As many as may wait in the front's queue (serve.max_queued_requests), so none can be refused
    # whatever the proxy's view of the replica's load.
    results: list[tuple[int, dict]] = []
    bodies = [{"statement": TRUE if i % 2 else FALSE, "attempts": 4} for i in range(8)]
    threads = [threading.Thread(target=lambda b=b: results.append(call(f"{server.url}/prove", b))) for b in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert sorted(status for status, _ in results) == [200] * 8
    assert sum(answer["found"] for _, answer in results) >= 1


@pytest.mark.slow
def test_bad_requests_get_4xx_and_leave_the_server_working(server):
    cases = [
        (b'{"statement": 7}', 400, "'statement' must be a string"),
        (b'{"statement": "Theorem t : True."', 400, "not valid JSON"),
        (b'{"statement": "\xc3\x28"}', 400, "not UTF-8"),
        (json.dumps({"statement": "Theorem t : " + "True /\\ " * 150_000 + "True."}).encode(), 413, "takes at most"),
        (b'{"statement": "Theorem t : no_such_thing."}', 422, "does not elaborate (statement_error)"),
        (b'{"statement": "Theorem t : True.", "prover": "hol"}', 400, "unknown prover 'hol'"),
        (b'{"statement": "Theorem t : True.", "attempts": 33}', 400, "attempts=33 must lie in 1..32"),
    ]
    for body, status, problem in cases:
        got, answer = call(f"{server.url}/prove", body)
        assert got == status and problem in answer["error"], (body[:80], got, answer)
    got, answer = call(f"{server.url}/verify", {"statement": TRUE, "proof": "Proof.\n  Admitted."})
    assert got == 200 and answer["status"] == "invalid" and answer["reason"].startswith("banned:")
    assert call(f"{server.url}/verify", {"statement": TRUE, "proof": "Proof.\n  exact I.\nQed."})[1]["valid"]


@pytest.mark.slow
def test_leancopilot_generate_returns_scored_suggestions(server):
    status, answer = call(f"{server.url}/generate", {"name": "sgs", "input": TRUE, "prefix": ""})
    assert status == 200 and answer["outputs"], answer
    assert answer["outputs"][0]["output"] == "exact I." and answer["outputs"][0]["score"] <= 0
    scores = [output["score"] for output in answer["outputs"]]
    assert scores == sorted(scores, reverse=True) and len(set(o["output"] for o in answer["outputs"])) == len(scores)
    status, goal = call(f"{server.url}/generate", {"name": "sgs", "input": "====\nTrue", "prefix": "zzz"})
    assert status == 200 and goal == {"outputs": []}


@pytest.mark.slow
def test_overload_is_refused_with_503_not_a_hang(server):
    burst = 32
    results: list[tuple[int, dict]] = []
    start = threading.Barrier(burst)

    # four attempts each: the burst arrives within milliseconds, while twelve requests are still in flight
    def send() -> None:
        start.wait()
        results.append(call(f"{server.url}/prove", {"statement": FALSE, "attempts": 4}, timeout=300))

    threads = [threading.Thread(target=send) for _ in range(burst)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=400)
    statuses = [status for status, _ in results]
    assert len(results) == burst and set(statuses) <= {200, 503}, statuses
    assert statuses.count(503) >= 1 and statuses.count(200) >= 4, statuses
    refused = next(answer for status, answer in results if status == 503)
    assert "backpressure" in refused["text"] and "max_queued_requests=8" in refused["text"], refused


@pytest.mark.slow
def test_metrics_and_request_logs_are_written(server):
    assert call(f"{server.url}/prove", {"statement": TRUE, "attempts": 8})[1]["found"]
    assert call(f"{server.url}/prove", {"statement": TRUE, "prover": "hol"})[0] == 400
    port = re.search(r"metrics \(Prometheus text, sgs_serve_\*\): http://[^:]+:(\d+)/metrics",
                     server.log.read_text()).group(1)
    names = {"ray_sgs_serve_requests_total", "ray_sgs_serve_request_seconds_bucket",
             "ray_sgs_serve_proofs_found_total", "ray_sgs_serve_attempts_total",
             "ray_sgs_serve_verifier_seconds_bucket"}
    # Ray's metrics agent exports what the replicas recorded every few seconds (slower on a loaded machine).
    deadline, missing = time.monotonic() + 180, names
    while missing and time.monotonic() < deadline:
        time.sleep(3)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
            text = response.read().decode()
        missing = {name for name in names if name not in text}
    assert not missing, missing
    log = server.log.read_text()
    assert re.search(r"sgs-serve /prove 200 \d+\.\d+s mode=sample attempts=8 found=True proved_by=sample", log)
    assert re.search(r"sgs-serve /prove 400 \d+\.\d+s error=\"unknown prover 'hol'", log)


@pytest.mark.slow
def test_sigterm_stops_the_service_cleanly(server):
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=120) == 0, server.log.read_text()[-3000:]
    log = server.log.read_text()
    assert "SIGTERM: stopping the service" in log and re.search(r"^stopped$", log, re.MULTILINE)
