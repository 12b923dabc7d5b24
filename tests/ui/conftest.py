"""Fixtures for the browser tests; the helpers live in :mod:`tests.ui.support`."""
from tests.ui.support import browser, lab_server, screenshot_dir  # noqa: F401 - pytest finds fixtures by name
