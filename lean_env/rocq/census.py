"""The axiom census: one audit of a header's libraries instead of one
``Print Assumptions`` per proof.

``Print Assumptions Top.name`` after every proof is exact but slow whenever
the proof reaches a large library proof (about 0.25 s for anything that uses
``lia``: Coq walks the whole correctness proof of the micromega checker each
time).  The census answers the same question once per set of loaded
libraries, and the answer is cached on disk.

Why skipping ``Print Assumptions`` is sound when the census is clean
--------------------------------------------------------------------

In Coq 8.16, ``Print Assumptions`` reports, for every global reachable from
the theorem (through its proof term and, transitively, through the bodies,
opaque ones and those hidden by module sealing included, and types of every
global it mentions): constants without a body (axioms, parameters,
primitives), constants and inductives declared with guard, universe or
positivity checking off, inductives of the shape that may use definitional
UIP (in ``SProp`` with one constructor without arguments, reported whether
or not ``Definitional UIP`` is on), and section variables.

A proof the backend accepts is ``Proof.``, tactic sentences, queries that
only print and ``Qed.`` or ``Defined.`` (:mod:`lean_env.rocq.checks`,
:mod:`lean_env.rocq.commands`).  Tactics and queries cannot declare axioms,
load libraries, open sections or change typing flags (those are commands the
table rejects), and ``Qed``/``Defined`` have the kernel check the whole term.  So the globals a valid proof
can reach are the theorem itself (and constants that tactics such as
``abstract`` define, with bodies), what coqtop declared at start-up, and what
the header's libraries declare.  ``Print Assumptions`` can therefore only
list something if

(a) the libraries declare an axiom, an unsafe constant or inductive, or an
    inductive of the UIP shape;
(b) something was declared in ``Top`` before the proof (e.g. ``coqtop -l``);
(c) the session's typing flags are not the defaults, so that the theorem
    itself is unsafe (a library can export ``Unset Guard Checking``).

The census rules these out and the backend skips ``Print Assumptions``
only when it does:

(a) ``coqchk -o`` re-checks exactly the ``.vo`` files coqtop loaded (the
    paths it interns are compared with those coqtop reports) and lists every
    axiom, type-in-type, unsafe fixpoint and assumed positivity in them;
    ``coqchk`` says nothing about the UIP shape, so a separate coqtop loads
    the same libraries, walks their module structure (``Print Module``) and
    runs ``Print Assumptions`` on every inductive type found, which must be
    closed;
(b) ``Print All`` is empty right after the header, or what it lists is the
    header's own: the census's coqtop, started with the same command line,
    declares nothing before loading anything, and the header's text,
    compiled by ``coqc`` as a library of its own, passes ``coqchk -o -norec``
    (its declarations re-checked, the libraries it loads admitted: their
    census is (a), cached apart and shared by every header that loads them)
    with no axiom or unsafe declaration of its own, and its inductive types
    pass the same ``Print Assumptions`` scan as (a)'s;
(c) ``Test Guard Checking`` (and universe and positivity checking) say "on"
    right after the header.

A project's header (targets traced by ``tools/trace_rocq_targets.py``) is the
file's text before the declaration, loaded with the project's ``-R``/``-Q``
load path; the census's coqtop, coqc and coqchk get the same load path.  Why
the compiled header stands for the one the session ran: both are the same
sentences run by the same Coq with the same options, and the only way a
sentence can differ between the two runs (a tactic under ``timeout``, say)
is to pick another proof term from the same globals, or to fail; neither can
add an axiom or an unsafe declaration, since those are commands.

Whatever cannot be established (no coqchk, a timeout, output in an
unexpected form, a module whose fields cannot be seen) leaves the census
untaken, and every proof is then checked with ``Print Assumptions`` as
before.  The verdicts are the same either way; only their cost differs.

Resources
---------

Targets traced from real projects bring one header per file, so a worker
meets many headers.  A census never delays a check (the check path only looks
up what is known), and what it costs is bounded: each backend takes its
censuses one after another in one background thread, from a queue of at most
:data:`MAX_QUEUED` headers (a header that finds the queue full is not
censused this time; it is queued again the next time it is loaded); before a
census starts, the cache is read again (another worker may have written it),
and a machine-wide slot is taken: one of ``census_max_concurrent`` lock files
in the cache directory, so that all workers sharing that directory run at most
that many censuses at once.  The census's coqtop and coqchk run at a lower CPU
priority (nice +:data:`CENSUS_NICE`) than the checks.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from pathlib import Path
from typing import Optional

from lean_env.rocq.census_cache import CENSUS_VERSION, CensusCache, default_cache_dir
from lean_env.rocq.config import RocqConfig
from lean_env.rocq.coqchk import Census, CensusError, coqchk_options, parse_summary, parse_trace
from lean_env.rocq.environment import Environment, Library
from lean_env.rocq.load_path import load_path_argv
from lean_env.rocq.output import clean, parse_assumptions
from lean_env.rocq.session import RocqSession, SessionError
from lean_env.sandbox import apply_limits
from lean_env.scratch import scratch_dir

log = logging.getLogger(__name__)

#: the logical library and module a header is compiled as (``-Q <scratch> SgsCensus``)
HEADER_LIBRARY = "SgsCensus"
HEADER_MODULE = "Header"
#: niceness added to the census's own processes (its coqtop, coqc and coqchk)
CENSUS_NICE = 10
#: headers a backend keeps waiting for their census; a header that finds the
#: queue full is not censused this time (its proofs keep ``Print Assumptions``)
MAX_QUEUED = 64

#: the typing flags a header must leave as they are, with coqtop's answer to ``Test``
_DEFAULT_FLAGS = {
    "Guard Checking": "Guard Checking is on",
    "Universe Checking": "Universe Checking is on",
    "Positivity Checking": "Positivity Checking is on",
}

_LIBRARY_NAME = re.compile(r"[^\s.]+(?:\.[^\s.]+)*")
#: start of ``Print Module`` output; a functor's fields are not globals
_MODULE_HEAD = re.compile(r"Module\s+\S+\s*(:\s*Funsig\b|:=\s*Functor\b)?")
#: fields in ``Print Module`` output under ``Set Short Module Printing``
_MODULE_FIELD = re.compile(r"\b(Module\s+Type|Module|Inductive|CoInductive|Variant|Record|Structure|Class)\s+(\S+)")
_MAX_MODULES = 100_000
#: what coqtop prints around ``Print Module`` of a library that redefines
#: notations (mathcomp's ssrnat, ssrbool): a warning with the location of the
#: command, and an info message about a scope's key.  Neither is part of the
#: module's listing, which is untagged text.
_NOTATION_NOISE = re.compile(
    r"(?:Toplevel input, characters \d+-\d+:\n(?:> [^\n]*\n)+)?<warning>.*?</warning>"
    r"|<infomsg>\s*Overwriting previous delimiting key \S+ in scope \S+\s*</infomsg>", re.S)
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)


def parse_libraries(output: str) -> tuple[str, ...]:
    """The answer to ``Print Libraries``."""
    head, *rest = clean(output).splitlines() or [""]
    names = [line.strip() for line in rest if line.strip()]
    if head.strip() != "Loaded library files:" or not all(_LIBRARY_NAME.fullmatch(n) for n in names):
        raise CensusError(f"unexpected answer to Print Libraries: {output[:300]!r}")
    return tuple(names)


def module_answer(output: str) -> str:
    """The answer to ``Print Module`` without the notation warnings printed with it."""
    return clean(_NOTATION_NOISE.sub("", output))


def parse_location(name: str, output: str) -> str:
    """The file named by the answer to ``Locate Library name``."""
    m = re.fullmatch(rf"{re.escape(name)} has been loaded from file\s+(\S.*)", clean(output), re.S)
    if m is None:
        raise CensusError(f"unexpected answer to Locate Library {name}: {output[:300]!r}")
    return m.group(1).strip()


class AxiomCensus:
    """Takes and caches censuses for one backend.

    :meth:`identify` runs in the backend's session right after a header is
    loaded; a census not yet in memory or on disk is then queued for this
    backend's census thread, and until it is known :meth:`is_clean` says no
    (so proofs are checked with ``Print Assumptions`` meanwhile).  The thread
    takes one census at a time, each in one of the machine's
    ``census_max_concurrent`` slots (see "Resources" in the module
    docstring).  Workers that share the cache directory take each census
    once: the first holds a file lock while it runs, the others wait for it
    and read its result.
    """

    def __init__(self, config: RocqConfig, coq_version: str, coqchk: str, coqchk_version: str) -> None:
        """Use :meth:`create`."""
        self.config = config
        self._coqchk = coqchk
        self._identity = [CENSUS_VERSION, coq_version, coqchk, coqchk_version, *self._coqchk_options()]
        self._lock = threading.Lock()
        #: census per key; ``None``: it could not be taken (not retried by this instance)
        self._results: dict[str, Optional[Census]] = {}
        #: headers waiting for their census, oldest first
        self._queue: deque[Environment] = deque()
        #: keys queued or being taken
        self._pending: set[str] = set()
        #: the key being taken (``None``: the thread is idle)
        self._current: Optional[str] = None
        #: signalled when the queue or ``_current`` changes, and on close
        self._changed = threading.Condition(self._lock)
        self._thread: Optional[threading.Thread] = None
        #: most headers queued (see :data:`MAX_QUEUED`)
        self.max_queued = MAX_QUEUED
        self._processes: set[subprocess.Popen] = set()
        self._sessions: set[RocqSession] = set()
        self._closed = threading.Event()
        self._cache = CensusCache(Path(config.census_cache_dir) if config.census_cache_dir else default_cache_dir(),
                                  config.census_max_concurrent, self._closed, coqchk_version)
        self._warned: set[str] = set()
        #: coqchk runs this instance started (the others found a cached census)
        self.coqchk_runs = 0

    @classmethod
    def create(cls, config: RocqConfig, coq_version: str) -> Optional["AxiomCensus"]:
        """A census for ``config``, or ``None`` (with a warning) when coqchk
        cannot be found or does not report its version."""
        exe = shutil.which(config.coqchk)
        version = ""
        if exe is not None:
            try:
                version = subprocess.run([exe, "-v"], capture_output=True, text=True, timeout=config.start_timeout,
                                         env=config.child_env()).stdout.strip()
            except (OSError, subprocess.TimeoutExpired):
                version = ""
        if not version:
            log.warning("axiom census disabled: %r is not a working coqchk; every proof is checked with "
                        "Print Assumptions", config.coqchk)
            return None
        return cls(config, coq_version, exe, version.splitlines()[0])

    # -- the backend's side ------------------------------------------------
    def identify(self, session: RocqSession, deadline: float) -> Environment:
        """Describe the environment ``session`` is in (it must be right after
        its header) and make sure its census is known or being taken.  The
        session is left at the same state.  :class:`SessionError` propagates."""
        state = session.header_state
        try:
            env = self._describe(session, deadline)
        except CensusError as e:
            env = Environment(libraries=(), key="", reason=str(e))
        session.back_to(state, deadline)
        if env.key:
            self._start(env)
        else:
            self._warn_once(env.reason, "axiom census not applicable (%s); proofs under this header are checked "
                                        "with Print Assumptions", env.reason[:300])
        return env

    def is_clean(self, env: Optional[Environment]) -> bool:
        """Whether ``env`` is known to be clean (no proof in it can depend on
        anything)."""
        if env is None or not env.key:
            return False
        with self._lock:
            census = self._results.get(env.key)
        return census is not None and census.clean

    def result(self, env: Environment) -> Optional[Census]:
        """The census of ``env`` if it is known."""
        with self._lock:
            return self._results.get(env.key)

    def wait(self, timeout: float) -> bool:
        """Wait for the censuses queued or being taken; ``False`` if some
        still are."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._queue and self._current is None, timeout)

    def close(self) -> None:
        """Stop the censuses being taken (their processes are killed) and
        drop the queued ones."""
        self._closed.set()
        with self._changed:
            self._queue.clear()
            self._changed.notify_all()
            processes, sessions = list(self._processes), list(self._sessions)
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        for session in sessions:
            session.kill()

    def _describe(self, session: RocqSession, deadline: float) -> Environment:
        for flag, expected in _DEFAULT_FLAGS.items():
            reply = session.run(f"Test {flag}.", deadline)
            if not reply.ok or clean(reply.output) != expected:
                return Environment((), "", f"{flag} is not on after the header")
        reply = session.run("Print All.", deadline)
        if not reply.ok:
            return Environment((), "", "Print All failed after the header")
        # something declared: the header's own (censused with it) or, without
        # a header, coqtop's start-up (extra_args such as -l)
        header = tuple(session.header or ()) if clean(reply.output) else ()
        if clean(reply.output) and not header:
            return Environment((), "", "the toplevel declares something before the proof")
        load_path = tuple(load_path_argv(session.load_path))
        libraries = _loaded_libraries(session, deadline)
        library_key = _digest([*self._identity, load_path,
                               [[lib.name, lib.path, lib.size, lib.mtime_ns] for lib in libraries]])
        key = _digest([library_key, header]) if header else library_key
        return Environment(libraries=libraries, key=key, load_path=load_path, header=header, library_key=library_key)

    def _start(self, env: Environment) -> None:
        """Know the census of ``env`` from the cache, or queue it (never waits
        for a census: this runs on the check path)."""
        with self._changed:
            if env.key in self._results or env.key in self._pending or self._closed.is_set():
                return
            cached = self._cache.read(env)
            if cached is not None:
                self._results[env.key] = cached
            elif len(self._queue) < self.max_queued:
                self._queue.append(env)
                self._pending.add(env.key)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._work, daemon=True, name="axiom-census")
                    self._thread.start()
                self._changed.notify_all()
                return
        if cached is not None:
            self._report(env, cached)
        else:
            self._warn_once("queue full", "axiom census: %d headers are waiting for their census; proofs under "
                                          "further headers are checked with Print Assumptions until the queue has "
                                          "room", self.max_queued)

    # -- taking a census ----------------------------------------------------
    def _work(self) -> None:
        """The census thread: takes the queued censuses one after another."""
        while True:
            with self._changed:
                while not self._queue and not self._closed.is_set():
                    self._changed.wait()
                if self._closed.is_set():
                    return
                env = self._queue.popleft()
                self._current = env.key
            census = self._run(env)
            with self._changed:
                self._results[env.key] = census
                self._pending.discard(env.key)
                self._current = None
                self._changed.notify_all()
            if census is not None:
                self._report(env, census)

    def _run(self, env: Environment) -> Optional[Census]:
        """The census of ``env``: from the cache if some worker has written
        it meanwhile, else taken in a machine-wide slot; ``None`` if it cannot
        be taken."""
        try:
            cached = self._cache.read(env)
            if cached is not None:
                return cached
            with self._cache.slot():
                return self._take(env)
        except Exception as e:   # whatever went wrong, proofs keep being checked with Print Assumptions
            if not self._closed.is_set():
                self._warn_once(env.key, "axiom census failed (%s); proofs under this header are checked with "
                                         "Print Assumptions", str(e)[:500])
            return None

    def _take(self, env: Environment) -> Census:
        # the holder of the lock may need a whole census_timeout of its own (two with a header)
        steps = 2 if env.header else 1
        with self._cache.lock(env.key, time.monotonic() + steps * self.config.census_timeout + 60):
            cached = self._cache.read(env)
            if cached is not None:
                return cached
            started = time.monotonic()
            if env.header:
                census = self._take(env.libraries_only())
                if census.clean:
                    census = self._check_header(env, time.monotonic() + self.config.census_timeout)
            else:
                deadline = started + self.config.census_timeout
                census = self._scan_inductives(env, deadline)
                if census.clean:
                    census = self._run_coqchk(env, deadline)
            self._cache.write(env, census, time.monotonic() - started)
            return census

    def _check_header(self, env: Environment, deadline: float) -> Census:
        """Compile the header as library ``SgsCensus.Header``, re-check its
        own declarations with ``coqchk -norec`` (the libraries it loads are
        admitted: :meth:`_take` censused them first) and scan its inductive
        types."""
        with scratch_dir("census-header") as scratch:
            source = Path(scratch) / f"{HEADER_MODULE}.v"
            source.write_text("\n".join(env.header) + "\n", encoding="utf-8")
            own = ["-Q", scratch, HEADER_LIBRARY]
            # -native-compiler no: as in the session, native_compute must not compile OCaml
            self._run_bounded([self.config.coqc, "-q", "-native-compiler", "no", *self.config.extra_args,
                               *env.load_path, *own, source.name], scratch, deadline, "coqc")
            text = self._run_bounded([self._coqchk, "-o", *self._coqchk_options(), *coqchk_options(env.load_path),
                                      *own, "-norec", f"{HEADER_LIBRARY}.{HEADER_MODULE}"], scratch, deadline, "coqchk")
            compiled = os.path.realpath(source.with_suffix(".vo"))
            if parse_trace(text) != {lib.path for lib in env.libraries} | {compiled}:
                raise CensusError("coqchk loaded other files than the header's libraries")
            summary = parse_summary(text)
            # with -norec every constant of the admitted libraries is listed as an axiom
            ours = f"{HEADER_LIBRARY}.{HEADER_MODULE}."
            census = Census(axioms=tuple(name for name in summary.axioms if name.startswith(ours)),
                            unsafe=summary.unsafe)
            if census.clean:
                census = self._scan_inductives(env, deadline, header_dir=scratch)
            return census

    def _scan_inductives(self, env: Environment, deadline: float, header_dir: Optional[str] = None) -> Census:
        """Load the libraries in a coqtop of our own and run ``Print
        Assumptions`` on every inductive type they declare; with
        ``header_dir``, load the header compiled there instead (it loads the
        same libraries) and scan its own inductive types only."""
        nice = shutil.which("nice")
        own = ["-Q", header_dir, HEADER_LIBRARY] if header_dir else []
        argv = self.config.argv([*env.load_path, *own])
        try:
            session = RocqSession([nice, "-n", str(CENSUS_NICE), *argv] if nice else argv,
                                  env=self.config.child_env(), limits=self.config.limits(), name="coqtop-census")
        except SessionError as e:
            raise CensusError(f"census coqtop: {e}") from e
        if not nice:   # then lower its priority from outside, as soon as it runs
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, session.pid, os.getpriority(os.PRIO_PROCESS, 0) + CENSUS_NICE)
        with self._lock:
            self._sessions.add(session)
        try:
            if self._closed.is_set():   # close() may have run before the session was registered
                raise CensusError("the backend was closed")
            session.wait_ready(deadline)
            declared = session.run("Print All.", deadline)
            if not declared.ok or clean(declared.output):
                raise CensusError("coqtop declares something at start-up, before any header")
            modules = [f"{HEADER_LIBRARY}.{HEADER_MODULE}"] if header_dir else [lib.name for lib in env.libraries]
            loaded = session.run(f"Require {' '.join(modules)}.", deadline)
            if not loaded.ok:
                raise CensusError(f"the libraries do not load: {loaded.message[:300]}")
            libraries = tuple(lib for lib in _loaded_libraries(session, deadline) if lib.name not in modules) \
                if header_dir else _loaded_libraries(session, deadline)
            if libraries != env.libraries:
                raise CensusError("a fresh coqtop loads other files for the same libraries")
            if not session.run("Set Short Module Printing.", deadline).ok:
                raise CensusError("Set Short Module Printing failed")
            unsafe = []
            for name in _inductive_types(session, modules, deadline):
                reply = session.run(f"Print Assumptions {name}.", deadline)
                found = parse_assumptions(reply.output)
                if not reply.ok or found.axioms or found.other:
                    unsafe.append(f"inductive: {name}: {' '.join(reply.message.split())[-200:]}")
            return Census(unsafe=tuple(unsafe))
        except SessionError as e:
            raise CensusError(f"census coqtop: {e}") from e
        finally:
            session.kill()
            with self._lock:
                self._sessions.discard(session)

    def _run_coqchk(self, env: Environment, deadline: float) -> Census:
        """Re-check the libraries' files with coqchk and read its summary."""
        argv = [self._coqchk, "-o", *self._coqchk_options(), *coqchk_options(env.load_path),
                *(lib.name for lib in env.libraries)]
        with scratch_dir("census") as scratch:
            text = self._run_bounded(argv, scratch, deadline, "coqchk")
        if parse_trace(text) != {lib.path for lib in env.libraries}:
            raise CensusError("coqchk checked other files than the ones coqtop loaded")
        return parse_summary(text)

    def _run_bounded(self, argv: list[str], cwd: str, deadline: float, what: str) -> str:
        """Run one census command (coqc or coqchk) in ``cwd`` at low priority,
        under the session's limits, until ``deadline``; its output, or
        :class:`CensusError` unless it exits 0."""
        limits = apply_limits(self.config.limits())
        out_path = Path(cwd) / f".{what}.out"
        with open(out_path, "wb") as out:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       cwd=cwd, env=self.config.child_env(), start_new_session=True,
                                       preexec_fn=lambda: (_census_child(), limits()))
        with self._lock:
            self._processes.add(process)
            if what == "coqchk":
                self.coqchk_runs += 1
        if self._closed.is_set():   # close() may have run before the process was registered
            os.killpg(process.pid, signal.SIGKILL)
        try:
            rc = process.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired as e:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise CensusError(f"{what} did not finish within {self.config.census_timeout} s") from e
        finally:
            with self._lock:
                self._processes.discard(process)
        text = out_path.read_text("utf-8", "replace")
        if rc != 0:
            raise CensusError(f"{what} exited with {rc}: {text[-500:]!r}")
        return text

    def _coqchk_options(self) -> list[str]:
        return coqchk_options(self.config.extra_args)

    # -- messages -------------------------------------------------------------
    def _report(self, env: Environment, census: Census) -> None:
        if not census.clean:
            # once per finding, not per header: a project's files share what they load, and
            # a worker sees hundreds of its headers (the message names no header anyway)
            self._warn_once(f"not clean: {census.describe()}",
                            "axiom census: what the header loads or declares is not clean (%s); proofs "
                                     "under it are checked with Print Assumptions", census.describe())

    def _warn_once(self, topic: str, message: str, *args: object) -> None:
        with self._lock:
            if topic in self._warned:
                return
            self._warned.add(topic)
        log.warning(message, *args)


def _digest(material: object) -> str:
    return hashlib.sha256(json.dumps(material).encode()).hexdigest()


def _census_child() -> None:
    """Runs in coqchk between fork and exec: a worker killed without closing
    its backend must not leave a long coqchk behind (coqtop, unlike coqchk,
    exits by itself when its stdin closes), and coqchk yields the CPU to the
    checks."""
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    os.nice(CENSUS_NICE)


def _loaded_libraries(session: RocqSession, deadline: float) -> tuple[Library, ...]:
    """Every library loaded in ``session``, with the file it came from."""
    reply = session.run("Print Libraries.", deadline)
    if not reply.ok:
        raise CensusError("Print Libraries failed")
    libraries = []
    for name in sorted(parse_libraries(reply.output)):
        located = session.run(f"Locate Library {name}.", deadline)
        if not located.ok:
            raise CensusError(f"Locate Library {name} failed")
        path = os.path.realpath(parse_location(name, located.output))
        try:
            st = os.stat(path)
        except OSError as e:
            raise CensusError(f"cannot read {path}: {e}") from e
        libraries.append(Library(name=name, path=path, size=st.st_size, mtime_ns=st.st_mtime_ns))
    return tuple(libraries)


def _inductive_types(session: RocqSession, libraries: list[str], deadline: float) -> list[str]:
    """Qualified names of the inductive types the libraries declare, found by
    walking their modules with ``Print Module`` (short printing).  Functors
    are skipped: their fields become globals only in the modules that apply
    them, which are walked.  A module whose fields cannot be seen raises
    :class:`CensusError`."""
    todo, seen, found = list(libraries), set(), set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        if len(seen) > _MAX_MODULES:
            raise CensusError("too many modules")
        reply = session.run(f"Print Module {module}.", deadline)
        text = module_answer(reply.output)
        head = _MODULE_HEAD.match(text)
        if not reply.ok or head is None:
            raise CensusError(f"unexpected answer to Print Module {module}: {text[:300]!r}")
        if head.group(1):
            continue
        body = text[head.end():]
        if "Struct" not in body and "Sig" not in body and re.match(r"\s*:(?!=)", body):
            # a module typed by a named module type, its implementation not shown
            raise CensusError(f"the fields of module {module} are not visible")
        for keyword, name in _MODULE_FIELD.findall(body):
            if keyword == "Module":
                todo.append(f"{module}.{name}")
            elif not keyword.startswith("Module"):
                found.add(f"{module}.{name}")
    return sorted(found)
