"""Configuration of the Rocq (coqtop) backend.

All fields are plain values so that a Hydra config group can fill them
(``RocqConfig(**options)``); sequences given as lists are stored as tuples.
"""

from __future__ import annotations

import hashlib
import os
import re
import resource
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Optional, Sequence

from lean_env.rocq.known_bugs import FEATURE_NAMES
from lean_env.sandbox import Limits

#: bump whenever a change to the checks can change a verdict (part of the
#: verdict-cache key)
CHECKS_VERSION = "4"   # 4: proof-term check, plugin commands, process tactics, prover_crash; 3: known-bug classes, qualified tactics, ellipsis, Open Scope in proofs

#: the module coqtop's own declarations live in
TOPLEVEL_MODULE = "Top"

#: variables passed from our environment to coqtop (nothing else is: the
#: prover runs hostile text and must not see API keys or tokens)
_PASSED_VARIABLES = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "COQLIB", "COQCORELIB", "COQPATH",
                     "OCAMLPATH", "OCAMLFIND_CONF")


_POSITIVE_FIELDS = ("timeout", "header_timeout", "start_timeout", "max_checks", "open_files", "max_output_bytes",
                    "max_proof_chars", "max_statement_chars", "max_header_chars", "max_project_header_chars",
                    "max_sentences",
                    "max_message_chars", "census_timeout")


#: the only sentences ``tactic_libraries`` may hold: one ``Require`` (with
#: ``From``, ``Import`` or ``Export``) of dotted library names, nothing else
TACTIC_LIBRARY_SENTENCE = re.compile(
    r"\s*(?:From\s+[\w']+(?:\.[\w']+)*\s+)?Require(?:\s+(?:Import|Export))?(?:\s+[\w']+(?:\.[\w']+)*)+\s*\.\s*")


class RocqConfigError(ValueError):
    """The backend is configured in a way that cannot work (no coqtop, a
    coqtop that does not answer ``-v``, a nonsensical limit)."""


@dataclass(frozen=True)
class RocqConfig:
    """Everything the Rocq backend needs to know."""

    #: the coqtop executable (a name looked up on PATH, or a path)
    coqtop: str = "coqtop"
    #: arguments added after ``-emacs -q -native-compiler no`` (e.g. ``-R dir Lib``);
    #: ``-top`` is always set to ``Top`` after them
    extra_args: tuple[str, ...] = ()
    #: default wall-clock seconds per proof or statement check
    timeout: float = 60.0
    #: wall-clock seconds allowed to run a header (loading libraries)
    header_timeout: float = 120.0
    #: wall-clock seconds allowed for coqtop to start and print its first prompt
    start_timeout: float = 60.0
    #: replace a session after this many checks
    max_checks: int = 500
    #: replace a session whose resident memory exceeds this (0 = never)
    max_rss_bytes: int = 2 << 30
    #: RLIMIT_AS of coqtop; None = unlimited
    address_space_bytes: Optional[int] = 4 << 30
    #: RLIMIT_NOFILE of coqtop (clamped to our hard limit)
    open_files: int = 256
    #: run coqtop in an empty network namespace when the machine allows it
    isolate_network: bool = True
    #: largest reply to one sentence, in bytes; more is an ``output_too_large`` failure
    max_output_bytes: int = 16 << 20
    #: keep a second coqtop started in the background, to replace a killed one
    spare: bool = True
    #: axioms a valid proof may depend on (as ``Print Assumptions`` names them,
    #: e.g. ``classic``); none by default
    allowed_axioms: tuple[str, ...] = ()
    #: proof features that reach Coq 8.16's known soundness bugs and are
    #: accepted anyway (:mod:`lean_env.rocq.known_bugs`): ``"fixpoints"``
    #: (``fix``/``cofix``; the guard checker's bugs) and ``"vm_reduction"``
    #: (``vm_compute``, ``native_compute``, ``Compute``, ``<:``; the VM's
    #: bugs).  None by default: such text is refused with ``known_bug:<name>``
    allow_bug_prone_features: tuple[str, ...] = ()
    #: ``Require`` sentences (``"From Hammer Require Import Tactics."``) the
    #: checker runs after every task's own header and before its statement, so
    #: that proofs may use those libraries' tactics under headers that never
    #: load them.  A statement must elaborate to the same term with and
    #: without them, or the task is refused with
    #: ``tactic_libraries_change_statement``
    #: (:mod:`lean_env.rocq.tactic_libraries`).  None by default
    tactic_libraries: tuple[str, ...] = ()
    #: longest proof body / tactic step accepted, in characters
    max_proof_chars: int = 50_000
    #: longest statement accepted, in characters
    max_statement_chars: int = 10_000
    #: longest header accepted, in characters
    max_header_chars: int = 10_000
    #: longest header of a task with a load path (a target traced from a Rocq
    #: project: its file's text before the theorem), in characters
    max_project_header_chars: int = 200_000
    #: most sentences accepted in one proof body
    max_sentences: int = 2_000
    #: longest prover message kept in a verdict, in characters
    max_message_chars: int = 4_000
    #: extra environment variables for coqtop
    extra_env: dict[str, str] = field(default_factory=dict)
    #: skip ``Print Assumptions`` after a proof when a one-time census of the
    #: header's libraries (coqchk, cached on disk) shows that no proof under
    #: that header can depend on an axiom or an unsafe declaration.  Sound
    #: because a proof body may only run tactics and ends with a kernel-checked
    #: ``Qed``, so everything it can depend on comes from those libraries (see
    #: :mod:`lean_env.rocq.census`).  Verdicts are the same with or without it.
    axiom_census: bool = True
    #: the coqchk executable the census and the audit run (a name looked up on
    #: PATH, or a path)
    coqchk: str = "coqchk"
    #: the coqc executable the audit (:mod:`lean_env.rocq.audit`) compiles a
    #: whole proof file with, in a fresh sandbox, before coqchk re-checks it
    #: (a name looked up on PATH, or a path); the audit answers
    #: ``audit_unavailable`` when it cannot be found
    coqc: str = "coqc"
    #: where census results are cached; None = ``$XDG_CACHE_HOME/lean_env``
    #: (or ``~/.cache/lean_env``)
    census_cache_dir: Optional[str] = None
    #: wall-clock seconds allowed for one census (coqchk over every loaded library)
    census_timeout: float = 600.0
    #: most censuses running at once on this machine: every worker whose
    #: ``census_cache_dir`` is the same counts (they share slot files locked
    #: in it).  Each backend takes its censuses one after another in one
    #: background thread, at low CPU priority, and queues at most 64 headers
    #: (the proofs under a header not queued are checked with ``Print
    #: Assumptions``, and it is queued the next time it is loaded)
    census_max_concurrent: int = 1
    #: fraction of the valid proofs that still get ``Print Assumptions`` while
    #: the census says it is unnecessary: defence in depth against a bug in the
    #: text checks.  A disagreement rejects that proof and switches the census
    #: off for the rest of this backend's life.  An audit costs ~230 ms, ~25
    #: checks' worth, so 0.5% adds ~12% to checking valid proofs and still
    #: audits ~150 proofs of a paper-sized iteration (~30,000 valid proofs).
    census_audit_fraction: float = 0.005

    def __post_init__(self) -> None:
        if not isinstance(self.census_audit_fraction, (int, float)) or not 0 <= self.census_audit_fraction <= 1:
            raise RocqConfigError(f"census_audit_fraction must be in [0, 1], got {self.census_audit_fraction!r}")
        for name in ("extra_args", "allowed_axioms", "allow_bug_prone_features", "tactic_libraries"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise RocqConfigError(f"{name} must be a list of strings, got {value!r}")
            object.__setattr__(self, name, tuple(value))
        object.__setattr__(self, "extra_env", dict(self.extra_env))
        for sentence in self.tactic_libraries:
            if not TACTIC_LIBRARY_SENTENCE.fullmatch(sentence):
                raise RocqConfigError(f"tactic_libraries: {sentence!r} is not one Require sentence "
                                      f"(such as 'From Hammer Require Import Tactics.')")
        unknown = sorted(set(self.allow_bug_prone_features) - set(FEATURE_NAMES))
        if unknown:
            raise RocqConfigError(f"allow_bug_prone_features: unknown {unknown} (known: {list(FEATURE_NAMES)})")
        if not isinstance(self.coqchk, str) or not isinstance(self.coqc, str) or not (
                self.census_cache_dir is None or isinstance(self.census_cache_dir, str)):
            raise RocqConfigError(f"coqchk, coqc and census_cache_dir must be strings, got {self.coqchk!r}, "
                                  f"{self.coqc!r} and {self.census_cache_dir!r}")
        if isinstance(self.census_max_concurrent, bool) or not isinstance(self.census_max_concurrent, int) \
                or self.census_max_concurrent < 1:
            raise RocqConfigError(f"census_max_concurrent must be a positive integer, got {self.census_max_concurrent!r}")
        for name in _POSITIVE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise RocqConfigError(f"{name} must be a positive number, got {value!r}")

    def argv(self, load_path_args: Sequence[str] = ()) -> list[str]:
        """The command line of one coqtop session, with a task's load path
        options (:mod:`lean_env.rocq.load_path`) after ``extra_args``;
        :class:`RocqConfigError` when the executable cannot be found."""
        exe = shutil.which(self.coqtop)
        if exe is None:
            raise RocqConfigError(f"coqtop not found: {self.coqtop!r} (install Rocq/Coq 8.16, e.g. apt-get install coq)")
        # -native-compiler no: native_compute would compile and load OCaml code;
        # -top last, so that theorems are always Top.<name> whatever extra_args say
        return [exe, "-emacs", "-q", "-native-compiler", "no", *self.extra_args, *load_path_args, "-top",
                TOPLEVEL_MODULE]

    def probe_version(self) -> str:
        """Ask ``coqtop -v`` for its version (``8.16.1``)."""
        argv = self.argv()
        try:
            out = subprocess.run([argv[0], "-v"], capture_output=True, text=True, timeout=self.start_timeout,
                                 env=self.child_env()).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            raise RocqConfigError(f"{argv[0]} -v failed: {e}") from e
        m = re.search(r"version (\S+)", out)
        if m is None:
            raise RocqConfigError(f"{argv[0]} -v printed no version: {out[:200]!r}")
        return m.group(1)

    def child_env(self) -> dict[str, str]:
        """coqtop's environment: a few safe variables of ours and ``extra_env``."""
        env = {k: v for k, v in os.environ.items() if k in _PASSED_VARIABLES}
        env.setdefault("LANG", "C.UTF-8")
        env.update(self.extra_env)
        return env

    def limits(self) -> Limits:
        """Resource limits of the coqtop process."""
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        open_files = self.open_files if hard == resource.RLIM_INFINITY else min(self.open_files, hard)
        return Limits(address_space_bytes=self.address_space_bytes, cpu_seconds=None, open_files=open_files,
                      isolate_network=self.isolate_network, max_output_bytes=self.max_output_bytes)

    def policy_fingerprint(self) -> str:
        """A short hash of every setting that can change a verdict."""
        policy = repr((sorted(self.allowed_axioms), self.extra_args, self.max_proof_chars,
                       self.max_statement_chars, self.max_header_chars, self.max_sentences,
                       sorted(self.allow_bug_prone_features), self.max_project_header_chars,
                       *([self.tactic_libraries] if self.tactic_libraries else [])))
        return hashlib.sha256(policy.encode()).hexdigest()[:12]
