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
from collections.abc import Iterable, Sequence

from labkit import __version__
from labkit.core.columns import fill
from labkit.core.errors import LabkitError
from labkit.i18n.argparse_words import learners_words
from labkit.i18n.messages import N_, _

COMMANDS = {
    "doctor": ("labkit.learner.doctor", N_("probe this machine: is it ready for the labs?")),
    "profile": ("labkit.learner.profile", N_("profile a torchvision or Hugging Face (--hf) model node by node")),
    "zoo": ("labkit.measurements.zoo",
            N_("will my model work? profile torchvision and Hugging Face (--hf) models, one process each")),
    "bench": ("labkit.measurements.bench", N_("reproduce every performance figure the labs claim")),
    "gpu-check": ("labkit.measurements.gpu_check.cli", N_(
        "on a CUDA machine: run every GPU path of the labs in minutes, and write their table (--dry-run: the plan)")),
    "lab": ("labkit.learner.lab", N_("update your workspace, then start JupyterLab on it: make lab without make")),
    "workshop": ("labkit.workshop.cli",
                 N_("a workshop room's instructor commands: install, hand-out-solutions, push, remove-accounts")),
    "progress": ("labkit.learner.progress", N_("your own progress: each exercise solved or not, and what to do next")),
    "workspace": ("labkit.learner.workspace",
                  N_("create or update the learner workspace that make lab opens (blank exercises; your edits are kept)")),
    "student-copy": ("labkit.authoring.student_copy", N_("write notebook copies for students (no solutions, no outputs)")),
    "docs": ("labkit.authoring.docs",
             N_("build the docs site (Sphinx, MyST-NB) from the executed notebooks, running none of them")),
    "notebooks": ("labkit.authoring.nbrun", N_("execute notebooks in place, storing outputs and widget state")),
    "nbval-stress": ("labkit.authoring.nbval_stress", N_("strict nbval on the notebooks under CPU load, then single-threaded")),
    "fwad-sweep": ("labkit.measurements.fwad_sweep",
                   N_("run forward_ad.jvp and verify_jvp over PyTorch's OpInfo database and count the outcomes")),
    "i18n": ("labkit.i18n.cli", N_("the notebooks' translations: update the catalogues, build the zh/ru notebooks, check them")),
    "hosted": ("labkit.authoring.hosted", N_(
        "check (or --write) the install lines of each notebook's first cell and the Colab links, for hosted notebooks")),
}


# Who types which command, in the order --help lists them; a command in no group is an author's.
LEARNER_COMMANDS = ("lab", "progress", "doctor", "profile", "zoo", "workspace")
INSTRUCTOR_COMMANDS = ("workshop", "student-copy")
DESCRIPTION = N_("The commands of labkit's PyTorch labs: a learner's first, then an instructor's and the authors'.")


def command_groups() -> list[tuple[str, list[str]]]:
    """(heading, commands) in the order --help shows them, the heading in the learner's language."""
    grouped = {*LEARNER_COMMANDS, *INSTRUCTOR_COMMANDS}
    return [(_("learning with the labs"), list(LEARNER_COMMANDS)), (_("running a workshop"), list(INSTRUCTOR_COMMANDS)),
            (_("writing, translating and measuring the labs"), [name for name in COMMANDS if name not in grouped])]


def _commands_text() -> str:
    """The grouped list of commands with their one-line help, indented as argparse's own lists, wrapped by columns."""
    indent = " " * (max(map(len, COMMANDS)) + 4)
    width = _width()
    blocks = []
    for heading, names in command_groups():
        lines = [fill(_(COMMANDS[name][1]), width, initial_indent=f"  {name}".ljust(len(indent)),
                      subsequent_indent=indent) for name in names]
        blocks.append("\n".join([f"{heading}:", *lines]))
    return "\n\n".join([*blocks, _("COMMAND --help shows a command's options.")])


def _width() -> int:
    """The columns argparse's formatter wraps to (at least 60)."""
    return max(shutil.get_terminal_size().columns - 2, 60)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's layout with its own words ("usage:") in the learner's language (argparse looks them up in
    Python's default gettext domain, where labkit's catalogues are not), and options' help wrapped by columns
    (argparse counts characters: a Chinese line would run past the terminal's edge)."""

    def add_usage(self, usage: str | None, actions: Iterable[argparse.Action],
                  groups: Iterable[argparse._MutuallyExclusiveGroup], prefix: str | None = None) -> None:
        super().add_usage(usage, actions, groups, _("usage: ") if prefix is None else prefix)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return fill(" ".join(text.split()), width).splitlines()


def in_the_learners_words(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` with argparse's own headings and ``-h``'s help in the learner's language (it is made with
    ``add_help=False``, so that the ``-h`` added here is the only one)."""
    parser._positionals.title = _("positional arguments")
    parser._optionals.title = _("options")
    parser.add_argument("-h", "--help", action="help", help=_("show this help and exit"))
    return parser


def program_name(argv0: str | None = None) -> str:
    """``labkit`` when run as the console script, ``python -m labkit`` when run as a module (argparse on
    Python < 3.12 would say ``__main__.py``)."""
    name = os.path.basename(sys.argv[0] if argv0 is None else argv0)
    if name in ("__main__.py", "-c", ""):
        return "python -m labkit"
    return name.removesuffix(".exe").removesuffix("-script.py")


def build_parser(selected: str | None = None, prog: str | None = None) -> argparse.ArgumentParser:
    """The CLI parser, in the learner's language; only ``selected`` (if any) gets its full set of options."""
    parser = in_the_learners_words(argparse.ArgumentParser(
        prog=prog or program_name(), usage="%(prog)s [-h] [--version] COMMAND ...", description=fill(_(DESCRIPTION), _width()),
        epilog=_commands_text(), formatter_class=HelpFormatter, add_help=False))
    parser.add_argument("--version", action="version", version=f"labkit {__version__}",
                        help=_("show labkit's version and exit"))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help=argparse.SUPPRESS,  # the epilog lists them
                                prog=parser.prog)  # "labkit doctor", not the usage line before "doctor"
    sub.required = True
    for name, (module_name, help_text) in COMMANDS.items():
        command_parser = in_the_learners_words(sub.add_parser(  # listed in the epilog, by group
            name, description=fill(_(help_text), _width()), formatter_class=HelpFormatter, add_help=False))
        if name == selected:
            module = importlib.import_module(module_name)
            module.add_arguments(command_parser)
            command_parser.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _run(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:  # the reader left early (labkit progress | head): stop quietly, as a shell tool does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit would raise again
        return 1


def _run(argv: list[str]) -> int:
    selected = next((a for a in argv if not a.startswith("-")), None)
    with learners_words():
        args = build_parser(selected if selected in COMMANDS else None).parse_args(argv)
    try:
        return int(args.run(args))
    except LabkitError as error:  # a mistake in the arguments: one line, no traceback
        print(f"labkit {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
