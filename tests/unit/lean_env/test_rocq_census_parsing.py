"""The axiom census (lean_env.rocq.census) without a prover: parsing coqchk's
and coqtop's answers (as Rocq 8.16.1 prints them), its settings, and its
queue and the machine's slots on censuses that run no process.  Against the
real coqtop and coqchk: ``tests/integration/lean_env/test_rocq_census.py``."""

from __future__ import annotations

import fcntl
import logging
import threading
import time

import pytest

from lean_env.rocq import RocqConfig, RocqConfigError
from lean_env.rocq.census import (
    AxiomCensus,
    Census,
    CensusError,
    module_answer,
    parse_libraries,
    parse_location,
    parse_summary,
    parse_trace,
)
from lean_env.rocq.environment import Environment


# -- what coqchk 8.16.1 prints (captured) ----------------------------------------

CLEAN_SUMMARY = """
CONTEXT SUMMARY
===============

* Theory: Set is predicative
  
* Axioms: <none>
  
* Constants/Inductives relying on type-in-type: <none>
  
* Constants/Inductives relying on unsafe (co)fixpoints: <none>
  
* Inductives whose positivity is assumed: <none>
  
"""

CLASSICAL_SUMMARY = """
CONTEXT SUMMARY
===============

* Theory: Set is predicative
  
* Axioms:
    Coq.Logic.Classical_Prop.classic
  
* Constants/Inductives relying on type-in-type: <none>
  
* Constants/Inductives relying on unsafe (co)fixpoints: <none>
  
* Inductives whose positivity is assumed: <none>
  
"""

#: a library with an axiom, a parameter, and one declaration of each unsafe kind
UNSAFE_SUMMARY = """
CONTEXT SUMMARY
===============

* Theory: Set is predicative
  
* Axioms:
    Lib.Bad.my_param
    Lib.Bad.my_ax
  
* Constants/Inductives relying on type-in-type:
    Lib.Bad.tt
  
* Constants/Inductives relying on unsafe (co)fixpoints:
    Lib.Bad.loop
  
* Inductives whose positivity is assumed:
    Lib.Bad.bad
  
"""

TRACE = """Welcome to Chicken 8.16.1
[intern /usr/lib/ocaml/coq/theories/Init/Prelude.vo ...
 done]

[intern /usr/lib/ocaml/coq/theories/Init/Logic.vo ...
 done]

Ordered list:
  Coq.Init.Logic
  Coq.Init.Prelude
  
Checking library: Coq.Init.Logic
  checking cst:Coq.Init.Logic.True_rect
Modules were successfully checked
""" + CLEAN_SUMMARY


def test_a_clean_summary_is_clean():
    census = parse_summary(TRACE)
    assert census.clean and census.axioms == () and census.unsafe == ()


def test_axioms_are_listed_by_qualified_name():
    census = parse_summary(CLASSICAL_SUMMARY)
    assert not census.clean and census.axioms == ("Coq.Logic.Classical_Prop.classic",) and census.unsafe == ()


def test_every_unsafe_kind_is_reported():
    census = parse_summary(UNSAFE_SUMMARY)
    assert census.axioms == ("Lib.Bad.my_param", "Lib.Bad.my_ax")
    assert census.unsafe == ("type-in-type: Lib.Bad.tt", "unsafe fixpoint: Lib.Bad.loop",
                             "assumed positivity: Lib.Bad.bad")


@pytest.mark.parametrize("change, finding", [
    (("Set is predicative", "Set is impredicative"), "theory: Set is impredicative"),
    (("* Inductives whose", "* Something new: Lib.x\n  \n* Inductives whose"), "Something new: Lib.x"),
])
def test_an_unusual_theory_or_an_unknown_section_is_unclean(change, finding):
    census = parse_summary(CLEAN_SUMMARY.replace(*change))
    assert not census.clean and finding in census.unsafe


@pytest.mark.parametrize("text", [
    "",
    "Fatal Error: User error: Cannot load Lib.NoSuch: no physical path bound to Lib.",
    CLEAN_SUMMARY.replace("* Axioms: <none>\n", ""),                       # a section missing
    CLEAN_SUMMARY.replace("* Axioms: <none>", "* Axioms:"),                # neither <none> nor names
    CLEAN_SUMMARY.replace("===============", ""),
    CLEAN_SUMMARY + "trailing words\n",
    CLEAN_SUMMARY.replace("* Axioms: <none>", "* Axioms: <none>\n    Lib.hidden"),
    CLEAN_SUMMARY + "* Axioms: <none>\n",                                  # a section twice
])
def test_a_summary_in_another_form_is_an_error(text):
    with pytest.raises(CensusError):
        parse_summary(text)


def test_the_trace_names_the_interned_files_and_must_report_success():
    assert parse_trace(TRACE) == {"/usr/lib/ocaml/coq/theories/Init/Prelude.vo",
                                  "/usr/lib/ocaml/coq/theories/Init/Logic.vo"}
    with pytest.raises(CensusError):
        parse_trace(TRACE.replace("Modules were successfully checked", "Fatal Error: Anomaly"))


def test_coqtop_answers_are_parsed_strictly():
    listing = "Loaded library files: \n  Coq.Init.Notations\n  Coq.Init.Ltac\n\n"
    assert parse_libraries(listing) == ("Coq.Init.Notations", "Coq.Init.Ltac")
    location = "Coq.micromega.Lia has been loaded from file\n/usr/lib/ocaml/coq/theories/micromega/Lia.vo\n\n"
    assert parse_location("Coq.micromega.Lia", location) == "/usr/lib/ocaml/coq/theories/micromega/Lia.vo"
    for bad in ("", "Loaded library files:\n  two words\n", "Error: nope"):
        with pytest.raises(CensusError):
            parse_libraries(bad)
    with pytest.raises(CensusError):
        parse_location("Coq.Other", location)


def test_notation_warnings_around_a_module_listing_are_dropped_and_nothing_else():
    # captured from coqtop 8.16.1 (-emacs), mathcomp's ssrnat and ssrbool required in a fresh session
    location = "Toplevel input, characters 0-39:\n> Print Module mathcomp.ssreflect.ssrnat.\n> ^^^^^^^^^^^^^^^^^^^^\n"
    warned = ("<infomsg>Overwriting previous delimiting key nat in scope nat_scope</infomsg>\n"
              + location + '<warning>\nWarning: Notation "_ + _" was already used in scope nat_scope.\n'
              "[notation-overridden,parsing]</warning>\n"
              + location + '<warning>\nWarning: Notation "_ - _" was already used in scope nat_scope.\n'
              "[notation-overridden,parsing]</warning>\n"
              "Module\nssrnat\n:= Struct\n     Definition eqn : nat -> nat -> bool.\n     Inductive le_xor_gt\nEnd\n")
    assert module_answer(warned) == ("Module\nssrnat\n:= Struct\n     Definition eqn : nat -> nat -> bool.\n"
                                     "     Inductive le_xor_gt\nEnd")
    keyed = "<infomsg>Overwriting previous delimiting key bool in scope bool_scope\n</infomsg>\nModule\nssr.ssrbool\n"
    assert module_answer(keyed) == "Module\nssr.ssrbool"
    # an error, or a listing printed as an info message, is left for the parser to refuse or read
    for kept in ("Error: Unknown module", "<infomsg>Module M := Struct Inductive t End</infomsg>"):
        assert module_answer(kept) == kept.replace("<infomsg>", "").replace("</infomsg>", "")


@pytest.mark.parametrize("options", [{"census_timeout": 0}, {"coqchk": 3}, {"census_cache_dir": 1},
                                     {"census_max_concurrent": 0}, {"census_max_concurrent": 1.5},
                                     {"census_max_concurrent": True}])
def test_nonsensical_census_settings_are_configuration_errors(options):
    with pytest.raises(RocqConfigError):
        RocqConfig(**options)


# -- the queue and the machine's slots, on censuses that run no process -----------

class Takes:
    """Records the (fake) censuses taken by any number of AxiomCensus
    instances; each one waits for ``release``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.active = self.most = 0
        self.keys: list[str] = []

    def take(self, key: str) -> None:
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
            self.keys.append(key)
        try:
            assert self.release.wait(60)
        finally:
            with self.lock:
                self.active -= 1

    def until_active(self, n: int) -> None:
        deadline = time.monotonic() + 30
        while self.active != n:
            assert time.monotonic() < deadline, f"{self.active} censuses running, expected {n}"
            time.sleep(0.01)


def fake_census(cache_dir, takes: Takes, **options) -> AxiomCensus:
    """An AxiomCensus whose census coqtop and coqchk are replaced by ``takes``
    (the queue, the slots, the per-key lock and the cache are the real ones)."""
    census = AxiomCensus(RocqConfig(census_cache_dir=str(cache_dir), **options), "8.16.1", "/no/coqchk", "fake")
    census._scan_inductives = lambda env, deadline: takes.take(env.key) or Census()
    census._run_coqchk = lambda env, deadline: Census()
    return census


def env(name: str) -> Environment:
    return Environment(libraries=(), key=name)


def census_threads() -> int:
    return sum(t.name == "axiom-census" for t in threading.enumerate())


def test_one_thread_takes_the_queued_censuses_in_order_and_the_caller_never_waits(tmp_path):
    takes = Takes()
    census = fake_census(tmp_path, takes)
    before = census_threads()
    keys = [f"k{i}" for i in range(6)]
    for key in keys:
        census._start(env(key))        # returns at once, the first census running
    takes.until_active(1)
    assert census_threads() == before + 1 and not census.is_clean(env("k0"))
    assert not census.wait(0.2)
    takes.release.set()
    assert census.wait(30)
    assert takes.keys == keys and takes.most == 1 and all(census.is_clean(env(key)) for key in keys)
    census._start(env("k0"))           # known: nothing is queued
    assert census.wait(0) and takes.keys == keys and census_threads() == before + 1
    census.close()


@pytest.mark.parametrize("slots", [1, 2])
def test_workers_sharing_a_cache_run_at_most_census_max_concurrent_censuses(tmp_path, slots):
    takes = Takes()
    workers = [fake_census(tmp_path, takes, census_max_concurrent=slots) for _ in range(3)]
    for i, census in enumerate(workers):
        census._start(env(f"k{i}"))
    takes.until_active(slots)
    time.sleep(0.5)                    # time for a census that ignored the slots to start
    assert takes.most == slots
    takes.release.set()
    assert all(census.wait(30) for census in workers)
    assert takes.most == slots and sorted(takes.keys) == ["k0", "k1", "k2"]
    assert all(census.is_clean(env(f"k{i}")) for i, census in enumerate(workers))
    for census in workers:
        census.close()


def test_a_queued_census_another_worker_wrote_meanwhile_is_read_not_taken(tmp_path):
    takes = Takes()
    census = fake_census(tmp_path, takes)
    census._start(env("k0"))
    census._start(env("k1"))
    takes.until_active(1)
    other = fake_census(tmp_path, Takes())
    other._cache.write(env("k1"), Census(axioms=("Lib.ax",)), 1.0)
    takes.release.set()
    assert census.wait(30)
    assert takes.keys == ["k0"] and census.result(env("k1")) == Census(axioms=("Lib.ax",))


def test_headers_beyond_the_queue_bound_are_not_censused_this_time(tmp_path, caplog):
    takes = Takes()
    census = fake_census(tmp_path, takes)
    census.max_queued = 2
    census._start(env("k0"))
    takes.until_active(1)              # k0 left the queue
    with caplog.at_level(logging.WARNING, logger="lean_env.rocq.census"):
        for i in range(1, 6):
            census._start(env(f"k{i}"))
    assert sum("headers are waiting" in r.getMessage() for r in caplog.records) == 1
    takes.release.set()
    assert census.wait(30)
    assert takes.keys == ["k0", "k1", "k2"] and census.result(env("k3")) is None
    census._start(env("k3"))           # loaded again: queued now
    assert census.wait(30) and takes.keys[-1] == "k3" and census.is_clean(env("k3"))


def test_close_ends_the_wait_for_a_slot(tmp_path):
    takes = Takes()
    census = fake_census(tmp_path, takes)
    with open(tmp_path / "census-slot-0.lock", "w") as slot:
        fcntl.flock(slot, fcntl.LOCK_EX)   # another worker's census
        census._start(env("k0"))
        census._start(env("k1"))
        assert not census.wait(0.5)
        census.close()
        assert census.wait(10)
        census._thread.join(10)
        assert not census._thread.is_alive()
    assert takes.keys == [] and census.result(env("k0")) is None


def test_what_is_not_clean_is_said_once_per_finding_not_per_header(tmp_path, caplog):
    census = fake_census(tmp_path, Takes())
    classic, other = Census(axioms=("Coq.Logic.Classical_Prop.classic",)), Census(axioms=("Lib.ax",))
    with caplog.at_level(logging.WARNING, logger="lean_env.rocq.census"):
        for i in range(5):                       # five files of one project, one finding
            census._report(env(f"k{i}"), classic)
        census._report(env("k5"), other)
        census._report(env("k6"), Census())      # clean: nothing said
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and "classic" in said[0] and "Lib.ax" in said[1]
    census.close()
