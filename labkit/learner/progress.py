"""``python -m labkit progress``: your own table of the labs' exercises, solved or not, and what to do next.

Why a command and not only a notebook cell: a learner picking up the next day, in a terminal, wants to
know where they stopped. It shows :func:`labkit.progress.table.my_progress`: your journal, or on a
workshop hub the events the room's board holds for you. Its first line names the journal it read, and
why that one (:func:`labkit.progress.journal.locate`): typed in another folder, it would read another.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from labkit.i18n.messages import _
from labkit.progress import journal
from labkit.progress.table import my_progress


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--file", type=Path, default=None,
                        help=_("the progress file to read (default: the journal of the workspace you are in, "
                               "or of the workspace/ that labkit lab made here)"))
    parser.add_argument("--local", action="store_true", help=_("on a hub: show your own file, do not ask the board"))


def journal_line(file: Path | None = None) -> str:
    """Which journal the table reads, and why that one ("" when recording is off: the table says so)."""
    if file is not None:
        return _("Journal: {path} (the file --file names).").format(path=file)
    place = journal.locate()
    why = {
        "setting": _("set by {variable}").format(variable=journal.ENVIRONMENT),
        "workspace": _("the journal of your workspace {workspace}").format(workspace=place.workspace),
        "user data": _("outside any workspace: labkit's folder of your user data"),
        "old user data": _("outside any workspace: the folder an older labkit used"),
    }.get(place.origin)
    return _("Journal: {path} ({why}).").format(path=place.path, why=why) if why else ""


def run(args: argparse.Namespace) -> int:
    line = journal_line(args.file)
    if line:
        print(line)
    print(my_progress(args.file, args.local).to_text())
    return 0
