import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from labkit.__main__ import main as cli
from labkit.authoring.nbrun import execute_notebook
from labkit.core.errors import LabkitError, LabkitValueError

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)


def _write(path: Path, *sources: str) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    return {p.name: p.read_bytes() if p.is_file() else None for p in sorted(folder.iterdir())}


@pytest.mark.slow
def test_execute_stores_outputs_in_the_notebooks_folder(tmp_path):
    path = tmp_path / "ok.ipynb"
    (tmp_path / "data.txt").write_text("hello from the notebook's folder")
    _write(path, "print(open('data.txt').read())", "1 + 1")
    link = tmp_path / "link.ipynb"
    link.symlink_to(path.name)
    seconds = execute_notebook(link)
    nb = nbformat.read(path, as_version=4)
    assert seconds > 0
    assert nb.cells[0].outputs[0].text.strip() == "hello from the notebook's folder"
    assert [c.execution_count for c in nb.cells] == [1, 2]
    assert nb.metadata.labkit == {"run_seconds": round(seconds, 1), "cpu_count": os.cpu_count()}  # what the docs state
    assert path.stat().st_mode & 0o777 == 0o644, "a rewritten notebook stays readable by everyone"
    assert link.is_symlink(), "a notebook reached through a symlink is written through it"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.txt", "link.ipynb", "ok.ipynb"]


@pytest.mark.slow
def test_a_failing_notebook_is_left_untouched(tmp_path):
    path = tmp_path / "broken.ipynb"
    _write(path, "print('first')", "raise ValueError('boom')")
    before = path.read_bytes()
    with pytest.raises(LabkitError, match="broken.ipynb failed while executing; nothing was written"):
        execute_notebook(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.ipynb"]


def test_bad_paths_are_refused_before_anything_runs(tmp_path, capsys):
    good = tmp_path / "good.ipynb"
    _write(good, "open('ran', 'w').close()")
    (tmp_path / "folder.ipynb").mkdir()
    (tmp_path / "text.ipynb").write_text("hello")
    (tmp_path / "list.ipynb").write_text("[1, 2]")
    (tmp_path / "binary.ipynb").write_bytes(b"\xff\xfe\x00\x81")
    os.mkfifo(tmp_path / "fifo.ipynb")  # reading it would block forever
    before = _snapshot(tmp_path)
    bad = ["missing.ipynb", "folder.ipynb", "text.ipynb", "list.ipynb", "binary.ipynb", "fifo.ipynb"]
    assert cli(["notebooks", str(good), *(str(tmp_path / name) for name in bad)]) == 2
    err = capsys.readouterr().err
    expected = {
        "missing.ipynb": "does not exist",
        "folder.ipynb": "is a folder, not a notebook",
        "text.ipynb": "is not JSON, so not a notebook",
        "list.ipynb": "is JSON but not a valid Jupyter notebook",
        "binary.ipynb": "is not a text file, so not a notebook",
        "fifo.ipynb": "is a special file (a device, FIFO or socket), not a notebook",
    }
    for name, message in expected.items():
        assert f"{tmp_path / name} {message}" in err
    assert err.rstrip().endswith("Nothing was executed or written.")
    assert _snapshot(tmp_path) == before, "the good notebook must not run when another path is bad"


def test_execute_notebook_names_a_missing_path(tmp_path):
    with pytest.raises(LabkitValueError, match="nope.ipynb does not exist; give the path of a .ipynb notebook"):
        execute_notebook(tmp_path / "nope.ipynb")


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupt_stops_the_whole_run_and_changes_no_notebook(tmp_path, signum):
    # The first notebook signals that it runs, then sleeps; the others would leave a file if they ran.
    paths = [tmp_path / f"{name}.ipynb" for name in "abc"]
    _write(paths[0], "open('started', 'w').close()", "import time; time.sleep(30)")
    for path in paths[1:]:
        _write(path, f"open('ran_{path.stem}', 'w').close()")
    before = _snapshot(tmp_path)
    # A session of its own, so that killpg reaches nbrun as a terminal's Ctrl-C reaches `make notebooks`.
    # SIGINT back to its default too: a test run started in the background (`cmd &`) inherits it ignored, and
    # Python (like nbrun) keeps an ignored signal ignored, whereas a terminal's foreground job never has it so.
    proc = subprocess.Popen([sys.executable, "-m", "labkit", "notebooks", *map(str, paths)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 180  # a safety net for a stuck run, not a timing check
        while not (tmp_path / "started").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the first notebook never started"
            time.sleep(0.1)
        os.killpg(proc.pid, signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, out + err
    name = signal.Signals(signum).name
    assert f"Interrupted by {name}: stopped the run. Left unchanged: {', '.join(map(str, paths))}." in err
    assert "Traceback" not in err
    after = _snapshot(tmp_path)
    assert after.pop("started") == b""
    assert after == before, "every notebook is byte-identical, no other notebook ran, no temporary file is left"
