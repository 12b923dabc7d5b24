"""The load test's report and inputs, without a hub (the hub itself runs in test_room.py and `make workshop-loadtest`)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import psutil

from labkit.workshop.load import (
    TOO_BUSY_STATUS,
    LearnerFigures,
    LoadReport,
    NotebookFigures,
    cpu_seconds,
    parse_verdicts,
    peak_rss_bytes,
    rss_bytes,
    solved_core_track,
)

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _learner(name: str, runs: list[tuple[str, float, float, list[str]]], failure: str = "") -> LearnerFigures:
    notebooks = [NotebookFigures(notebook, 1.0, cpu, rss, 3, errors) for notebook, cpu, rss, errors in runs]
    return LearnerFigures(name, server_start_s=2.0, first_cell_s=5.0, notebooks=notebooks, failure=failure)


def test_a_learner_peak_is_the_largest_kernel_and_cpu_the_sum_over_notebooks():
    learner = _learner("ada", [("00_a.ipynb", 1.5, 300.0, []), ("01_b.ipynb", 2.0, 700.0, []), ("02_c.ipynb", 0.5, 200.0, [])])
    assert learner.kernel_peak_rss_mib == 700.0
    assert learner.kernel_cpu_s == 4.0
    assert learner.failures == []


def test_every_failed_cell_and_stopped_learner_is_named_once():
    report = LoadReport([
        _learner("ada", [("00_a.ipynb", 1.0, 1.0, ["ValueError: no"]), ("01_b.ipynb", 1.0, 1.0, ["KeyError: 'x'"])]),
        _learner("grace", [], failure="HubError: not ready"),
    ], leftovers="node configurable-http-proxy")
    assert report.failures == ["ada 00_a.ipynb: ValueError: no", "ada 01_b.ipynb: KeyError: 'x'", "grace: HubError: not ready",
                               "after the hub stopped: node configurable-http-proxy"]
    assert "4 failures" in report.to_text()
    assert "not stopped cleanly" in report.to_text()


def test_the_table_has_one_cpu_column_per_notebook_in_run_order_and_a_gap_where_one_did_not_run():
    report = LoadReport([_learner("ada", [("00_a.ipynb", 1.0, 1.0, []), ("01_b.ipynb", 2.0, 1.0, [])]),
                         _learner("grace", [("00_a.ipynb", 3.0, 1.0, [])], failure="timeout")])
    table = report.learner_table()
    assert [h for h in table.headers if h.startswith("CPU ")] == ["CPU 00 (s)", "CPU 01 (s)"]
    assert table.column("CPU 01 (s)") == [2.0, None]
    assert table.column("kernel CPU (s)") == [3.0, 3.0]


def test_the_json_keeps_every_figure_and_the_derived_ones():
    report = LoadReport([_learner("ada", [("00_a.ipynb", 1.5, 300.0, [])])], wall_s=12.0, hub_cpu_s=0.5)
    data = json.loads(report.to_json())
    assert data["wall_s"] == 12.0 and data["hub_cpu_s"] == 0.5 and data["failures"] == []
    assert data["learners"][0]["kernel_peak_rss_mib"] == 300.0
    assert data["learners"][0]["notebooks"][0]["kernel_cpu_s"] == 1.5


def test_process_figures_of_this_process():
    me = psutil.Process(os.getpid())
    rss = rss_bytes(me, tree=False)
    assert rss > 0
    assert rss_bytes(me, tree=True) >= rss
    assert peak_rss_bytes(me) >= rss
    assert cpu_seconds(me, tree=True) >= cpu_seconds(me, tree=False) > 0


def test_the_learners_run_solved_notebooks_without_outputs():
    solved, _ = solved_core_track(NOTEBOOKS)
    assert list(solved)[0] == "00_start_here.ipynb"
    code = [cell for notebook in solved.values() for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert not any('NotImplementedError("Exercise' in "".join(cell["source"]) for cell in code), "a stub, not a solution"
    assert any("solution" in cell["metadata"].get("tags", []) for cell in code)
    assert all(cell["outputs"] == [] and cell["execution_count"] is None for cell in code)


def test_the_machine_peak_is_reported_in_total_and_per_learner():
    report = LoadReport([_learner("ada", []), _learner("grace", [])], machine_peak_mib=3000.0)
    assert "peak memory in use 3000 MiB above before the hub (1500 MiB per learner)" in report.hub_table().title
    assert json.loads(report.to_json())["machine_peak_mib"] == 3000.0


# --- verdicts under load ---------------------------------------------------------------------------------------------


def test_every_checker_verdict_line_is_read_with_its_status():
    text = ("✅ Exercise 1.2: solved. Your recorder counts every FLOP.\n"
            "some other output\n"
            "⏳ Exercise 2.1: not yet solved. Replace the stub ...\n"
            "❌ Exercise 3.4: not solved. Your code raised TypeError: ...\n"
            "⚠ Exercise 2.3: checker error. This is a bug in labkit's checker ...\n"
            "🔁 Exercise 4.1: not judged. The machine is too busy to judge the speed-up; run the check again. ...\n"
            "the words Exercise 9.9: solved. inside a sentence are no verdict\n")
    assert parse_verdicts(text) == {"1.2": "solved", "2.1": "not yet solved", "3.4": "not solved",
                                    "2.3": "checker error", "4.1": TOO_BUSY_STATUS}


def test_not_judged_is_the_checkers_own_status():
    from labkit.core.checks import Status

    assert TOO_BUSY_STATUS == Status.NOT_JUDGED.value


def test_the_stored_notebooks_say_every_checker_of_the_solved_core_track_is_solved():
    _, expected = solved_core_track(NOTEBOOKS)
    exercises = {exercise: status for verdicts in expected.values() for exercise, status in verdicts.items()}
    assert {"1.1", "1.2", "2.1", "3.1", "4.1"} <= set(exercises)
    assert set(exercises.values()) == {"solved"}
    assert expected["00_start_here.ipynb"] == {}


def _ran(verdicts: dict[str, str], errors: list[str] | None = None) -> LearnerFigures:
    run = NotebookFigures("04_capstone.ipynb", 1.0, 1.0, 1.0, 3, errors or [], verdicts)
    return LearnerFigures("ada", notebooks=[run])


EXPECTED = {"04_capstone.ipynb": {"4.1": "solved"}}


def test_a_flipped_verdict_is_a_failure_and_lands_in_the_json():
    report = LoadReport([_ran({"4.1": "solved"}), _ran({"4.1": "not solved"})], expected_verdicts=EXPECTED)
    assert report.flips == ["ada 04_capstone.ipynb: exercise 4.1 said 'not solved', expected 'solved'"]
    assert report.flips[0] in report.failures
    assert "checker verdicts: 1 of 2 not as stored" in report.to_text()
    data = json.loads(report.to_json())
    assert data["flips"] == report.flips and data["learners"][1]["notebooks"][0]["verdicts"] == {"4.1": "not solved"}


def test_a_checker_that_printed_no_verdict_is_a_failure_unless_its_cell_already_failed():
    assert LoadReport([_ran({})], expected_verdicts=EXPECTED).failures == [
        "ada 04_capstone.ipynb: exercise 4.1 printed no verdict in en, expected 'solved'"]
    report = LoadReport([_ran({}, ["NameError: make_faster"])], expected_verdicts=EXPECTED)
    assert report.failures == ["ada 04_capstone.ipynb: NameError: make_faster"], "one failure per cause"


def test_too_busy_to_judge_is_reported_apart_and_is_no_failure():
    report = LoadReport([_ran({"4.1": TOO_BUSY_STATUS})], expected_verdicts=EXPECTED)
    assert report.failures == [] and report.too_busy == ["ada 04_capstone.ipynb: exercise 4.1"]
    assert ("checker verdicts: all 1 as stored; 1 found the machine too busy to judge (ada 04_capstone.ipynb: "
            "exercise 4.1)") in report.to_text()
    assert json.loads(report.to_json())["too_busy"] == report.too_busy


def test_a_cells_output_that_comes_after_its_reply_is_kept():
    """The shell's execute_reply can overtake the cell's last iopub output (a checker's verdict) on the one socket."""
    from labkit.workshop import load

    class Socket:
        def __init__(self) -> None:
            self.frames: list[str] = []

        def send(self, text: str) -> None:
            msg_id = json.loads(text)["header"]["msg_id"]

            def message(kind: str, content: dict[str, object]) -> str:
                return json.dumps({"parent_header": {"msg_id": msg_id}, "msg_type": kind, "content": content})

            self.frames = [message("execute_reply", {"status": "ok"}),
                           message("execute_result", {"data": {"text/plain": "✅ Exercise 2.2: solved. Well done."}}),
                           message("status", {"execution_state": "idle"})]

        def recv(self) -> str:
            return self.frames.pop(0)

    reply = load._execute(Socket(), "check()")  # type: ignore[arg-type]
    assert load.parse_verdicts(reply.results) == {"2.2": "solved"}
