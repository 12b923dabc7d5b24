"""The labkit command line: ``python -m labkit <command>``.

Each command lives in its own module, which provides ``add_arguments(parser)``
and ``run(args) -> int``; this file only wires them together. Only the module of
the command being run is imported, so ``doctor`` stays fast even though
``bench`` pulls in half of torchvision.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from labkit import __version__
from labkit.core.errors import LabkitError

COMMANDS = {
    "doctor": ("labkit.learner.doctor", "probe this machine: is it ready for the labs?"),
    "profile": ("labkit.learner.profile", "profile a torchvision or Hugging Face (--hf) model node by node"),
    "zoo": ("labkit.measurements.zoo",
            "will my model work? profile torchvision and Hugging Face (--hf) models, one process each"),
    "bench": ("labkit.measurements.bench", "reproduce every performance figure the labs claim"),
    "gpu-check": ("labkit.measurements.gpu_check.cli",
                  "on a CUDA machine: run every GPU path of the labs in minutes, and write their table (--dry-run: the plan)"),
    "lab": ("labkit.learner.lab", "update your workspace, then start JupyterLab on it: make lab without make"),
    "workshop": ("labkit.workshop.cli", "a workshop room's instructor commands: install, hand-out-solutions, remove-accounts"),
    "progress": ("labkit.learner.progress", "your own progress: each exercise solved or not, and what to do next"),
    "workspace": ("labkit.learner.workspace",
                  "create or update the learner workspace that make lab opens (blank exercises; your edits are kept)"),
    "student-copy": ("labkit.authoring.student_copy", "write notebook copies for students (no solutions, no outputs)"),
    "docs": ("labkit.authoring.docs", "build the docs site (Sphinx, MyST-NB) from the executed notebooks, running none of them"),
    "notebooks": ("labkit.authoring.nbrun", "execute notebooks in place, storing outputs and widget state"),
    "nbval-stress": ("labkit.authoring.nbval_stress", "strict nbval on the notebooks under CPU load, then single-threaded"),
    "fwad-sweep": ("labkit.measurements.fwad_sweep",
                   "run forward_ad.jvp and verify_jvp over PyTorch's OpInfo database and count the outcomes"),
    "i18n": ("labkit.i18n.cli", "the notebooks' translations: update the catalogues, build the zh/ru notebooks, check them"),
    "hosted": ("labkit.authoring.hosted",
               "check (or --write) the install lines of each notebook's first cell and the Colab links, for hosted notebooks"),
}


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The CLI parser; only ``selected`` (if any) gets its full set of options."""
    parser = argparse.ArgumentParser(prog="python -m labkit", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"labkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module_name, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == selected:
            module = importlib.import_module(module_name)
            module.add_arguments(command_parser)
            command_parser.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    selected = next((a for a in argv if not a.startswith("-")), None)
    args = build_parser(selected if selected in COMMANDS else None).parse_args(argv)
    try:
        return int(args.run(args))
    except LabkitError as error:  # a mistake in the arguments: one line, no traceback
        print(f"labkit {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
