"""English left in a translated notebook: phrases of Latin words outside code, for the zh/ru editions' scan test.

Why: every word a learner reads is translated, but a report built in labkit without ``_()`` lands in a zh or ru
notebook's stored output in English and no catalogue check sees it. This scan reads what the learner reads (the
markdown, every stored text/plain, text/html with its tags stripped, stream text and widget-state text) and
returns each run of two or more Latin words that is not code: fenced and inline code, math, link targets and
tags are removed first, a word with a digit, ``_`` or ``.`` inside is an identifier, and a phrase made only of
:data:`ALLOWED` words (names, units, Python literals) is no English sentence.

Printed Python source (``inspect.getsource``) is code too.
A code cell's own string literals are code: its tokens are byte-identical in every edition (the learner reads and
runs the same code), so an output phrase made only of words the cell's string literals hold is the code's echo,
not labkit's English. Keep such literals few and short in the English source; labkit's own words go through ``_()``.
"""
from __future__ import annotations

import ast
import html
import io
import json
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.i18n import glossary

_WORD = r"[A-Za-z][a-z]*(?:'[a-z]+)?"
_PHRASE = re.compile(rf"(?<![\w./\-`'\"=:]){_WORD}(?:[ ,]+{_WORD})+(?![\w(./\-`'\"=:\[])")
_CODE = [re.compile(pattern, re.S) for pattern in (
    r"```.*?```", r"`[^`\n]*`", r"\$\$.*?\$\$", r"\$[^$\n]*\$", r"https?://\S+", r"\]\([^)]*\)",
    r"<(script|style)[^>]*>.*?</\1>", r"<[^>]+>")]

#: Words that make no English sentence on their own (each phrase made only of these passes), with why:
ALLOWED = frozenset({
    # Python literals and the names a printed graph or signature shows
    "True", "False", "None", "self", "x", "kwargs", "args",
    # the devices and dimension letters a learner types as code
    "cpu", "cuda", "mps", "N", "C", "D", "H", "W", "n", "c", "d", "h", "w",
    # names of things, the same in every language
    "labkit", "torch", "PyTorch", "Python", "Jupyter", "JupyterLab", "Hugging", "Face", "Colab",
    # units and the statistics' short names a timing table prints beside its numbers
    "ms", "us", "ns", "s", "GB", "MB", "KB", "min",
    # names of code the labs compare, the same in every edition: variants, functions, ops, a Python keyword
    "eager", "fused", "jacfwd", "jacrev", "permute", "reshape", "split", "add", "relu", "fc", "head", "Linear", "in",
    "out", "return", "transformers",
})


@dataclass(frozen=True, order=True)
class Finding:
    """One English phrase a learner reads: where (notebook, cell id, what part) and the phrase."""

    notebook: str
    cell: str
    part: str
    phrase: str

    def __str__(self) -> str:
        return f"{self.notebook} cell {self.cell} ({self.part}): {self.phrase!r}"


def prose(text: str) -> str:
    """``text`` without its code, math, link targets and markup: what is left to read as words."""
    for pattern in _CODE:
        text = pattern.sub(" ", text)
    return html.unescape(text)


#: Other programs' own words a lab quotes or shows as they are, in every edition, with why: labkit cannot
#: translate them, and a learner searches for them in English (a menu item, an error message to look up).
FOREIGN = (
    # JupyterLab's menu items and its widget error, as an English JupyterLab shows them (a language pack changes them)
    "Run All Cells", "Restart Kernel", "Error displaying widget: model not found",
    # Perfetto's button that opens a trace file, as its page shows it
    "Open trace file",
    # torch's own error messages that the labs print to show where torch.fx or a view stops
    "Proxy object cannot be iterated", "'Proxy' object does not support item assignment",
    "view size is not compatible with input tensor's size and stride",
    "at least one dimension spans across two contiguous subspaces",
    "In order to use an autograd.Function with functorch transforms (vmap, grad, jvp, jacrev, ...), it must override "
    "the setup_context staticmethod. For more details, please see",
    # the titles of the English pages the labs link to (PyTorch's tutorials), as those pages are titled
    "Building a Simple CPU Performance Profiler with FX", "(beta) Channels Last Memory Format in PyTorch",
    "Channels Last Memory Format in PyTorch",
    # the tutorial's own profiler prints its table in English (the lab shows that code as the tutorial writes it)
    "Op type", "Average runtime (s)", "Pct total runtime",
    "required rank 4 tensor to use channels_last format",
    # a torchvision model's own error, quoted where the lab shows that labkit reports it in the model's words
    "Wrong image height! Expected 224 but got 64",
)


def phrases(text: str) -> Iterator[str]:
    """Each English phrase of ``text`` (two or more Latin words, not all of them :data:`ALLOWED`), after
    :data:`FOREIGN` text is set aside."""
    for foreign in FOREIGN:
        text = text.replace(foreign, " ")
    for match in _PHRASE.finditer(prose(text)):
        words = re.findall(_WORD, match.group())
        if not all(word in ALLOWED for word in words):
            yield " ".join(match.group().split())


def _joined(value: object) -> str:
    return "".join(value) if isinstance(value, list) else value if isinstance(value, str) else ""


def readable(cell: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(part, text) for what a learner reads of one cell: its markdown, its outputs' text (not tracebacks)."""
    if cell.get("cell_type") == "markdown":
        yield "markdown", _joined(cell.get("source"))
    for output in cell.get("outputs", []) or []:
        if "text" in output:
            yield "stream", _joined(output["text"])
        data = output.get("data", {})
        for kind in ("text/plain", "text/html", "text/markdown"):
            if kind in data:
                yield kind, _joined(data[kind])


def widget_texts(notebook: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(model id, text) for each string a stored widget shows: its ``value``, ``description``, ``options``, ``placeholder``."""
    state = notebook.get("metadata", {}).get("widgets", {})
    models = state.get("application/vnd.jupyter.widget-state+json", {}).get("state", {}) if isinstance(state, dict) else {}
    for model_id, model in models.items():
        values = model.get("state", {})
        for key in ("value", "description", "placeholder", "tooltip", "_options_labels", "button_style_text"):
            value = values.get(key)
            for text in (value if isinstance(value, list) else [value]):
                if isinstance(text, str):
                    yield model_id, text


def literal_words(cell: dict[str, Any]) -> frozenset[str]:
    """The words of a code cell's string literals (all its text when it is not plain Python, e.g. a magic)."""
    if cell.get("cell_type") != "code":
        return frozenset()
    source = _joined(cell.get("source"))
    try:
        literals = [token.string for token in tokenize.generate_tokens(io.StringIO(source).readline)
                    if token.type in (tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING))]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        literals = [source]
    return frozenset(word for literal in literals for word in re.findall(_WORD, literal))


def _not_echoed(phrase: str, echoed: frozenset[str]) -> bool:
    return not all(word in echoed or word in ALLOWED for word in re.findall(_WORD, phrase))


GLOSSARY = Path(__file__).resolve().parents[2] / "notebooks" / "i18n" / "glossary.csv"


def glosses(path: Path = GLOSSARY) -> frozenset[str]:
    """The glossary's English terms, lower case, qualifier dropped: a translation may give one beside its own word.

    Why allowed: the prose teaches the English term once (反向模式（reverse mode）, шаг (stride)), so the learner
    recognises it in torch's documentation and error messages. Only in markdown, and only a glossary term.
    """
    if not path.is_file():
        return frozenset()
    return frozenset(re.sub(r"\s*\(.*\)", "", term.english).lower() for term in glossary.load(path))


def is_python_source(text: str) -> bool:
    """True for printed Python source with a class or function in it (``inspect.getsource``): code, comments and all."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) for node in tree.body)


def _not_a_gloss(phrase: str, terms: frozenset[str]) -> bool:
    words = phrase.lower()
    return all(plural not in terms for plural in (words, words.removesuffix("s"), words.removesuffix("es")))


def scan(path: Path, terms: frozenset[str] | None = None) -> list[Finding]:
    """Every English phrase a learner reads in the notebook at ``path``, in cell order (see the module's rules)."""
    terms = glosses() if terms is None else terms
    notebook = json.loads(path.read_text(encoding="utf-8"))
    name = f"{path.parent.name}/{path.name}"
    found = [Finding(name, str(cell.get("id", index)), part, phrase)
             for index, cell in enumerate(notebook.get("cells", []))
             for echoed in [literal_words(cell)]
             for part, text in readable(cell) if not (part == "stream" and is_python_source(text))
             for phrase in phrases(text)
             if _not_echoed(phrase, echoed) and (part != "markdown" or _not_a_gloss(phrase, terms))]
    found += [Finding(name, f"widget {model_id[:8]}", "widget", phrase)
              for model_id, text in widget_texts(notebook) for phrase in phrases(text)]
    return found
