"""``python -m labkit workshop ACTION``: the instructor's commands for a room.

- ``install``: the learner venv under ``LABKIT_WORKSHOP_INSTALL`` (:mod:`labkit.workshop.install`);
- ``hand-out-solutions``: the solutions into every learner's workspace (:mod:`labkit.workshop.handout`);
- ``push``: a new version of the labs into every learner's workspace, mid-workshop, every edit kept
  (:mod:`labkit.workshop.push`);
- ``summary``: after the workshop, per exercise, how many solved it and how long help took
  (:mod:`labkit.workshop.board.summary`);
- ``remove-accounts``: after the workshop, every learner account labkit made, with its home
  (:mod:`labkit.workshop.accounts`).

Each reads the same ``LABKIT_WORKSHOP_*`` settings as the hub.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from labkit.core.errors import LabkitValueError
from labkit.i18n.messages import _
from labkit.workshop import handout, push
from labkit.workshop.accounts import learner_accounts, remove_accounts
from labkit.workshop.board.summary import read_day, summarize
from labkit.workshop.install import install
from labkit.workshop.settings import HubSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    handout.add_arguments(actions.add_parser(
        "hand-out-solutions", help="copy notebooks/solutions/ into solutions/ of each learner's workspace (nothing overwritten)"))
    installer = actions.add_parser("install", help="(root) the learner venv a room's servers run, readable by learners, "
                                   "writable by root only (LABKIT_WORKSHOP_INSTALL, default /opt/labkit)")
    installer.add_argument("--if-stale", action="store_true", help="only if labkit changed since the last install")
    push.add_arguments(actions.add_parser(
        "push", help="(the hub's account: root in a room) a new version of the labs into every learner's workspace, "
        "each edited notebook kept and the new version beside it, with labkit-update-N.md saying what changed"))
    summary = actions.add_parser("summary", help="after the workshop: per exercise, how many solved it, and the help "
                                 "queue's median wait to a claim and from the claim to the close (the board's files)")
    summary.add_argument("--board", type=Path, help="the board's folder (default: LABKIT_WORKSHOP_STATE's board/)")
    remover = actions.add_parser("remove-accounts", help="(root) remove every learner account labkit made, with its home")
    remover.add_argument("--yes", action="store_true", help="do not ask first")


def run(args: argparse.Namespace) -> int:
    if args.action == "hand-out-solutions":
        return handout.run(args)
    if args.action == "push":
        return push.run(args)
    settings = HubSettings.from_environment()
    if args.action == "summary":
        return summary(args.board or settings.board_state, settings.admin)
    if args.action == "install":
        print(f"workshop install: {install(settings.install, if_stale=args.if_stale)}")
        return 0
    accounts = learner_accounts(settings.account_prefix)
    if not accounts:
        print(f"workshop remove-accounts: no account labkit made with the prefix {settings.account_prefix!r}")
        return 0
    if not args.yes:
        answer = input(f"Remove {len(accounts)} accounts and their homes ({', '.join(accounts)})? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("workshop remove-accounts: nothing removed")
            return 1
    try:
        removed = remove_accounts(settings.account_prefix)
    except KeyboardInterrupt:
        print("workshop remove-accounts: interrupted; run it again to remove the rest", file=sys.stderr)
        return 130
    print(f"workshop remove-accounts: removed {len(removed)} accounts and their homes: {', '.join(removed)}")
    return 0


def summary(folder: Path, instructor: str) -> int:
    """Print the day's summary from the board's ``folder`` (``instructor``'s own events left out); 2 if none is there."""
    try:
        events, requests = read_day(folder)
    except LabkitValueError as exc:
        print(f"workshop summary: {exc}", file=sys.stderr)
        return 2
    print(_("The workshop's day, from the board at {folder}:").format(folder=folder))
    print(summarize(events, requests, instructors=[instructor]).to_text())
    return 0
