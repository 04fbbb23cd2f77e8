"""The composed config as a test needs it: the Hydra config of ``conf/``
with the given overrides, as ``python -m sgs`` would compose it."""

from __future__ import annotations

from hydra import compose, initialize_config_dir

from sgs import config as C

#: What the tests' runs (``python -m sgs``, ``sgs.sft``, ``sgs.evaluate``) add to their
#: command lines: a local Ray cluster without the dashboard's web modules, about 3
#: CPU-seconds a start (docs/results.md).  The default run's test keeps the
#: dashboard and checks that it comes up.
NO_DASHBOARD = "resources.include_dashboard=false"


def compose_cfg(*overrides: str):
    with initialize_config_dir(config_dir=str(C.CONFIG_DIR), version_base="1.3"):
        return compose(config_name=C.CONFIG_NAME, overrides=list(overrides))
