"""The board page's words in the room's language (``LABKIT_LANG``, which the hub sets to ``LABKIT_WORKSHOP_LANGUAGE``).

Why a module: Babel extracts labkit's messages from Python only, so the template and the page's script read their
words here: the template through :func:`page_words`, the script from the same words the page carries as JSON in a
``data-`` attribute (escaped by the template, read with ``JSON.parse``, written with ``textContent``). Only what is
shown translates: the events, their statuses and mistake ids stay the English data they are.
"""
from __future__ import annotations

from labkit.i18n.messages import _, language, ngettext
from labkit.progress.summary import SOLVED


def page_words() -> dict[str, str]:
    """Every fixed text of the page and its script, by key; ``{name}`` fields are filled where shown."""
    return {
        "lang": language(),
        "title": _("Room board"),
        "logged_in": _("Logged in as {viewer}."),
        "download": _("Download:"),
        "grid_csv": _("the grid (CSV)"),
        "mistakes_csv": _("the mistakes (CSV)"),
        "about": _("What this board holds: each time a learner runs a checker or the preflight of notebook 00, or asks "
                   "for a hint, their kernel sends one event with their own hub token: the exercise, the verdict, a "
                   "short id of the mistake and the time; never their code or its outputs. Only the room's instructors "
                   "see this page; each learner sees only their own events ({command}). The events stay in the hub's "
                   "state folder."),
        "shown_as_of": _("Shown as of {time}; refreshed every few seconds."),
        "grid_caption": _("Each learner: the preflight, each exercise of the track, the last activity, and whether they "
                          "may be stuck (after {attempts} at one exercise, or {minutes} without an event while others "
                          "are working), with the reason."),
        "learner": _("Learner"),
        "preflight": _("Preflight"),
        "last_activity": _("Last activity"),
        "stuck_question": _("Stuck?"),
        "version": _("Labs version"),  # which push her workspace holds (labkit.workshop.board.versions)
        "server": _("server"),
        "open_server": _("open {name}'s server"),
        "no_event_yet": _("no event yet"),
        "stuck_because": _("stuck: {reasons}"),
        "not_stuck": _("no"),
        "exercises_caption": _("Each exercise across the room: how many learners solved it, how many hints they used, "
                               "and its most frequent mistakes (how many learners made each)."),
        "exercise": _("Exercise"),
        "solved_head": _("Solved"),
        "hints_used": _("Hints used"),
        "most_frequent": _("Most frequent mistakes"),
        "none_yet": _("none yet"),
        "solved_cell": "✓ " + _(SOLVED),  # how a solved cell starts (labkit.progress.summary.Cell.text)
        "logged_out": _("The board no longer knows you as an instructor: reload the page to log in again."),
        "not_updated": _("The board could not be updated (the service answered {status}); trying again."),
        "unreachable": _("The board could not be reached; trying again."),
    }


def attempts(count: int) -> str:
    return ngettext("{count} attempt", "{count} attempts", count).format(count=count)


def minutes(count: int) -> str:
    return ngettext("{count} minute", "{count} minutes", count).format(count=count)


def solved_of(solved: int, learners: int) -> str:
    """An exercise's "Solved" cell: how many of the room's learners solved it."""
    return _("{solved} of {learners}").format(solved=solved, learners=learners)


def mistake_line(words: str, mistake: str, learners: int) -> str:
    """One of an exercise's most frequent mistakes: what it means, its id, and how many learners made it."""
    return ngettext("{words} ({mistake}): {count} learner", "{words} ({mistake}): {count} learners", learners).format(
        words=words, mistake=mistake, count=learners)
