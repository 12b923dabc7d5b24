"""The checker tests pass under ``python -O`` too, where ``assert`` statements are removed.

Why: a checker written with ``assert`` reports every wrong answer as solved
under ``-O`` / ``PYTHONOPTIMIZE=1``. pytest keeps the tests' own asserts (it
rewrites them), so a run of the checker tests under ``-O`` catches any check
that still relies on ``assert``. The timed tests (marker ``slow``) are left to
the ordinary run.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The framework's tests, each lab's checker tests (tests/<lab>/test_checks.py), the guard's and the mistake catalogues.
CHECKER_TESTS = sorted(
    str(path.relative_to(ROOT))
    for pattern in ("*/test_checks.py", "core/test_guard.py", "mistakes/test_catalogues.py")
    for path in (ROOT / "tests").glob(pattern)
)


@pytest.mark.slow  # a fresh interpreter imports torch and runs every checker test again
@pytest.mark.skipif(sys.flags.optimize > 0, reason="already running under -O")
def test_checker_tests_pass_under_python_O():
    env = {key: value for key, value in os.environ.items() if key != "PYTHONOPTIMIZE"}
    command = [sys.executable, "-O", "-m", "pytest", "-p", "no:nbval", "-p", "no:cacheprovider", "-o", "addopts=", "-q",
               "-m", "not slow", "-W", "ignore::pytest.PytestConfigWarning", *CHECKER_TESTS]
    # No timeout: a wall-clock limit is one a busy machine reaches (600 s did, at a load of 10 to 15), not a verdict.
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "passed" in result.stdout and "failed" not in result.stdout


def test_the_reported_reproduction_is_not_solved_under_python_O():
    # The reproduction: a wrong choice of mode was "solved" under PYTHONOPTIMIZE=1.
    code = ("import torch; from labkit.forward_ad.checks import check_cheaper_jacobian as c; "
            "print(c(lambda f, x: ('jacfwd', torch.func.jacfwd(f)(x))).status.value)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONOPTIMIZE": "1"},
                            capture_output=True, text=True)  # no wall-clock limit: load decides none
    assert result.stdout.strip() == "not solved", result.stdout + result.stderr
