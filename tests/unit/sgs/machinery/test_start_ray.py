"""What :func:`sgs.machinery.runtime.start_ray` asks of ``ray.init`` for a local
cluster: the dashboard as ``resources.include_dashboard`` says.  ``ray.init`` is
replaced by a recorder here; the runs that start real clusters, with and without
the dashboard, are the end-to-end tests' (``tests/e2e/test_loop.py``)."""

from __future__ import annotations

import pytest

from sgs import config as C
from sgs.machinery import runtime
from tests.config_support import compose_cfg


def init_arguments(monkeypatch, *overrides: str) -> dict:
    calls = []
    monkeypatch.setattr(runtime.ray, "init", lambda **kwargs: calls.append(kwargs))
    runtime.start_ray(C.validate(compose_cfg(*overrides)))
    [kwargs] = calls
    return kwargs


def test_a_local_cluster_starts_the_dashboard_by_default_as_ray_does(monkeypatch):
    kwargs = init_arguments(monkeypatch)
    # None is Ray's own default: the dashboard where its dependencies are installed, a warning otherwise.
    assert kwargs["address"] == "local" and kwargs["include_dashboard"] is None


def test_include_dashboard_false_starts_a_local_cluster_without_it(monkeypatch):
    kwargs = init_arguments(monkeypatch, "resources.include_dashboard=false")
    assert kwargs["address"] == "local" and kwargs["include_dashboard"] is False


@pytest.mark.parametrize("value", ["true", "false"])
def test_a_cluster_joined_by_address_keeps_its_own_dashboard(monkeypatch, value):
    monkeypatch.setattr(runtime.ray, "cluster_resources", lambda: {"CPU": 4.0})
    kwargs = init_arguments(monkeypatch, "resources.ray_address='127.0.0.1:6379'", f"resources.include_dashboard={value}")
    assert kwargs["address"] == "127.0.0.1:6379" and "include_dashboard" not in kwargs
