"""The room board on the real hub: three learners' kernels post their verdicts, the instructor's Chromium shows them.

One room for the module, as it runs (``https_room``): as root (``system-users``, the room's own spawner, accounts
of a prefix of their own, removed with their homes when the hub stops), the real log-in, HTTPS through Caddy with
the board on its own host (``labkit-board--service.hub.localhost``) and the learners on ``NAME.learners.localhost``.
``solver`` solves exercise 2.1, ``stuck`` gets it wrong three times, ``starter`` only runs the preflight. Each runs
its code in a kernel of its own server, reached through Caddy (wss), as a notebook cell would; the kernel posts to
the board with the server's own token (on loopback, where the hub tells it). The instructor logs in through the
hub's page in Chromium (trusting Caddy's CA) and opens the board once, before anyone works; it must show every
verdict without a reload (a mark set on the page's window survives). Every wait is bounded generously (a busy
two-core CI machine); how fast the board follows is a benchmark figure, not a test.
"""
from __future__ import annotations

import json
import time
import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from labkit.progress.events import Event
from labkit.workshop.board_service import PREFIX as BOARD
from labkit.workshop.settings import PREFIX, HubSettings
from tests.workshop.https_room import Room as HttpsRoom
from tests.workshop.https_room import board_url, chromium, https_room, logged_in
from tests.workshop.hub import Hub, learner_install, request, run_code
from tests.workshop.test_log_in_attacks import ADMIN_PASSWORD

pytestmark = [pytest.mark.workshop, pytest.mark.slow]
LEARNERS_DOMAIN = "learners.localhost"

LEARNERS = ("solver", "stuck", "starter")
INSTRUCTOR = HubSettings().admin
UPDATE_SECONDS = 60  # how long the page may take to show a verdict on a loaded CI machine (the goal is seconds)
SOLUTION = (Path(__file__).resolve().parents[2] / "notebooks" / "solutions" / "02_1_predict_strides.py").read_text()
CHECK = "from labkit.memory_format.checks import check_predict_strides\nprint(check_predict_strides(predict_strides))"
WRONG = "def predict_strides(shape, memory_format):\n    return tuple(shape)\n"
LOOK_SECONDS = 90  # LABKIT_WORKSHOP_LOOK_SECONDS here (a workshop: 20 min): time to open her JupyterLab on a busy machine
# a learner's server keeps the hub's answer about a token for HubOAuth.cache_max_age (10 s in a room), the board
# checks the limit every 2 s: a revoked look is refused within this
REVOKED_SECONDS = 40


@dataclass
class Room:
    https: HttpsRoom
    tokens: dict[str, str]

    @property
    def hub(self) -> Hub:
        return self.https.hub

    def board(self, path: str = "") -> str:
        return f"{self.hub.service_origin('labkit-board')}{BOARD}{path}"  # its own host, through Caddy

    def request(self, path: str, method: str = "GET", body: object = None, token: str = "") -> Any:
        """A request of the board's, through Caddy, its certificate checked against the room's CA."""
        return request(self.board(path), method, body, token, self.hub.tls)


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Room]:
    install = learner_install()
    settings = {PREFIX + "SPAWNER": "system-users", PREFIX + "INSTALL": str(install), PREFIX + "STUCK_ATTEMPTS": "3",
                PREFIX + "LOOK_SECONDS": str(LOOK_SECONDS)}
    with https_room(tmp_path_factory.mktemp("board"), LEARNERS_DOMAIN, settings) as https:
        hub = https.hub
        assert hub.settings.separated and hub.settings.account_prefix.startswith("lt"), hub.settings.account_prefix
        hub.api("users", "POST", {"usernames": [*LEARNERS, INSTRUCTOR]})
        for name in LEARNERS:
            hub.start_server(name)
        for name in LEARNERS:
            hub.wait_until_ready(name)
        yield Room(https, {name: hub.learner_token(name) for name in (*LEARNERS, INSTRUCTOR)})


@pytest.fixture(scope="module")
def page(room: Room, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The instructor's Chromium on the board, logged in through the hub's log-in page (the room's real one)."""
    with chromium(room.https, tmp_path_factory.mktemp("instructor-chromium")) as browser:
        page = logged_in(browser, room.https, INSTRUCTOR, ADMIN_PASSWORD)
        page.set_default_timeout(UPDATE_SECONDS * 1000)
        assert room.board() == board_url(room.https)
        page.goto(room.board())  # on its own host (JupyterHub's Services menu links it there)
        page.wait_for_selector("#board-grid")
        page.evaluate("window.__not_reloaded = true")
        yield page


def cell(page: object, learner: str, column: str) -> list[str]:
    """The text and class of one cell of the grid, found by its column's heading."""
    return page.evaluate(  # type: ignore[attr-defined, no-any-return]
        """([learner, column]) => {
            const headings = Array.from(document.querySelectorAll('#board-grid thead th'), th => th.textContent.trim());
            const row = Array.from(document.querySelectorAll('#board-grid tbody tr'))
                .find(tr => tr.dataset.learner === learner);
            if (!row) return ['', ''];
            const node = row.children[headings.indexOf(column)];
            return node ? [node.textContent.trim(), node.className] : ['', ''];
        }""", [learner, column])


def wait_for(page: object, condition: object, what: str) -> float:
    """Seconds until ``condition()`` holds, polling the page as it is (never reloading it)."""
    start = time.monotonic()
    while not condition():  # type: ignore[operator]
        if time.monotonic() - start > UPDATE_SECONDS:
            grid = page.inner_text("#board-grid")  # type: ignore[attr-defined]
            raise AssertionError(f"the board did not show {what} within {UPDATE_SECONDS} s:\n{grid}")
        time.sleep(0.2)
    return time.monotonic() - start


def learner_cell(room: Room, name: str, code: str) -> str:
    reply = run_code(room.hub.server_url(name), room.tokens[name], code, room.hub.tls)
    assert not reply.errors, reply.errors
    return reply.stdout


def test_the_board_lists_every_learner_before_anyone_works(room: Room, page: object):
    for name in LEARNERS:
        assert cell(page, name, "2.1")[0] == "not started"
        assert cell(page, name, "Preflight")[0] == "not run"
    assert cell(page, INSTRUCTOR, "2.1") == ["", ""], "the instructor is no learner"


def test_each_verdict_appears_without_a_reload_and_the_stuck_learner_is_flagged(room: Room, page: object):
    assert "Exercise 2.1: solved" in learner_cell(room, "solver", SOLUTION + "\n" + CHECK)
    seconds = wait_for(page, lambda: "state-solved" in cell(page, "solver", "2.1")[1], "solver's 2.1 solved")
    print(f"board latency after the checker cell ended: {seconds:.1f} s")
    for _ in range(3):
        assert "Exercise 2.1: not solved" in learner_cell(room, "stuck", WRONG + CHECK)
    wait_for(page, lambda: cell(page, "stuck", "2.1")[0].startswith("3 attempts"), "stuck's three attempts")
    text, _ = cell(page, "stuck", "2.1")
    assert "sizes" in text, text  # the latest mistake's words: 2.1/returns-the-sizes
    wait_for(page, lambda: cell(page, "stuck", "Stuck?")[0].startswith("stuck"), "stuck flagged")
    assert "stuck" in page.get_attribute('#board-grid tr[data-learner="stuck"]', "class")  # type: ignore[attr-defined]
    assert cell(page, "solver", "Stuck?")[0] == "no"

    verdict = learner_cell(room, "starter", "from labkit.learner.doctor import run_preflight\nprint(run_preflight().verdict())")
    expected = "ready" if "doctor: READY" in verdict else "not ready"
    wait_for(page, lambda: cell(page, "starter", "Preflight")[0].startswith(expected), f"starter's preflight {expected}")
    assert cell(page, "starter", "2.1")[0] == "not started"

    summary = page.inner_text('#board-exercises tr[data-exercise="2.1"]')  # type: ignore[attr-defined]
    assert "1 of 3" in summary and "2.1/returns-the-sizes" in summary, summary
    assert page.evaluate("window.__not_reloaded === true"), "the page was reloaded"  # type: ignore[attr-defined]


def test_a_learner_is_refused_the_board_and_the_grid(room: Room):
    for path in ("", "api/grid", "export/grid.csv"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            room.request(path, token=room.tokens["stuck"])
        assert refused.value.code == 403, path


def test_a_learner_cannot_post_for_another(room: Room):
    forged = Event("solver", "check", "2.2", "solved")
    with pytest.raises(urllib.error.HTTPError) as refused:
        room.request("api/events", "POST", {"events": [json.loads(forged.to_json())]}, room.tokens["stuck"])
    assert refused.value.code == 403
    held = room.request("api/me", token=room.tokens["solver"])
    assert forged.id not in {event["id"] for event in held["events"]}
    assert "2.2" not in {event["exercise"] for event in held["events"]}


def test_a_get_changes_nothing(room: Room):
    with pytest.raises(urllib.error.HTTPError) as refused:
        room.request("api/events", token=room.tokens["stuck"])
    assert refused.value.code == 405


# The help queue and the look (labkit.help; labkit/workshop/board/queue.py)
ASK = 'import labkit\nprint(labkit.help("{exercise}"{more}))'
QUEUE_ROW = '#board-queue-table tr[data-learner="{name}"]'
LISTING = ".jp-DirListing-item"  # a file of her JupyterLab's file browser
CONFIRM = "form button[type=submit]"  # the hub's "Authorize" page for another user's server


def server_answers(room: Room, learner: str, token: str) -> int:
    """The status ``learner``'s server answers a token's request for her files with (200: it may look)."""
    try:
        request(f"{room.hub.server_url(learner)}/api/contents", token=token, tls=room.hub.tls)
    except urllib.error.HTTPError as refused:
        return refused.code
    return 200


def wait_until(condition: object, what: str, seconds: float = REVOKED_SECONDS) -> None:
    start = time.monotonic()
    while not condition():  # type: ignore[operator]
        if time.monotonic() - start > seconds:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.5)


# Her own notebook, which she saves before she asks (the kernelspec makes JupyterLab try to start a kernel for it)
HERS = "her-look.ipynb"
NOTEBOOK = {"type": "notebook", "format": "json", "content": {
    "cells": [{"cell_type": "code", "id": "her-cell", "source": "answer = 41 + 1\nprint(answer)", "metadata": {},
               "outputs": [], "execution_count": None}],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5}}
# What a look may not do in her server: (method, path, body); each is 403 to the instructor, and she may do each
CHANGES = [("PUT", f"api/contents/{HERS}", NOTEBOOK), ("POST", "api/kernels", {"name": "python3"}),
           ("POST", "api/terminals", {}),
           ("POST", "api/sessions", {"path": HERS, "name": HERS, "type": "notebook", "kernel": {"name": "python3"}}),
           # JupyterLab's own handlers, which never ask the authorizer (labkit.workshop.look.LookIdentityProvider)
           ("PUT", "lab/api/settings/@jupyterlab/apputils-extension:themes", {"raw": "{}"}),
           ("PUT", "lab/api/workspaces/default", {"data": {}, "metadata": {"id": "default"}})]


def answer(room: Room, learner: str, token: str, method: str, path: str, body: object = None) -> tuple[int, Any]:
    """The status (200 for any success) and reply of ``learner``'s server to one request with ``token``."""
    try:
        return 200, request(f"{room.hub.server_url(learner)}/{path}", method, body, token, room.hub.tls)
    except urllib.error.HTTPError as refused:
        return refused.code, None


def refused_to(room: Room, learner: str, token: str) -> dict[str, int]:
    """What each of :data:`CHANGES` answers ``token`` in ``learner``'s server (and her notebook's deletion)."""
    tries = {f"{method} {path}": answer(room, learner, token, method, path, body)[0] for method, path, body in CHANGES}
    tries[f"DELETE api/contents/{HERS}"] = answer(room, learner, token, "DELETE", f"api/contents/{HERS}")[0]
    return tries


def she_still_can(room: Room, learner: str) -> None:
    """She does each of :data:`CHANGES` in her own server, and undoes what it started."""
    token = room.tokens[learner]
    for method, path, body in CHANGES:
        status, reply = answer(room, learner, token, method, path, body)
        assert status == 200, f"{learner}: {method} {path} answered {status}"
        if path == "api/kernels":
            answer(room, learner, token, "DELETE", f"api/kernels/{reply['id']}")
        elif path == "api/terminals":
            answer(room, learner, token, "DELETE", f"api/terminals/{reply['name']}")
        elif path == "api/sessions":
            answer(room, learner, token, "DELETE", f"api/sessions/{reply['id']}")


def her_cells(room: Room, learner: str) -> list[str]:
    status, model = answer(room, learner, room.tokens[learner], "GET", f"api/contents/{HERS}?content=1")
    assert status == 200, status
    return [cell["source"] for cell in model["content"]["cells"]]


def open_her_notebook_read_only(look: Any, room: Room, learner: str) -> None:
    """The instructor's JupyterLab shows her notebook; typing there and saving is refused, and no kernel starts."""
    kernels = her_kernels(room, learner)
    look.goto(f"{room.hub.server_url(learner)}/lab/tree/{HERS}")
    look.wait_for_selector(".jp-Notebook .jp-Cell .jp-InputArea-editor:has-text('41 + 1')")  # her notebook renders
    time.sleep(3)  # JupyterLab asks for a kernel for it (refused)
    close_dialogs(look)
    look.click(".jp-Notebook .jp-Cell .jp-InputArea-editor")
    look.keyboard.press("End")
    look.keyboard.type("  # the instructor's edit")
    look.keyboard.press("Escape")
    look.keyboard.press("Control+s")
    look.wait_for_selector(".jp-Dialog:has-text('File Save Error')")
    assert "may only look at this server" in look.inner_text(".jp-Dialog"), look.inner_text(".jp-Dialog")
    close_dialogs(look)
    assert her_cells(room, learner) == [NOTEBOOK["content"]["cells"][0]["source"]], "her notebook unchanged"
    look.click(".jp-Notebook .jp-Cell .jp-InputArea-editor")
    look.keyboard.press("Escape")
    look.keyboard.press("Shift+Enter")  # run: JupyterLab has no kernel to run it in, and may start none
    time.sleep(3)
    assert her_kernels(room, learner) == kernels, "no kernel started"


def her_kernels(room: Room, learner: str) -> set[str]:
    return {kernel["id"] for kernel in answer(room, learner, room.tokens[learner], "GET", "api/kernels")[1]}


def close_dialogs(look: Any) -> None:
    """Close what JupyterLab says (it asks for a kernel for her notebook, and is refused one)."""
    for _ in range(5):
        if not look.locator(".jp-Dialog").count():
            return
        look.keyboard.press("Escape")
        time.sleep(1)


def test_a_look_lasts_while_she_asks_and_is_refused_once_the_instructor_closes(room: Room, page: object):
    teacher = room.tokens[INSTRUCTOR]
    assert answer(room, "stuck", room.tokens["stuck"], "PUT", f"api/contents/{HERS}", NOTEBOOK)[0] == 200
    assert server_answers(room, "stuck", teacher) == 403, "the instructor holds no standing access to her server"
    said = learner_cell(room, "stuck", ASK.format(exercise="2.1", more=", share=True"))
    assert "number 1 in the queue for exercise 2.1" in said, said
    assert "may look at your notebooks: read them, never change or run them" in said, said
    row = QUEUE_ROW.format(name="stuck")
    page.wait_for_selector(row)  # type: ignore[attr-defined]
    assert "2.1" in page.inner_text(row)  # type: ignore[attr-defined]
    with page.context.expect_page() as opened:  # type: ignore[attr-defined]
        page.click(row + " a.look")  # type: ignore[attr-defined]
    look = opened.value
    look.set_default_timeout(UPDATE_SECONDS * 1000)
    try:
        look.wait_for_selector(f"{LISTING}, {CONFIRM}")
        if look.locator(CONFIRM).count():  # JupyterHub asks once before it lets one user into another's server
            look.click(CONFIRM)
        look.wait_for_selector(LISTING)  # her JupyterLab, through the hub's OAuth, as the instructor
    except Exception:
        raise AssertionError(f"her notebook did not open at {look.url}:\n{look.content()[:3000]}") from None
    assert look.url.startswith(room.hub.server_url("stuck")), look.url
    her_lab = look.url

    # The look is read-only: the instructor reads her notebook, and may neither change it nor run anything there
    wait_until(lambda: server_answers(room, "stuck", teacher) == 200, "the instructor's token let in while she asks")
    status, model = answer(room, "stuck", teacher, "GET", f"api/contents/{HERS}?content=1")
    assert status == 200 and "41 + 1" in model["content"]["cells"][0]["source"], status
    tries = refused_to(room, "stuck", teacher)
    assert tries == dict.fromkeys(tries, 403), tries
    learner_cell(room, "stuck", "open('.her-secret', 'w').write('a key')")  # as her kernels' connection files are
    for path in ("api/contents/.her-secret", "files/.her-secret"):
        assert answer(room, "stuck", teacher, "GET", path)[0] in (403, 404), f"a hidden file read by a look: {path}"
    she_still_can(room, "stuck")
    open_her_notebook_read_only(look, room, "stuck")

    page.bring_to_front()  # type: ignore[attr-defined]  # the board's tab, behind hers meanwhile, redraws again
    page.click(row + " button.close")  # type: ignore[attr-defined]
    page.wait_for_selector(row, state="detached")  # type: ignore[attr-defined]
    wait_until(lambda: server_answers(room, "stuck", teacher) == 403, "the instructor's token refused after close")
    assert set(refused_to(room, "stuck", teacher).values()) == {403}, "after close, as before the look"
    statuses: list[int] = []
    wait_until(lambda: statuses.append(look.goto(her_lab).status) or statuses[-1] == 403,
               "the instructor's browser refused her server after close")
    assert statuses[-1] == 403, statuses
    assert page.evaluate("window.__not_reloaded === true")  # type: ignore[attr-defined]
    she_still_can(room, "stuck")


def test_a_look_is_refused_after_she_cancels_and_after_the_time_limit(room: Room):
    teacher = room.tokens[INSTRUCTOR]
    learner_cell(room, "solver", ASK.format(exercise="2.2", more=", share=True"))
    wait_until(lambda: server_answers(room, "solver", teacher) == 200, "the look while solver asks")
    assert "cancelled" in learner_cell(room, "solver", ASK.format(exercise="2.2", more=", cancel=True"))
    wait_until(lambda: server_answers(room, "solver", teacher) == 403, "the look refused after she cancelled")

    learner_cell(room, "starter", ASK.format(exercise="2.1", more=", share=True"))
    wait_until(lambda: server_answers(room, "starter", teacher) == 200, "the look while starter asks")
    wait_until(lambda: server_answers(room, "starter", teacher) == 403, "the look refused past its time limit",
               seconds=LOOK_SECONDS + REVOKED_SECONDS)
    assert "starter" not in {item["learner"] for item in room.request("api/queue", token=teacher)["requests"]}


# What a learner's own server token may try with JupyterHub's share API (her kernel's cell).
WIDEN = """import json, os, urllib.error, urllib.request
api, me = os.environ["JUPYTERHUB_API_URL"], os.environ["JUPYTERHUB_USER"]
def post(path, body):
    req = urllib.request.Request(api + path, json.dumps(body).encode(), {"Authorization": "token " + os.environ[
        "JUPYTERHUB_API_TOKEN"], "Content-Type": "application/json"}, method="POST")
    try:
        return urllib.request.urlopen(req, timeout=10).status
    except urllib.error.HTTPError as exc:
        return exc.code
print(json.dumps([post("/shares/solver/", {"group": "instructors"}), post(f"/shares/{me}/", {"user": "solver"}),
                  post(f"/shares/{me}/", {"group": "instructors", "scopes": ["admin:users"]})]))
"""


def test_a_learner_cannot_share_another_s_server_nor_widen_her_own_share(room: Room):
    answers = json.loads(learner_cell(room, "stuck", WIDEN))
    assert answers[0] in (403, 404), "another learner's server (the hub does not even say it exists)"
    assert answers[1] == 403, "her server with another learner by name"
    assert answers[2] in (400, 403), "a scope beyond her server"


def test_a_learner_cannot_see_claim_or_close_the_queue(room: Room):
    learner_cell(room, "solver", ASK.format(exercise="2.3", more=""))
    mine = room.request("api/queue", token=room.tokens[INSTRUCTOR])["requests"]
    ident = next(item["id"] for item in mine if item["learner"] == "solver")
    for path, method in (("api/queue", "GET"), (f"api/queue/{ident}/claim", "POST"), (f"api/queue/{ident}/close", "POST"),
                         ("export/help.csv", "GET")):
        with pytest.raises(urllib.error.HTTPError) as refused:
            room.request(path, method, {} if method == "POST" else None, room.tokens["stuck"])
        assert refused.value.code == 403, path
    with pytest.raises(urllib.error.HTTPError) as refused:  # her own hub token cancels only her own
        room.request("api/help/cancel", "POST", {"exercise": "2.3"}, room.tokens["stuck"])
    assert refused.value.code == 404
    assert ident in {item["id"] for item in room.request("api/queue", token=room.tokens[INSTRUCTOR])["requests"]}
