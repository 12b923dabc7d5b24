"""hint("1.2") gives growing help and never the solution; the learner's table says where they stand."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import labkit
from labkit.core.errors import LabkitValueError
from labkit.labs import EXERCISES
from labkit.progress import journal, record
from labkit.progress.events import Event
from labkit.progress.hints import HINTS, hint
from tests.mistakes import solution_lines

MEASURED = re.compile(r"\d+(\.\d+)? ?(ms|µs|us|s|%|x)\b")


@pytest.fixture
def journal_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / ".labkit" / "progress.jsonl"
    monkeypatch.setenv(journal.ENVIRONMENT, str(path))
    monkeypatch.setenv("JUPYTERHUB_USER", "ada")
    monkeypatch.delenv("LABKIT_BOARD_URL", raising=False)
    monkeypatch.setattr(record, "_warned", False)
    monkeypatch.setattr("labkit.progress.hints._shown", {})
    return path


@pytest.mark.parametrize("exercise", EXERCISES)
def test_every_exercise_has_three_hints_and_none_gives_the_solution_away(exercise: str):
    hints = HINTS[exercise]
    assert len(hints) == 3 and all(text.strip() for text in hints)
    assert len(set(hints)) == 3
    for text in hints:
        assert [line for line in solution_lines(exercise) if line.lower() in text.lower()] == [], text
        assert not MEASURED.search(text), f"a hint states a measured figure: {text}"


def test_each_call_gives_the_next_hint_and_a_restart_keeps_the_level(journal_file: Path, monkeypatch: pytest.MonkeyPatch):
    assert [hint("1.2").level for _ in range(4)] == [1, 2, 3, 3]
    assert "last hint" in str(hint("1.2")) and "hint(\"1.2\") again" in str(hint("1.2", level=1))
    monkeypatch.setattr("labkit.progress.hints._shown", {})  # a new kernel
    assert hint("1.2").level == 3
    events, _ = journal.read_events(journal_file)
    assert [e.hint_level for e in events if e.kind == "hint"] == [1, 2, 3, 3, 3, 1, 3]
    assert labkit.hint is hint


def test_each_hint_says_what_it_is_and_what_the_next_one_gives_never_a_count(journal_file: Path):
    first, second, third = (str(hint("1.2")) for _ in range(3))
    assert first.startswith("Hint for exercise 1.2: a nudge") and "the next hint gives where to look" in first
    assert second.startswith("Hint for exercise 1.2: where to look") and "the next hint gives the approach" in second
    assert third.startswith("Hint for exercise 1.2: the approach") and 'labkit.solution("1.2")' in third
    assert not any(re.search(r"\b\d of \d\b", text) for text in (first, second, third))


def test_a_wrong_exercise_or_level_is_a_clear_error(journal_file: Path):
    with pytest.raises(LabkitValueError, match="there is no exercise '9.9'"):
        hint("9.9")
    with pytest.raises(LabkitValueError, match="level from 1 to 3"):
        hint("1.2", level=4)
    assert not journal_file.exists()


def test_the_hint_shows_escaped_html():
    from labkit.progress.hints import Hint

    assert "&lt;b&gt;" in Hint("1.1", 1, "<b>")._repr_html_()


def test_the_table_and_the_command_say_where_the_learner_stands(journal_file: Path):
    for event in (Event("ada", "preflight", "preflight", "ready"), Event("ada", "check", "1.1", "solved"),
                  Event("ada", "check", "1.2", "not solved", "1.2/other"),
                  Event("ada", "check", "1.2", "not solved", "1.2/other")):
        journal.append(event, journal_file)
    table = labkit.my_progress()
    assert table.solved == 1
    assert table.table.column("state")[:3] == ["solved", "attempted", "not started"]
    assert table.table.column("attempts")[:2] == ["0", "2"]
    assert table.next_step().startswith("Next: exercise 1.2: last try: a wrong answer the checker does not name")
    shown = subprocess.run([sys.executable, "-m", "labkit", "progress", "--file", str(journal_file)],
                           capture_output=True, text=True, check=True, env={"JUPYTERHUB_USER": "ada", "PATH": "/usr/bin"})
    assert "1 of 11 solved." in shown.stdout and "Preflight: ready." in shown.stdout


def test_with_recording_off_the_table_says_so(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(journal.ENVIRONMENT, "off")
    monkeypatch.setenv("JUPYTERHUB_USER", "ada")
    shown = labkit.my_progress().to_text()
    assert "Recording is off" in shown
    assert shown.startswith("Progress (nothing recorded)") and "ada" not in shown  # the docs' stored run names nobody
