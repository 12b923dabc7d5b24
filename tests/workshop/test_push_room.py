"""A push reaches a learner's open notebook over the room's HTTPS, her edits intact (labkit.workshop.push).

One room for the module, as it runs (``https_room``: as root, ``system-users``, the real log-in, HTTPS through Caddy,
each learner on her own host). ``ada`` signs up, logs in with Chromium, opens notebook 02 in JupyterLab, types into
its first cell and saves. The instructor fixes a typo in the room's notebooks and pushes. Without a reload or a
restart, ada's file browser lists the notice and the new version beside her notebook, her open notebook still holds
her edit (on the page and on disk), and the board's version column says she holds version 2. Every wait is bounded.
"""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from labkit.workshop import push
from labkit.workshop.board.versions import version_texts
from labkit.workshop.settings import PREFIX
from tests.workshop.https_room import Room, chromium, https_room, logged_in, sign_up
from tests.workshop.hub import learner_install

pytestmark = [pytest.mark.workshop, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = "02_memory_format.ipynb"
TYPO, FIX = "Memory formats", "Memory formats (fixed at 10:40)"
LEARNER, PASSWORD = "ada", "ada's long password 42"
EDIT = "# ada was here"
SECONDS = 60  # a push shows within a minute (the goal is seconds: JupyterLab re-lists the folder on its own)


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Room]:
    folder = tmp_path_factory.mktemp("push")
    notebooks = folder / "notebooks"  # the room's own copy: the instructor fixes it mid-workshop
    notebooks.mkdir()
    for path in (REPO / "notebooks").glob("*.ipynb"):
        shutil.copy(path, notebooks / path.name)
    shutil.copytree(REPO / "notebooks" / "solutions", notebooks / "solutions")
    settings = {PREFIX + "SPAWNER": "system-users", PREFIX + "INSTALL": str(learner_install()),
                PREFIX + "NOTEBOOKS": str(notebooks)}
    with https_room(folder, "learners.localhost", settings) as https:
        yield https


def test_a_push_reaches_her_open_notebook_with_her_edit_intact(room: Room, tmp_path: Path):
    sign_up(room, LEARNER, PASSWORD, tmp_path / "jar")
    hub = room.hub
    with chromium(room, tmp_path) as browser:
        page: Any = logged_in(browser, room, LEARNER, PASSWORD)
        page.set_default_timeout(SECONDS * 1000)
        hub.start_server(LEARNER)
        hub.wait_until_ready(LEARNER)
        page.goto(f"{hub.server_url(LEARNER)}/lab/tree/{NOTEBOOK}")
        page.wait_for_selector(".jp-Notebook .jp-CodeCell .cm-content")
        page.locator(".jp-Notebook .jp-CodeCell .cm-content").first.click()
        page.keyboard.press("Control+Home")
        page.keyboard.type(EDIT + "\n")
        page.keyboard.press("Control+s")
        on_disk = hub.settings.workspace(LEARNER) / NOTEBOOK
        page.wait_for_function("() => !document.querySelector('.jp-mod-dirty')")
        assert EDIT in on_disk.read_text()
        edited = on_disk.read_bytes()

        path = hub.settings.notebooks / NOTEBOOK
        path.write_text(path.read_text().replace(TYPO, FIX, 1))
        version, results = push.push(hub.settings, note="fixed the title of 02")
        assert version == 2 and [(r.learner, r.ok) for r in results] == [(LEARNER, True)], results

        listing = ".jp-FileBrowser .jp-DirListing-itemName"
        page.wait_for_selector(f"{listing}:has-text('labkit-update-2.md')")
        page.wait_for_selector(f"{listing}:has-text('02_memory_format.labkit-new.ipynb')")
        assert EDIT in page.locator(".jp-Notebook .jp-CodeCell").first.inner_text()  # her open notebook, as she left it
        assert on_disk.read_bytes() == edited
        assert FIX in (on_disk.parent / "02_memory_format.labkit-new.ipynb").read_text()
        assert "02_memory_format.labkit-new.ipynb" in (on_disk.parent / "labkit-update-2.md").read_text()
    assert version_texts(hub.settings.board_state / "push.json", [LEARNER]) == {LEARNER: "version 2"}
