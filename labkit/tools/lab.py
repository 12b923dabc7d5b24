"""``python -m labkit lab``: what ``make lab`` does, for a machine without ``make`` (Windows).

Brings the learner workspace up to date (:mod:`labkit.tools.workspace`: blank
exercises, the learner's edits never overwritten), then replaces this process
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

from labkit.tools.tracks import TRACKS
from labkit.tools.workspace import DEFAULT_FOLDER
from labkit.tools.workspace import run as update_workspace


def jupyter_lab_command(args: argparse.Namespace) -> list[str]:
    """The ``jupyter lab`` command line serving the workspace."""
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--ip={args.ip}", f"--port={args.port}",
               f"--ServerApp.root_dir={args.folder}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # root in a container: jupyter refuses root unless told
        command.append("--allow-root")
    return command + shlex.split(args.lab_args, posix=os.name != "nt")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "folder", type=Path, nargs="?", default=DEFAULT_FOLDER,
        help=f"your workspace, created on first use (default: {DEFAULT_FOLDER})",
    )
    parser.add_argument("--notebooks", type=Path, default=Path("notebooks"), help="the labs' notebooks folder")
    parser.add_argument("--track", choices=TRACKS, default=None,
                        help="core: the workshop's shorter path; all: every section (default: the track the workspace holds)")
    parser.add_argument("--port", type=int, default=8888, help="JupyterLab's port (default: 8888)")
    parser.add_argument("--ip", default="127.0.0.1", help="the address JupyterLab listens on (default: 127.0.0.1)")
    parser.add_argument("--lab-args", default="", metavar="OPTIONS",
                        help="more options for jupyter lab, in one quoted string, e.g. --lab-args='--ServerApp.token=secret'")


def run(args: argparse.Namespace) -> int:
    status = update_workspace(args)
    if status != 0:
        return status
    print(f"Starting JupyterLab on http://{args.ip}:{args.port}/lab in {args.folder}/ "
          "(the token is printed below; Ctrl-C stops it)", flush=True)
    command = jupyter_lab_command(args)
    if os.name == "nt":  # Windows has no exec: wait for JupyterLab instead
        return subprocess.call(command)
    os.execv(command[0], command)
    return 0  # not reached: execv replaces this process
