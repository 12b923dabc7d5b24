"""The board page in a real Chromium: it updates in place from api/grid, and a name that is markup stays text.

Why a browser: only a browser runs ``static/board.js`` under the page's Content-Security-Policy, sends
``Sec-Fetch-Mode: cors`` (so the XSRF token must travel) and would run a script a name smuggled in.
"""
from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from labkit.workshop.board.app import make_app
from tests.workshop.board.support import COOKIE_SECRET, PREFIX, FakeDirectory, FakeHubAuth, event, make_board, user

pytestmark = [pytest.mark.ui, pytest.mark.slow]
expect = pytest.importorskip("playwright.sync_api", reason="Python playwright is missing (the dev extra)").expect
EVIL = "<img src=x onerror=alert(1)>"
LATER = "<script>alert(2)</script>"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The board on a free loopback port, in a thread of its own; the test changes its hub and events directly."""
    directory = FakeDirectory(users=[{"name": "ada", "admin": False}, {"name": EVIL, "admin": False}])
    hub_auth = FakeHubAuth({"teacher-token": user("teacher")})
    board = make_board(tmp_path, directory, now=time.time())
    board.clock = time.time
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        make_app(board, hub_auth, COOKIE_SECRET).listen(port, "127.0.0.1")
        loop.call_soon(started.set)
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield {"url": f"http://127.0.0.1:{port}{PREFIX}", "board": board, "directory": directory, "hub_auth": hub_auth}
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        board.store.close()


def test_the_board_updates_in_place_and_names_stay_text(served, browser):
    hub_auth = served["hub_auth"]
    cookie = hub_auth.cookie("teacher-token").split("=", 1)[1]
    browser.add_cookies([{"name": hub_auth.cookie_name, "value": cookie, "url": served["url"]}])
    page = browser.new_page()
    dialogs: list[str] = []
    problems: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.on("console", lambda message: problems.append(message.text)
            if message.type == "error" and not message.location.get("url", "").endswith("/favicon.ico") else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    try:
        page.goto(served["url"])
        names = page.locator("#board-grid tbody th .name")
        assert names.all_text_contents() == [EVIL, "ada"]
        page.focus('tr[data-learner="ada"] a.server')

        served["board"].store.add([event("ada", "1.1", "solved", at=time.time())], received=time.time())
        served["directory"].users_list.append({"name": LATER, "admin": False})
        expect(page.locator("#board-grid tbody tr")).to_have_count(3, timeout=15_000)  # no reload: board.js polls

        assert names.all_text_contents() == [EVIL, LATER, "ada"]
        ada_cell = page.locator('tr[data-learner="ada"] td.cell').first
        assert ada_cell.text_content().startswith("✓ solved ")
        assert "state-solved" in ada_cell.get_attribute("class")
        assert page.locator("#board-exercises tbody tr").first.locator("td.solved").text_content() == "1 of 3"
        assert page.evaluate("document.activeElement.closest('tr').dataset.learner") == "ada"  # focus kept: updated in place
        assert page.locator("#board-grid img, #board-grid script").count() == 0
        assert page.text_content("#board-status") == ""
        assert dialogs == [] and problems == []
    finally:
        page.close()


def test_the_queue_s_buttons_keep_the_keyboard_s_focus_across_redraws(served, browser, monkeypatch):
    monkeypatch.setattr("labkit.workshop.board.app.POLL_MS", 200)  # redraws every 0.2 s instead of 2 s
    queue = served["board"].queue
    queue.ask("ada", "1.1", "", 0, False, time.time())
    second, _ = queue.ask("bob", "1.2", "", 0, False, time.time() + 1)
    hub_auth = served["hub_auth"]
    browser.add_cookies([{"name": hub_auth.cookie_name, "value": hub_auth.cookie("teacher-token").split("=", 1)[1],
                          "url": served["url"]}])
    page = browser.new_page()
    redraws: list[str] = []
    page.on("response", lambda reply: redraws.append(reply.url) if reply.url.endswith("api/queue") else None)
    focused = "[document.activeElement.tagName, document.activeElement.className, " \
              "(document.activeElement.closest('tr') || {dataset: {}}).dataset.request]"
    try:
        page.goto(served["url"])
        page.focus(f'#board-queue-table tr[data-request="{second.id}"] button.claim')
        seen, deadline = len(redraws), time.monotonic() + 15
        while len(redraws) < seen + 3 and time.monotonic() < deadline:  # three redraws of the queue
            page.wait_for_timeout(100)
        assert len(redraws) >= seen + 3
        assert page.evaluate(focused) == ["BUTTON", "claim", second.id]
        page.keyboard.press("Enter")  # the instructor claims it from the keyboard: Claim goes, Close takes the focus
        expect(page.locator(f'#board-queue-table tr[data-request="{second.id}"] button.claim')).to_have_count(0)
        assert queue.waiting()[1].claimed_by == "teacher"
        assert page.evaluate(focused) == ["BUTTON", "close", second.id]
        assert [row.claimed_by for row in queue.waiting()] == ["", "teacher"]  # ada's, above, untouched
    finally:
        page.close()
