"""Floods of distinct project inputs on the real Rocq backend: many project
headers that declare things of their own (each one gets a census step of its
own: a ``coqc`` and a ``coqchk`` run), and a stream of checks that alternate
between two projects' load paths (each switch starts another coqtop).  Both
are normal in a run over a user's development; neither may pile up processes
or change a verdict."""

from __future__ import annotations

import subprocess
import threading

import psutil
import pytest

from lean_env.rocq import RocqBackend, RocqConfig
from lean_env.rocq.census import CENSUS_NICE
from lean_env.verdict import ProofTask, Status
from tests.integration.lean_env.test_rocq_census import CENSUS_WAIT, census_processes

pytestmark = [pytest.mark.rocq, pytest.mark.slow]


def declaring_headers(count: int):
    """``count`` distinct headers of project ``P0`` that each define something,
    every fourth also an axiom; with the checks each must answer: (statement, proof, expected)."""
    for i in range(count):
        header = f"Require Import Arith P0.Lib.\nDefinition d{i} : nat := {i} + v - 10.\n"
        checks = [(f"Theorem t : d{i} = {i}.", "Proof. reflexivity. Qed.", (Status.VALID, "ok"))]
        if i % 4 == 0:
            header += f"Axiom cheat{i} : False.\n"
            checks.append(("Theorem t : 0 = 1.", f"Proof. destruct cheat{i}. Qed.", (Status.INVALID, "axioms")))
        yield header, checks


class ProcessWatch:
    """Samples this process's children every 30 ms while it is open."""

    def __init__(self, select) -> None:
        self._select = select
        self.most = 0
        self.seen: dict[int, int] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._done.wait(0.03):
            now = self._select()
            self.most = max(self.most, len(now))
            self.seen.update(now)

    def __enter__(self) -> "ProcessWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()


def test_many_declaring_project_headers_run_one_low_priority_census_process_at_a_time(require_rocq, tmp_path):
    project = small_library(tmp_path / "p0", "P0", 10, require_rocq.replace("coqtop", "coqc"))
    cases = list(declaring_headers(6))
    workers = [RocqBackend(RocqConfig(coqtop=require_rocq, timeout=60, census_cache_dir=str(tmp_path / "census"),
                                      census_max_concurrent=1, census_audit_fraction=0.0)) for _ in range(2)]
    header_steps: set[int] = set()

    def census_processes_noting_header_steps() -> dict[int, int]:
        found = census_processes()
        for pid in found:
            try:
                if "lean_env-census-header-pid" in psutil.Process(pid).cwd():
                    header_steps.add(pid)
            except psutil.Error:
                pass
        return found

    wrong = []
    try:
        with ProcessWatch(census_processes_noting_header_steps) as watch:
            for round in range(2):  # the second round finds the headers censused
                for i, (header, checks) in enumerate(cases):
                    for statement, proof, expected in checks:
                        task = ProofTask(id=f"t{i}", header=header, load_path=(project,), statement=statement,
                                         proof=proof)
                        verdict = workers[(i + round) % 2].check_proof(task, 60)
                        if (verdict.status, verdict.reason) != expected:
                            wrong.append((round, header, proof, verdict.status, verdict.reason))
                if round == 0:
                    assert all(worker.census.wait(CENSUS_WAIT) for worker in workers)
    finally:
        for worker in workers:
            worker.close()
    assert not wrong
    # The header steps ran (coqc and coqchk in lean_env-census-header-* folders); never two census processes at
    # once, all niced.
    assert header_steps and watch.most == 1
    own = psutil.Process().nice()
    assert all(nice >= own + CENSUS_NICE or nice == 19 for nice in watch.seen.values()), watch.seen


def small_library(directory, name: str, value: int, coqc: str) -> tuple[str, str, str]:
    """A one-file library ``<name>.Lib`` defining ``v := value``, compiled; its load-path entry."""
    directory.mkdir()
    (directory / "Lib.v").write_text(f"Definition v : nat := {value}.\n")
    subprocess.run([coqc, "-Q", str(directory), name, str(directory / "Lib.v")], check=True, capture_output=True,
                   timeout=120)
    return ("-Q", str(directory), name)


def coqtop_processes() -> dict[int, int]:
    found = {}
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name().startswith("coqtop"):
                found[child.pid] = child.nice()
        except psutil.Error:
            pass
    return found


def test_checks_alternating_between_two_load_paths_keep_a_bounded_number_of_coqtops(require_rocq, tmp_path):
    coqc = require_rocq.replace("coqtop", "coqc")
    projects = [small_library(tmp_path / f"p{k}", f"P{k}", 10 + k, coqc) for k in range(2)]
    backend = RocqBackend(RocqConfig(coqtop=require_rocq, timeout=60, axiom_census=False))
    wrong = []
    try:
        with ProcessWatch(coqtop_processes) as watch:
            for i in range(24):
                k = i % 2
                flag, directory, name = projects[k]
                task = ProofTask(id=f"t{i}", header=f"Require Import {name}.Lib.", load_path=(projects[k],),
                                 statement=f"Theorem t : {name}.Lib.v = {10 + k}.", proof="Proof. reflexivity. Qed.")
                verdict = backend.check_proof(task, 60)
                # The other project's name is unknown under this load path.
                other = 1 - k
                foreign = ProofTask(id=f"f{i}", header=f"Require Import P{other}.Lib.", load_path=(projects[k],),
                                    statement="Theorem t : True.", proof="Proof. exact I. Qed.")
                refused = backend.check_proof(foreign, 60)
                if not verdict.valid or refused.valid:
                    wrong.append((i, verdict.status, verdict.reason, refused.status))
    finally:
        backend.close()
    assert not wrong
    # One session and its spare at most, however often the load path changes.
    assert 1 <= watch.most <= 2, watch.seen
    assert not coqtop_processes()
