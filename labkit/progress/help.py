"""``labkit.help("2.3")``: a raised hand in the room's queue, with the exercise, the latest mistake id and hint level.

Why from the kernel: the kernel holds the learner's hub token (``JUPYTERHUB_API_TOKEN``) and her journal, so
the request carries what the board may know (the exercise, the mistake id her last check named, the hint level
she reached) and never her code. Outside a room there is no queue: the answer says how to ask instead.

``share=True`` is her consent, for this request only, to a *look*: her server is shared with each of the room's
instructors the board names (JupyterHub's sharing API, with her own token; her server lets anyone but her only read:
:mod:`labkit.workshop.look`), and the board revokes that share when the
request is closed, cancelled or runs past its time limit. ``cancel=True`` ends her open request on the exercise.
"""
from __future__ import annotations

import html
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from labkit.core.errors import LabkitValueError
from labkit.i18n.messages import _
from labkit.progress import journal, sender
from labkit.progress.events import EXERCISE_PATTERN, MAX_OPEN_HELP_REQUESTS

TIMEOUT_S = 5.0
TOO_MANY_OPEN = "too many open requests"  # what _post answers for the board's 429 on api/help


@dataclass(frozen=True)
class HelpAnswer:
    """What ``labkit.help`` says: one sentence in the learner's language (and, in a room, the request's id)."""

    text: str
    request_id: str = ""

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return f"<p class=\"labkit-help\">{html.escape(self.text)}</p>"


def help(exercise: str, share: bool = False, cancel: bool = False) -> HelpAnswer:  # noqa: A001 (the learner's word)
    """Ask the room's instructors for help on ``exercise`` (``share=True``: let them look at your server meanwhile)."""
    if not isinstance(exercise, str) or not EXERCISE_PATTERN.match(exercise):
        raise LabkitValueError(_("Give the exercise's number as text, such as labkit.help(\"2.3\")."))
    url = sender.board_url()
    if url is None:
        return HelpAnswer(_("There is no room here (no workshop hub with a board): raise your hand, or ask your "
                            "instructor directly, naming exercise {exercise}.").format(exercise=exercise))
    board = url.removesuffix("/api/events")
    if cancel:
        reply = _post(board + "/api/help/cancel", {"exercise": exercise})
        if isinstance(reply, str):
            return HelpAnswer(_("Your request for exercise {exercise} could not be cancelled: {problem}.").format(
                exercise=exercise, problem=reply))
        return HelpAnswer(_("Your request for help on exercise {exercise} is cancelled.").format(exercise=exercise))
    mistake, hint_level = latest_of(exercise)
    reply = _post(board + "/api/help", {"exercise": exercise, "mistake": mistake, "hint_level": hint_level,
                                        "look": share})
    if reply == TOO_MANY_OPEN:
        return HelpAnswer(_("You already have {limit} open requests for help: cancel one with "
                            "labkit.help(\"N.M\", cancel=True), or wait for the instructor, before asking about "
                            "exercise {exercise}.").format(limit=MAX_OPEN_HELP_REQUESTS, exercise=exercise))
    if isinstance(reply, str):
        return HelpAnswer(_("The board could not take your request ({problem}): raise your hand.").format(problem=reply))
    if share:
        problem = _share_with(reply.get("instructors") or [])
        if problem:
            _post(board + "/api/help/cancel", {"exercise": exercise})  # the board revokes what was shared
            return HelpAnswer(_("Your server could not be shared with the instructors ({problem}); nothing was "
                                "asked. Ask again without share=True, or raise your hand.").format(problem=problem))
    text = _("You are number {place} in the queue for exercise {exercise}.").format(place=reply["place"],
                                                                                   exercise=exercise)
    if not reply["new"]:
        text = _("You had already asked for help on exercise {exercise}: you are still number {place}.").format(
            exercise=exercise, place=reply["place"])
    if share:
        text += " " + _("Until the request ends, the instructors may look at your notebooks: read them, never change "
                        "or run them.")
    return HelpAnswer(text, reply["request"]["id"])


def help_pointer(exercise: str) -> str:
    """The line under a refused verdict in a room: how to ask the instructors ("" outside a room, where there is none)."""
    if sender.board_url() is None:
        return ""
    return _("Still stuck? labkit.help(\"{exercise}\") puts you in the instructors' queue; with share=True they may "
             "also look at your notebook (read only) until your request ends.").format(exercise=exercise)


def latest_of(exercise: str) -> tuple[str, int]:
    """The mistake id of her latest check of ``exercise`` ("" when it named none) and the highest hint level seen."""
    path = journal.journal_path()
    if path is None:
        return "", 0
    try:
        events, _end = journal.read_events(path)
    except OSError:
        return "", 0
    mistake, level = "", 0
    for event in events:
        if event.exercise != exercise:
            continue
        if event.kind == "check":
            mistake = event.mistake
        elif event.kind == "hint":
            level = max(level, event.hint_level)
    return mistake, level


def _share_with(instructors: list[str]) -> str:
    """Share this server with each of ``instructors`` by name (her own token); "" or the problem."""
    api, user = os.environ.get("JUPYTERHUB_API_URL", ""), os.environ.get("JUPYTERHUB_USER", "")
    server = os.environ.get("JUPYTERHUB_SERVER_NAME", "")
    if not api or not user or not instructors:
        return _("this server is not a hub's")
    for instructor in instructors:
        reply = _post(f"{api.rstrip('/')}/shares/{quote(user, safe='')}/{quote(server, safe='')}", {"user": instructor})
        if isinstance(reply, str):
            return reply
    return ""


def _post(url: str, body: dict[str, object], method: str = "POST") -> dict[str, Any] | str:
    """Send ``body`` as JSON with the server's hub token; the reply, or the problem in words."""
    request = urllib.request.Request(url, json.dumps(body).encode(), {
        "Authorization": f"token {os.environ.get(sender.TOKEN, '')}", "Content-Type": "application/json"}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as reply:
            answer = json.loads(reply.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return TOO_MANY_OPEN if exc.code == 429 and url.endswith("/api/help") else f"{exc.code} {exc.reason}"
    except (OSError, ValueError) as exc:
        return str(exc)
    return answer if isinstance(answer, dict) else str(answer)
