"""An "Open in Colab" link at the top of every notebook's page on the docs site.

Why: a reader who wants to run a page has no checkout; Colab opens the same notebook
from the repository, and its first cell installs labkit there. The address comes from
:func:`labkit.authoring.hosted.colab_url`, built from the one setting
:data:`labkit.labs.REPOSITORY_URL`, as the README's links are: never written by hand.
A plain link (no badge image): the site loads nothing from the network. While that setting
is None (no public repository yet) the pages have no such link.
"""
from __future__ import annotations

from pathlib import PurePosixPath

from docutils import nodes
from sphinx.application import Sphinx

from labkit.labs import NOTEBOOK_PATTERN
from labkit.authoring.hosted import colab_url

NOTEBOOKS_FOLDER = "notebooks"  # relative to the Sphinx source folder (labkit.authoring.docs.SOURCE_NOTEBOOKS)
LINK_CLASS = "labkit-open-in-colab"
LINK_TEXT = "Open this notebook in Colab"


def colab_link(notebook: str) -> nodes.paragraph | None:
    """A paragraph holding the link that opens ``notebook`` (a file name) in Colab; None while no repository is set."""
    url = colab_url(notebook)
    if url is None:
        return None
    return nodes.paragraph("", "", nodes.reference("", LINK_TEXT, refuri=url, internal=False), classes=[LINK_CLASS])


def add_colab_link(app: Sphinx, doctree: nodes.document) -> None:
    """Right below the page's title, on the pages made from the lab notebooks."""
    docname = PurePosixPath(app.env.docname)
    notebook = f"{docname.name}.ipynb"
    if docname.parent != PurePosixPath(NOTEBOOKS_FOLDER) or not NOTEBOOK_PATTERN.match(notebook):
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None or not isinstance(section[0], nodes.title):
        return
    link = colab_link(notebook)
    if link is not None:
        section.insert(1, link)


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("doctree-read", add_colab_link)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
