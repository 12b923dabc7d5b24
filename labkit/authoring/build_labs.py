"""The build step that puts the labs in labkit's wheel: setuptools' ``build_py``, plus the learner edition.

Why: a wheel of labkit used to carry the library and no notebook, so
``pip install`` then ``labkit lab`` had nothing to serve. The wheel now carries
the learner edition of every language and track (:func:`labkit.learner.workspace.write_packaged_labs`:
stubs, no outputs, an installed labkit's README in that language) in ``labkit/_labs/<lang>/<track>/``,
the same files ``make lab`` (``LAB_LANG=zh``, ``ru``) gives in a checkout. It is converted at build time
from the solved ``notebooks/`` and their translations ``notebooks/zh/``, ``notebooks/ru/`` (the sdist
carries them, see ``MANIFEST.in``) rather than
committed, because it is derived: a committed copy would go stale each time a
notebook is re-executed. The wheel carries no solutions and no solved notebook:
it is also what a workshop room's learner venv holds (:mod:`labkit.workshop.install`),
whose learners must not read the solutions before the instructor hands them out.

An editable install (``make lab``'s ``pip install -e``) gets nothing here: it runs
from the checkout, whose ``notebooks/`` are the labs. pyproject.toml names this
class (``[tool.setuptools.cmdclass]``); building needs nbformat and nbclient
(``[build-system] requires``), which the conversion imports.
"""
from __future__ import annotations

import sys
from pathlib import Path

from setuptools.command.build_py import build_py  # type: ignore[import-untyped]  # the build's, never imported at run time

SOURCE = Path(__file__).resolve().parents[2]  # the source tree being built: a checkout, or an unpacked sdist


class BuildPy(build_py):
    """``build_py``, then the learner edition of every language and track into the built package."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        if str(SOURCE) not in sys.path:
            sys.path.insert(0, str(SOURCE))  # the build backend's path lacks the tree; the conversion is its code
        import labkit
        from labkit.learner.workspace import PACKAGED_LABS, write_packaged_labs

        if Path(labkit.__file__).resolve().parent != SOURCE / "labkit":
            raise RuntimeError(f"building labkit from {SOURCE} imported another labkit ({labkit.__file__}); build it with "
                               "pip's default build isolation, or from an environment without another labkit")
        out = Path(self.build_lib) / "labkit" / PACKAGED_LABS.name
        editions = write_packaged_labs(SOURCE / "notebooks", out)
        made = ", ".join(e.folder.relative_to(out).as_posix() for e in editions)
        self.announce(f"labkit: wrote the learner editions ({made}) to {out}", 2)
