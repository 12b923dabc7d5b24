"""What a stuck learner finds: the hint named in every "not solved", the reference solution after a try
(recorded as seen), and a progress table that counts the exercises of their own track."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

import labkit
from labkit.core.checks import Status
from labkit.core.errors import LabkitValueError
from labkit.labs import EXERCISES, NOTEBOOKS_DIR
from labkit.learner import workspace
from labkit.memory_format.checks import check_predict_strides
from labkit.progress import journal, record
from labkit.progress.hints import HINTS
from labkit.progress.table import my_progress

PROGRESS = Path(labkit.__file__).parent / "progress"


@pytest.fixture
def journal_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / ".labkit" / "progress.jsonl"
    monkeypatch.setenv(journal.ENVIRONMENT, str(path))
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.delenv("LABKIT_BOARD_URL", raising=False)
    monkeypatch.setattr(record, "_tried", set())
    monkeypatch.setattr("labkit.progress.hints._shown", {})
    return path


def test_every_not_solved_verdict_ends_with_how_to_ask_for_the_next_hint(journal_file: Path):
    result = check_predict_strides(lambda shape, memory_format: (1,) * len(shape))
    assert result.status is Status.WRONG
    assert result.message.endswith('Stuck? labkit.hint("2.1") gives the next hint.'), result.message


def test_hint_with_a_number_says_to_write_the_id_as_text(journal_file: Path):
    with pytest.raises(LabkitValueError, match=r'write the exercise id as text, in quotes: hint\("1.2"\)'):
        labkit.hint(1.2)  # type: ignore[arg-type]


def test_the_solution_is_refused_before_a_try_then_shown_and_recorded_as_seen(journal_file: Path):
    refused = labkit.solution("1.2")
    assert refused.refused.startswith("Try exercise 1.2 first") and not refused.code
    record.record_verdict("1.2", "not yet solved")  # the stub: no try yet
    assert labkit.solution("1.2").refused
    record.record_verdict("1.2", "not solved", "1.2/other")
    record._tried.clear()  # a new kernel: the try is read back from the journal
    shown = labkit.solution("1.2")
    reference = next((NOTEBOOKS_DIR / "solutions").glob("01_2_*.py"))
    assert shown.code == reference.read_text(encoding="utf-8") and not shown.refused
    assert "<pre>" in shown._repr_html_() and "class ShapeFlopRecorder" in str(shown)
    events, _ = journal.read_events(journal_file)
    assert [(e.kind, e.exercise, e.status) for e in events][-1] == ("solution", "1.2", "seen")
    table = my_progress(journal_file)
    assert table.table.column("hints")[EXERCISES.index("1.2")] == "solution seen"
    assert "solution seen" in table.cells[EXERCISES.index("1.2")].text()  # what the room's board shows


def test_on_a_hub_the_solution_comes_only_from_the_workspace_hand_out(
        journal_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "ada")
    monkeypatch.chdir(tmp_path)
    record.record_verdict("2.1", "not solved", "2.1/other")
    assert "not handed out yet" in labkit.solution("2.1").refused  # the checkout's notebooks/ is not read
    (tmp_path / ".labkit-manifest.json").write_text("{}")
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "02_1_predict_strides.py").write_text("handed out\n")
    assert labkit.solution("2.1").code == "handed out\n"


def test_the_core_tracks_table_counts_the_core_exercises_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(journal.ENVIRONMENT, "off")
    folder = tmp_path / "ws"
    result = workspace.prepare_workspace(folder, NOTEBOOKS_DIR, track="core")
    assert {"1.3", "2.3", "3.4"}.isdisjoint(result.exercises) and {"1.1", "2.1", "4.1"} <= set(result.exercises)
    assert json.loads((folder / ".labkit-manifest.json").read_text())["exercises"] == list(result.exercises)
    table = my_progress(folder / ".labkit" / "progress.jsonl")
    assert [cell.exercise for cell in table.cells] == list(result.exercises)
    assert f"0 of {len(result.exercises)} solved." in table.to_text()
    assert "1.3" not in table.table.column("exercise")


def test_a_workspace_from_before_the_exercises_were_listed_counts_every_exercise(tmp_path: Path):
    (tmp_path / ".labkit-manifest.json").write_text(json.dumps({"tool": "workspace", "files": {}, "track": "all"}))
    assert [cell.exercise for cell in my_progress(tmp_path / ".labkit" / "progress.jsonl").cells] == list(EXERCISES)


def test_the_recording_depends_on_nothing_it_records():
    """labkit.core.checks calls labkit.progress.record; nothing in labkit.progress imports the checkers back."""
    importers = []
    for path in PROGRESS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            importers += [path.name for name in names if name.startswith("labkit.core.checks")]
    assert importers == []


def _solution_identifiers(exercise: str) -> set[str]:
    """The APIs the reference solution of ``exercise`` uses: attributes (``torch.channels_last``, ``.eval()``) and
    imported names, four letters or more."""
    lab, number = exercise.split(".")
    tree = ast.parse(next((NOTEBOOKS_DIR / "solutions").glob(f"{int(lab):02d}_{number}_*.py")).read_text())
    names = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    return {name for name in names if len(name) >= 4}


@pytest.mark.parametrize("exercise", ["1.1", "2.3", "3.1", "3.2", "4.1"])
def test_the_third_hint_is_an_approach_that_names_none_of_the_solutions_apis(exercise: str):
    third = HINTS[exercise][2]
    assert sorted(name for name in _solution_identifiers(exercise) if re.search(rf"\b{re.escape(name)}\b", third)) == []


def test_the_last_hint_says_the_solution_is_a_step_of_its_own_after_a_try(journal_file: Path):
    shown = str(labkit.hint("3.2", level=3))
    assert 'once you have tried, labkit.solution("3.2") shows the reference solution' in shown.lower()
