"""Each learner's workspace on the hub: made by the spawner's pre-spawn hook, as the learner.

The workspace is made by ``python -m labkit workspace`` run as the learner
(never as root inside a learner's home: a learner could plant a link there),
so it never overwrites a learner's edits (see :mod:`labkit.tools.workspace`).
"""
from __future__ import annotations

import asyncio
import os
import pwd
import sys
from pathlib import Path
from typing import Any

from labkit.workshop.settings import HubSettings


def workspace_command(settings: HubSettings, workspace: Path) -> list[str]:
    """The command that creates or updates a learner's workspace (run as the learner)."""
    return [sys.executable, "-m", "labkit", "workspace", str(workspace), "--notebooks", str(settings.notebooks),
            "--track", settings.track]


async def provision_workspace(spawner: Any, settings: HubSettings) -> None:
    """The spawner's pre-spawn hook: the learner's workspace, created on first log-in and updated after.

    Runs ``python -m labkit workspace`` as the learner (``system-users``) or as
    the hub's account (``shared-account``), in a subprocess so the hub keeps
    answering meanwhile. A failure stops the spawn with the tool's message.
    """
    username = spawner.user.name
    workspace = settings.workspace(username)
    run_as: dict[str, Any] = {}
    if settings.spawner == "shared-account":
        workspace.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        workspace.parent.chmod(0o700)  # each learner's folder: the account's own, not the group's or others'
    else:
        account = pwd.getpwnam(username)
        run_as = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []} if os.geteuid() != account.pw_uid else {}
    process = await asyncio.create_subprocess_exec(
        *workspace_command(settings, workspace), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        cwd="/", **run_as,
    )
    output, _ = await process.communicate()
    text = output.decode(errors="replace").strip()
    if process.returncode != 0:
        raise RuntimeError(f"labkit could not prepare the workspace of {username}: {text}")
    spawner.log.info("labkit workspace of %s: %s", username, text)
    spawner.notebook_dir = str(workspace)
