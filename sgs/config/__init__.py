"""The configuration of an SGS run: the typed schema, its validation, machine checks.

The schema is a tree of dataclasses rooted at :class:`SGSConfig`.  It is
registered with Hydra's ConfigStore as ``sgs_schema``; ``conf/config.yaml``
puts that schema first in its defaults list, so every YAML file in ``conf/``
is merged into (and type-checked against) these dataclasses.  Config groups:

=============  ==========================================================
group          options (``conf/<group>/<option>.yaml``)
=============  ==========================================================
``model``      ``tiny`` (built locally), ``deepseek_prover_v2_7b``
``prover``     ``rocq`` (coqtop), ``lean`` (Lean 4 REPL)
``resources``  ``local_cpu``, ``gpu_node`` (8 GPUs), ``cluster``
``scale``      ``laptop``, ``paper`` (run length, token budgets, batch size)
``logging``    ``default``
``experiment`` the eight experiments of SPEC §1.5 and ``parallel_sampling`` (``+experiment=NAME``)
=============  ==========================================================

The dataclass defaults are the paper's values (App. C) for the ``standard``
method; the group files choose model, prover, hardware and scale.

The steps, each module importing only those of the steps before it (and none
of them any data loading):

* :mod:`sgs.config.schema`: the dataclasses, every field documented where it
  is declared, each choice field typed with an Enum of its allowed values (a
  :class:`~sgs.config.checks.Choice`, declared beside the field), which
  OmegaConf checks on every assignment (the method, sampling, training,
  model, prover, resources, evaluation and self-play Solver settings and the
  prover service's live in modules of their own, which the schema imports; ``conf/serve.yaml``
  is the service's primary config);
* :mod:`sgs.config.choices`: the choice fields by key, and the checks that
  name every bad choice at once, of command-line overrides before Hydra
  composes them (:func:`override_problems`, :func:`compose_config`) and of a
  composed config, and what Hydra refuses while composing, as the same kind
  of message (:func:`composition_problems`);
* :mod:`sgs.config.validation`: :func:`validate` turns a composed
  ``DictConfig`` into a typed :class:`SGSConfig`, or raises
  :class:`ConfigError` listing every problem (value ranges, bad choices,
  fields that contradict each other), each message naming the key; benchmark
  names are checked against :mod:`sgs.config.benchmark_names`.  The nodes
  kept in modules of their own (:mod:`sgs.config.method`,
  :mod:`sgs.config.sampling`, :mod:`sgs.config.training`,
  :mod:`sgs.config.model`, :mod:`sgs.config.prover`,
  :mod:`sgs.config.resources`, :mod:`sgs.config.evaluation`,
  :mod:`sgs.config.solver`, :mod:`sgs.config.serve`) check themselves
  there, beside their fields, with the checks of :mod:`sgs.config.checks`;
  what the Solver objective asks of the config is its registry's to check
  (:func:`sgs.method.registry.config_problems`);
* :mod:`sgs.config.machine`: :func:`requirements_problems` checks that *this
  machine* can run the config (GPU, prover binaries, data files) without
  starting Ray; :func:`suggested_overrides` lists the command-line overrides
  that would make a config runnable here.

The package exports their public names, so callers write
``from sgs.config import SGSConfig, validate``.
"""

from sgs.config.schema import (  # noqa: F401  (the package's public names)
    BACKEND_LANGUAGE,
    CONFIG_DIR,
    CONFIG_NAME,
    D3K_TARGETS,
    ENGINE_HEARTBEAT_INTERVAL_S,
    HUB_SCHEME,
    KNOWN_TARGET_LANGUAGES,
    PACKAGE_SCHEME,
    ROCQ_TARGETS,
    ROLES,
    SCHEMA_NAME,
    SOLVER_OBJECTIVES,
    STATEMENT_GRAMMAR,
    UNELABORATED_CONJECTURES,
    Choice,
    ConfigError,
    ConjectureDedup,
    ConjecturerPrompt,
    Contamination,
    Dtype,
    EiSolvedCount,
    EngineBackend,
    EvaluationConfig,
    LeanSettings,
    LearnerStrategy,
    LoggingConfig,
    LossNormalisation,
    MethodConfig,
    ModelConfig,
    OptimizerState,
    PlacementStrategy,
    ProofLanguage,
    ProverBackend,
    ProverConfig,
    register_configs,
    model_location,
    resolve_source_path,
    ResourcesConfig,
    RewardNormalisation,
    RocqSettings,
    RoleSampling,
    SamplingConfig,
    SelfPlaySolverMode,
    SGSConfig,
    SolverConfig,
    TargetsConfig,
    TinyModelSettings,
    TrainingConfig,
    UnelaboratedConjectures,
    WandbMode,
    WarmstartConfig,
    WarmstartMode,
    WeightTransfer,
)
from sgs.config.serve import ServeConfig, serve_problems  # noqa: F401  (the package's public names)
from sgs.config.solver import attempt_expansions, search_cpus, searching  # noqa: F401  (the package's public names)
from sgs.config.derived import (  # noqa: F401  (the package's public names)
    declared_gpus,
    engine_backend,
    engines_sleep_during_training,
    warmstart_enabled,
    weight_transfer_backend,
)
from sgs.config.choices import (  # noqa: F401  (the package's public names)
    choice_fields,
    compose_config,
    composition_problems,
    override_problems,
)
from sgs.config.validation import config_problems, to_schema, validate  # noqa: F401  (the package's public names)
from sgs.config.machine import (  # noqa: F401  (the package's public names)
    missing_model_directory,
    requirements_problems,
    suggested_overrides,
)
