"""``python -m labkit gpu-check``: the plan, the CLI, and every step's code run on the CPU (tiny sizes).

No GPU is at hand in CI, so these tests run each step's own code on the CPU, where it is the same code
with tiny models; the figures of a tiny run mean nothing and no speed is asserted. What is asserted: the
plan fits the budget and says what it dropped, each step produces its rows and verdicts, each check can
fail (a wrong value is caught), every backend setting is put back, and the CLI's exit codes.
"""
import json
import os
import subprocess
import sys

import nbformat
import pytest
import torch

from labkit.__main__ import main
from labkit.core.timing import RunStats, SideBySide
from labkit.labs import EXERCISES, NOTEBOOKS_DIR
from labkit.measurements.gpu_check import cli, formats, forward_ad, memory, notebooks, profiler
from labkit.measurements.gpu_check.plan import (
    DISAGREES,
    DROPPED,
    FAILED,
    FULL_BUDGET_S,
    NOT_AVAILABLE,
    OK,
    Budget,
    Row,
    Step,
    StepResult,
    plan,
    planned_cost,
)
from labkit.measurements.gpu_check.settings import kept_backend_settings, snapshot, tf32

CPU = torch.device("cpu")
TINY = Budget("tiny", 1.0)


# ------------------------------------------------------------------------------------------------- the plan


def _step(name, costs, priority=5):
    return Step(name, name, costs, lambda device, budget: StepResult(OK), priority)


def test_the_whole_check_fits_in_eight_minutes_on_a_gpu():
    planned = plan(cli.STEPS, FULL_BUDGET_S)
    assert all(p.size == "full" for p in planned), [(p.step.name, p.why) for p in planned]
    assert planned_cost(planned) <= FULL_BUDGET_S == 480


def test_a_short_budget_shrinks_then_drops_by_priority_and_says_why():
    steps = [_step("a", {"full": 50, "small": 20}, 1), _step("b", {"full": 40}, 2), _step("c", {"full": 30, "small": 10}, 0)]
    planned = {p.step.name: p for p in plan(steps, 60)}
    assert planned["c"].size == "full"  # priority 0 first: 30 s
    assert planned["a"].size == "small" and "full needs 50 s, 30 s were left" in planned["a"].why
    assert planned["b"].size is None and "dropped: needs 40 s, 10 s were left" in planned["b"].why
    assert [p.step.name for p in plan(steps, 60)] == ["a", "b", "c"]  # the run keeps the steps' own order
    assert planned_cost(plan(steps, 60)) <= 60


def test_a_budget_must_be_positive():
    with pytest.raises(Exception, match="positive"):
        plan(cli.STEPS, 0)


def test_every_lab_notebook_and_every_path_has_a_step():
    names = cli.STEP_NAMES
    assert {"forward-ad", "profiler", "memory", "channels-last"} <= set(names)
    assert [n for n in names if n.startswith("notebook")] == ["notebook 01", "notebook 02", "notebook 03", "notebook 04"]


# ------------------------------------------------------------------------------------------------- settings


def test_tf32_and_cudnn_benchmark_are_put_back_even_after_an_error():
    before = snapshot()
    with pytest.raises(ValueError), tf32(True):
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.benchmark
        raise ValueError
    assert snapshot() == before
    with kept_backend_settings():
        torch.backends.cudnn.allow_tf32 = not torch.backends.cudnn.allow_tf32
        torch.set_float32_matmul_precision("medium")
    assert snapshot() == before


def test_a_step_that_leaves_a_setting_changed_fails(monkeypatch):
    def careless(device, budget):
        torch.backends.cudnn.benchmark = True
        return StepResult(OK)

    before = torch.backends.cudnn.benchmark
    try:
        planned = plan([Step("careless", "careless", {"tiny": 0}, careless)], 10, tiny=True)[0]
        result, _ = cli.run_step(planned, CPU)
    finally:
        torch.backends.cudnn.benchmark = before
    assert result.status == FAILED and "torch.backends.cudnn.benchmark" in result.rows[-1].value


# ------------------------------------------------------------------------------------------------- the steps on CPU


def test_forward_ad_step_agrees_on_cpu_and_a_wrong_value_disagrees():
    result = forward_ad.check_forward_ad(CPU, TINY)
    assert result.status == OK, result.rows
    assert [row.verdict for row in result.rows] == ["agree"] * 5
    assert any("module_jvp (method swap)" in row.what for row in result.rows)
    wrong = forward_ad._row("wrong", torch.ones(3), torch.ones(3) * 1.01, CPU)
    assert wrong.verdict == "DISAGREE"


def test_profiler_step_on_cpu_reports_both_modes_and_a_crosscheck_verdict():
    result = profiler.check_profiler(CPU, TINY)
    assert result.status == OK, result.rows
    modes = [row.data.get("mode") for row in result.rows]
    assert modes[:2] == ["fast", "modules"]
    assert all(row.data["ratio"] > 0 and row.verdict == "not judged on a CPU" for row in result.rows[:2])
    crosscheck = result.rows[2]
    assert crosscheck.verdict == "ok" and "agree" in crosscheck.data["verdict"]


def test_sync_verdict_catches_a_clock_that_did_not_wait():
    cuda = torch.device("cuda")  # a device object only: nothing runs on it
    assert profiler.sync_verdict(1.3, 2.0, cuda) == "ok"
    assert "did not wait for the device" in profiler.sync_verdict(0.3, 2.0, cuda)
    assert "the stamps did not wait" in profiler.sync_verdict(1.1, 60.0, cuda)
    assert profiler.sync_verdict(0.3, 60.0, CPU) == "not judged on a CPU"


def test_bert_builds_for_the_profiler_step():
    pytest.importorskip("transformers")
    from labkit.measurements.bench import hf_skip_reason

    if hf_skip_reason():
        pytest.skip(hf_skip_reason())
    model, args, kwargs = profiler.bert_call(CPU, TINY)
    with torch.no_grad():
        model(*args, **kwargs)
    assert kwargs["input_ids"].shape[0] == 1


def test_channels_last_step_on_cpu_gives_every_row_a_verdict_and_restores_settings():
    before = snapshot()
    result = formats.check_channels_last(CPU, TINY)
    assert snapshot() == before
    assert result.status == OK, result.rows
    whats = [row.what for row in result.rows]
    assert len(whats) == 2 * len(formats.PRECISIONS) + 2
    for precision in formats.PRECISIONS:
        assert any(f"inference, {precision.name}," in w for w in whats)
        assert any(f"training step, {precision.name}," in w for w in whats)
    assert sum("convert_conv2d_weight_memory_format" in w for w in whats) == 2
    verdicts = {"faster", "slower", "too close to call", "too few samples to call"}
    assert all(row.verdict.split(" (CPU rehearsal")[0] in verdicts for row in result.rows)
    assert all(row.data["same_output"] for row in result.rows)


def test_a_conversion_that_changes_the_result_is_caught():
    def wrong(model):  # a "conversion" that changes the weights, not only their layout
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(1.0)
        return model

    _, model = formats.conv_heavy(TINY)
    row = formats.measure_row("broken", model, (2, 3, 8, 8), CPU, formats.PRECISIONS[0], formats._inference, wrong, TINY)
    assert row.verdict.startswith("OUTPUTS DIFFER") and not row.data["same_output"]


def _stats(median, iqr, count=5):
    return RunStats(median, median, median - iqr, median + iqr, iqr, count)


@pytest.mark.parametrize(("first", "last", "verdict"), [
    (_stats(2.0, 0.1), _stats(1.0, 0.05), "faster"),
    (_stats(1.0, 0.05), _stats(2.0, 0.1), "slower"),
    (_stats(1.0, 0.2), _stats(0.95, 0.2), "too close to call"),
    (_stats(2.0, 0.0, 1), _stats(1.0, 0.0, 1), "too few samples to call"),
])
def test_layout_verdict(first, last, verdict):
    timings = SideBySide({"channels_first": first, "channels_last": last}, "channels_first")
    assert formats.layout_verdict(timings, "channels_last") == verdict


def test_memory_step_says_it_is_not_available_rather_than_pretending():
    result = memory.check_memory(CPU, TINY)
    assert result.status == NOT_AVAILABLE
    expected = "not available in this labkit" if not memory.memory_fields() else "not available in this gpu-check"
    assert expected in result.rows[0].verdict


# ------------------------------------------------------------------------------------------------- notebooks


@pytest.fixture(scope="module")
def exercise_notebook(tmp_path_factory):
    """Notebook 02's first cell, then Exercise 2.1's solution and checker cells: the lab's own cells, a subset."""
    source = nbformat.read(NOTEBOOKS_DIR / "02_memory_format.ipynb", as_version=4)
    code = [cell for cell in source.cells if cell.cell_type == "code"]
    solution = next(i for i, cell in enumerate(code) if "solutions/02_1_" in cell.source)
    setup = next(cell for cell in code if "setup_notebook()" in cell.source)
    notebook = nbformat.v4.new_notebook(cells=[setup, code[solution], code[solution + 1]],
                                        metadata=source.metadata)
    path = tmp_path_factory.mktemp("nb") / "subset.ipynb"
    nbformat.write(notebook, path)
    return path


def test_a_notebook_runs_on_the_device_and_every_listed_exercise_must_be_solved(exercise_notebook, monkeypatch):
    monkeypatch.delenv("LABKIT_DEVICE", raising=False)
    row = notebooks.run_notebook(exercise_notebook, CPU, ("2.1", "2.2"))
    assert row.data["verdicts"] == {"2.1": "solved"}
    assert row.data["probe"]["device"] == "cpu"
    assert row.verdict == "2.2: no verdict printed"  # 2.1 solved; 2.2 is not in this subset
    assert "LABKIT_DEVICE" not in os.environ


def test_a_missing_notebook_fails_with_what_to_do(tmp_path):
    row = notebooks.run_notebook(tmp_path / "01_fx_profiling.ipynb", CPU, ("1.1",))
    assert row.verdict.startswith("FAILED: no ") and "checkout" in row.verdict


def test_a_failing_cell_fails_the_notebook(tmp_path):
    path = tmp_path / "broken.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("raise RuntimeError('broken on cuda')")]),
                   path)
    row = notebooks.run_notebook(path, CPU, ())
    assert row.verdict.startswith("FAILED") and "broken on cuda" in row.verdict


def test_verdict_lines_are_read_from_outputs():
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("stream", text="❌ Exercise 3.1: not solved. hint\n"),
                    nbformat.v4.new_output("execute_result", data={"text/plain": "✅ Exercise 3.2: solved. ok"}),
                    nbformat.v4.new_output("stream", text=notebooks.PROBE_MARKER + '{"device": "cuda:0"}\n')]
    verdicts, probe = notebooks.read_outputs(nbformat.v4.new_notebook(cells=[cell]))
    assert verdicts == {"3.1": "not solved", "3.2": "solved"} and probe == {"device": "cuda:0"}


def test_the_notebook_steps_expect_every_exercise_of_labs_01_to_04():
    listed = [e for lab in notebooks.LAB_NOTEBOOKS for e in lab.exercises]
    assert listed == [e for e in EXERCISES if not e.startswith("0")]


# ------------------------------------------------------------------------------------------------- the command


def test_dry_run_lists_every_step_with_its_budget(capsys):
    assert main(["gpu-check", "--dry-run", "--budget", "200"]) == 0
    out = capsys.readouterr().out
    for name in cli.STEP_NAMES:
        assert name in out
    assert "of the 200 s budget" in out and "dropped: needs" in out and "shrunk to its small size" in out


def test_without_cuda_the_real_run_says_so_and_exits_with_its_own_code(capsys, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is here")
    assert main(["gpu-check", "--out", str(tmp_path)]) == cli.NO_CUDA_EXIT
    err = capsys.readouterr().err
    assert "no CUDA GPU here" in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())


def test_a_disagreeing_step_makes_the_command_fail(monkeypatch, tmp_path, capsys):
    def disagrees(device, budget):
        return StepResult(DISAGREES, (Row("a check", "1 != 2", "", "DISAGREE"),))

    monkeypatch.setattr(cli, "STEPS", (Step("bad", "a step whose check disagrees", {"tiny": 0}, disagrees),
                                       Step("skipped", "never planned", {"full": 1e9}, disagrees)))
    assert main(["gpu-check", "--device", "cpu", "--out", str(tmp_path)]) == 1
    report = json.loads((tmp_path / "gpu-check.json").read_text())
    assert not report["ok"] and report["rehearsal"]
    assert [s["result"]["status"] for s in report["steps"]] == [DISAGREES, DROPPED]  # no tiny size: not rehearsed
    assert "no tiny size" in report["steps"][1]["why"]
    assert "bad disagrees" in capsys.readouterr().out


def test_rehearsal_on_cpu_end_to_end_writes_json_and_markdown(tmp_path):
    result = subprocess.run([sys.executable, "-m", "labkit", "gpu-check", "--device", "cpu", "--only", "forward-ad",
                             "memory", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "gpu-check.json").read_text())
    assert report["ok"] and report["rehearsal"]
    assert [s["name"] for s in report["steps"]] == ["forward-ad", "memory"]
    assert report["steps"][1]["result"]["status"] == NOT_AVAILABLE
    markdown = (tmp_path / "gpu-check.md").read_text()
    assert "| step" in markdown and "CPU REHEARSAL" in markdown and "jvp of an MLP" in markdown
    assert "Warning" not in result.stderr


def test_the_instructors_page_says_which_command_to_run_and_what_its_table_means():
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "instructors.md").read_text()
    assert "make gpu-check" in page and "GPU_CHECK_ARGS=--dry-run" in page
    for words in ("*faster*", "*slower*", "*too close to call*", f"below {profiler.MIN_RATIO:g}x",
                  f"and {cli.NO_CUDA_EXIT}, having run nothing", "not available in this labkit",
                  "build/gpu-check.md", "build/gpu-check.json"):
        assert words in page, words
    assert "make gpu-check" in (Path(__file__).parents[2] / "INSTRUCTORS.md").read_text()
