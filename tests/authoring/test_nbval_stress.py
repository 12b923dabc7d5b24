"""make nbval-stress: strict nbval under load really fails when a stored output does not repeat."""
import nbformat
import pytest

from labkit.__main__ import main as cli
from labkit.authoring import nbval_stress

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)


def _notebook(path, source, stored):
    cell = nbformat.v4.new_code_cell(source, execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored)]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, path)
    return str(path)


def test_cpu_hog_stops_its_processes():
    with nbval_stress.cpu_hog(1):
        import multiprocessing

        hogs = multiprocessing.active_children()
        assert hogs and all(h.is_alive() for h in hogs)
    assert not any(h.is_alive() for h in hogs)


def test_plan_is_repeat_runs_then_one_thread(monkeypatch, capsys):
    calls = []

    def fake_suite(label, notebooks, extra_env):
        calls.append(extra_env)
        return nbval_stress.StressRun(label, 1.0, 0)

    monkeypatch.setattr(nbval_stress, "run_suite", fake_suite)
    assert cli(["nbval-stress", "x.ipynb", "--repeat", "3", "--hogs", "0"]) == 0
    assert calls == [{}, {}, {}, {"OMP_NUM_THREADS": "1"}]
    assert "all 4 runs passed" in capsys.readouterr().out


@pytest.mark.slow
def test_a_stored_output_that_does_not_repeat_fails_and_stops(tmp_path, capsys):
    bad = _notebook(tmp_path / "bad.ipynb", "import os; print(os.getpid())", "1\n")
    assert cli(["nbval-stress", bad, "--repeat", "2", "--hogs", "1"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "run 2 of 2" not in out.split("summary")[1]


def test_rejects_nonsense_counts():
    assert cli(["nbval-stress", "--repeat", "0"]) == 2
