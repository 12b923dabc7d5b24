"""Write INSTRUCTORS.md's "the checker says" tables from the mistake catalogues.

``python -m tests.mistakes.instructors`` rewrites each table between its markers
(``<!-- mistakes 1.2 -->`` ... ``<!-- /mistakes 1.2 -->``) with what the checkers print now;
``--check`` exits 1 when the file is out of date (``test_instructors.py`` runs the same
comparison). Line numbers of the learner's code become ``N``, measured figures ``…``, and the
closing "Your run_node starts at line N of its cell." and "Stuck? labkit.hint(...)" are left out, as the guide says.

Some rows quote torch's own words, which change between releases, so the guide records the torch it
was written with (``<!-- mistakes written with torch 2.14 -->``); the test compares on that torch or a
newer one (where a changed message means: write the tables again) and skips on the older floor.

Its checkers record nothing (``LABKIT_PROGRESS=off``, as under pytest): outside a workspace they would append every
entry's verdict to the author's own journal, in the platform's user data folder.
"""
from __future__ import annotations

import os
import re
import sys

import torch

from labkit.core.checks import CheckResult
from labkit.progress import journal
from tests.mistakes import ROOT, Mistake
from tests.mistakes.catalogues import EXERCISES, all_mistakes

GUIDE = ROOT / "INSTRUCTORS.md"
WRITTEN_WITH = re.compile(r"<!-- mistakes written with torch (\d+\.\d+) -->")
_WHERE_IT_STARTS = re.compile(r" Your [\w.]+ starts at line \d+ of (?:its cell|[\w.-]+)\.(?=\s|$)")
_HINT_POINTER = re.compile(r' Stuck\? labkit\.hint\("[\d.]+"\) gives the next hint\.$')  # the same on every row


def shown(mistake: Mistake, result: CheckResult) -> str:
    """The checker's verdict ``result`` on ``mistake`` as the guide quotes it."""
    text = str(result)
    text = _HINT_POINTER.sub("", _WHERE_IT_STARTS.sub("", text))
    for pattern in mistake.measured:
        text = re.sub(pattern, "…", text)
    text = re.sub(r"\bline \d+ of\b", "line N of", text)
    return " ".join(text.split()).replace("|", "\\|")


def row(mistake: Mistake) -> str:
    result = mistake.answer()
    board = f"`{result.mistake}`" if result.mistake else ""
    return f"| {mistake.what} | {shown(mistake, result)} | {board} |"


def table(exercise: str, mistakes: list[Mistake]) -> str:
    """The exercise's table: each mistake, what the checker says, and the id the room's board counts it under."""
    rows = [row(mistake) for mistake in mistakes if mistake.exercise == exercise]
    return "\n".join(["| mistake | the checker says | on the board |", "|---|---|---|", *rows])


def torch_release() -> str:
    """This torch as major.minor, e.g. '2.14'."""
    return ".".join(torch.__version__.split("+")[0].split(".")[:2])


def written_with(guide: str) -> str:
    """The torch release the guide's tables were written with."""
    match = WRITTEN_WITH.search(guide)
    if match is None:
        raise SystemExit("INSTRUCTORS.md has no <!-- mistakes written with torch X.Y --> line above its tables.")
    return match[1]


def render(guide: str, mistakes: list[Mistake]) -> str:
    """``guide`` with every marked table replaced by the catalogue's, and this torch recorded."""
    guide = WRITTEN_WITH.sub(f"<!-- mistakes written with torch {torch_release()} -->", guide)
    for exercise in EXERCISES:
        start, end = f"<!-- mistakes {exercise} -->", f"<!-- /mistakes {exercise} -->"
        pattern = re.compile(re.escape(start) + r"\n.*?" + re.escape(end), re.DOTALL)
        if not pattern.search(guide):
            raise SystemExit(f"INSTRUCTORS.md has no {start} ... {end} around exercise {exercise}'s table.")
        replacement = f"{start}\n{table(exercise, mistakes)}\n{end}"
        guide = pattern.sub(lambda _, text=replacement: text, guide)
    return guide


def main(argv: list[str]) -> int:
    os.environ[journal.ENVIRONMENT] = "off"  # the catalogue's wrong answers are nobody's progress, the author's least
    current = GUIDE.read_text(encoding="utf-8")
    updated = render(current, all_mistakes())
    if "--check" in argv:
        if updated != current:
            print("INSTRUCTORS.md quotes messages the checkers no longer print: run python -m tests.mistakes.instructors")
            return 1
        return 0
    GUIDE.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
