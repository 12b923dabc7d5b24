"""What must hold before a room's hub starts: private state, private solutions, code no learner can change.

Why checked at every start, not documented only: one ``chmod`` or a checkout
moved to ``/srv`` is enough to hand the room the solutions or the hub's
cookie secret, and nothing would look wrong until a learner used it. The hub
refuses to start instead, saying what to change. These checks assume what a
learner account is: no special rights, a group of its own (see
:mod:`labkit.workshop.accounts`), so "others" permission bits are what it has.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from labkit.core.errors import LabkitError
from labkit.core.files import write_text
from labkit.workshop.install import is_current, others_can_run
from labkit.workshop.limits import short_of_space
from labkit.workshop.settings import PREFIX, ROOT, UNSAFE_SHARED_ROOT, UNSAFE_TRUSTED, HubSettings

INSTRUCTOR_CODE = "instructor-sign-up-code"
FRONT_PROXY_SECRET = "front-proxy-secret"
CODE_LENGTH = 16
STATE_FILES = ("jupyterhub.sqlite",)  # created 0600 before JupyterHub opens it (it writes the cookie secret 0600 itself)


class RoomError(LabkitError):
    """The hub would give a learner something that must stay the instructor's."""


def prepare_state(settings: HubSettings) -> None:
    """The hub's state folder: the hub account's alone (0700), its database and cookie secret 0600."""
    settings.state.mkdir(mode=0o700, parents=True, exist_ok=True)
    owner = settings.state.lstat()
    if stat.S_ISLNK(owner.st_mode) or owner.st_uid != os.geteuid():
        raise RoomError(f"{settings.state} is not a folder of the hub's own account: set {PREFIX}STATE to one it owns.")
    settings.state.chmod(0o700)
    for name in STATE_FILES:
        path = settings.state / name
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))  # an empty file: JupyterHub fills it
        path.chmod(0o600)


def writable_by_others(path: Path) -> Path | None:
    """The first entry of ``path``'s tree, or of the folders above it, that an account other than its owner could change.

    The whole tree is walked (links are not followed: a link's target is
    checked where it lies, if it lies in a checked tree), since one writable
    file deep in a venv is enough to run a learner's code as root.
    """
    if not path.exists():
        return None
    path = path.resolve()
    for entry in [*reversed(path.parents), path]:
        if _open_to_others(entry.stat()):
            return entry
    for folder, names, files in os.walk(path):
        for name in [*names, *files]:
            entry = Path(folder) / name
            info = entry.lstat()
            if not stat.S_ISLNK(info.st_mode) and _open_to_others(info):
                return entry
    return None


def _open_to_others(info: os.stat_result) -> bool:
    """Whether an account other than the owner (root or the hub's) could change this entry."""
    sticky_folder = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX  # /tmp: nobody replaces our entry
    if info.st_mode & stat.S_IWOTH and not sticky_folder:
        return True
    return bool(info.st_mode & stat.S_IWGRP and info.st_gid != 0) or info.st_uid not in (0, os.geteuid())


def check_isolation(settings: HubSettings, euid: int | None = None) -> None:
    """Refuse a room whose learners' code would run as root, or whose learners' pages would share the hub's origin.

    Why the origin: a learner's code can serve any page from their own
    server's port (it can take over the socket), and on the hub's origin that
    page, opened by the instructor or another learner, acts with their log-in.
    ``euid`` is the hub's user id (default: this process's).
    """
    euid = os.geteuid() if euid is None else euid
    if not settings.separated and euid == 0 and not settings.unsafe_shared_account_as_root:
        raise RoomError(
            f"{PREFIX}SPAWNER=shared-account in a hub run as root: every learner's kernel would run as root and read "
            "every secret (the admin password in the hub's environment too). Unset it (a root hub runs each learner as "
            "their own account), or start the hub as your own account on a trusted machine. (The tests' machine: "
            f"{PREFIX}{UNSAFE_SHARED_ROOT}=yes.)"
        )
    if settings.is_room and not settings.isolated_origins and not settings.unsafe_trusted:
        raise RoomError(
            f"a room needs each learner's server on a subdomain of its own: set {PREFIX}SUBDOMAIN_HOST=https://hub.example.org "
            "(a wildcard DNS name and certificate for *.hub.example.org: workshop/README.md, Security). Without it, a page a "
            "learner's code serves runs with the log-in of whoever opens it, the instructor's included. Only if you trust "
            f"every participant: {PREFIX}{UNSAFE_TRUSTED}=yes."
        )


def what_trust_gives_away(settings: HubSettings) -> str:
    """What ``UNSAFE_EVERY_PARTICIPANT_TRUSTED=yes`` gives away in this room, for the hub's console at start ("" if unset).

    Why at start: the setting is one line in an environment, and what it costs is in the README only;
    the instructor reads it where the room starts, every time it does.
    """
    if not settings.unsafe_trusted:
        return ""
    setting = f"{PREFIX}{UNSAFE_TRUSTED}=yes"
    if settings.isolated_origins:
        return f"labkit: {setting} gives nothing away here: every learner's server is on a subdomain of its own."
    admin = (" With the shared password the instructor is a JupyterHub admin, whose role opens every learner's server."
             if settings.password else "")
    return (f"labkit: {setting}: every learner's server shares the hub's origin, so a page a learner's code serves "
            "acts as whoever opens it, the instructor included: it can mint their API token, change their password, "
            "approve sign-ups, read the room board and other learners' files. Open no link into a learner's server."
            f"{admin} For a room of people you would give your password to; otherwise set {PREFIX}SUBDOMAIN_HOST "
            "(workshop/README.md, Security).")


def check_room(settings: HubSettings, hub_code: list[Path]) -> None:
    """Refuse to start a room (``system-users``) whose learners could read the solutions or change the hub's code."""
    if not settings.separated:
        return
    if not settings.learner_python.exists() or not is_current(settings.install):
        raise RoomError(f"the learner venv in {settings.install} is missing or older than this labkit: "
                        "run `sudo make workshop-install` (python -m labkit workshop install) first.")
    if others_can_run(ROOT) and not settings.unsafe_readable_checkout:
        raise RoomError(
            f"learners could read the labkit checkout {ROOT}: its notebooks, solutions, git history and INSTRUCTORS.md "
            "hold every answer, and learners need nothing of it. chmod 0700 it (or a folder above it)."
        )
    if others_can_run(settings.notebooks):
        raise RoomError(
            f"learners could read the solved notebooks and solutions in {settings.notebooks}: make a folder above "
            "it private (e.g. chmod 0700 it)."
        )
    for path in [*hub_code, settings.install]:
        exposed = writable_by_others(path)
        if exposed is not None:
            raise RoomError(f"a learner could change {exposed}, which the hub runs: make it root's and not "
                            f"group- or world-writable (chmod go-w {exposed}).")
    short = short_of_space([_nearest_existing(settings.homes), _nearest_existing(settings.state)])
    if short:  # the spawner checks again before each server; a room that starts short would refuse every learner
        raise RoomError(f"not starting the room: {short}.")


def _nearest_existing(path: Path) -> Path:
    """``path``, or the nearest folder above it that exists (the state folder is made after this check)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def front_proxy_secret(settings: HubSettings) -> str:
    """What the HTTPS proxy in front sends the hub to be believed about the client's address: made once, 0600.

    Why: a learner's code reaches the hub's proxy on loopback as the front proxy
    does, so only a secret it cannot read tells the front proxy's requests apart.
    """
    return _private_secret(settings.state / FRONT_PROXY_SECRET, secrets.token_urlsafe(32))


def instructor_sign_up_code(settings: HubSettings) -> str:
    """The code signing up under the instructor's name needs: made once, kept in the private state folder (0600).

    Why: NativeAuthenticator approves the admin name at once, so without it
    whoever reached the sign-up page first would be the instructor. The hub
    prints it on its own console; a learner can read neither. A stored code
    shorter than :data:`CODE_LENGTH` (a write cut short) is made anew: the code
    never fails open.
    """
    return _private_secret(settings.state / INSTRUCTOR_CODE, secrets.token_urlsafe(CODE_LENGTH))


def _private_secret(path: Path, new: str) -> str:
    """The secret stored in ``path`` (0600), or ``new`` stored there if none as long as it is."""
    with contextlib.suppress(FileNotFoundError):
        stored = path.read_text().strip()
        if len(stored) >= len(new):
            return stored
    write_text(path, new + "\n")
    path.chmod(0o600)
    return new
