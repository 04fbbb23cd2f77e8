"""Configuration of the Lean REPL backend.

The REPL must run with the Lean search path of a Mathlib project built at the
same Lean version as the REPL binary.  With ``project_dir`` set, each REPL
process runs in that directory, so ``lake env <repl binary>`` finds the project,
elan's ``lake`` proxy picks the project's toolchain (from its
``lean-toolchain``), and relative paths in ``repl_command`` are relative to it.
Without ``project_dir`` the process runs in a fresh scratch directory (deleted
afterwards) and the command must find the project itself, e.g.
``<toolchain's lake> -d <project> env <repl binary>``.  ``tools/setup_lean.sh``
prints working settings.

Headers: keep a finite ``set_option maxHeartbeats N`` in the header (e.g.
400000).  Lean then stops most runaway proofs itself with an error message,
and the process survives; with ``maxHeartbeats 0`` every runaway proof costs a
wall-clock timeout and a process restart (the backend logs a warning).  Bodies
cannot change it: ``set_option`` is banned in proofs.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from lean_env.lean.checks import CHECKS_VERSION, DEFAULT_ALLOWED_AXIOMS, CheckPolicy
from lean_env.sandbox import Limits

#: environment variables a user can set instead of config fields
ENV_REPL_COMMAND = "LEAN_ENV_REPL_COMMAND"
ENV_PROJECT_DIR = "LEAN_ENV_PROJECT_DIR"
ENV_LAKE_COMMAND = "LEAN_ENV_LAKE_COMMAND"

#: variables passed from our environment to the REPL (nothing else is: the
#: prover runs hostile text and must not see API keys or tokens)
_PASSED_VARIABLES = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR")
_PASSED_PREFIXES = ("LEAN_", "ELAN", "LAKE")


#: the places a proof's axioms can be read from (``LeanConfig.axiom_check``)
AXIOM_CHECKS = ("process", "repl")


class LeanConfigError(ValueError):
    """The backend is configured in a way that cannot work (no REPL command,
    a binary that does not exist)."""


@dataclass(frozen=True)
class LeanConfig:
    """Everything the Lean REPL backend needs to know."""

    #: command line that starts one REPL, split like a shell would split it;
    #: empty: ``lake env <repl_binary>``
    repl_command: str = ""
    #: the Mathlib project the REPL runs in (its working directory); empty:
    #: a scratch directory, and the command must locate the project
    project_dir: str = ""
    #: the REPL binary (``<repl checkout>/.lake/build/bin/repl``), used only
    #: when ``repl_command`` is empty
    repl_binary: str = ""
    #: the ``lake`` command the audit compiles with (``<lake_command> -d
    #: <project_dir> env lean FILE``); a name on PATH, a path, or a command line
    lake_command: str = "lake"
    #: where a proof's axioms are read: ``process`` (the REPL pickles the proof's
    #: environment and the trusted checker ``SgsAxiomCheck.lean`` replays it through the
    #: kernel in a separate ``lake env lean --run``; needs ``project_dir``) or ``repl``
    #: (``#print axioms`` in the proof's own environment: one REPL round trip, but a
    #: proof that adds syntax could change what it prints; docs/proof_checking.md)
    axiom_check: str = "process"
    #: default wall-clock seconds per proof / tactic (paper: 200 s)
    timeout: float = 200.0
    #: wall-clock seconds allowed to start a process and run a header
    #: (``import Mathlib`` takes seconds on a warm disk, minutes on a cold one)
    header_timeout: float = 600.0
    #: recycle a process after this many commands (the REPL frees nothing)
    max_commands: int = 1000
    #: recycle a process whose resident memory (with children) exceeds this;
    #: it includes the mapped Mathlib .olean files (about 5-6 GiB); 0 = never
    max_rss_bytes: int = 14 << 30
    #: RLIMIT_AS for the process; None = unlimited (a tight limit breaks Mathlib's
    #: memory-mapped imports with spurious bad_alloc)
    address_space_bytes: Optional[int] = None
    #: RLIMIT_NOFILE for the process (clamped to the hard limit we have)
    open_files: int = 8192
    #: run the REPL in an empty network namespace when the machine allows it
    isolate_network: bool = True
    #: keep a warm spare process (header already run) for restarts
    spare: bool = True
    #: at most this many distinct headers are remembered per process
    max_headers: int = 4
    #: threads per Lean process (``LEAN_NUM_THREADS``); several REPLs per
    #: machine must not oversubscribe its cores
    lean_num_threads: int = 1
    #: axioms a valid proof may depend on
    allowed_axioms: tuple[str, ...] = tuple(sorted(DEFAULT_ALLOWED_AXIOMS))
    #: tokens banned in proofs on top of the built-in lists
    extra_banned_tokens: tuple[str, ...] = ()
    #: longest proof body / tactic accepted, in characters
    max_body_chars: int = 100_000
    #: longest statement accepted, in characters
    max_statement_chars: int = 20_000
    #: Lean toolchain label for the verdict-cache key; empty: read
    #: ``<project_dir>/lean-toolchain``
    toolchain: str = ""
    #: directories the REPL, the axiom checker and the audit may write to besides their
    #: scratch directories (writes elsewhere are refused where Landlock exists)
    writable_paths: tuple[str, ...] = ()
    #: extra environment variables for the REPL process
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The command line is one string, split here like a shell would: a list passed in
        # by mistake must fail now, naming the field, not later inside every worker.
        for name in ("repl_command", "project_dir", "repl_binary", "toolchain", "lake_command"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise LeanConfigError(f"LeanConfig.{name} must be a string, got {type(value).__name__}: {value!r}")
        if self.axiom_check not in AXIOM_CHECKS:
            raise LeanConfigError(f"LeanConfig.axiom_check must be one of {', '.join(AXIOM_CHECKS)}, "
                                  f"got {self.axiom_check!r}")

    @classmethod
    def from_env(cls, **overrides) -> "LeanConfig":
        """A config whose ``repl_command`` / ``project_dir`` / ``lake_command`` come
        from ``LEAN_ENV_REPL_COMMAND`` / ``LEAN_ENV_PROJECT_DIR`` /
        ``LEAN_ENV_LAKE_COMMAND`` when set;
        ``overrides`` win over both."""
        values: dict = {}
        if os.environ.get(ENV_REPL_COMMAND):
            values["repl_command"] = os.environ[ENV_REPL_COMMAND]
        if os.environ.get(ENV_PROJECT_DIR):
            values["project_dir"] = os.environ[ENV_PROJECT_DIR]
        if os.environ.get(ENV_LAKE_COMMAND):
            values["lake_command"] = os.environ[ENV_LAKE_COMMAND]
        values.update(overrides)
        return cls(**values)

    def argv(self) -> list[str]:
        """The command line that starts one REPL; :class:`LeanConfigError`
        when it cannot be built or its program cannot be found."""
        try:
            argv = shlex.split(self.repl_command)
        except ValueError as e:
            raise LeanConfigError(f"cannot parse repl_command {self.repl_command!r}: {e}") from e
        if not argv:
            if not self.repl_binary:
                raise LeanConfigError(
                    "no Lean REPL configured: set prover.lean.repl_command (or LEAN_ENV_REPL_COMMAND) and "
                    "prover.lean.project_dir; tools/setup_lean.sh prints them")
            argv = ["lake", "env", self.repl_binary]
        if self.project_dir and not Path(self.project_dir).is_dir():
            raise LeanConfigError(f"Lean project_dir {self.project_dir!r} is not a directory")
        program = argv[0]
        if "/" in program:
            found = Path(self.project_dir or ".", program).is_file()
        else:
            found = shutil.which(program, path=self.child_env().get("PATH")) is not None
        if not found:
            raise LeanConfigError(f"Lean REPL command not found: {program!r} (command: {shlex.join(argv)})")
        if self.axiom_check == "process" and not self.project_dir:
            raise LeanConfigError(
                "the Lean axiom check runs `lake env lean` in the Lean project: set prover.lean.project_dir, "
                "or prover.lean.axiom_check=repl to read `#print axioms` from the REPL instead")
        return argv

    def cwd(self) -> Optional[str]:
        """The REPL's working directory: ``project_dir``, or ``None`` for a
        scratch directory."""
        return self.project_dir or None

    def child_env(self) -> dict[str, str]:
        """The REPL's environment: a few safe variables of ours, the Lean /
        elan / lake ones, ``LEAN_NUM_THREADS`` and ``extra_env``."""
        env = {k: v for k, v in os.environ.items()
               if k in _PASSED_VARIABLES or k.startswith(_PASSED_PREFIXES)}
        env["LEAN_NUM_THREADS"] = str(self.lean_num_threads)
        env.update(self.extra_env)
        return env

    def limits(self) -> Limits:
        """Resource limits of the REPL process."""
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        open_files = self.open_files if hard == resource.RLIM_INFINITY else min(self.open_files, hard)
        return Limits(address_space_bytes=self.address_space_bytes, cpu_seconds=None,
                      open_files=open_files, isolate_network=self.isolate_network,
                      writable_paths=tuple(self.writable_paths))

    def policy(self) -> CheckPolicy:
        """The validity-check policy these settings describe."""
        return CheckPolicy(allowed_axioms=frozenset(self.allowed_axioms),
                           extra_banned=frozenset(self.extra_banned_tokens),
                           max_body_chars=self.max_body_chars,
                           max_statement_chars=self.max_statement_chars)

    def toolchain_label(self) -> str:
        """The Lean toolchain, from ``toolchain`` or the project's
        ``lean-toolchain`` file; ``unknown`` when neither says."""
        if self.toolchain:
            return self.toolchain
        if self.project_dir:
            try:
                return (Path(self.project_dir) / "lean-toolchain").read_text().strip() or "unknown"
            except OSError:
                pass
        return "unknown"

    def version(self) -> str:
        """Prover and checker version for verdict-cache keys: the toolchain,
        the checks' version and a hash of the policy."""
        policy = hashlib.sha256(self.policy().fingerprint().encode()).hexdigest()[:12]
        return f"lean-repl|{self.toolchain_label()}|checks-{CHECKS_VERSION}|axioms-{self.axiom_check}|{policy}"


__all__ = ["AXIOM_CHECKS", "ENV_LAKE_COMMAND", "ENV_PROJECT_DIR", "ENV_REPL_COMMAND", "LeanConfig", "LeanConfigError"]
