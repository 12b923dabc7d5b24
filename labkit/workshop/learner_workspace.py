"""``python -m labkit.workshop.learner_workspace FOLDER --language zh ...``: a learner's workspace in the room's language.

Why a command of the room's own: the hub makes each workspace as the learner (:mod:`labkit.workshop.provision`), and
``labkit workspace --lang`` refuses a workspace made in another language, while a room restarted in another language
must still start every learner's server: her workspace keeps the language it was made in, and this command says so
and succeeds. Everything else is ``labkit workspace``'s own (:func:`labkit.learner.workspace.run`).
"""
from __future__ import annotations

import argparse
import sys

from labkit.i18n.messages import LANGUAGES, workspace_language
from labkit.learner import workspace
from labkit.progress.journal import WORKSPACE_MARKER
from labkit.workshop import push


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.workshop.learner_workspace", description=__doc__.split("\n")[0])
    workspace.add_arguments(parser)
    parser.add_argument("--language", choices=LANGUAGES, required=True, help="the room's language (LABKIT_WORKSHOP_LANGUAGE)")
    parser.add_argument("--pushed", type=int, default=None, metavar="N",
                        help="a push (labkit.workshop.push): after the refresh, write labkit-update-N.md saying what changed")
    parser.add_argument("--note", default="", help="with --pushed: the instructor's note")
    args = parser.parse_args(argv)
    made = args.folder is not None and (args.folder / WORKSPACE_MARKER).is_file()
    held = workspace_language(args.folder) if made else None
    if held is not None and held != args.language:  # a workspace keeps its language: her work stays as it is
        print(f"workspace: {args.folder} holds the labs in {held}, the room speaks {args.language}: kept as it is")
        return 0
    args.lang = args.language
    if args.pushed is not None:
        return push.refresh_here(args)
    return workspace.run(args)


if __name__ == "__main__":
    sys.exit(main())
