"""The schema of an SGS run's configuration: one dataclass per config group,
rooted at :class:`SGSConfig`, with every field documented where it is declared.

The dataclass defaults are the paper's values (App. C) for the ``standard``
method; the group files in ``conf/`` choose model, prover, hardware and scale.
The schema is registered with Hydra's ConfigStore as ``sgs_schema`` on import.
It reads no data: target sources are strings here, resolved to paths by
:func:`resolve_source_path` and loaded elsewhere (:mod:`sgs.state`).
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass, field
from pathlib import Path

from hydra.core.config_store import ConfigStore

from sgs.config.checks import Choice
from sgs.config.evaluation import Contamination, EvaluationConfig  # noqa: F401  (imported from here by the rest)
from sgs.config.sampling import STATEMENT_GRAMMAR, RoleSampling, SamplingConfig  # noqa: F401  (likewise)
from sgs.config.training import LearnerStrategy, OptimizerState, TrainingConfig  # noqa: F401  (likewise)
from sgs.config.model import Dtype, ModelConfig, TinyModelSettings  # noqa: F401  (likewise)
from sgs.config.prover import (  # noqa: F401  (likewise)
    BACKEND_LANGUAGE,
    LeanSettings,
    ProofLanguage,
    ProverBackend,
    ProverConfig,
    RocqSettings,
)
from sgs.config.resources import (  # noqa: F401  (likewise)
    ENGINE_HEARTBEAT_INTERVAL_S,
    EngineBackend,
    PlacementStrategy,
    ResourcesConfig,
    WeightTransfer,
)
from sgs.config.method import (  # noqa: F401  (the method's choices, imported from here by the rest)
    SOLVER_OBJECTIVES,
    UNELABORATED_CONJECTURES,
    ConjectureDedup,
    ConjecturerPrompt,
    EiSolvedCount,
    LossNormalisation,
    MethodConfig,
    RewardNormalisation,
    UnelaboratedConjectures,
)
from sgs.config.serve import ServeConfig
from sgs.config.solver import SelfPlaySolverMode, SolverConfig  # noqa: F401  (imported from here by the rest)

#: Directory holding ``config.yaml`` and the config groups (repository root ``conf/``).
CONFIG_DIR = Path(__file__).resolve().parents[2] / "conf"
#: Name of the primary config inside :data:`CONFIG_DIR`.
CONFIG_NAME = "config"
#: Name under which :class:`SGSConfig` is stored in Hydra's ConfigStore.
SCHEMA_NAME = "sgs_schema"

#: The three roles (``warmstart.roles`` lists some of them).
ROLES = ("solver", "conjecturer", "guide")


class WandbMode(Choice):
    """``logging.wandb_mode``."""

    auto = "auto"
    offline = "offline"
    online = "online"
    disabled = "disabled"


class WarmstartMode(Choice):
    """``warmstart.mode``."""

    auto = "auto"
    always = "always"
    never = "never"


# Target sources are strings in one of three forms:
#   pkg://<package>/<path>  a file shipped inside an installed Python package
#   hf://<owner>/<name>     a data set repository on the Hugging Face hub
#   anything else           a filesystem path (relative to the working directory)
PACKAGE_SCHEME = "pkg://"
HUB_SCHEME = "hf://"
#: The paper's 3,323 Lean 4 + Mathlib targets (SPEC §1.1).
D3K_TARGETS = "hf://LukeBailey181Pub/D_3k"
#: The Rocq target set shipped with the package.
ROCQ_TARGETS = "pkg://sgs/data/rocq_targets.jsonl"
#: Target sources whose language is known without reading them.
KNOWN_TARGET_LANGUAGES = {D3K_TARGETS: "lean", ROCQ_TARGETS: "rocq"}


class ConfigError(ValueError):
    """A config that cannot run; ``problems`` holds one message per issue."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(f"invalid SGS config ({len(self.problems)} problem(s)):\n{lines}")


# --------------------------------------------------------------------------
# Schema
# --------------------------------------------------------------------------


@dataclass
class TargetsConfig:
    """The target statements the run tries to prove."""

    #: Where the targets come from: ``pkg://package/path`` (a file shipped in a
    #: package), ``hf://owner/name`` (a hub data set) or a filesystem path.
    #: Lean files are a JSON list or JSONL of records with ``id``, ``header``,
    #: ``theorem`` (``tools/trace_targets.py`` writes them) or a LeanDojo
    #: Benchmark 4 file; Rocq files use the Rocq target format of ``sgs/data``.
    #: Defaults to the prover's own target set (``prover.default_targets``).
    source: str = "${prover.default_targets}"
    #: For a LeanDojo Benchmark 4 ``source``: a checkout of the traced repository
    #: at its commit, where each entry's statement and header are read from its
    #: ``file_path`` (rules in ``sgs/state/leandojo.py``); null otherwise.
    lean_repo_dir: str | None = None
    #: Use only the first N targets of the source; null uses all of them.
    limit: int | None = None
    #: Fraction of the targets held out from training for evaluation, chosen
    #: deterministically from the target ids; 0 holds out nothing.
    held_out_fraction: float = 0.0
    #: Target ids always held out for evaluation, on top of the fraction.
    held_out_ids: list[str] = field(default_factory=list)


@dataclass
class WarmstartConfig:
    """Supervised fine-tuning of the base model before self-play (:mod:`sgs.sft`).

    The base model is trained on a corpus of (prompt, completion) pairs for
    the three roles (:mod:`sgs.state.warmstart`) through the same Ray Train learner
    as the self-play updates, with the plain NLL objective (every weight 1).
    The result is cached by corpus content, base model and these settings,
    so only the first run pays for it.  The optimiser's betas, epsilon,
    weight decay, clip norm and ``max_seq_len`` are those of ``training``.
    """

    #: ``auto`` warm-starts the locally built tiny model (``model.path``
    #: null), which knows no output format until then, and leaves a given
    #: checkpoint alone; ``always`` warm-starts any base model; ``never``
    #: starts self-play from the base model as it is.
    mode: WarmstartMode = WarmstartMode.auto
    #: The corpus: ``pkg://package/path`` or a filesystem path, in the format
    #: of :mod:`sgs.state.warmstart`.  Defaults to the prover's own corpus
    #: (``prover.default_warmstart_corpus``); null means none, so ``auto``
    #: skips the warm start.
    corpus: str | None = "${prover.default_warmstart_corpus}"
    #: The roles whose corpus lines are trained on; a Guide-only corpus run
    #: (``[guide]``) is how the paper makes its Guide follow the review format.
    roles: list[str] = field(default_factory=lambda: list(ROLES))
    #: Passes over the corpus.
    epochs: int = 1
    #: Train on at most this many of the chosen roles' corpus lines: a
    #: seeded sample (``seed``), kept in corpus order, for quick smoke runs
    #: (like the ``max_train_samples`` of Hugging Face's example scripts);
    #: null trains on every line.  Part of the cache key.
    max_examples: int | None = None
    #: Constant learning rate (as given: ``model.learning_rate_scale`` applies
    #: to the self-play updates only).
    learning_rate: float = 1e-5
    #: Sequences per optimiser step, over all learner workers.
    global_batch_size: int = 32
    #: Sequences per forward/backward pass on one learner worker.
    micro_batch_size: int = 1
    #: Training targets the warm-up report samples (see :mod:`sgs.sft`), a
    #: seeded subsample of the run's training targets; null samples all of them.
    report_targets: int | None = None


@dataclass
class LoggingConfig:
    """Where metrics go (SPEC §2.2, monitoring)."""

    #: wandb mode: ``auto`` (online when a key is configured in
    #: ``WANDB_API_KEY``, else offline), ``offline`` (local files only, to
    #: ``wandb sync`` later), ``online`` or ``disabled``.
    wandb_mode: WandbMode = WandbMode.auto
    #: wandb project name.
    wandb_project: str = "sgs"
    #: wandb entity (team or user); null uses the account's default.
    wandb_entity: str | None = None
    #: Show a progress bar per phase on the driver.
    progress_bars: bool = True


@dataclass
class StopConfig:
    """Stopping a run before ``iterations`` once its curve is flat (:mod:`sgs.loop.stopping`)."""

    #: Stop once the cumulative solve rate has not risen for this many
    #: consecutive iterations; null runs all ``iterations``.  The long
    #: comparison (``make long-horizon``) uses 5: each method runs until its
    #: own curve has plateaued.
    flat_iterations: int | None = None
    #: Never stop early before this many iterations are done.
    min_iterations: int = 0


@dataclass
class SGSConfig:
    """One SGS run."""

    #: Directory of this run's state (config, records, checkpoints, metrics);
    #: re-running with the same directory resumes.  In a multirun sweep each
    #: job writes to ``<run_dir>/<job number>`` (see :func:`validate`).
    run_dir: str = "runs/${now:%Y-%m-%d_%H-%M-%S}"
    #: Number of iterations to run (counting ones finished before a resume);
    #: ``stop`` may end the run earlier.
    iterations: int = 500
    #: Stopping early once the cumulative solve rate is flat.
    stop: StopConfig = field(default_factory=StopConfig)
    #: Seed for sampling, batching, data splits and the tiny model's weights.
    seed: int = 0
    #: Name of the experiment; set by each file in ``conf/experiment/``.
    experiment: str = "standard"
    #: The target statements.
    targets: TargetsConfig = field(default_factory=TargetsConfig)
    #: The algorithm.
    method: MethodConfig = field(default_factory=MethodConfig)
    #: How the Solver proves: whole-proof sampling (the default) or tactic-level search.
    solver: SolverConfig = field(default_factory=SolverConfig)
    #: Generation settings per role.
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    #: Optimiser and batching.
    training: TrainingConfig = field(default_factory=TrainingConfig)
    #: Supervised warm start of the base model before self-play.
    warmstart: WarmstartConfig = field(default_factory=WarmstartConfig)
    #: Held-out evaluation at the start and end of the run.
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    #: The base model (group ``model``).
    model: ModelConfig = field(default_factory=ModelConfig)
    #: The proof checker (group ``prover``).
    prover: ProverConfig = field(default_factory=ProverConfig)
    #: Hardware and actor placement (group ``resources``).
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    #: Metrics output (group ``logging``).
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    #: The prover service (``python -m sgs.serve``; ``conf/serve.yaml``).
    serve: ServeConfig = field(default_factory=ServeConfig)


def register_configs() -> None:
    """Store :class:`SGSConfig` in Hydra's ConfigStore as ``sgs_schema``.

    Called on import of this module; calling it again is harmless.
    """
    ConfigStore.instance().store(name=SCHEMA_NAME, node=SGSConfig)


register_configs()


# --------------------------------------------------------------------------
# Target sources
# --------------------------------------------------------------------------


def resolve_source_path(source: str) -> Path | None:
    """The local file behind a target source, or None for a hub source.

    ``pkg://sgs/data/x.jsonl`` becomes the file ``data/x.jsonl`` inside the
    installed ``sgs`` package; a plain string becomes a path (``~`` expanded).
    The file need not exist.
    """
    if source.startswith(HUB_SCHEME):
        return None
    if source.startswith(PACKAGE_SCHEME):
        package, _, relative = source[len(PACKAGE_SCHEME):].partition("/")
        if not package or not relative:
            raise ValueError(f"package source {source!r} must look like pkg://<package>/<path>")
        try:
            root = importlib.resources.files(package)
        except ModuleNotFoundError as error:
            raise ValueError(f"package source {source!r}: no package named {package!r}") from error
        return Path(str(root.joinpath(relative)))
    return Path(source).expanduser()


def model_location(value: str) -> str:
    """A ``model.path``-like value as the loaders take it: a ``pkg://`` source
    (a checkpoint shipped inside a package, such as the general Rocq prover)
    becomes its directory; hub ids and paths are returned unchanged."""
    return str(resolve_source_path(value)) if value.startswith(PACKAGE_SCHEME) else value
