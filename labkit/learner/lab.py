"""``python -m labkit lab``: what ``make lab`` does, for a machine without ``make`` (Windows).

Brings the learner workspace up to date (:mod:`labkit.learner.workspace`: blank
exercises, the learner's edits never overwritten; ``--lang zh`` for the labs in
Chinese, ``ru`` in Russian), then replaces this process
(on Windows: waits for) ``jupyter lab`` serving that folder, so Ctrl-C stops
JupyterLab as usual.
``make lab`` calls this command: there is one way to start the labs.
"""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from labkit.i18n.messages import _
from labkit.learner.tracks import TRACKS
from labkit.learner.workspace import DEFAULT_FOLDER, NOTEBOOKS_HELP, lang_help, language_argument
from labkit.learner.workspace import run as update_workspace

# JupyterLab's defaults for every labkit server (labkit lab, make lab-reference, a hub's learners): an app settings
# folder whose overrides.json saves widget state with the notebook (a reopened notebook shows its widgets, not
# "model not found") and turns off the "notified about Jupyter news?" toast (news_url=None alone leaves it up).
# A learner's own settings still win; nothing is written to ~/.jupyter or the venv's share/jupyter. The folder takes
# the place of <prefix>/share/jupyter/lab/settings (empty in a pip install): an overrides.json there is not read.
LAB_SETTINGS = Path(__file__).with_name("lab_settings")


def server_args(venv: Path | None = None) -> list[str]:
    """The options every labkit JupyterLab gets: labkit's settings folder; no news feed, no update check.

    ``venv``: the venv the server runs when it is not this Python's (a room's learner venv, labkit installed from
    a wheel there): that venv's own copy of the settings folder, which the learners' accounts can read.
    """
    settings = LAB_SETTINGS
    if venv is not None:
        site_packages = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
        settings = site_packages / LAB_SETTINGS.relative_to(Path(__file__).parents[2])
    return [f"--LabApp.app_settings_dir={settings}", "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]


def jupyter_lab_command(args: argparse.Namespace) -> list[str]:
    """The ``jupyter lab`` command line serving the workspace, with labkit's defaults (:func:`server_args`)."""
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--ip={args.ip}", f"--port={args.port}",
               f"--ServerApp.root_dir={args.folder}", *server_args()]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # root in a container: jupyter refuses root unless told
        command.append("--allow-root")
    return command + shlex.split(args.lab_args, posix=os.name != "nt")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "folder", type=Path, nargs="?", default=DEFAULT_FOLDER,
        help=_("your workspace, created on first use (default: {folder})").format(folder=DEFAULT_FOLDER),
    )
    parser.add_argument("--notebooks", type=Path, default=None, help=_(NOTEBOOKS_HELP))
    parser.add_argument("--track", choices=TRACKS, default=None,
                        help=_("core: the workshop's shorter path; all: every section (default: the track the workspace "
                               "holds)"))
    parser.add_argument("--lang", type=language_argument, default=None, metavar="LANG", help=lang_help())
    parser.add_argument("--port", type=int, default=8888, help=_("JupyterLab's port (default: {port})").format(port=8888))
    parser.add_argument("--ip", default="127.0.0.1", help=_("the address JupyterLab listens on (default: {address})").format(
                            address="127.0.0.1"))
    parser.add_argument("--lab-args", default="", metavar="OPTIONS",
                        help=_("more options for jupyter lab, in one quoted string, e.g. "
                               "--lab-args='--ServerApp.token=secret'"))


def run(args: argparse.Namespace) -> int:
    status = update_workspace(args)
    if status != 0:
        return status
    print(_("Starting JupyterLab on {url} in {folder}/ (the token is printed below; Ctrl-C stops it)").format(
        url=f"http://{args.ip}:{args.port}/lab", folder=args.folder), flush=True)
    command = jupyter_lab_command(args)
    if os.name == "nt":  # Windows has no exec: wait for JupyterLab instead
        return subprocess.call(command)
    os.execv(command[0], command)
    return 0  # not reached: execv replaces this process
