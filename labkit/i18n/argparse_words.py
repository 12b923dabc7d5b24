"""argparse's own error messages in the learner's language, while labkit's command line parses.

Why: argparse looks its words up with :func:`gettext.gettext` in Python's default domain, where no catalogue of
labkit's languages is, so ``labkit lab --lnag zh`` would answer a zh learner "unrecognized arguments". Its messages
are marked here (the wording of CPython's argparse), so they sit in labkit's catalogues; while
:func:`learners_words` is active, argparse's lookups go to labkit's catalogue of the language spoken now. A
message a later Python words differently stays English: its lookup finds no entry.
"""
from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

from labkit.i18n.messages import N_, _, ngettext

#: argparse's messages a learner's mistake on the command line shows (the parser's own setup errors are the
#: authors' and stay English).
MESSAGES = (
    N_("%(prog)s: error: %(message)s\n"),
    N_("argument %(argument_name)s: %(message)s"),
    N_("unrecognized arguments: %s"),
    N_("the following arguments are required: %s"),
    N_("one of the arguments %s is required"),
    N_("not allowed with argument %s"),
    N_("ignored explicit argument %r"),
    N_("expected one argument"),
    N_("expected at most one argument"),
    N_("expected at least one argument"),
    N_("ambiguous option: %(option)s could match %(matches)s"),
    N_("invalid %(type)s value: %(value)r"),
    N_("invalid choice: %(value)r (choose from %(choices)s)"),
)


@contextmanager
def learners_words() -> Iterator[None]:
    """argparse speaks the learner's language inside the block (its module's ``_`` and ``ngettext`` are labkit's)."""
    saved = argparse._, argparse.ngettext  # type: ignore[attr-defined]
    argparse._, argparse.ngettext = _, ngettext  # type: ignore[attr-defined]
    try:
        yield
    finally:
        argparse._, argparse.ngettext = saved  # type: ignore[attr-defined]
