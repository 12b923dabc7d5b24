"""The workshop hub: two learners log in, each gets a workspace of their own, and notebook 00 runs for both."""
from __future__ import annotations

import stat
import urllib.error
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from labkit.workshop.settings import HubSettings
from tests.workshop.hub import request, require_proxy, run_notebook, server_process, workshop_hub

LEARNERS = ("ada", "grace")
pytestmark = [pytest.mark.workshop, pytest.mark.slow]


def test_two_learners_get_separate_workspaces_and_run_notebook_00(tmp_path: Path):
    require_proxy()
    with workshop_hub(tmp_path) as hub:
        hub.api("users", "POST", {"usernames": list(LEARNERS)})
        for name in LEARNERS:
            hub.start_server(name)
        for name in LEARNERS:
            hub.wait_until_ready(name)
        tokens = {name: hub.learner_token(name) for name in LEARNERS}

        workspaces = {name: tmp_path / "learners" / name / "labkit-workspace" for name in LEARNERS}
        for name, workspace in workspaces.items():
            listing = request(f"{hub.server_url(name)}/api/contents", token=tokens[name])
            names = {item["name"] for item in listing["content"]}
            assert "00_start_here.ipynb" in names, f"{name}'s server does not serve a workspace: {names}"
            assert (workspace / "00_start_here.ipynb").is_file()
            assert stat.S_IMODE(workspace.parent.stat().st_mode) == 0o700, "a learner's folder must be theirs alone"
            server = server_process(hub, name)  # torch's threads capped, idle kernels shut down (workshop settings)
            assert server.environ().get("OMP_NUM_THREADS") == str(HubSettings().threads)
            assert f"--MappingKernelManager.cull_idle_timeout={HubSettings().kernel_cull_after_s}" in server.cmdline()

        # Separate: what ada saves is in her workspace only, and her token does not open grace's server.
        request(f"{hub.server_url('ada')}/api/contents/mine.txt", "PUT",
                {"type": "file", "format": "text", "content": "ada's"}, tokens["ada"])
        assert (workspaces["ada"] / "mine.txt").read_text() == "ada's"
        assert not (workspaces["grace"] / "mine.txt").exists()
        with pytest.raises(urllib.error.HTTPError) as refused:
            request(f"{hub.server_url('grace')}/api/contents", token=tokens["ada"])
        assert refused.value.code == 403

        with ThreadPoolExecutor(len(LEARNERS)) as pool:
            errors = dict(zip(LEARNERS, pool.map(
                lambda name: run_notebook(hub.server_url(name), tokens[name], "00_start_here.ipynb").errors, LEARNERS)))
        assert errors == {name: [] for name in LEARNERS}, f"notebook 00 failed:\n{hub.log()}"
