"""The load test as the room runs: through Caddy over HTTPS (``python -m labkit.workshop.load --https``).

Two learners at once run one solved notebook with checkers (02, the memory-format lab: about 3 s of kernel CPU
each) through Caddy in front of the hub's proxy: every REST call and kernel websocket (wss) goes to 127.0.0.1
with the room's name in SNI and ``Host``, Caddy's certificate checked against its local root CA only. The hub
runs as the shared account (no learner venv to build); the whole run is bounded by the load test's own waits.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from labkit.workshop.front_proxy import INSTALL
from labkit.workshop.load import run_load_test
from labkit.workshop.settings import PREFIX
from tests.ui.support import skip_or_fail
from tests.workshop.hub import require_proxy

pytestmark = [pytest.mark.workshop, pytest.mark.slow]

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOK = "02_memory_format.ipynb"
LEARNERS = 2
WALL_S = 300  # the hub, Caddy, two servers and the notebook twice at once, on two busy cores


def test_two_learners_run_a_solved_notebook_through_caddy_over_https(tmp_path: Path):
    require_proxy()
    if shutil.which("caddy") is None:
        skip_or_fail(f"caddy is not installed ({INSTALL})")
    (tmp_path / "notebooks").mkdir()
    shutil.copy(NOTEBOOKS / NOTEBOOK, tmp_path / "notebooks" / NOTEBOOK)
    (tmp_path / "room").mkdir(mode=0o700)
    report = run_load_test(LEARNERS, tmp_path / "room", tmp_path / "notebooks", https=True,
                           settings={PREFIX + "SPAWNER": "shared-account"})
    assert report.failures == [], report.to_text()
    assert report.stopped_cleanly and report.wall_s < WALL_S, report.to_text()
    expected = report.expected_verdicts[NOTEBOOK]
    assert expected, "the stored notebook has no checker verdict to compare"
    for learner in report.learners:
        [run] = learner.notebooks
        assert run.cells > 0 and run.verdicts.keys() == expected.keys(), (learner.name, run)
    # Through Caddy, not around it: it carried every request (the hub's proxy still routes behind it).
    assert report.https and report.front_proxy_cpu_s > 0 and report.front_proxy_peak_rss_mib > 0, report.to_text()
    assert "front proxy (Caddy)" in report.hub_table().to_text()
