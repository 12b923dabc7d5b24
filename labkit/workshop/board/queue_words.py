"""The help queue's words on the board page, in the room's language (the queue's script reads them from api/queue).

Why apart from :mod:`labkit.workshop.board.words`: the queue is its own part of the page, with its own script
(``static/queue.js``), and its words travel with its data; the data itself (exercise ids, mistake ids) stays English.
"""
from __future__ import annotations

from labkit.i18n.messages import _


def queue_words() -> dict[str, str]:
    """Every fixed text of the queue's table and buttons, by key; ``{name}`` fields are filled where shown."""
    return {
        "title": _("Help queue"),
        "caption": _("Learners who asked for help (labkit.help), first asked first; a look is her consent to open her "
                     "server until the request ends."),
        "learner": _("Learner"),
        "exercise": _("Exercise"),
        "mistake": _("Latest mistake"),
        "hint_level": _("Hint level"),
        "waiting": _("Waiting"),
        "look": _("Look"),
        "claimed_by": _("Claimed by"),
        "actions": _("Actions"),
        "claim": _("Claim"),
        "close": _("Close"),
        "open_look": _("open {name}'s server"),
        "no_look": _("no"),
        "nobody": _("nobody yet"),
        "empty": _("Nobody is waiting."),
        "minutes_seconds": _("{minutes} min {seconds} s"),
        "median_wait": _("Median wait from asking to a claim today: {wait}."),
    }
