"""The workshop hub for tests: :mod:`labkit.workshop.load`'s hub, with the proxy installed or the test skipped.

The load test (``make workshop-loadtest``) and the hub test share one
implementation: ``workshop/jupyterhub_config.py`` on free loopback ports, the
dummy authenticator (test only: any name, any password) and an API token for a
service that may create learners and start their servers; notebooks run as the
browser runs them, through the hub's proxy, with a token of the learner's own.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from labkit.workshop.install import install
from labkit.workshop.load import PROXY, WORKSHOP, Hub, request, run_code, run_notebook, server_process, workshop_hub

__all__ = ["Hub", "learner_install", "logged_in_page", "request", "require_proxy", "run_code", "run_notebook", "server_process",
           "workshop_hub"]
# the tests' learner venv: kept between runs, remade when labkit changes (LABKIT_TEST_INSTALL: a checkout's own,
# where several checkouts run room tests on one machine and would remake each other's)
TEST_INSTALL = Path(os.environ.get("LABKIT_TEST_INSTALL", "/opt/labkit-tests"))


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


@contextlib.contextmanager
def logged_in_page(hub: Hub, name: str, password: str, next_path: str, timeout_s: float) -> Iterator[Any]:
    """A fresh Chromium profile that logged in to ``hub`` as ``name`` through its log-in page, sent on to ``next_path``.

    Every step waits ``timeout_s`` at most; the caller waits for what the page it lands on must show.
    """
    from tests.ui.support import CHROMIUM, CHROMIUM_FLAGS, skip_or_fail

    if not CHROMIUM.is_file():
        skip_or_fail(f"{CHROMIUM} not found; install it with `apt-get update && apt-get install -y chromium`")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("Python playwright is missing; install it with `python -m pip install -e '.[dev]'`")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True)
        try:
            page = browser.new_context().new_page()
            page.set_default_timeout(timeout_s * 1000)
            page.goto(f"{hub.url}/hub/login?next={quote(next_path, safe='')}")
            page.fill("#username_input", name)
            page.fill("#password_input", password)
            page.click("#login_submit")
            yield page
        finally:
            browser.close()
