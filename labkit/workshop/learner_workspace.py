"""``python -m labkit.workshop.learner_workspace FOLDER --language zh ...``: a learner's workspace in the room's language.

Why a command of the room's own: the hub makes each workspace as the learner (:mod:`labkit.workshop.provision`), and
``python -m labkit workspace`` has no language option, while :func:`labkit.learner.workspace.prepare_workspace` takes
one: the labs in that language, recorded in the workspace's manifest, which labkit's messages read after
``LABKIT_LANG``. A workspace keeps the language it was made in (a room restarted in another leaves it as it is, not
refused: the learner's server must start). Every other option is ``labkit workspace``'s own.
"""
from __future__ import annotations

import argparse
import sys

from labkit.core.errors import LabkitError
from labkit.i18n.messages import LANGUAGES, workspace_language
from labkit.learner.workspace import add_arguments, prepare_workspace
from labkit.progress.journal import WORKSPACE_MARKER


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.workshop.learner_workspace", description=__doc__.split("\n")[0])
    add_arguments(parser)
    parser.add_argument("--language", choices=LANGUAGES, required=True, help="the room's language (LABKIT_WORKSHOP_LANGUAGE)")
    args = parser.parse_args(argv)
    made = args.folder is not None and (args.folder / WORKSPACE_MARKER).is_file()
    held = workspace_language(args.folder) if made else None
    if held is not None and held != args.language:  # a workspace keeps its language: her work stays as it is
        print(f"workspace: {args.folder} holds the labs in {held}, the room speaks {args.language}: kept as it is")
        return 0
    try:
        result = prepare_workspace(args.folder, args.notebooks, args.track, edition=args.edition, room=args.room,
                                   language=args.language)
    except LabkitError as exc:
        print(f"workspace: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. a manifest labkit may not read: one line, never a traceback
        print(f"workspace: cannot use {exc.filename or args.folder}: {exc.strerror or exc}.", file=sys.stderr)
        return 2
    for line in result.lines():
        print(f"workspace: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
