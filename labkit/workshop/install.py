"""``python -m labkit workshop install``: the learner venv, where learners can run it but never change it.

Why: in a room each learner's server runs as their own account, so it needs a
Python and a labkit those accounts can read. The instructor's own venv will
not do: it may sit under ``/root`` (mode 0700), it is usually an editable
install of a checkout that also holds the solutions, and anything a learner
could write there would run as the next learner, or in the hub as root. So the
hub's learners run a venv of their own under ``/opt/labkit`` (the
``LABKIT_WORKSHOP_INSTALL`` setting): owned by root, readable by all, writable
by none, with labkit installed from a wheel (no solutions, no notebooks).

The interpreter: the venv is made from this Python when every account can run
it, else from the system's Python of the same version (``/usr/bin/python3.X``),
else (pyenv under ``/root`` and no such system Python) this Python is copied
under the prefix, and :func:`learner_environment` points the loader at the
copy's ``libpython`` (a pyenv build finds it by a run path under ``/root``).
``--if-stale`` (what ``make workshop`` runs) skips a venv already made from
the same labkit source and ``pyproject.toml``.

pip can take many minutes (torch is gigabytes): its lines go to stderr as it
writes them, each prefixed ``pip:``, so the instructor sees what it is doing.
"""
from __future__ import annotations

import collections
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import TextIO

from labkit.core.errors import LabkitError
from labkit.workshop.settings import ROOT

STAMP = ".labkit-installed"
PIP_SECONDS = 1800  # torch from a local disk takes a minute, from PyPI on a slow link much longer


class InstallError(LabkitError):
    """The learner venv could not be made."""


def source_digest(root: Path = ROOT) -> str:
    """What the learner venv is made from: labkit's source and ``pyproject.toml``, hashed."""
    digest = hashlib.sha256()
    for path in sorted([root / "pyproject.toml", *(root / "labkit").rglob("*")]):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def is_current(prefix: Path) -> bool:
    stamp = prefix / STAMP
    return stamp.is_file() and stamp.read_text().strip() == source_digest()


def others_can_run(path: Path) -> bool:
    """Whether an account with no special rights can reach and execute ``path`` (every folder above it: o+x)."""
    path = path.resolve()
    for folder in [*reversed(path.parents), path]:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            return False
    return True


def install(prefix: Path, *, if_stale: bool = False) -> str:
    """Make (or bring up to date) the learner venv under ``prefix``; one line saying what was done."""
    if os.geteuid() != 0:
        raise InstallError("the learner venv must belong to root (learners must not change it): run this as root.")
    if if_stale and is_current(prefix):
        return f"{prefix}: the learner venv is up to date"
    prefix.mkdir(mode=0o755, parents=True, exist_ok=True)
    prefix.chmod(0o755)
    (prefix / STAMP).unlink(missing_ok=True)  # until this install completes, the hub refuses the venv
    python = _interpreter(prefix)
    venv = prefix / "venv"
    if _venv_home(venv) != python.parent:
        shutil.rmtree(venv, ignore_errors=True)
        _run([str(python), "-m", "venv", str(venv)])
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--progress-bar", "off", "--upgrade", f"{ROOT}[workshop]"])
    _drop_write_for_others(prefix)
    (prefix / STAMP).write_text(source_digest() + "\n")
    (prefix / STAMP).chmod(0o644)
    return f"{prefix}: learner venv ready ({venv / 'bin' / 'python'}, from {python})"


def learner_environment(prefix: Path) -> dict[str, str]:
    """What the learners' processes need in their environment to run the learner venv of ``prefix``."""
    copy = prefix / "python" / "lib"
    return {"LD_LIBRARY_PATH": str(copy)} if copy.is_dir() else {}


def _venv_home(venv: Path) -> Path | None:
    """The folder of the interpreter ``venv`` was made from, None if there is no venv."""
    try:
        lines = (venv / "pyvenv.cfg").read_text().splitlines()
    except FileNotFoundError:
        return None
    homes = [line.split("=", 1)[1].strip() for line in lines if line.split("=", 1)[0].strip() == "home"]
    return Path(homes[0]) if homes else None


def _interpreter(prefix: Path) -> Path:
    """A Python of this version every account can run: this one, the system's, or a copy under ``prefix/python``."""
    base = Path(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (base / "bin" / version, Path("/usr/bin") / version):
        if candidate.exists() and others_can_run(candidate) and _has_venv(candidate):
            return candidate
    copy = prefix / "python"
    if not (copy / "bin" / version).exists():
        partial = prefix / "python.partial"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(base, partial, symlinks=True)
        partial.rename(copy)
    return copy / "bin" / version


def _has_venv(python: Path) -> bool:
    """Debian splits venv and ensurepip off its python3 package (python3-venv)."""
    return subprocess.run([str(python), "-c", "import venv, ensurepip"], capture_output=True, timeout=60).returncode == 0


def _run(command: list[str], progress: TextIO | None = None, timeout: float = PIP_SECONDS) -> None:
    """Run ``command``, writing each line of its output to ``progress`` (stderr) as it comes; its last lines on failure."""
    progress = sys.stderr if progress is None else progress
    label = command[2] if command[1:2] == ["-m"] else Path(command[0]).name  # "pip" for python -m pip
    tail: collections.deque[str] = collections.deque(maxlen=5)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, umask=0o022)
    stalled = threading.Event()

    def stop() -> None:  # pip stalled on the network: give up rather than wait for ever
        stalled.set()
        process.kill()

    timer = threading.Timer(timeout, stop)
    timer.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            tail.append(line.rstrip())
            print(f"  {label}: {line.rstrip()}", file=progress, flush=True)
        returncode = process.wait()
    finally:
        timer.cancel()
        if process.poll() is None:  # interrupted (Ctrl-C): leave no pip behind
            process.kill()
            process.wait()
    if returncode != 0:
        why = f"stopped after {timeout:g} s" if stalled.is_set() else "failed"
        raise InstallError(f"{' '.join(command[:4])} ... {why}:\n" + "\n".join(tail))


def _drop_write_for_others(prefix: Path) -> None:
    """Nothing in the install writable by group or others (a copied interpreter keeps its own modes)."""
    for folder, _, files in os.walk(prefix):
        for path in [Path(folder), *(Path(folder) / name for name in files)]:
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and mode & (stat.S_IWGRP | stat.S_IWOTH):
                path.chmod(stat.S_IMODE(mode) & ~(stat.S_IWGRP | stat.S_IWOTH))

