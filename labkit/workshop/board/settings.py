"""The board's settings: JupyterHub's service environment and the board's own, checked before it starts.

Why checked up front: the board holds every learner's verdicts and a cookie secret that signs the
instructor's session. A folder others can read, or a setting the board would misread, must stop it
with one sentence that says what to change, not show up later as a leak or a wrong grid.

JupyterHub sets these for a service it runs (``jupyterhub.services.auth.HubOAuth`` reads them too):
``JUPYTERHUB_API_TOKEN`` (the board's own token), ``JUPYTERHUB_API_URL``, ``JUPYTERHUB_SERVICE_URL``
(where to listen, e.g. ``http://127.0.0.1:10101``), ``JUPYTERHUB_SERVICE_PREFIX``
(``/services/labkit-board/``), ``JUPYTERHUB_CLIENT_ID``, ``JUPYTERHUB_OAUTH_CALLBACK_URL``,
``JUPYTERHUB_OAUTH_ACCESS_SCOPES``.

The board's own settings:

- ``LABKIT_BOARD_DB``: the SQLite file of events. Its folder must exist, belong to the board's
  account and be 0700 (``chmod 700``); the board refuses to start otherwise. Required.
- ``LABKIT_BOARD_COOKIE_SECRET_FILE``: the secret that signs the board's log-in cookie, so that a
  restart keeps the instructor logged in. A 0600 file of the board's account; made (32 random bytes)
  when missing. Default: ``cookie_secret`` next to the database.
- ``LABKIT_BOARD_INSTRUCTORS``: comma-separated hub names who may see the board. So may every member
  of the hub group ``instructors`` and every JupyterHub admin.
- ``LABKIT_BOARD_EXERCISES``: comma-separated exercise ids of the track in use, in order
  (``1.1,1.2,2.1``): the grid's columns. Empty: the exercises seen in events, in numeric order.
- ``LABKIT_BOARD_STUCK_ATTEMPTS`` (default 3): a learner is stuck after this many attempts at one
  exercise without solving it.
- ``LABKIT_BOARD_STUCK_MINUTES`` (default 10): a learner is stuck after this long without an event
  while at least two others had one.
- ``LABKIT_BOARD_STUCK_REPEATS`` (default 2) and ``LABKIT_BOARD_STUCK_SLOWER`` (default 2): stuck by evidence
  (:mod:`labkit.workshop.board.stuck`), after the same mistake this many times in a row, or after this many times the
  room's median time on the exercise she is on.
- ``LABKIT_LANG`` (the hub sets it to ``LABKIT_WORKSHOP_LANGUAGE``): the language of the page's words, stuck reasons
  and mistake descriptions, ``en``, ``zh`` or ``ru`` (:mod:`labkit.workshop.board.words`); the events stay English.
- ``LABKIT_BOARD_SERVER_URL``: where "open this learner's server" goes, ``{name}`` standing for the
  learner's name (``https://{name}.hub.example.org/``, rooms with a subdomain per server). Unset: the
  hub's admin page, which lists every server.
- ``LABKIT_BOARD_LOOK_SECONDS`` (default 1200): the longest an instructor's look at a learner's server lasts
  (:mod:`labkit.workshop.board.queue`): a request with a look still open after this long is ended and its
  share revoked.
"""
from __future__ import annotations

import os
import secrets
import stat
import string
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from labkit.core.errors import LabkitValueError
from labkit.progress.events import EXERCISE_PATTERN

NAME = "labkit-board"
PREFIX = "LABKIT_BOARD_"
DEFAULT_SERVICE_PREFIX = f"/services/{NAME}/"
COOKIE_SECRET_BYTES = 32


@dataclass(frozen=True)
class BoardSettings:
    """What the board runs with (:meth:`from_environment` reads and checks it)."""

    db: Path
    cookie_secret_file: Path
    api_url: str
    api_token: str
    host: str = "127.0.0.1"
    port: int = 10101
    prefix: str = DEFAULT_SERVICE_PREFIX
    hub_prefix: str = "/hub/"
    instructors: frozenset[str] = frozenset()
    exercises: tuple[str, ...] = ()
    stuck_attempts: int = 3
    stuck_minutes: int = 10
    stuck_repeats: int = 2
    stuck_slower: int = 2
    server_url: str = ""  # a template with {name}; "" links to the hub's admin page
    look_seconds: int = 1200  # a help request's look at the learner's server ends after this long

    @classmethod
    def from_environment(cls, env: dict[str, str] | None = None) -> BoardSettings:
        """The settings in ``env`` (default: this process's); :class:`LabkitValueError` saying what to change."""
        env = dict(os.environ if env is None else env)
        for name in ("JUPYTERHUB_API_TOKEN", "JUPYTERHUB_API_URL", "JUPYTERHUB_SERVICE_URL", "JUPYTERHUB_CLIENT_ID"):
            if not env.get(name):
                raise LabkitValueError(f"{name} is not set: the board is a JupyterHub service, started by the hub "
                                       "(c.JupyterHub.services in workshop/jupyterhub_config.py), which sets it.")
        if not env.get(PREFIX + "DB"):
            raise LabkitValueError(f"{PREFIX}DB is not set: give the board's SQLite file, in a folder of its own (0700).")
        db = Path(env[PREFIX + "DB"]).expanduser().absolute()
        listen = urlsplit(env["JUPYTERHUB_SERVICE_URL"])
        if listen.scheme != "http" or not listen.hostname:
            raise LabkitValueError(f"JUPYTERHUB_SERVICE_URL={env['JUPYTERHUB_SERVICE_URL']!r}: the board listens on "
                                   "plain http behind the hub's proxy, e.g. http://127.0.0.1:10101.")
        base = env.get("JUPYTERHUB_BASE_URL") or "/"
        settings = cls(
            db=db,
            cookie_secret_file=Path(env.get(PREFIX + "COOKIE_SECRET_FILE") or db.with_name("cookie_secret")).expanduser(),
            api_url=env["JUPYTERHUB_API_URL"],
            api_token=env["JUPYTERHUB_API_TOKEN"],
            host=listen.hostname,
            port=listen.port or 80,
            prefix=_slashed(env.get("JUPYTERHUB_SERVICE_PREFIX") or DEFAULT_SERVICE_PREFIX),
            hub_prefix=_slashed(base.rstrip("/") + "/hub/"),
            instructors=frozenset(_names(env.get(PREFIX + "INSTRUCTORS", ""))),
            exercises=tuple(_names(env.get(PREFIX + "EXERCISES", ""))),
            stuck_attempts=_whole(PREFIX + "STUCK_ATTEMPTS", env.get(PREFIX + "STUCK_ATTEMPTS", "3")),
            stuck_minutes=_whole(PREFIX + "STUCK_MINUTES", env.get(PREFIX + "STUCK_MINUTES", "10")),
            stuck_repeats=_whole(PREFIX + "STUCK_REPEATS", env.get(PREFIX + "STUCK_REPEATS", "2")),
            stuck_slower=_whole(PREFIX + "STUCK_SLOWER", env.get(PREFIX + "STUCK_SLOWER", "2")),
            server_url=env.get(PREFIX + "SERVER_URL", "").strip(),
            look_seconds=_whole(PREFIX + "LOOK_SECONDS", env.get(PREFIX + "LOOK_SECONDS", "1200")),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        """Refuse exercise ids, numbers or a server URL template the board would misread."""
        for exercise in self.exercises:
            if not EXERCISE_PATTERN.fullmatch(exercise):
                raise LabkitValueError(f"{PREFIX}EXERCISES: {exercise!r} is not an exercise id such as 1.2.")
        if len(set(self.exercises)) != len(self.exercises):
            raise LabkitValueError(f"{PREFIX}EXERCISES names an exercise twice.")
        if self.server_url:
            fields = {field for _, field, _, _ in string.Formatter().parse(self.server_url) if field is not None}
            if urlsplit(self.server_url).scheme not in ("http", "https") or not fields <= {"name"}:
                raise LabkitValueError(f"{PREFIX}SERVER_URL={self.server_url!r}: give an http(s) URL in which {{name}} "
                                       "stands for the learner's name, e.g. https://{name}.hub.example.org/.")

    @property
    def admin_url(self) -> str:
        """The hub's admin page: where a row links when there is no server URL template."""
        return self.hub_prefix + "admin"


def check_private_folder(path: Path, euid: int | None = None) -> None:
    """Refuse to start unless ``path``'s folder exists, is this account's, and nobody else may enter it (0700)."""
    euid = os.geteuid() if euid is None else euid
    folder = path.parent
    try:
        info = os.stat(folder)
    except OSError:
        raise LabkitValueError(f"{folder} does not exist: make it with `mkdir -m 700 {folder}` (the board keeps its "
                               "events there).") from None
    if not stat.S_ISDIR(info.st_mode):
        raise LabkitValueError(f"{folder} is not a folder: {PREFIX}DB must name a file in a folder of the board's own.")
    if info.st_uid != euid:
        raise LabkitValueError(f"{folder} belongs to another account (uid {info.st_uid}): the board's folder must be "
                               "its own account's.")
    if stat.S_IMODE(info.st_mode) != 0o700:
        raise LabkitValueError(f"{folder} is {stat.S_IMODE(info.st_mode):04o}: it holds every learner's verdicts and the "
                               f"board's cookie secret, so it must be 0700 (`chmod 700 {folder}`).")


def read_cookie_secret(path: Path, euid: int | None = None) -> bytes:
    """The board's cookie secret, made (0600, random) if missing; refused if others may read it."""
    euid = os.geteuid() if euid is None else euid
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        raise LabkitValueError(f"{path}: cannot make the board's cookie secret ({exc.strerror}).") from None
    else:
        with os.fdopen(descriptor, "wb") as file:
            file.write(secrets.token_bytes(COOKIE_SECRET_BYTES))
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise LabkitValueError(f"{path}: cannot read the board's cookie secret ({exc.strerror}; a link is refused).") from None
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != euid or stat.S_IMODE(info.st_mode) & 0o077:
            raise LabkitValueError(f"{path}: the board's cookie secret must be a file of its own account that nobody else "
                                   f"may read (`chmod 600 {path}`), or be removed so the board makes a new one.")
        secret = file.read()
    if len(secret) < COOKIE_SECRET_BYTES:
        raise LabkitValueError(f"{path} holds {len(secret)} bytes: a cookie secret has at least {COOKIE_SECRET_BYTES} "
                               "(remove the file and the board makes a new one).")
    return secret


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _whole(name: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise LabkitValueError(f"{name}={text!r}: give a whole number.") from None
    if value < 1:
        raise LabkitValueError(f"{name}={value}: give a whole number of at least 1.")
    return value


def _slashed(prefix: str) -> str:
    return "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
