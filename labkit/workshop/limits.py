"""What one learner's server may use beyond memory: processes, its own /tmp and /dev/shm, and an end with the server.

Why (a room is hostile, DESIGN.md): a fork bomb, files left in a shared ``/dev/shm``, a ``setsid``
process that outlives the server, or a ``torch.compile`` cache planted in a shared ``/tmp`` by
another learner each took the room or another learner's code. So each learner's server gets:

- a pids cgroup (``labkit-NAME`` below the hub's own, beside the memory one of
  :mod:`labkit.workshop.memory`) of at most :data:`PROCESSES` processes and threads, and an
  ``RLIMIT_NPROC`` of as many for its account, far below the kernel's ``pid_max``;
- a private mount namespace with a fresh size-bounded tmpfs on ``/tmp`` and ``/dev/shm``: other
  learners' files are not there, and both vanish with the namespace's last process (their pages
  are charged to the server's memory cgroup meanwhile);
- an end: when the server stops (or is culled) every process left in its cgroup is killed
  (cgroup v2's ``cgroup.kill``; on v1, each process by a pidfd, after checking it is still in the
  cgroup, until none is left), so nothing it started keeps running or keeps the tmpfs alive.

Where no pids cgroup is writable, :func:`pids_cgroups` says why and the hub starts with the
``RLIMIT_NPROC`` bound alone.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from labkit.workshop.memory import CGROUPS, own_cgroup

PROCESSES = 512  # processes and threads of one learner: a kernel with torch's threads uses tens; pid_max is 32,768
KILL_SECONDS = 10.0  # how long ending a cgroup's processes may take before the hub says some are left
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000
# Every world-writable folder of a Debian system: each learner gets a fresh one, so none is a channel between learners
# or a place to plant files for another, and what she leaves there ends with her server.
PRIVATE_FOLDERS = ("/tmp", "/dev/shm", "/var/tmp", "/run/lock")
LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here, never in a forked child (dlopen's lock may be held at the fork)


@dataclass(frozen=True)
class PidsCgroups:
    """Where learners' pids cgroups go (below the hub's own)."""

    parent: Path

    def prepare(self, name: str, limit: int = PROCESSES) -> Path:
        """Cgroup ``name`` of at most ``limit`` processes, emptied of any left from before; its ``cgroup.procs``."""
        group = self.parent / name
        group.mkdir(exist_ok=True)
        end_processes(group)
        (group / "pids.max").write_text(str(limit))
        return group / "cgroup.procs"

    def release(self, name: str) -> list[int]:
        """End every process of cgroup ``name`` and remove it; the pids still there after :data:`KILL_SECONDS`."""
        group = self.parent / name
        if not group.is_dir():
            return []
        left = end_processes(group)
        with contextlib.suppress(OSError):
            group.rmdir()
        return left


def pids_cgroups(cgroups: Path = CGROUPS, own: str | None = None) -> PidsCgroups | str:
    """The learners' pids cgroups below this process's own, or why processes cannot be bounded by a cgroup here."""
    found = own_cgroup("pids", "cgroup.procs", cgroups, own)
    if found is None:
        return "no writable pids cgroup (cgroup v2 with the pids controller, or v1's pids hierarchy) for the hub"
    return PidsCgroups(found[0])


def end_processes(group: Path, seconds: float = KILL_SECONDS) -> list[int]:
    """Kill every process in cgroup ``group`` (and what they start meanwhile); the pids left after ``seconds``."""
    kill = group / "cgroup.kill"
    if kill.is_file():
        with contextlib.suppress(OSError):
            kill.write_text("1")
    deadline = time.monotonic() + seconds
    while True:
        pids = _pids(group)
        if not pids or time.monotonic() > deadline:
            return pids
        for pid in pids:
            _kill_if_in(pid, group)
        time.sleep(0.02)


def _pids(group: Path) -> list[int]:
    try:
        return [int(line) for line in (group / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _kill_if_in(pid: int, group: Path) -> None:
    """SIGKILL ``pid`` through a pidfd, once the process it names is known to be in ``group`` (never a reused pid)."""
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        return  # already gone
    try:
        if pid in _pids(group):  # the pidfd holds this very process: if it is in the group now, it is the one to kill
            signal.pidfd_send_signal(handle, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(handle)


def private_folders(size: int, folders: tuple[str, ...] = PRIVATE_FOLDERS) -> None:
    """In a process about to become the learner (root, after fork): a mount namespace of its own, a fresh tmpfs of at
    most ``size`` bytes on each of ``folders`` that exists; what it mounts is seen by it and its children only."""
    if LIBC.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), f"unshare(CLONE_NEWNS): {os.strerror(ctypes.get_errno())}")
    _mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)  # nothing mounted here reaches the hub's namespace
    for folder in folders:
        if not os.path.isdir(folder):  # /run/lock is a link on some systems, absent on others: nothing shared there
            continue
        _mount(b"tmpfs", folder.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777".encode())


def _mount(source: bytes, target: bytes, kind: bytes | None, flags: int, data: bytes | None) -> None:
    if LIBC.mount(source, target, kind, flags, data) != 0:
        code = ctypes.get_errno() or errno.EPERM
        raise OSError(code, f"mount {target.decode()}: {os.strerror(code)}")


def bound_processes(limit: int = PROCESSES) -> None:
    """``RLIMIT_NPROC`` of ``limit`` for the account this process becomes (set as root, before it drops to it)."""
    resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))


KEEP_FREE = 2 * 2**30  # bytes left free on the disks of the homes and the hub's state before a learner's server starts


def short_of_space(paths: list[Path], keep_free: int = KEEP_FREE) -> str:
    """Why a learner's server must not start now (a disk of ``paths`` has less than ``keep_free`` bytes free), or ""."""
    for path in paths:
        usage = os.statvfs(path)
        free = usage.f_bavail * usage.f_frsize  # what an account without root's reserve may still write
        if free < keep_free:
            return (f"the disk of {path} has {free / 2**30:.1f} GiB free, less than the {keep_free / 2**30:.1f} GiB a "
                    "room keeps for the hub's state and the board: free space there (a learner's large files) first")
    return ""
