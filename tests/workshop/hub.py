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

from labkit.workshop.load import PROXY, WORKSHOP, Hub, request, run_notebook, server_process, workshop_hub

__all__ = ["Hub", "request", "require_proxy", "run_notebook", "server_process", "workshop_hub"]


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
