"""The one registry of labs: each lab's notebook, title, package and widgets.

Why: bench, the browser tests, the docs site and the student copy all walk the
learning path. They read it from :data:`LABS` instead of keeping their own
lists, so adding a lab means adding one :class:`Lab` entry here and one package
(see CONTRIBUTING.md, "Adding a lab"). ``tests/test_labs.py`` tests that the
registry and the ``notebooks/`` folder agree.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from labkit.core.errors import LabkitValueError

#: Where the solved reference notebooks live in a checkout of labkit.
NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
#: What ``pip install`` takes (pyproject's ``name``): ``labkit`` on PyPI is an unrelated package. The import name and the
#: command are ``labkit``.
DISTRIBUTION = "torch-labkit"
#: labkit's public repository (``https://github.com/OWNER/NAME``), the one setting every link to it is built from:
#: ``pip install "torch-labkit @ git+URL"`` in each notebook's first cell and the README, "Open in Colab" and Binder
#: in the README and on the docs site (:mod:`labkit.authoring.hosted`). None until the repository is public: then no
#: such link is shown (one that cannot work is worse than none) and installs name :data:`DISTRIBUTION` alone. After
#: setting it, run ``python -m labkit hosted --write``.
REPOSITORY_URL: str | None = None
#: The branch those links open (the one the notebooks are committed on).
REPOSITORY_BRANCH = "main"
NOTEBOOK_PATTERN = re.compile(r"^\d\d_[\w-]+\.ipynb$")


def in_checkout() -> bool:
    """Whether this labkit runs from a checkout of its repository: an installed wheel has no ``notebooks/`` beside it."""
    return NOTEBOOKS_DIR.is_dir()


def checkout_needed(command: str, needs: str) -> LabkitValueError:
    """The error of an author's command run from an installed labkit: what it needs, and where to run it instead."""
    return LabkitValueError(f"`labkit {command}` works in a checkout of labkit's repository ({needs}), and this labkit "
                            f"is installed without one (from a wheel). Run it in a clone of the repository, or in its "
                            f"unpacked sdist, after `python -m pip install -e .` there.")

Kind = Literal["intro", "lab", "capstone"]

#: The most a lab notebook may take top to bottom on a 2-core CPU, unless its entry says otherwise.
DEFAULT_BUDGET_S = 45.0


@dataclass(frozen=True)
class Lab:
    """One notebook of the learning path and the labkit package behind it."""

    number: str  # "01": the notebook's prefix and the first part of its exercise ids
    notebook: str  # file name in notebooks/
    title: str  # the notebook's heading, without the "01 · " prefix
    package: str  # the package holding its code; its ``widgets`` module holds the widgets
    widgets: tuple[str, ...] = ()  # widget classes the notebook shows, defined in ``<package>.widgets``
    budget_s: float = DEFAULT_BUDGET_S  # checked by bench
    kind: Kind = "lab"
    exercises: tuple[str, ...] = ()  # its exercise ids, in order: "1.1", ... (each has a checker, run_check("1.1", ...))

    @property
    def stem(self) -> str:
        return Path(self.notebook).stem

    @property
    def widgets_module(self) -> str:
        return f"{self.package}.widgets"


LABS: tuple[Lab, ...] = (
    Lab("00", "00_start_here.ipynb", "Start here", "labkit.core", ("SliderPlot",), kind="intro"),
    Lab("01", "01_fx_profiling.ipynb", "Where does the time go? Profiling a model with `torch.fx`", "labkit.fx",
        ("LiveProfile", "MemoryTimeline"), exercises=("1.1", "1.2", "1.3")),
    Lab("02", "02_memory_format.ipynb", "Memory formats and `channels_last`", "labkit.memory_format", ("StrideExplorer",),
        exercises=("2.1", "2.2", "2.3")),
    Lab("03", "03_forward_ad.ipynb", "Forward-mode automatic differentiation", "labkit.forward_ad", ("JacobianScaling",),
        exercises=("3.1", "3.2", "3.3", "3.4")),
    # 04 compiles ResNet18 with an empty cache (the honest break-even): that alone takes about a minute here.
    Lab("04", "04_capstone.ipynb", "Capstone: make it faster, and prove it", "labkit.capstone", budget_s=150.0,
        kind="capstone", exercises=("4.1",)),
)

#: Every exercise id, in the learning order.
EXERCISES: tuple[str, ...] = tuple(exercise for lab in LABS for exercise in lab.exercises)


def lab_of_exercise(exercise: str) -> Lab | None:
    """The lab whose notebook holds ``exercise`` ("1.2" is lab 01's), if any."""
    return next((lab for lab in LABS if exercise in lab.exercises), None)

#: The most the intro and the labs (not the capstone) may take together, run one after another.
PATH_BUDGET_S = 120.0


def lab_for(notebook: str | Path) -> Lab | None:
    """The registered lab whose notebook has this file name, if any."""
    name = Path(notebook).name
    return next((lab for lab in LABS if lab.notebook == name), None)


def widget_css_class(widget: str) -> str:
    """The DOM class a labkit widget adds to itself: ``StrideExplorer`` -> ``labkit-stride-explorer``."""
    return "labkit-" + re.sub(r"(?<!^)(?=[A-Z])", "-", widget).lower()


def find_notebooks(folder: Path) -> list[Path]:
    """The lab notebooks (``NN_name.ipynb``) in ``folder``, in the registry's learning order.

    Notebooks the registry does not know (an instructor's extra ``05_x.ipynb``)
    follow, by name.
    """
    if not folder.is_dir():
        raise LabkitValueError(f"{folder} is not a folder; pass the notebooks folder with --notebooks.")
    found = [p for p in folder.iterdir() if NOTEBOOK_PATTERN.match(p.name)]
    if not found:
        raise LabkitValueError(f"No notebooks named like 00_name.ipynb in {folder}.")
    order = {lab.notebook: index for index, lab in enumerate(LABS)}
    return sorted(found, key=lambda p: (order.get(p.name, len(order)), p.name))
