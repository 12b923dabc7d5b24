"""The room board as the hub runs it: the service's entry, its roles, and what each learner's server is told.

Why apart from the board itself (:mod:`labkit.workshop.board`): this is hub configuration, read by
``workshop/jupyterhub_config.py``; the board is a web service that knows nothing of the hub's settings.

Who may do what:
- every learner's server token gets ``access:services!service=labkit-board``, so the learner's kernel
  posts their own verdicts; the board takes the learner's name from that token;
- the board's own token may list the hub's users and read its groups (who is an instructor);
- the board page is the instructor's (``LABKIT_WORKSHOP_ADMIN``, the hub group ``instructors``, admins).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import nbformat

from labkit.labs import find_notebooks
from labkit.learner.tracks import apply_track
from labkit.workshop.hosts import learner_url_template
from labkit.workshop.settings import HubSettings

NAME = "labkit-board"
PREFIX = f"/services/{NAME}/"
LEARNER_SCOPE = f"access:services!service={NAME}"
INSTRUCTORS_GROUP = "instructors"
# what a learner's server may do to ask for a look (labkit.help(..., share=True)): share itself with the instructors
LOOK_SCOPES = ["shares!server", f"read:users:name!group={INSTRUCTORS_GROUP}"]
# JupyterHub's scopes for $JUPYTERHUB_API_TOKEN (its "server" role), plus posting to the board, plus a look
SERVER_TOKEN_SCOPES = ["users:activity!user", "access:servers!server", LEARNER_SCOPE, *LOOK_SCOPES]
# an exercise's function starts with its docstring, "Exercise 1.2: ..." (the stub student_copy makes keeps it)
EXERCISE_DOCSTRING = re.compile(r'"""Exercise (\d{1,2}\.\d{1,2}):')


def track_exercises(notebooks: Path, track: str) -> list[str]:
    """The exercise ids the learner edition of ``track`` holds, in order (each exercise function's docstring)."""
    found: list[str] = []
    for path in find_notebooks(notebooks):
        notebook = apply_track(path, nbformat.read(path, as_version=4), track)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                found += [exercise for exercise in EXERCISE_DOCSTRING.findall(cell.source) if exercise not in found]
    return found


def board_url(settings: HubSettings) -> str:
    """Where a learner's kernel reaches the board: its own port on loopback, under the service's prefix."""
    return f"http://127.0.0.1:{settings.board_port}{PREFIX}"


def board_service(settings: HubSettings) -> dict[str, Any]:
    """The board's entry in ``c.JupyterHub.services``: the hub starts it, restarts it, and routes to it."""
    state = settings.board_state
    return {
        "name": NAME,
        "url": f"http://127.0.0.1:{settings.board_port}",
        "command": [sys.executable, "-m", "labkit.workshop.board"],
        "oauth_no_confirm": True,  # the instructor opens their own hub's board: no "authorize" page
        "display": True,
        "environment": {
            "LABKIT_BOARD_DB": str(state / "board.sqlite"),
            "LABKIT_BOARD_COOKIE_SECRET_FILE": str(state / "cookie_secret"),
            "LABKIT_BOARD_INSTRUCTORS": settings.admin,
            "LABKIT_BOARD_EXERCISES": ",".join(track_exercises(settings.notebooks, settings.track)),
            "LABKIT_BOARD_STUCK_ATTEMPTS": str(settings.stuck_attempts),
            "LABKIT_BOARD_STUCK_MINUTES": str(settings.stuck_minutes),
            "LABKIT_BOARD_STUCK_REPEATS": str(settings.stuck_repeats),  # stuck by evidence: board/stuck.py
            "LABKIT_BOARD_STUCK_SLOWER": str(settings.stuck_slower),
            "LABKIT_BOARD_LOOK_SECONDS": str(settings.look_seconds),  # a look ends after this long at most
            "LABKIT_LANG": settings.language,  # the page's words and mistake descriptions; the events stay English
            **({"LABKIT_BOARD_SERVER_URL": learner_url_template(settings)} if settings.subdomain_host else {}),
            # the board's log-in cookie as __Host- (HubOAuth reads this): a learner's page cannot toss hers in its place
            **({"JUPYTERHUB_COOKIE_HOST_PREFIX_ENABLED": "1"} if settings.host_only_cookies else {}),
        },
    }


def board_roles(settings: HubSettings) -> list[dict[str, Any]]:
    """The board's own role, and the default user role with the one scope that lets a learner post their verdicts."""
    return [
        # users:shares!group=instructors: the board revokes a look when its help request ends; it can open no server
        {"name": NAME, "services": [NAME], "scopes": ["list:users", "read:users", "list:groups", "read:groups",
                                                      f"users:shares!group={INSTRUCTORS_GROUP}"]},
        {"name": "user", "scopes": ["self", LEARNER_SCOPE, "shares!user", f"read:users:name!group={INSTRUCTORS_GROUP}"]},
    ]


def prepare_board_state(settings: HubSettings) -> Path:
    """The board's folder in the hub's state, 0700 (the database and its cookie secret live there)."""
    folder = settings.board_state
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    return folder
