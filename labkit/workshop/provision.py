"""Each learner's workspace on the hub: made by the spawner's pre-spawn hook, as the learner.

The workspace is made by ``python -m labkit.workshop.learner_workspace`` (``labkit workspace`` in the room's
language) run as the learner
(never as root inside a learner's home: a learner could plant a link there),
so it never overwrites a learner's edits (see :mod:`labkit.learner.workspace`).
In a room (``system-users``) the hook first makes the learner's Unix account
(:mod:`labkit.workshop.accounts`), and the workspace comes from the learner
edition the hub wrote at start (:func:`write_room_edition`): the learner's
account never reads the solved notebooks. The command gets a bare
environment: the hub's holds the instructor's settings, passwords included,
and a process running as the learner is the learner's to inspect. It runs
isolated (``python -I``, from ``/``): a ``labkit/`` folder the learner planted in
their home must not be what runs, and its output is read up to
:data:`OUTPUT_LIMIT` bytes, for at most :data:`SECONDS`, before it reaches the
hub's log with its control characters replaced.
"""
from __future__ import annotations

import asyncio
import stat
import sys
from pathlib import Path
from typing import Any

from labkit.learner.workspace import write_learner_edition
from labkit.workshop.accounts import ensure_account
from labkit.workshop.board_service import board_url
from labkit.workshop.install import learner_environment
from labkit.workshop.push import record_spawn
from labkit.workshop.settings import HubSettings

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
OUTPUT_LIMIT = 64 * 1024  # what the hub reads of the workspace command's output: a learner's code must not fill its memory
SECONDS = 120  # a workspace takes seconds; a command still running after this is killed


def server_environment(settings: HubSettings, learner_bin: Path) -> dict[str, str]:
    """Each learner server's whole environment (``c.Spawner.environment``; the hub keeps only LANG and LC_ALL of its own).

    - ``LABKIT_LANG``: the room's language (``LABKIT_WORKSHOP_LANGUAGE``); a learner may set her own in her kernel.
    - ``LABKIT_BOARD_URL``: where the kernel sends each checker's verdict (:mod:`labkit.progress.sender`), with the
      server's own token, which may reach the board and nothing more of it (``SERVER_TOKEN_SCOPES``).
    - ``LABKIT_PREFLIGHT=image``: every learner runs the one installation the instructor's doctor checked
      (workshop/README.md, step 3), so notebook 00's preflight reads its versions instead of importing every package.
    - ``OMP_WAIT_POLICY=PASSIVE``: a thread waiting for work sleeps instead of spinning on a core (libgomp's default
      spins), which on a shared server burns CPU every other learner needs (tests/workshop/test_room.py checks both).
    """
    return {"PATH": f"{learner_bin}:{SAFE_PATH}", "OMP_NUM_THREADS": str(settings.threads), "OMP_WAIT_POLICY": "PASSIVE",
            "LABKIT_LANG": settings.language, "LABKIT_BOARD_URL": board_url(settings), "LABKIT_PREFLIGHT": "image",
            **(learner_environment(settings.install) if settings.separated else {})}


def write_room_edition(settings: HubSettings) -> Path:
    """The learner edition of the room's track in the room's language, written by the hub (root) where every learner can
    read it."""
    edition = settings.edition
    write_learner_edition(settings.notebooks, edition, settings.track, room=True, language=settings.language)
    edition.parent.chmod(0o755)
    for path in [edition, *edition.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return edition


def workspace_command(settings: HubSettings, workspace: Path) -> list[str]:
    """The command that creates or updates a learner's workspace (run as the learner)."""
    command = ["-I", "-m", "labkit.workshop.learner_workspace", str(workspace), "--language", settings.language, "--room"]
    if settings.separated:
        return [str(settings.learner_python), *command, "--edition", str(settings.edition)]
    return [sys.executable, *command, "--notebooks", str(settings.notebooks), "--track", settings.track]


async def provision_workspace(spawner: Any, settings: HubSettings) -> None:
    """The spawner's pre-spawn hook: the learner's account (a room) and workspace, made on first log-in, updated after.

    A subprocess, so the hub keeps answering meanwhile. A failure stops the
    spawn with the tool's message.
    """
    username = spawner.user.name
    workspace = settings.workspace(username)
    env = {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "HOME": str(workspace.parent)}
    run_as: dict[str, Any] = {}
    if settings.separated:
        account = await asyncio.to_thread(ensure_account, settings, username)
        run_as = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        env.update(HOME=account.pw_dir, **learner_environment(settings.install))
    else:
        workspace.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        workspace.parent.chmod(0o700)  # each learner's folder: the account's own, not the group's or others'
    process = await asyncio.create_subprocess_exec(
        *workspace_command(settings, workspace), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        cwd="/", env=env, **run_as,
    )
    text, returncode = await _bounded(process)
    if returncode != 0:
        raise RuntimeError(f"labkit could not prepare the workspace of {username}: {text}")
    spawner.log.info("labkit workspace of %s: %s", username, text)
    await asyncio.to_thread(record_spawn, settings, username)  # the board's version column: she holds the room's labs
    spawner.notebook_dir = str(workspace)
    if stat.S_IMODE(workspace.parent.stat().st_mode) & 0o077:
        raise RuntimeError(f"the home of {username} is open to other accounts; chmod 0700 {workspace.parent}")


async def _bounded(process: asyncio.subprocess.Process) -> tuple[str, int | None]:
    """The process's output (printable, at most OUTPUT_LIMIT bytes) and exit code; killed after SECONDS or more output."""
    try:
        output = await asyncio.wait_for(_read_at_most(process, OUTPUT_LIMIT + 1), SECONDS)
        if len(output) > OUTPUT_LIMIT:
            raise OverflowError
        returncode: int | None = await asyncio.wait_for(process.wait(), SECONDS)
    except (asyncio.TimeoutError, OverflowError) as stop:
        process.kill()
        await process.wait()
        why = f"printed more than {OUTPUT_LIMIT} bytes" if isinstance(stop, OverflowError) else f"ran over {SECONDS} s"
        return f"the workspace command {why}: stopped", None
    text = "".join(char if char.isprintable() or char == "\n" else "?" for char in output.decode(errors="replace"))
    return text.strip(), returncode


async def _read_at_most(process: asyncio.subprocess.Process, limit: int) -> bytes:
    """What the process writes until it closes its output, or the first ``limit`` bytes of it."""
    if process.stdout is None:
        raise RuntimeError("the workspace command has no output pipe")
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await process.stdout.read(limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
