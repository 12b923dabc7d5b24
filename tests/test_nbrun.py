from pathlib import Path

import nbformat
import pytest

from labkit.errors import LabkitError
from labkit.nbrun import execute_notebook


def _write(path: Path, *sources: str) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.mark.slow
def test_execute_stores_outputs_in_the_notebooks_folder(tmp_path):
    path = tmp_path / "ok.ipynb"
    (tmp_path / "data.txt").write_text("hello from the notebook's folder")
    _write(path, "print(open('data.txt').read())", "1 + 1")
    seconds = execute_notebook(path)
    nb = nbformat.read(path, as_version=4)
    assert seconds > 0
    assert nb.cells[0].outputs[0].text.strip() == "hello from the notebook's folder"
    assert [c.execution_count for c in nb.cells] == [1, 2]
    assert path.stat().st_mode & 0o777 == 0o644, "a rewritten notebook stays readable by everyone"


@pytest.mark.slow
def test_a_failing_notebook_is_left_untouched(tmp_path):
    path = tmp_path / "broken.ipynb"
    _write(path, "print('first')", "raise ValueError('boom')")
    before = path.read_bytes()
    with pytest.raises(LabkitError, match="broken.ipynb failed while executing; nothing was written"):
        execute_notebook(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.ipynb"]
