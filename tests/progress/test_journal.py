"""The learner's journal: where it is, what a run_check adds to it, and what a damaged line does."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from labkit.core.checks import Status, expect, run_check
from labkit.progress import journal, record
from labkit.progress.events import Event
from labkit.progress.record import record_preflight


@pytest.fixture
def journal_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home" / ".labkit" / "progress.jsonl"
    monkeypatch.setenv(journal.ENVIRONMENT, str(path))
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setattr(record, "_warned", False)
    return path


def test_the_journal_is_in_the_workspace_above_the_notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(journal.ENVIRONMENT, raising=False)
    (tmp_path / journal.WORKSPACE_MARKER).write_text("{}")
    (tmp_path / "notes").mkdir()
    assert journal.journal_path(tmp_path / "notes") == tmp_path / ".labkit" / "progress.jsonl"
    monkeypatch.setenv(journal.ENVIRONMENT, "off")
    assert journal.journal_path(tmp_path) is None


def test_each_verdict_is_one_line_with_its_mistake_id(journal_file: Path):
    def wrong() -> str:
        expect(False, "two multiply-adds are two FLOPs", mistake="flops per mac")
        return ""

    result = run_check("1.2", wrong)
    assert result.status is Status.WRONG and result.mistake == "1.2/flops-per-mac"
    run_check("1.2", lambda: "well done")
    events, end = journal.read_events(journal_file)
    assert [(e.exercise, e.status, e.mistake) for e in events] == [("1.2", "not solved", "1.2/flops-per-mac"),
                                                                    ("1.2", "solved", "")]
    assert end == journal_file.stat().st_size
    assert "two multiply-adds" not in journal_file.read_text(), "the hint's text is not recorded"
    assert stat.S_IMODE(journal_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(journal_file.parent.stat().st_mode) == 0o700


def test_a_learners_exception_and_an_unnamed_mistake_get_ids_of_their_own(journal_file: Path):
    def raises() -> str:
        from labkit.core.checks import call_learner

        return call_learner(lambda: 1 / 0)

    assert run_check("3.1", raises).mistake == "3.1/raised-zerodivisionerror"
    assert run_check("3.1", lambda: expect(False, "no")).mistake == "3.1/other"  # type: ignore[arg-type,func-returns-value]


def test_the_preflight_is_an_event(journal_file: Path):
    record_preflight(["torch"])
    record_preflight([])
    events, _ = journal.read_events(journal_file)
    assert [(e.status, e.failed_probes) for e in events] == [("not ready", ("torch",)), ("ready", ())]


def test_a_damaged_or_unfinished_line_is_skipped_and_the_rest_read(journal_file: Path):
    journal.append(Event("ada", "check", "1.1", "solved"), journal_file)
    with open(journal_file, "a") as file:
        file.write('{"learner": "mallory", "status": "solved"}\n')
        file.write('{"exercise": "1.2", "cut sh')
    events, end = journal.read_events(journal_file)
    assert [e.exercise for e in events] == ["1.1"]
    assert end < journal_file.stat().st_size, "the unfinished line is left for the next read"


def test_a_link_in_place_of_the_journal_is_refused_and_the_verdict_still_comes(journal_file: Path, tmp_path: Path):
    journal_file.parent.mkdir(parents=True)
    target = tmp_path / "elsewhere.txt"
    target.write_text("mine\n")
    os.symlink(target, journal_file)
    with pytest.warns(UserWarning, match="could not record your progress"):
        result = run_check("1.1", lambda: "fine")
    assert result.solved and target.read_text() == "mine\n"


def test_a_check_not_judged_is_no_verdict_and_no_attempt(journal_file: Path):
    from labkit.core.checks import CheckNotJudged
    from labkit.progress.summary import dated, exercise_cell

    def busy() -> str:
        raise CheckNotJudged("The machine is too busy to judge the speed-up; run the check again.")

    result = run_check("4.1", busy)
    assert result.status is Status.NOT_JUDGED and result.mistake == "" and str(result).startswith("🔁")
    events, _ = journal.read_events(journal_file)
    assert exercise_cell("4.1", dated(events)).state == "not judged"
    run_check("4.1", lambda: expect(False, "slow", mistake="not-fast-enough"))  # type: ignore[arg-type,func-returns-value]
    run_check("4.1", busy)
    events, _ = journal.read_events(journal_file)
    cell = exercise_cell("4.1", dated(events))
    assert (cell.state, cell.attempts, cell.mistake) == ("attempted", 1, "4.1/not-fast-enough")
