"""What a learner reads speaks to a learner: no word of the maintainers' (the tests, nbval's markers, benchmark
ids, make targets of the room) in checker messages, hints, mistakes, the workspace README or their notebooks."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

import labkit
from labkit.labs import NOTEBOOKS_DIR
from labkit.learner.workspace import learner_edition
from labkit.progress.hints import HINTS, Hint
from labkit.progress.mistakes import MISTAKES

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

MAINTAINERS_WORDS = re.compile(
    r"stored ones|stored outputs|stored run|compared by the tests|tests do not compare|\bP\d+\.[a-z_]+|"
    r"make workshop-loadtest|NBVAL_|\bnbval\b",
    re.IGNORECASE,
)
PACKAGE = Path(labkit.__file__).parent
#: Modules whose string literals a learner reads: checker messages, hints, mistakes, the solution's and the table's
#: words, the workspace README.
LEARNER_MODULES = [*PACKAGE.glob("*/checks.py"), PACKAGE / "forward_ad" / "diagnosis.py", *PACKAGE.glob("progress/*.py"),
                   PACKAGE / "learner" / "workspace.py"]


def _words(texts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(where, match[0]) for where, text in texts for match in [MAINTAINERS_WORDS.search(text)] if match]


def _literals(path: Path) -> list[tuple[str, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(f"{path.relative_to(PACKAGE)}:{node.lineno}", node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


@pytest.mark.parametrize("path", LEARNER_MODULES, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_messages_hints_and_mistakes_speak_to_a_learner(path: Path):
    assert _words(_literals(path)) == []


def test_hints_and_mistakes_as_shown_speak_to_a_learner():
    shown = [(f"hint {exercise}.{level}", Hint(exercise, level, text).to_text())
             for exercise, texts in HINTS.items() for level, text in enumerate(texts, 1)]
    assert _words(shown + [(mistake, words) for mistake, words in MISTAKES.items()]) == []


def test_the_learner_edition_speaks_to_a_learner():
    files = learner_edition(NOTEBOOKS_DIR, None, "all", installed=False)
    texts = [("README.md", files["README.md"])]
    for name, text in files.items():
        if name.endswith(".ipynb"):
            texts += [(f"{name}, cell {index}", cell.source)
                      for index, cell in enumerate(nbformat.reads(text, as_version=4).cells)]
    assert _words(texts) == []
