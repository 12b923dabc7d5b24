"""The labkit command line: ``labkit <command>`` (or ``python -m labkit <command>``).

Each command lives in its own module, which provides ``add_arguments(parser)``
and ``run(args) -> int``; this file only wires them together. Only the module of
the command being run is imported, so ``doctor`` stays fast even though
``bench`` pulls in half of torchvision. ``--help`` lists the learner's commands
first, then the instructor's, then the authors' (every command no group names).
"""
from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import textwrap
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
    "workshop": ("labkit.workshop.cli",
                 "a workshop room's instructor commands: install, hand-out-solutions, push, remove-accounts"),
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


# Who types which command, in the order --help lists them; a command in no group is an author's.
LEARNER_COMMANDS = ("lab", "progress", "doctor", "profile", "zoo", "workspace")
INSTRUCTOR_COMMANDS = ("workshop", "student-copy")
DESCRIPTION = "The commands of labkit's PyTorch labs: a learner's first, then an instructor's and the authors'."


def command_groups() -> list[tuple[str, list[str]]]:
    """(heading, commands) in the order --help shows them."""
    grouped = {*LEARNER_COMMANDS, *INSTRUCTOR_COMMANDS}
    return [("learning with the labs", list(LEARNER_COMMANDS)), ("running a workshop", list(INSTRUCTOR_COMMANDS)),
            ("writing, translating and measuring the labs", [name for name in COMMANDS if name not in grouped])]


def _commands_text() -> str:
    """The grouped list of commands with their one-line help, indented and wrapped as argparse's own lists."""
    indent = " " * (max(map(len, COMMANDS)) + 4)
    columns = shutil.get_terminal_size().columns - 2  # what argparse's formatter wraps to
    blocks = []
    for heading, names in command_groups():
        lines = [textwrap.fill(COMMANDS[name][1], max(columns, 60), initial_indent=f"  {name}".ljust(len(indent)),
                               subsequent_indent=indent, break_on_hyphens=False) for name in names]
        blocks.append("\n".join([f"{heading}:", *lines]))
    return "\n\n".join([*blocks, "COMMAND --help shows a command's options."])


def program_name(argv0: str | None = None) -> str:
    """``labkit`` when run as the console script, ``python -m labkit`` when run as a module (argparse on
    Python < 3.12 would say ``__main__.py``)."""
    name = os.path.basename(sys.argv[0] if argv0 is None else argv0)
    if name in ("__main__.py", "-c", ""):
        return "python -m labkit"
    return name.removesuffix(".exe").removesuffix("-script.py")


def build_parser(selected: str | None = None, prog: str | None = None) -> argparse.ArgumentParser:
    """The CLI parser; only ``selected`` (if any) gets its full set of options."""
    parser = argparse.ArgumentParser(prog=prog or program_name(), usage="%(prog)s [-h] [--version] COMMAND ...",
                                     description=DESCRIPTION, epilog=_commands_text(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"labkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help=argparse.SUPPRESS,  # the epilog lists them
                                prog=parser.prog)  # "labkit doctor", not the usage line before "doctor"
    sub.required = True
    for name, (module_name, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, description=help_text)  # listed in the epilog, by group
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
