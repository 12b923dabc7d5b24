"""The two things the docs site needs beyond MyST-NB and the theme.

- ``{learning-path}``: a directive for the landing page that lists every notebook of the
  learning path, in the registry's order (:data:`labkit.labs.LABS`), with its learning
  goals (the list under "Learning goals" in its first cells) and its run time: the one
  ``make notebooks`` measured and stored in the notebook's metadata, never a promise
  (a reader's machine would contradict it). Read from the notebooks on every build, so
  the landing page never disagrees with them.
- A note above every widget: on the static page a widget is the snapshot stored when the
  notebook was executed, and nothing moves when a reader drags a slider.
- In docstrings, ``|x|`` is an absolute value (``Largest |difference|``), not a
  reStructuredText substitution: the bars are escaped before autodoc parses them.
"""
from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from nbformat import NotebookNode
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from labkit.labs import find_notebooks
from labkit.authoring.docs import describe_notebook
from labkit.authoring.nbrun import read_notebook

NOTEBOOKS_FOLDER = "notebooks"  # relative to the Sphinx source folder
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_LITERAL = re.compile(r"(``.*?``)")  # inline code, where a bar is already literal
FROZEN_NOTE = "A frozen snapshot of this widget, stored when the notebook was run: run the notebook to interact."


class LearningPath(SphinxDirective):
    """Each notebook as a link, how long it runs, and its learning goals."""

    def run(self) -> list[nodes.Node]:
        folder = Path(self.env.srcdir) / NOTEBOOKS_FOLDER
        lines: list[str] = []
        for path in find_notebooks(folder):
            self.env.note_dependency(str(path))
            notebook = read_notebook(path, write=False)
            page = describe_notebook(path, notebook)
            lines += [f"**[{page.title}]({NOTEBOOKS_FOLDER}/{path.name})**{run_time(notebook)}", ""]
            lines += [page.goals_markdown or "(no learning goals listed)", ""]
        container = nodes.container(classes=["labkit-learning-path"])
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]), self.content_offset, container)
        return [container]


def run_time(notebook: NotebookNode) -> str:
    """The run that stored the outputs (``make notebooks`` records it); nothing for a notebook without one."""
    record = notebook.metadata.get("labkit", {})
    if "run_seconds" in record:
        cores = f" on a {record['cpu_count']}-core machine" if record.get("cpu_count") else ""
        return f" · ran in {record['run_seconds']:.0f} s{cores} when its outputs were stored"
    return ""


def add_frozen_widget_notes(app: Sphinx, doctree: nodes.document) -> None:
    """Put the frozen-snapshot note right above each stored widget view."""
    for view in list(doctree.findall(nodes.raw)):
        if WIDGET_VIEW in view.astext():
            note = nodes.paragraph(text=FROZEN_NOTE, classes=["labkit-frozen-widget"])
            view.parent.insert(view.parent.index(view), note)


def escape_absolute_value_bars(app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]) -> None:
    """``|difference|`` -> ``\\|difference\\|`` outside inline code, in place."""
    for index, line in enumerate(lines):
        parts = _LITERAL.split(line)
        lines[index] = "".join(part if part.startswith("``") else part.replace("|", "\\|") for part in parts)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("learning-path", LearningPath)
    app.connect("doctree-read", add_frozen_widget_notes)
    app.connect("autodoc-process-docstring", escape_absolute_value_bars)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
