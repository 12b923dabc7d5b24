"""The room's spawner: JupyterHub's LocalProcessSpawner, with learner NAME's server run as ``labkit-NAME``.

Why a subclass: LocalProcessSpawner runs each server as the Unix account named
exactly like the hub user. labkit's accounts carry a prefix (so a learner who
signs up as ``root`` or ``www-data`` gets ``labkit-root``, never that system
account), and only two methods name the account: the one that switches to it
before the server starts, and the one that sets its environment. A learner
deleted from the hub loses their account and home (``delete_forever``). It also
bounds each server's memory (``mem_limit``) with a cgroup where the machine
allows (:mod:`labkit.workshop.memory`), which LocalProcessSpawner never does. And every server it starts is
read-only to anyone but its learner (:mod:`labkit.workshop.look`): an instructor she shares it with may look, not type.
"""
from __future__ import annotations

import asyncio
import os
import pwd
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyterhub.spawner import LocalProcessSpawner, set_user_setuid
from traitlets import Integer, Unicode

from labkit.workshop.accounts import remove_account
from labkit.workshop.limits import KEEP_FREE, PROCESSES, bound_processes, pids_cgroups, private_folders, short_of_space
from labkit.workshop.look import server_arguments
from labkit.workshop.memory import memory_cgroups
from labkit.workshop.settings import ACCOUNT_PREFIX


class LearnerSpawner(LocalProcessSpawner):
    """Each learner's server as their own ``account_prefix + name`` account."""

    account_prefix = Unicode(ACCOUNT_PREFIX, help="the prefix of every learner's Unix account").tag(config=True)
    keep_free = Integer(KEEP_FREE, help="bytes left free on the disks of the homes and the hub's database, below which "
                                        "no learner's server starts").tag(config=True)
    cgroup_procs: Path | None = None  # the memory cgroup the next server joins (its cgroup.procs file)
    pids_procs: Path | None = None  # the pids cgroup it joins
    TMP_DEFAULT = 2**30  # bytes of /tmp and of /dev/shm each when no mem_limit is set

    @property
    def account(self) -> str:
        return f"{self.account_prefix}{self.user.name}"

    def get_args(self) -> list[str]:
        """JupyterHub's arguments, then the read-only look's (last: no ``Spawner.args`` of a config can undo them)."""
        args: list[str] = [*super().get_args(), *server_arguments()]
        return args

    def make_preexec_fn(self, name: str) -> Callable[[], None]:
        """As root, before any code of the server runs: join its cgroups, mount its own /tmp and /dev/shm, bound its
        account's processes; then become the learner."""
        become_learner = set_user_setuid(self.account)
        groups = [procs for procs in (self.cgroup_procs, self.pids_procs) if procs is not None]
        tmp_size = self.mem_limit // 2 if self.mem_limit else self.TMP_DEFAULT  # both are charged to its memory too

        def preexec() -> None:
            for procs in groups:
                with open(procs, "w") as handle:
                    handle.write(str(os.getpid()))
            try:
                private_folders(tmp_size)
            except OSError as exc:
                os.write(2, f"labkit: no private /tmp and /dev/shm for {name}'s server ({exc}); a room needs mount "
                            "namespaces (run the hub as root, with CAP_SYS_ADMIN in a container)\n".encode())
                raise
            bound_processes(PROCESSES)
            become_learner()

        return preexec

    def user_env(self, env: dict[str, Any]) -> dict[str, Any]:
        entry = pwd.getpwnam(self.account)
        env.update(USER=self.account, HOME=entry.pw_dir, SHELL=entry.pw_shell, TMPDIR="/tmp",
                   TORCHINDUCTOR_CACHE_DIR="/tmp/torchinductor")  # its own /tmp (private_folders), emptied with it
        return env

    async def start(self) -> tuple[str, int]:
        self.cgroup_procs = self.pids_procs = None
        short = short_of_space(self._disks(), self.keep_free)
        if short:
            raise RuntimeError(f"labkit does not start {self.user.name}'s server: {short}")
        cgroups = memory_cgroups()
        if isinstance(cgroups, str):
            self.log.warning("labkit: the memory of %s's server is not bounded: %s", self.user.name, cgroups)
        elif self.mem_limit:
            try:
                self.cgroup_procs = cgroups.prepare(self.account, self.mem_limit)
            except OSError as exc:
                raise RuntimeError(f"labkit could not bound the memory of {self.user.name}'s server: {exc}") from None
            self.log.info("labkit: %s's server goes in %s, at most %d bytes", self.user.name, self.cgroup_procs.parent,
                          self.mem_limit)
        pids = pids_cgroups()
        if isinstance(pids, str):
            self.log.warning("labkit: %s's server has RLIMIT_NPROC=%d but no pids cgroup: %s", self.user.name,
                             PROCESSES, pids)
        else:
            try:
                self.pids_procs = await asyncio.to_thread(pids.prepare, self.account, PROCESSES)
            except OSError as exc:
                raise RuntimeError(f"labkit could not bound the processes of {self.user.name}'s server: {exc}") from None
        address: tuple[str, int] = await super().start()
        return address

    async def stop(self, now: bool = False) -> None:
        """Stop the server, then end every process it left (a ``setsid`` one included) and remove its cgroups."""
        await super().stop(now=now)
        pids = pids_cgroups()
        if not isinstance(pids, str):
            left = await asyncio.to_thread(pids.release, self.account)
            if left:
                self.log.error("labkit: processes of %s still running after the stop: %s", self.user.name, left)
        cgroups = memory_cgroups()
        if not isinstance(cgroups, str):
            cgroups.release(self.account)

    def _disks(self) -> list[Path]:
        """Where a full disk would stop the room: the learner's home and the hub's database."""
        paths = [Path(pwd.getpwnam(self.account).pw_dir)]
        database = getattr(getattr(self.db, "bind", None), "url", None)
        if database is not None and database.get_backend_name() == "sqlite" and database.database:
            paths.append(Path(database.database).resolve().parent)
        return [path for path in paths if path.exists()]

    def delete_forever(self) -> None:
        """The learner was deleted from the hub: their account and home go too, so nobody approved later under
        the same name inherits their files."""
        if remove_account(self.account):
            self.log.info("labkit: removed the account %s and its home", self.account)
