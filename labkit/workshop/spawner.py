"""The room's spawner: JupyterHub's LocalProcessSpawner, with learner NAME's server run as ``labkit-NAME``.

Why a subclass: LocalProcessSpawner runs each server as the Unix account named
exactly like the hub user. labkit's accounts carry a prefix (so a learner who
signs up as ``root`` or ``www-data`` gets ``labkit-root``, never that system
account), and only two methods name the account: the one that switches to it
before the server starts, and the one that sets its environment. A learner
deleted from the hub loses their account and home (``delete_forever``). It also
bounds each server's memory (``mem_limit``) with a cgroup where the machine
allows (:mod:`labkit.workshop.memory`), which LocalProcessSpawner never does.
"""
from __future__ import annotations

import os
import pwd
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyterhub.spawner import LocalProcessSpawner, set_user_setuid
from traitlets import Unicode

from labkit.workshop.accounts import remove_account
from labkit.workshop.memory import memory_cgroups
from labkit.workshop.settings import ACCOUNT_PREFIX


class LearnerSpawner(LocalProcessSpawner):
    """Each learner's server as their own ``account_prefix + name`` account."""

    account_prefix = Unicode(ACCOUNT_PREFIX, help="the prefix of every learner's Unix account").tag(config=True)
    cgroup_procs: Path | None = None  # the memory cgroup the next server joins (its cgroup.procs file)

    @property
    def account(self) -> str:
        return f"{self.account_prefix}{self.user.name}"

    def make_preexec_fn(self, name: str) -> Callable[[], None]:
        """Join the server's memory cgroup (as root, before any code of the server runs), then become the learner."""
        become_learner = set_user_setuid(self.account)
        procs = self.cgroup_procs

        def preexec() -> None:
            if procs is not None:
                with open(procs, "w") as handle:
                    handle.write(str(os.getpid()))
            become_learner()

        return preexec

    def user_env(self, env: dict[str, Any]) -> dict[str, Any]:
        entry = pwd.getpwnam(self.account)
        env.update(USER=self.account, HOME=entry.pw_dir, SHELL=entry.pw_shell)
        return env

    async def start(self) -> tuple[str, int]:
        self.cgroup_procs = None
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
        address: tuple[str, int] = await super().start()
        return address

    async def stop(self, now: bool = False) -> None:
        await super().stop(now=now)
        cgroups = memory_cgroups()
        if not isinstance(cgroups, str):
            cgroups.release(self.account)

    def delete_forever(self) -> None:
        """The learner was deleted from the hub: their account and home go too, so nobody approved later under
        the same name inherits their files."""
        if remove_account(self.account):
            self.log.info("labkit: removed the account %s and its home", self.account)
