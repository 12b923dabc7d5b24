"""The two things the docs site needs beyond MyST-NB and the theme.

- ``{learning-path}``: a directive for the landing page that lists every notebook of the
  learning path, in the registry's order (:data:`labkit.labs.LABS`), with its learning
  goals (the list under "Learning goals" in its first cells) and its run time: the one
  ``make notebooks`` measured and stored in the notebook's metadata, never a promise
  (a reader's machine would contradict it). Read from the notebooks on every build, so
  the landing page never disagrees with them.
- A note above every widget: on the static page a widget is the snapshot stored when the
  notebook was executed, and nothing moves when a reader drags a slider.
- The words this extension and the theme's solution toggle write, in the edition's language: Sphinx's own
  gettext (:func:`sphinx.locale.get_translation`, catalogue ``labkit_docs`` in ``docs/locale``, compiled by
  Sphinx's :class:`~sphinx.util.i18n.CatalogRepository` when the build starts). The pages themselves are
  translated by Sphinx's ``locale_dirs`` catalogues (``docs/locale/<language>/LC_MESSAGES/<page>.po``); a page
  that a translated edition keeps in English (:data:`ENGLISH_ONLY_PAGES`) says so in one line under its title.
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
from sphinx.config import Config
from sphinx.locale import get_translation
from sphinx.util.docutils import SphinxDirective
from sphinx.util.i18n import CatalogRepository

from labkit.authoring.docs import describe_notebook
from labkit.authoring.nbrun import read_notebook
from labkit.labs import find_notebooks

NOTEBOOKS_FOLDER = "notebooks"  # relative to the Sphinx source folder
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_LITERAL = re.compile(r"(``.*?``)")  # inline code, where a bar is already literal
CATALOGUE = "labkit_docs"  # docs/locale/<language>/LC_MESSAGES/labkit_docs.po
LOCALE_DIR = Path(__file__).resolve().parents[1] / "locale"
#: Pages the zh and ru editions keep in English: for instructors and maintainers, and the API reference's stub
#: (labkit.authoring.docs.API_STUB, which links to the English reference).
ENGLISH_ONLY_PAGES = frozenset({"api", "instructors", "maintainers"})
_ = get_translation(CATALOGUE)


class LearningPath(SphinxDirective):
    """Each notebook as a link, how long it runs, and its learning goals."""

    def run(self) -> list[nodes.Node]:
        if self.env.app.builder.name == "gettext":  # its words are the notebooks', translated in their own catalogues
            return []
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
    if "run_seconds" not in record:
        return ""
    seconds = f"{record['run_seconds']:.0f}"
    if record.get("cpu_count"):
        line = _("ran in {seconds} s on a {cores}-core machine when its outputs were stored")
        return " · " + line.format(seconds=seconds, cores=record["cpu_count"])
    return " · " + _("ran in {seconds} s when its outputs were stored").format(seconds=seconds)


def frozen_note() -> str:
    return _("A frozen snapshot of this widget, stored when the notebook was run: run the notebook to interact.")


def add_english_only_note(app: Sphinx, doctree: nodes.document) -> None:
    """Under the title of a page a translated edition keeps in English: one line, in the edition's language.

    The page's sections say ``lang="en"`` and the note the edition's language (docutils writes a ``language-xx``
    class as the ``lang`` attribute), so a screen reader does not read English text with a Chinese or Russian voice
    under the page's ``<html lang>``.
    """
    if app.config.language.startswith("en") or app.env.docname not in ENGLISH_ONLY_PAGES:
        return
    sections = [child for child in doctree.children if isinstance(child, nodes.section)]
    for section in sections:
        section["classes"].append("language-en")
    if sections:
        edition = app.config.language.replace("_", "-")
        note = nodes.paragraph(text=_("This page is in English."), classes=["labkit-english-only", f"language-{edition}"])
        sections[0].insert(1, note)


def use_edition_language(app: Sphinx, config: Config) -> None:
    """Compile and load the ``labkit_docs`` catalogue of ``config.language``; the site's title and the solution
    toggle's words from it.

    Runs before sphinx-togglebutton's own config-inited handler, which writes ``togglebutton_hint`` into the page.
    """
    repository = CatalogRepository(str(LOCALE_DIR.parent), ["locale"], config.language, config.source_encoding)
    for catalogue in repository.catalogs:
        if catalogue.domain == CATALOGUE and catalogue.is_outdated():
            catalogue.write_mo(config.language)
    app.add_message_catalog(CATALOGUE, str(LOCALE_DIR))
    config.html_title = _("labkit labs")  # conf.py's html_title: every page's <title> and the sidebar's name
    config.togglebutton_hint = _("Show solution")
    config.togglebutton_hint_hide = _("Hide solution")


def add_frozen_widget_notes(app: Sphinx, doctree: nodes.document) -> None:
    """Put the frozen-snapshot note right above each stored widget view."""
    for view in list(doctree.findall(nodes.raw)):
        if WIDGET_VIEW in view.astext():
            note = nodes.paragraph(text=frozen_note(), classes=["labkit-frozen-widget"])
            view.parent.insert(view.parent.index(view), note)


def escape_absolute_value_bars(app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]) -> None:
    """``|difference|`` -> ``\\|difference\\|`` outside inline code, in place."""
    for index, line in enumerate(lines):
        parts = _LITERAL.split(line)
        lines[index] = "".join(part if part.startswith("``") else part.replace("|", "\\|") for part in parts)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("learning-path", LearningPath)
    app.connect("config-inited", use_edition_language, priority=400)
    app.connect("doctree-read", add_frozen_widget_notes)
    app.connect("doctree-read", add_english_only_note)
    app.connect("autodoc-process-docstring", escape_absolute_value_bars)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
