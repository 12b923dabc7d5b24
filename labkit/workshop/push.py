"""``python -m labkit workshop push``: a new version of the labs, mid-workshop, into every learner's workspace.

Why this way: a typo or a broken cell found at 10:40 must reach thirty learners without a restart and without
losing an edit. The push rebuilds the room's learner edition (as the hub does at start) and runs the same
workspace refresh the hub runs at each spawn, as each learner (:mod:`labkit.workshop.provision`), so the rules of
:mod:`labkit.learner.workspace` hold: a notebook she never changed is refreshed in place, one she edited is kept byte
for byte and the new version goes beside it (``NAME.labkit-new.ipynb``). The refresh then writes
``labkit-update-N.md`` in her workspace (never over a file already there) saying what changed for her: a new file is
the simplest notice a running server shows without a restart or an extension, since JupyterLab's file browser lists
it within seconds, beside the new versions it names, in her language.

Who may push: whoever may write the hub's state and run commands as each learner, i.e. the hub's account (root in a
room); a learner can do neither, and the board has no endpoint for it. The version each learner's workspace holds is
kept in the board's folder of the hub's state (``push.json``: the room's version, and each learner's), written by
the push and by each spawn, read by the board's version column.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pwd
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.files import write_text
from labkit.i18n.messages import N_, translation
from labkit.learner.workspace import WorkspaceResult, prepare_workspace
from labkit.workshop.board.versions import RECORD, read_record
from labkit.workshop.handout import learner_workspaces
from labkit.workshop.install import learner_environment
from labkit.workshop.settings import HubSettings

NOTICE = "labkit-update-{version}.md"
NOTE_LIMIT = 500  # characters of the instructor's note a notice carries
SECONDS = 120  # one learner's refresh takes seconds; one still running after this is stopped


def record_path(settings: HubSettings) -> Path:
    return settings.board_state / RECORD


@contextlib.contextmanager
def updating(path: Path) -> Iterator[dict[str, Any]]:
    """The record, locked against another push or a spawn, written back whole when the block ends."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = read_record(path)
        yield record
        write_text(path, json.dumps(record, indent=1, sort_keys=True) + "\n")


def record_spawn(settings: HubSettings, username: str) -> None:
    """A spawn refreshed ``username``'s workspace from the room's current labs: she holds the current version."""
    with updating(record_path(settings)) as record:
        record["learners"][username] = record["version"]


@dataclass
class Pushed:
    """What a push did for one learner."""

    learner: str
    ok: bool
    text: str  # the refresh's own lines, or why it failed


def require_instructor(settings: HubSettings) -> None:
    """Refuse, before anything changes, whoever cannot write the hub's state and act as each learner (a learner)."""
    if settings.separated and os.geteuid() != 0:
        raise LabkitValueError("push runs each learner's refresh as her own account: run it as root, as the hub runs.")
    state = settings.state
    if not os.access(state, os.W_OK | os.X_OK):
        raise LabkitValueError(f"push writes the hub's state ({state}), which this account may not: run it as the "
                               "hub's account (root in a room), with the hub's LABKIT_WORKSHOP_* settings.")


def learners(settings: HubSettings) -> list[str]:
    """Every learner with a workspace the hub made."""
    names = []
    for workspace in learner_workspaces(settings):
        home = workspace.parent.name
        names.append(home[len(settings.account_prefix):] if settings.separated else home)
    return sorted(names)


def push(settings: HubSettings, note: str = "", names: list[str] | None = None) -> tuple[int, list[Pushed]]:
    """A new version of the labs into every learner's workspace (or ``names``'); the version and each one's outcome."""
    from labkit.workshop.provision import write_room_edition

    require_instructor(settings)
    note = " ".join(note.split())[:NOTE_LIMIT]
    if settings.separated:
        write_room_edition(settings)
    with updating(record_path(settings)) as record:
        version = record["version"] = int(record["version"]) + 1
        record["note"], record["at"] = note, time.time()
    results = [refresh(settings, name, version, note) for name in (names if names is not None else learners(settings))]
    with updating(record_path(settings)) as record:
        record["learners"].update({result.learner: version for result in results if result.ok})
    return version, results


def refresh(settings: HubSettings, username: str, version: int, note: str) -> Pushed:
    """``username``'s workspace brought to ``version`` by the hub's own workspace command, run as her."""
    from labkit.workshop.provision import SAFE_PATH, workspace_command

    workspace = settings.workspace(username)
    env = {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "HOME": str(workspace.parent)}
    run_as: dict[str, Any] = {}
    if settings.separated:
        try:
            account = pwd.getpwnam(settings.account(username))
        except KeyError:
            return Pushed(username, False, f"no account {settings.account(username)}: she has not logged in yet")
        run_as = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        env.update(HOME=account.pw_dir, **learner_environment(settings.install))
    command = [*workspace_command(settings, workspace), "--pushed", str(version), "--note", note]
    try:
        done = subprocess.run(command, capture_output=True, text=True, errors="replace", cwd="/", env=env,
                              timeout=SECONDS, **run_as)
    except subprocess.TimeoutExpired:
        return Pushed(username, False, f"the refresh ran over {SECONDS} s: stopped")
    text = "".join(char if char.isprintable() or char == "\n" else "?" for char in (done.stdout + done.stderr))
    return Pushed(username, done.returncode == 0, text.strip()[-2000:])


def notice_text(result: WorkspaceResult, version: int, note: str) -> str:
    """What ``labkit-update-N.md`` says to the learner, in her workspace's language."""
    say = translation(result.language).gettext
    title = say(N_("Version {version} of the labs")).format(version=version)
    lines = ["# " + title, ""]
    if note:
        lines += [note, ""]
    if result.beside:
        lines.append(say(N_("Changed where you had edited: your notebook is as you left it, the new version is beside "
                            "it (open both and copy what you need):")))
        lines += [f"- {name} → {new}" for name, new in result.beside] + [""]
    if result.refreshed:
        lines.append(say(N_("Updated in place (you had not changed them; reopen them to see the new version):")))
        lines += [f"- {name}" for name in result.refreshed] + [""]
    if result.added:
        lines.append(say(N_("New:")))
        lines += [f"- {name}" for name in result.added] + [""]
    if not (result.beside or result.refreshed or result.added):
        lines += [say(N_("Nothing changed in your workspace.")), ""]
    return "\n".join(lines)


def write_notice(folder: Path, result: WorkspaceResult, version: int, note: str) -> str | None:
    """``labkit-update-N.md`` in ``folder``, unless a file is already there (never replaced, no link followed)."""
    name = NOTICE.format(version=version)
    try:
        fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        return None
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(notice_text(result, version, note))
    return name


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--note", default="", help="one line for every learner: what changed and why (e.g. 'fixed the "
                        "typo in 2.3')")
    parser.add_argument("learners", nargs="*", help="only these learners (default: every one with a workspace)")


def run(args: argparse.Namespace) -> int:
    settings = HubSettings.from_environment()
    try:
        version, results = push(settings, args.note, args.learners or None)
    except KeyboardInterrupt:
        print("workshop push: interrupted; every file is whole. Run it again to reach the rest.", file=sys.stderr)
        return 130
    for result in results:
        print(f"workshop push: {result.learner}: {'version ' + str(version) if result.ok else 'failed'}: "
              f"{result.text.splitlines()[-1] if result.text else ''}", flush=True)
    if not results:
        print(f"workshop push: version {version}, but no learner has a workspace yet: each gets it at log-in")
    return 0 if all(result.ok for result in results) else 1


def refresh_here(args: argparse.Namespace) -> int:
    """``learner_workspace --pushed N``, as the learner: the refresh of ``labkit workspace``, then the notice."""
    try:
        result = prepare_workspace(args.folder, args.notebooks, args.track, edition=args.edition, room=args.room,
                                   language=args.lang)
        notice = write_notice(result.folder, result, args.pushed, args.note)
    except LabkitError as exc:
        print(f"workspace: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"workspace: cannot use {exc.filename or args.folder}: {exc.strerror or exc}.", file=sys.stderr)
        return 2
    for line in result.lines():
        print(f"workspace: {line}")
    print(f"workspace: {notice or NOTICE.format(version=args.pushed) + ' was already there: kept'}")
    return 0
