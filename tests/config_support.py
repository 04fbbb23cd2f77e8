"""The composed config as a test needs it: the Hydra config of ``conf/``
with the given overrides, as ``python -m sgs`` would compose it."""

from __future__ import annotations

from hydra import compose, initialize_config_dir

from sgs import config as C


def compose_cfg(*overrides: str):
    with initialize_config_dir(config_dir=str(C.CONFIG_DIR), version_base="1.3"):
        return compose(config_name=C.CONFIG_NAME, overrides=list(overrides))
