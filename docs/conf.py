"""Sphinx configuration of the labkit docs site, built by ``make docs`` (``python -m labkit docs``).

That command copies this folder and ``notebooks/*.ipynb`` (as ``notebooks/``) into one
source folder and runs ``sphinx-build -W`` on it (see :mod:`labkit.authoring.docs`).

Why these choices:

- The notebooks are rendered by MyST-NB with the outputs and widget state they were
  committed with, and never executed: nbval already re-runs them and compares every
  output, so the page shows what was verified.
- Nothing is loaded from a CDN. The widget manager and MathJax are vendored under
  ``_static/vendor`` (provenance in its README), so the site works offline and from
  ``file://``.
- One edition per language (English here; ``zh/`` and ``ru/`` from the translated notebooks), each its own
  Sphinx run with ``-D language=...`` so the theme's words and the search index are that language's; a
  switcher in every page's header leads to the same page in the others (``_ext/labkit_languages.py``).
  Chinese search splits words with jieba (the docs extra installs it): without it Sphinx indexes
  only the Latin words of a Chinese page.
- A translated edition's own prose (index.md, running.md, install.md) and sidebar captions come from Sphinx's gettext catalogues,
  ``locale/<language>/LC_MESSAGES/<page>.po`` (one per page: ``gettext_compact = False``), compiled by Sphinx at build;
  the words ``_ext/labkit_docs.py`` writes (run-time line, widget note, "Show solution") from its ``labkit_docs``
  catalogue there. ``python -m labkit i18n update`` / ``check`` keep them following the English
  (:mod:`labkit.i18n.docs_check`). Pages for instructors and maintainers stay English, with a line saying so.
- Cells tagged ``solution`` get MyST-NB's ``tag_solution`` class; sphinx-togglebutton
  collapses their source behind "Show solution". Their outputs (the checker's verdict)
  stay visible.
"""
from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "labkit"
author = "the labkit authors"
html_title = "labkit labs"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx_togglebutton",
    "labkit_docs",  # _ext/labkit_docs.py: the learning path on the landing page, the frozen-widget note
    "labkit_hosted",  # _ext/labkit_hosted.py: "Open in Colab" on each notebook's page (labkit.labs.REPOSITORY_URL)
    "labkit_languages",  # _ext/labkit_languages.py: English / 中文 / Русский, the same page in each edition
]
templates_path = ["_templates"]

root_doc = "index"
# Only the pages of the site: the notebooks folder also holds solutions/ and nbval's sanitize.cfg.
include_patterns = ["*.md", "api/*.md", "notebooks/[0-9][0-9]_*.ipynb"]
exclude_patterns = ["**/.ipynb_checkpoints"]

# The zh and ru editions' translations (see the docstring); English has none.
locale_dirs = ["locale/"]
gettext_compact = False

# MyST-NB: show what is stored, run nothing.
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
# The stored widget state is rendered by the vendored @jupyter-widgets/html-manager (no CDN, no RequireJS).
nb_ipywidgets_js = {"vendor/html-manager/embed.js": {}}
mathjax_path = "vendor/mathjax/tex-svg.js"

# Solutions: collapsed source, visible output.
togglebutton_selector = ".tag_solution .cell_input"
togglebutton_hint = "Show solution"  # in a translated edition: labkit_docs.use_edition_language
togglebutton_hint_hide = "Hide solution"

autodoc_member_order = "bysource"
autodoc_inherit_docstrings = False  # torch's docstrings (autograd.Function.forward) point at labels of torch's own docs
autodoc_typehints = "description"
# A lab package re-exports its names (lazy_exports): its page adds :imported-members: (docs/api/).
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "sphinx_book_theme"
html_static_path = ["_static"]
html_favicon = "_static/labkit-icon.svg"  # else every browser asks for /favicon.ico, a 404 in the console
html_css_files = ["labkit.css", "labkit-languages.css"]
html_js_files = [
    ("widgets-mathjax.js", {"defer": "defer"}),  # after MathJax, which Sphinx also defers
    ("search-snippets.js", {"defer": "defer"}),  # a search result's snippet starts with the page's text, not its buttons
]
# One search control on every page: the header's button (it stays when the sidebar is collapsed or on a phone);
# the theme's default sidebar adds a second, search-button-field.html, which is left out here.
html_sidebars = {"**": ["navbar-logo.html", "icon-links.html", "sbt-sidebar-nav.html"]}
html_sourcelink_suffix = ""  # the download button offers the .ipynb itself
html_theme_options = {
    "use_download_button": True,
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "navigation_with_keys": False,
    "article_header_end": ["labkit-languages.html", "article-header-buttons.html"],
}
html_last_updated_fmt = None
# The reader's system setting, and the theme's switch in the header to change it: labkit's pictures are drawn for
# both (tests/ui/test_docs_ui.py checks every page in each). Without a default the theme logs "Got invalid theme mode".
html_context = {"default_mode": "auto"}
