"""The workshop hub for tests: :mod:`labkit.workshop.load`'s hub, with the proxy installed or the test skipped.

The load test (``make workshop-loadtest``) and the hub test share one
implementation: ``workshop/jupyterhub_config.py`` on free loopback ports, the
dummy authenticator (test only: any name, any password) and an API token for a
service that may create learners and start their servers; notebooks run as the
browser runs them, through the hub's proxy, with a token of the learner's own.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from labkit.workshop.install import install
from labkit.workshop.load import PROXY, WORKSHOP, Hub, request, run_code, run_notebook, server_process, workshop_hub

__all__ = ["Hub", "learner_install", "request", "require_proxy", "run_code", "run_notebook", "server_process", "workshop_hub"]
TEST_INSTALL = Path("/opt/labkit-tests")  # the tests' learner venv: kept between runs, remade when labkit changes


def require_proxy() -> Path:
    """configurable-http-proxy in workshop/node_modules, installed as ``make workshop`` does if npm is here."""
    if not PROXY.exists() and shutil.which("npm"):
        subprocess.run(["npm", "ci", "--prefix", str(WORKSHOP), "--no-audit", "--no-fund"], check=True, timeout=600)
    if not PROXY.exists():
        reason = f"{PROXY} is missing and npm is not installed (Debian: apt-get install nodejs npm; then make workshop)"
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return PROXY


def learner_install() -> Path:
    """The learner venv a room's servers run (``labkit workshop install``), under :data:`TEST_INSTALL`; root only."""
    if os.geteuid() != 0:
        reason = "a room runs each learner as their own Unix account: only root can start one"
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    install(TEST_INSTALL, if_stale=True)
    return TEST_INSTALL
