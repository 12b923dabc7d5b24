"""The labs in other languages: catalogues per notebook, generated notebooks, and the check that keeps them honest.

Why: the English notebooks are the one source; a translation is a gettext catalogue per notebook, and the
translated notebooks are generated from both, so a changed English cell can never hide in a stale translation.
"""

LANGS = ("zh", "ru")  # the languages the notebooks are translated into (simplified Chinese, Russian)
