"""Learners' Unix accounts for a room: ``labkit-NAME``, made on first log-in, removed after the workshop.

Why: a learner's code is only kept from the hub's secrets and from the other
learners' files when it runs as an account of its own. NativeAuthenticator
approves hub users but creates no Unix account, so the hub's pre-spawn hook
calls :func:`ensure_account` (the hub runs as root). Every account labkit makes
carries the prefix of the settings (``labkit-`` by default, so it never
collides with a system account) and :data:`COMMENT` in its GECOS field, and
only such accounts are ever removed.
"""
from __future__ import annotations

import pwd
import re
import subprocess
from pathlib import Path

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.workshop.settings import USERNAME_PATTERN, USERNAME_RULE, HubSettings

COMMENT = "labkit workshop learner"  # the GECOS field that marks an account as labkit's
COMMAND_SECONDS = 60


class AccountError(LabkitError):
    """A learner's Unix account could not be made or removed."""


def ensure_account(settings: HubSettings, username: str) -> pwd.struct_passwd:
    """Learner ``username``'s account, created (home of mode 0700, a group of its own, no password) if missing."""
    if not re.fullmatch(USERNAME_PATTERN, username):
        raise LabkitValueError(f"{username!r} is not a learner name labkit makes an account for: {USERNAME_RULE}.")
    account, home = settings.account(username), settings.home(username)
    try:
        entry = pwd.getpwnam(account)
    except KeyError:
        settings.homes.mkdir(mode=0o755, parents=True, exist_ok=True)
        # Expired from the start: PAM then refuses it ssh (a key in ~/.ssh), cron, at and su, which would run
        # outside its server's memory bound; the hub still starts its server (setuid, no PAM).
        _run(["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash", "--user-group",
              "--expiredate", "1", "--comment", COMMENT, account])
        entry = pwd.getpwnam(account)
    if entry.pw_gecos != COMMENT:
        raise AccountError(f"the Unix account {account} exists and is not a labkit learner's; choose another "
                           "LABKIT_WORKSHOP_ACCOUNT_PREFIX or remove that account.")
    Path(entry.pw_dir).chmod(0o700)  # useradd's HOME_MODE varies by distribution: the learner's alone
    return entry


def learner_accounts(prefix: str) -> list[str]:
    """Every account labkit made with ``prefix``."""
    return sorted(entry.pw_name for entry in pwd.getpwall()
                  if entry.pw_name.startswith(prefix) and entry.pw_gecos == COMMENT)


def remove_accounts(prefix: str) -> list[str]:
    """Remove every account labkit made with ``prefix``, with its home and workspace; the names removed."""
    removed = []
    for account in learner_accounts(prefix):
        remove_account(account)
        removed.append(account)
    return removed


def remove_account(account: str) -> bool:
    """Remove ``account`` with its home if labkit made it (its processes killed first); whether it was removed.

    Why also one at a time: when the instructor deletes a learner from the hub,
    the next person approved under that name must not inherit their files.
    """
    if account not in learner_accounts(account):
        return False
    subprocess.run(["pkill", "-KILL", "-u", account], check=False, timeout=COMMAND_SECONDS)
    _run(["userdel", "--remove", account])
    return True


def _run(command: list[str]) -> None:
    try:
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=COMMAND_SECONDS)
    except FileNotFoundError:
        raise AccountError(f"{command[0]} is not installed: a room needs the shadow utilities (Debian: passwd).") from None
    except subprocess.CalledProcessError as exc:
        raise AccountError(f"{' '.join(command)} failed: {(exc.stderr or exc.stdout).strip()}") from None
