"""The code passes the project's ruff configuration (pyflakes, import order, likely bugs)."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_is_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is part of the dev extra: python -m pip install -e '.[dev]'"
    result = subprocess.run([ruff, "check", "labkit", "tests"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
