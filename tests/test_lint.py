"""The code passes the project's ruff configuration and mypy: `make test` enforces both.

ruff: pyflakes, import order, the declared line length, likely bugs. mypy: the
package is annotated throughout, so the annotations are checked, not decoration.
"""
import ast
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


_OWN_SCOPE_ENDS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
                   ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _binds_underscore(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int | None:
    """The line where ``function`` itself binds ``_`` (``_, x = ...``, ``for _ in``, an argument), else None."""
    if any(arg.arg == "_" for arg in (*function.args.args, *function.args.kwonlyargs)):
        return function.lineno
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and node.id == "_" and isinstance(node.ctx, ast.Store):
            return node.lineno
        if not isinstance(node, _OWN_SCOPE_ENDS):
            stack.extend(ast.iter_child_nodes(node))
    return None


def test_no_function_shadows_gettexts_underscore_it_calls():
    """``_`` bound anywhere in a function makes it local there, so that function's ``_("...")`` calls a tuple item.

    ruff's F402 sees loop variables only; an unpacking ``_, x = ...`` slips past it and the learner gets a TypeError.
    """
    found = []
    for path in sorted((ROOT / "labkit").rglob("*.py")):
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            calls = any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_"
                        for node in ast.walk(function))
            line = _binds_underscore(function)
            if calls and line is not None:
                found.append(f"{path.relative_to(ROOT)}:{line} ({function.name})")
    assert not found, "rename the throwaway variable (e.g. _unused), gettext's _ is called in the same function:\n" \
        + "\n".join(found)
