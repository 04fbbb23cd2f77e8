"""The Lean 4 backend: the leanprover-community REPL as the production prover.

``protocol`` frames and types the REPL's JSON, ``checks`` decides validity
(pre-filter of untrusted text, verdict from Lean's answers), ``repl`` runs one
REPL process, ``backend`` manages processes behind the ``ProverBackend``
interface, and ``config`` holds the settings.
"""

from lean_env.lean.backend import LeanBackend, ProofStateRef, TacticResult, TacticStatus
from lean_env.lean.checks import CheckPolicy, PreparedProof, Rejection
from lean_env.lean.config import LeanConfig, LeanConfigError
from lean_env.lean.repl import HeaderError, ReplCrashed, ReplFailure, ReplProcess, ReplTimeout

__all__ = [
    "CheckPolicy", "HeaderError", "LeanBackend", "LeanConfig", "LeanConfigError", "PreparedProof",
    "ProofStateRef", "Rejection", "ReplCrashed", "ReplFailure", "ReplProcess", "ReplTimeout",
    "TacticResult", "TacticStatus",
]
