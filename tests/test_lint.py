"""The code passes the project's ruff configuration and mypy: `make test` enforces both.

ruff: pyflakes, import order, the declared line length, likely bugs. mypy: the
package is annotated throughout, so the annotations are checked, not decoration.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_is_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is part of the dev extra: python -m pip install -e '.[dev]'"
    result = subprocess.run([ruff, "check", "labkit", "tests", "conftest.py"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow  # about a minute on a cold cache: mypy reads torch's annotations
def test_mypy_is_clean():
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (result.stdout[-6000:] + result.stderr[-2000:]
                                    + "\n(mypy is part of the dev extra: python -m pip install -e '.[dev]')")
