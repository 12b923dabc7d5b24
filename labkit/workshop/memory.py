"""A memory bound per learner: each server (and every kernel it starts) in a memory cgroup of its own.

Why: JupyterHub's local spawners only pass ``mem_limit`` on as ``MEM_LIMIT``;
one learner's runaway cell could then take the whole server's memory and the
room with it. SystemdSpawner does this with systemd; a hub run as root on a
machine without systemd (a container, say) can still do it with the kernel's
cgroup files, which is all this module does: make ``labkit-NAME`` below the
hub's own memory cgroup, set its limit, move the server into it (its kernels,
started later, are born there; it joins before it runs any code of its own),
and remove it once the server has stopped.
Where neither cgroup v2 with the memory controller nor cgroup v1's memory
hierarchy is writable, :func:`memory_cgroups` says why and the hub starts
without a bound (the README names the spawners that bound memory there).
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

CGROUPS = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class MemoryCgroups:
    """Where learners' cgroups go (below the hub's own) and which file holds a limit there."""

    parent: Path
    limit_file: str  # memory.max (v2) or memory.limit_in_bytes (v1)
    swap_file: str  # memory.swap.max (v2: swap alone) or memory.memsw.limit_in_bytes (v1: memory and swap together)

    def prepare(self, name: str, limit: int) -> Path:
        """Cgroup ``name`` with at most ``limit`` bytes of memory and no swap beyond it; its ``cgroup.procs`` file."""
        group = self.parent / name
        group.mkdir(exist_ok=True)
        (group / self.limit_file).write_text(str(limit))
        swap = group / self.swap_file
        if swap.exists():  # absent where the kernel keeps no swap accounting
            swap.write_text("0" if self.swap_file == "memory.swap.max" else str(limit))
        return group / "cgroup.procs"

    def release(self, name: str) -> None:
        """Remove cgroup ``name`` once its processes are gone (a cgroup with a process in it stays)."""
        with contextlib.suppress(OSError):
            (self.parent / name).rmdir()


def memory_cgroups(cgroups: Path = CGROUPS, own: str | None = None) -> MemoryCgroups | str:
    """The learners' cgroups below this process's memory cgroup, or why memory cannot be bounded here."""
    found = own_cgroup("memory", "memory.limit_in_bytes", cgroups, own)
    if found is None:
        return "no writable memory cgroup (cgroup v2 with the memory controller, or v1's memory hierarchy) for the hub"
    parent, version = found
    if version == 2:
        return MemoryCgroups(parent, "memory.max", "memory.swap.max")
    return MemoryCgroups(parent, "memory.limit_in_bytes", "memory.memsw.limit_in_bytes")


def own_cgroup(controller: str, v1_file: str, cgroups: Path = CGROUPS, own: str | None = None) -> tuple[Path, int] | None:
    """This process's own cgroup for ``controller`` where it may make children, with its version (2 or 1), or None.

    Why one function: the memory bound and the process bound (labkit.workshop.limits) find their parent alike:
    cgroup v2 (alone, or beside v1 as ``unified``) where the controller is enabled for children, else v1's
    hierarchy of that controller, recognised by ``v1_file``; ``own`` is /proc/self/cgroup's text.
    """
    own = Path("/proc/self/cgroup").read_text() if own is None else own
    paths = dict(line.split(":", 2)[1:] for line in own.splitlines() if line.count(":") >= 2)
    if (cgroups / "cgroup.controllers").is_file():  # v2 alone, at the root
        v2: Path | None = cgroups
    else:
        v2 = cgroups / "unified" if (cgroups / "unified" / "cgroup.controllers").is_file() else None
    if v2 is not None and "" in paths:
        parent = v2 / paths[""].lstrip("/")
        control = parent / "cgroup.subtree_control"
        if control.is_file() and controller in control.read_text(errors="replace").split() and os.access(parent, os.W_OK):
            return parent, 2
    for controllers, path in paths.items():
        if controller in controllers.split(","):
            parent = cgroups / controller / path.lstrip("/")
            if (parent / v1_file).is_file() and os.access(parent, os.W_OK):
                return parent, 1
    return None
